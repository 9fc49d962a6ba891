//! The AMQP 0-9-1 value codec: method arguments, content properties and field tables.
//!
//! Encoding reads values through the [`Value`] trait, so the same encoder serves JS values
//! (through Node-API, in `bindings`) and plain Rust values (in tests). Decoding writes onto
//! the event [`Tape`] that JS reads in one pass.
//!
//! Semantics follow amqplib 2.0.1: the same type inference for table values, the same
//! defaults and the same error texts.

use crate::boundary::ErrorId;
use crate::spec_types::{Arg, ArgType, Default, MethodSpec, PropertiesSpec};
use crate::strings::Interner;
use crate::tape::{Obj, Tape};

/// Tables nested deeper than this are refused rather than decoded (recursion is bounded).
pub const MAX_TABLE_DEPTH: usize = 64;
/// A field table encodes to at most this many bytes (generated, as JS copies CC lists within
/// it too): no frame we send is larger, a table that shares its parts (`t = {a: t0, b: t0}`,
/// over and over) is refused before its size doubles on without end, and an array's walk
/// stops there, however long the array says it is.
pub use crate::boundary::MAX_TABLE_BYTES;
/// String values in tables up to this many bytes go through the string table.
const MAX_INTERNED_VALUE: usize = 32;

#[derive(Clone, Debug, PartialEq)]
pub enum CodecError {
    WrongType { field: String, expected: &'static str },
    Missing(String),
    OutOfRange { min: f64, max: f64, got: f64 },
    /// Out of the range of a 64-bit field, which amqplib writes as a BigInt.
    OutOfRange64 { signed: bool, got: f64 },
    NotAnInteger(f64),
    UnknownEncodeType(String),
    /// A decimal that is not {places, digits}: the value as JSON.stringify writes it.
    BadDecimal(String),
    UnexpectedTag(u8),
    Truncated,
    TooDeep,
    /// A table to send nested deeper than decoding allows, or cyclic.
    TooDeepToEncode,
    UnknownMethod,
    UnknownProperties,
    /// A table over [`MAX_TABLE_BYTES`].
    TableTooLarge,
    /// An encoded frame larger than the frame max (a table too large for one frame).
    FrameTooLarge { size: usize, max: usize },
    /// A frame max that leaves no room for a body frame's payload.
    NoRoomForBody(usize),
    /// An error raised by the value source itself (e.g. a throwing getter in JS).
    Source(String),
}

/// A parameter of an error the core reports: JS words the error from it (lib/core_errors.js).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Param<'a> {
    Number(f64),
    Text(&'a str),
}

/// An error as the core reports it to JS: which one, and its parameters (of the kinds
/// `id.params()` gives). The words, the error's class and its code are JS's alone.
#[derive(Clone, Debug, PartialEq)]
pub struct Report<'a> {
    pub id: ErrorId,
    pub params: Vec<Param<'a>>,
}

impl Report<'_> {
    pub(crate) fn of(id: ErrorId) -> Self {
        Report { id, params: Vec::new() }
    }

    pub(crate) fn numbers(id: ErrorId, numbers: &[f64]) -> Self {
        Report { id, params: numbers.iter().map(|&n| Param::Number(n)).collect() }
    }
}

impl CodecError {
    pub fn report(&self) -> Report<'_> {
        use Param::Text;
        match self {
            CodecError::WrongType { field, expected } => Report { id: ErrorId::WrongType, params: vec![Text(field), Text(expected)] },
            CodecError::Missing(field) => Report { id: ErrorId::Missing, params: vec![Text(field)] },
            CodecError::OutOfRange { min, max, got } => Report::numbers(ErrorId::OutOfRange, &[*min, *max, *got]),
            CodecError::OutOfRange64 { signed, got } => Report::numbers(ErrorId::OutOfRange64, &[f64::from(u8::from(*signed)), *got]),
            CodecError::NotAnInteger(n) => Report::numbers(ErrorId::NotAnInteger, &[*n]),
            CodecError::UnknownEncodeType(t) => Report { id: ErrorId::UnknownEncodeType, params: vec![Text(t)] },
            CodecError::BadDecimal(json) => Report { id: ErrorId::BadDecimal, params: vec![Text(json)] },
            CodecError::UnexpectedTag(t) => Report::numbers(ErrorId::UnexpectedTag, &[f64::from(*t)]),
            CodecError::Truncated => Report::of(ErrorId::Truncated),
            CodecError::TooDeep => Report::numbers(ErrorId::TooDeep, &[MAX_TABLE_DEPTH as f64]),
            CodecError::TooDeepToEncode => Report::numbers(ErrorId::TooDeepToEncode, &[MAX_TABLE_DEPTH as f64]),
            CodecError::UnknownMethod => Report::of(ErrorId::UnknownMethod),
            CodecError::UnknownProperties => Report::of(ErrorId::UnknownProperties),
            CodecError::TableTooLarge => Report::numbers(ErrorId::TableTooLarge, &[MAX_TABLE_BYTES as f64]),
            CodecError::FrameTooLarge { size, max } => Report::numbers(ErrorId::FrameTooLarge, &[*size as f64, *max as f64]),
            CodecError::NoRoomForBody(max) => Report::numbers(ErrorId::NoRoomForBody, &[*max as f64]),
            CodecError::Source(message) => Report { id: ErrorId::Source, params: vec![Text(message)] },
        }
    }
}

pub type Result<T> = std::result::Result<T, CodecError>;

/// What kind of value a [`Value`] holds, as JS's `typeof`, refined for null, arrays and Buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Undefined,
    Null,
    Bool,
    Number,
    String,
    Bytes,
    Array,
    Object,
    /// Functions, symbols, bigints: nothing a table can hold.
    Other(&'static str),
}

/// A source of values to encode: JS values in production, Rust values in tests.
pub trait Value: Sized {
    fn kind(&self) -> Result<Kind>;
    /// JS truthiness, which is how amqplib reads bits.
    fn truthy(&self) -> Result<bool>;
    /// The value as a number, coerced as JS's unary `+` does (amqplib hands values to Node's
    /// Buffer writers, which coerce: a string in a float field is NaN, not an error).
    fn number(&self) -> Result<f64>;
    /// Appends the UTF-8 bytes of a string value to `out`.
    fn append_utf8(&self, out: &mut Vec<u8>) -> Result<()>;
    /// Appends at most `max` UTF-8 bytes of a string value; false (with `out` as it was) when
    /// the string is longer. Sources that can do it in one step override this.
    fn append_utf8_within(&self, out: &mut Vec<u8>, max: usize) -> Result<bool> {
        let at = out.len();
        self.append_utf8(out)?;
        if out.len() - at > max {
            out.truncate(at);
            return Ok(false);
        }
        Ok(true)
    }
    /// Appends the bytes of a Buffer value to `out`.
    fn append_bytes(&self, out: &mut Vec<u8>) -> Result<()>;
    /// An array's `length`: what a user's array says, not what it holds (`new Array(2 ** 32 - 1)`
    /// holds nothing), so the encoder reads its items one by one, within the table's budget.
    fn length(&self) -> Result<u32>;
    /// An array's item at `index` (a hole is undefined).
    fn item(&self, index: u32) -> Result<Self>;
    /// The names of the enumerable string-keyed properties, in `for...in` order, as an array
    /// (read with `length` and `item`); their values are read one by one with `entry`.
    fn keys(&self) -> Result<Self>;
    /// The name `key` (one of `keys`) as a string, and the property under it (getters run).
    fn entry(&self, key: &Self) -> Result<(String, Self)>;
    /// Property names are the protocol's own (static), so sources may cache their keys.
    fn get(&self, key: &'static str) -> Result<Self>;
    fn has_own(&self, key: &'static str) -> Result<bool>;
    /// The value as `JSON.stringify` writes it ("undefined" where it writes nothing), for
    /// the errors that show it as amqplib's do.
    fn json(&self) -> Result<String>;
}

// ---------------------------------------------------------------- primitive writers

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Reserves a 4-byte length at the current end of `out`, to be filled by [`end_length`].
fn begin_length(out: &mut Vec<u8>) -> usize {
    out.extend_from_slice(&[0; 4]);
    out.len()
}

fn end_length(out: &mut [u8], start: usize) {
    let len = (out.len() - start) as u32;
    out[start - 4..start].copy_from_slice(&len.to_be_bytes());
}

fn check_range(n: f64, min: f64, max: f64) -> Result<f64> {
    if n.is_nan() || n < min || n > max {
        Err(CodecError::OutOfRange { min, max, got: n })
    } else {
        Ok(n.trunc())
    }
}

fn check_integer(n: f64) -> Result<f64> {
    if n.fract() != 0.0 || !n.is_finite() {
        Err(CodecError::NotAnInteger(n))
    } else {
        Ok(n)
    }
}

fn put_i64(out: &mut Vec<u8>, n: f64) -> Result<()> {
    let n = check_integer(n)?;
    if !(-9223372036854775808.0..9223372036854775808.0).contains(&n) {
        return Err(CodecError::OutOfRange64 { signed: true, got: n });
    }
    out.extend_from_slice(&(n as i64).to_be_bytes());
    Ok(())
}

fn put_u64(out: &mut Vec<u8>, n: f64) -> Result<()> {
    let n = check_integer(n)?;
    if !(0.0..18446744073709551616.0).contains(&n) {
        return Err(CodecError::OutOfRange64 { signed: false, got: n });
    }
    out.extend_from_slice(&(n as u64).to_be_bytes());
    Ok(())
}

/// A shortstr: one length byte, then at most 255 bytes of UTF-8.
fn put_shortstr<V: Value>(out: &mut Vec<u8>, v: &V, field: &str) -> Result<()> {
    let len_at = out.len();
    out.push(0);
    if !v.append_utf8_within(out, 255)? {
        out.truncate(len_at);
        return Err(wrong_type(field, ArgType::ShortStr));
    }
    out[len_at] = (out.len() - len_at - 1) as u8;
    Ok(())
}

fn wrong_type(field: &str, ty: ArgType) -> CodecError {
    let expected = match ty {
        ArgType::ShortStr => "a string (up to 255 chars)",
        ArgType::LongStr => "a Buffer",
        ArgType::Table => "an object",
        _ => "a number (but not NaN)",
    };
    CodecError::WrongType { field: field.to_string(), expected }
}

// ---------------------------------------------------------------- tables

/// The table type amqplib infers for a JS number.
pub fn infer_number_tag(n: f64) -> u8 {
    let is_float = n >= 9223372036854775808.0 || (n.abs() < 1125899906842624.0 && n.floor() != n);
    if is_float {
        b'd'
    } else if (-128.0..128.0).contains(&n) {
        b'b'
    } else if (-32768.0..32768.0).contains(&n) {
        b's'
    } else if (-2147483648.0..2147483648.0).contains(&n) {
        b'I'
    } else {
        b'l'
    }
}

/// The tag of an explicitly typed value `{'!': name, value}`.
fn explicit_tag(name: &str) -> Option<u8> {
    Some(match name {
        "double" | "float64" => b'd',
        "byte" | "int8" => b'b',
        "unsignedbyte" | "uint8" => b'B',
        "short" | "int16" => b's',
        "unsignedshort" | "uint16" => b'u',
        "int" | "int32" => b'I',
        "unsignedint" | "uint32" => b'i',
        "long" | "int64" => b'l',
        "timestamp" => b'T',
        "float" => b'f',
        "decimal" => b'D',
        "string" => b'S',
        "boolean" => b't',
        "number" => 0,
        "object" => 1,
        _ => return None,
    })
}

/// How large the frame being encoded may grow: the walk of a user's table or array stops as
/// soon as the frame is past its max, before the rest of the table is read (an array's
/// `length` may be 2 ** 32 - 1, a table's entries millions).
#[derive(Clone, Copy, Debug)]
pub struct FrameBudget {
    /// Where the frame starts in the output.
    start: usize,
    max: usize,
}

impl FrameBudget {
    /// For a frame starting at `start` in the output, of at most `max` bytes.
    pub fn new(start: usize, max: usize) -> Self {
        FrameBudget { start, max }
    }

    /// No frame around the encoding (a table encoded alone): only the table's own bound holds.
    pub const UNBOUNDED: FrameBudget = FrameBudget { start: 0, max: usize::MAX };

    /// Refuses the frame once `out` holds more of it than fits (counting its end octet).
    fn check(self, out: &[u8]) -> Result<()> {
        let size = out.len() - self.start + 1;
        if size > self.max {
            return Err(CodecError::FrameTooLarge { size, max: self.max });
        }
        Ok(())
    }
}

/// Where a walk of nested tables and arrays is: how deep, and within what budget.
#[derive(Clone, Copy)]
struct Walk {
    depth: usize,
    budget: FrameBudget,
}

/// Encodes a field table (length-prefixed) from the enumerable properties of `table`.
pub fn encode_table<V: Value>(out: &mut Vec<u8>, table: &V) -> Result<()> {
    encode_table_at(out, table, Walk { depth: 0, budget: FrameBudget::UNBOUNDED })
}

/// A table or array one level down. Recursion is bounded as decoding's is: a cyclic table, or
/// one nested deeper than [`MAX_TABLE_DEPTH`], is refused (amqplib overflows its stack there,
/// a RangeError too), never followed down the native stack.
fn enter(walk: Walk) -> Result<Walk> {
    if walk.depth >= MAX_TABLE_DEPTH {
        return Err(CodecError::TooDeepToEncode);
    }
    Ok(Walk { depth: walk.depth + 1, ..walk })
}

fn encode_table_at<V: Value>(out: &mut Vec<u8>, table: &V, walk: Walk) -> Result<()> {
    let walk = enter(walk)?;
    let start = begin_length(out);
    if table.kind()? != Kind::Null {
        let keys = table.keys()?;
        for index in 0..keys.length()? {
            let (key, value) = table.entry(&keys.item(index)?)?;
            if value.kind()? == Kind::Undefined {
                continue;
            }
            if key.len() > 255 {
                // amqplib writes the key's length as an octet, and Node refuses the overflow.
                return Err(CodecError::OutOfRange { min: 0.0, max: 255.0, got: key.len() as f64 });
            }
            out.push(key.len() as u8);
            out.extend_from_slice(key.as_bytes());
            encode_field_value(out, &value, walk)?;
            check_size(out, start, walk)?;
        }
    }
    end_length(out, start);
    Ok(())
}

/// After each entry or item: the table (from `start`) within its own bound, and the frame
/// within its budget.
fn check_size(out: &[u8], start: usize, walk: Walk) -> Result<()> {
    if out.len() - start > MAX_TABLE_BYTES {
        return Err(CodecError::TableTooLarge);
    }
    walk.budget.check(out)
}

fn encode_array<V: Value>(out: &mut Vec<u8>, array: &V, walk: Walk) -> Result<()> {
    let walk = enter(walk)?;
    let start = begin_length(out);
    // Every item takes a byte at least: the budget ends the walk of a long array early.
    for index in 0..array.length()? {
        encode_field_value(out, &array.item(index)?, walk)?;
        check_size(out, start, walk)?;
    }
    end_length(out, start);
    Ok(())
}

fn encode_field_value<V: Value>(out: &mut Vec<u8>, value: &V, walk: Walk) -> Result<()> {
    let kind = value.kind()?;
    if kind == Kind::Object && value.has_own("!")? {
        let type_name = value.get("!")?;
        let mut name = Vec::new();
        if type_name.kind()? == Kind::String {
            type_name.append_utf8(&mut name)?;
        }
        let name = String::from_utf8_lossy(&name).into_owned();
        let inner = value.get("value")?;
        return match explicit_tag(&name) {
            Some(0) => encode_inferred(out, &inner, Kind::Number, walk),
            Some(1) => encode_inferred(out, &inner, Kind::Object, walk),
            Some(tag) => encode_tagged(out, tag, &inner),
            None => Err(CodecError::UnknownEncodeType(name)),
        };
    }
    encode_inferred(out, value, kind, walk)
}

fn encode_inferred<V: Value>(out: &mut Vec<u8>, value: &V, kind: Kind, walk: Walk) -> Result<()> {
    match kind {
        Kind::Number => encode_tagged(out, infer_number_tag(value.number()?), value),
        Kind::String => encode_tagged(out, b'S', value),
        Kind::Bool => encode_tagged(out, b't', value),
        Kind::Null => {
            out.push(b'V');
            Ok(())
        }
        Kind::Array => {
            out.push(b'A');
            encode_array(out, value, walk)
        }
        Kind::Bytes => {
            out.push(b'x');
            let start = begin_length(out);
            value.append_bytes(out)?;
            end_length(out, start);
            Ok(())
        }
        Kind::Object => {
            out.push(b'F');
            encode_table_at(out, value, walk)
        }
        Kind::Undefined => Err(CodecError::UnknownEncodeType("undefined".into())),
        Kind::Other(name) => Err(CodecError::UnknownEncodeType(name.into())),
    }
}

fn encode_tagged<V: Value>(out: &mut Vec<u8>, tag: u8, value: &V) -> Result<()> {
    out.push(tag);
    match tag {
        b'S' => {
            let start = begin_length(out);
            value.append_utf8(out)?;
            end_length(out, start);
        }
        b't' => out.push(value.truthy()? as u8),
        b'd' => out.extend_from_slice(&value.number()?.to_be_bytes()),
        b'f' => out.extend_from_slice(&(value.number()? as f32).to_be_bytes()),
        b'b' => out.push(check_range(value.number()?, -128.0, 127.0)? as i8 as u8),
        b'B' => out.push(check_range(value.number()?, 0.0, 255.0)? as u8),
        b's' => out.extend_from_slice(&(check_range(value.number()?, -32768.0, 32767.0)? as i16).to_be_bytes()),
        b'u' => put_u16(out, check_range(value.number()?, 0.0, 65535.0)? as u16),
        b'I' => out.extend_from_slice(
            &(check_range(value.number()?, -2147483648.0, 2147483647.0)? as i32).to_be_bytes(),
        ),
        b'i' => put_u32(out, check_range(value.number()?, 0.0, 4294967295.0)? as u32),
        b'l' => put_i64(out, value.number()?)?,
        b'T' => put_u64(out, value.number()?)?,
        b'D' => encode_decimal(out, value)?,
        _ => unreachable!("encode_tagged is only called with known tags"),
    }
    Ok(())
}

fn encode_decimal<V: Value>(out: &mut Vec<u8>, value: &V) -> Result<()> {
    if value.kind()? != Kind::Object || !value.has_own("places")? || !value.has_own("digits")? {
        return Err(CodecError::BadDecimal(value.json()?));
    }
    let places = value.get("places")?.number()?;
    if !(0.0..256.0).contains(&places) {
        return Err(CodecError::BadDecimal(value.json()?));
    }
    out.push(places as u8);
    put_u32(out, check_range(value.get("digits")?.number()?, 0.0, 4294967295.0)? as u32);
    Ok(())
}

// ---------------------------------------------------------------- methods and properties

/// Encodes one shortstr argument (with its default when `value` is undefined), as
/// [`encode_args`] would: for callers that pass arguments one by one.
pub fn encode_shortstr_arg<V: Value>(out: &mut Vec<u8>, arg: &Arg, value: &V) -> Result<()> {
    if value.kind()? == Kind::Undefined {
        encode_default(out, arg)
    } else {
        encode_arg(out, arg, value, FrameBudget::UNBOUNDED)
    }
}

/// Encodes the arguments of `method` from `fields`, substituting defaults for absent ones,
/// within the frame's `budget`.
pub fn encode_args<V: Value>(out: &mut Vec<u8>, method: &MethodSpec, fields: &V, budget: FrameBudget) -> Result<()> {
    let mut bits = 0u8;
    let mut bit_index = 0;
    for arg in method.args {
        let value = fields.get(arg.name)?;
        let present = value.kind()? != Kind::Undefined;
        if arg.ty == ArgType::Bit {
            let set = if present { value.truthy()? } else { arg.default == Default::Bool(true) };
            if set {
                bits |= 1 << bit_index;
            }
            bit_index += 1;
            if bit_index == 8 {
                out.push(bits);
                bits = 0;
                bit_index = 0;
            }
            continue;
        }
        if bit_index > 0 {
            out.push(bits);
            bits = 0;
            bit_index = 0;
        }
        if present {
            encode_arg(out, arg, &value, budget)?;
        } else {
            encode_default(out, arg)?;
        }
    }
    if bit_index > 0 {
        out.push(bits);
    }
    Ok(())
}

fn encode_default(out: &mut Vec<u8>, arg: &Arg) -> Result<()> {
    match arg.default {
        Default::Mandatory => return Err(CodecError::Missing(arg.name.to_string())),
        Default::Str(s) if arg.ty == ArgType::ShortStr => {
            out.push(s.len() as u8);
            out.extend_from_slice(s.as_bytes());
        }
        Default::Str(s) => {
            put_u32(out, s.len() as u32);
            out.extend_from_slice(s.as_bytes());
        }
        Default::EmptyTable => put_u32(out, 0),
        Default::Num(n) => encode_number(out, arg.ty, n)?,
        Default::Bool(_) => unreachable!("bits are packed by encode_args"),
    }
    Ok(())
}

fn encode_arg<V: Value>(out: &mut Vec<u8>, arg: &Arg, value: &V, budget: FrameBudget) -> Result<()> {
    let kind = value.kind()?;
    match arg.ty {
        ArgType::ShortStr => {
            if kind != Kind::String {
                return Err(wrong_type(arg.name, arg.ty));
            }
            put_shortstr(out, value, arg.name)
        }
        ArgType::LongStr => {
            if kind != Kind::Bytes {
                return Err(wrong_type(arg.name, arg.ty));
            }
            let start = begin_length(out);
            value.append_bytes(out)?;
            end_length(out, start);
            Ok(())
        }
        ArgType::Table => {
            if !matches!(kind, Kind::Object | Kind::Array | Kind::Bytes | Kind::Null) {
                return Err(wrong_type(arg.name, arg.ty));
            }
            encode_table_at(out, value, Walk { depth: 0, budget })
        }
        ArgType::Bit => unreachable!("bits are packed by encode_args"),
        _ => {
            let n = if kind == Kind::Number { value.number()? } else { f64::NAN };
            if n.is_nan() {
                return Err(wrong_type(arg.name, arg.ty));
            }
            encode_number(out, arg.ty, n)
        }
    }
}

fn encode_number(out: &mut Vec<u8>, ty: ArgType, n: f64) -> Result<()> {
    match ty {
        ArgType::Octet => out.push(check_range(n, 0.0, 255.0)? as u8),
        ArgType::Short => put_u16(out, check_range(n, 0.0, 65535.0)? as u16),
        ArgType::Long => put_u32(out, check_range(n, 0.0, 4294967295.0)? as u32),
        ArgType::LongLong | ArgType::Timestamp => put_u64(out, n)?,
        _ => unreachable!("encode_number is only called for numeric types"),
    }
    Ok(())
}

/// Encodes content properties: 16-bit presence flags, then the present values.
/// Null and undefined both count as absent, as in amqplib. Only the properties whose flag
/// is set in `candidates` are read at all (a caller that knows which are there saves the
/// reads of the rest; `u16::MAX` reads every one). Tables are read within the frame's `budget`.
pub fn encode_properties<V: Value>(out: &mut Vec<u8>, props: &PropertiesSpec, fields: &V, candidates: u16, budget: FrameBudget) -> Result<()> {
    let flags_at = out.len();
    put_u16(out, 0);
    let mut flags = 0u16;
    for (n, arg) in props.args.iter().enumerate() {
        if candidates & (1 << (15 - n)) == 0 {
            continue;
        }
        let value = fields.get(arg.name)?;
        let kind = value.kind()?;
        if matches!(kind, Kind::Undefined | Kind::Null) {
            continue;
        }
        flags |= 1 << (15 - n);
        if arg.ty == ArgType::Bit {
            continue;
        }
        encode_arg(out, arg, &value, budget)?;
    }
    out[flags_at..flags_at + 2].copy_from_slice(&flags.to_be_bytes());
    Ok(())
}

// ---------------------------------------------------------------- decoding

/// A bounds-checked reader over a frame payload.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self.pos.checked_add(n).ok_or(CodecError::Truncated)?;
        let slice = self.bytes.get(self.pos..end).ok_or(CodecError::Truncated)?;
        self.pos = end;
        Ok(slice)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }

    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }

    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }

    fn sized(&mut self, long: bool) -> Result<&'a [u8]> {
        let len = if long { self.u32()? as usize } else { self.u8()? as usize };
        self.take(len)
    }
}

/// Decoding context: where strings are interned and where the bytes being decoded start in
/// the connection's read buffer (so string objects can refer to them by range).
pub struct Decoder<'s> {
    pub strings: &'s mut Interner,
    pub tape: &'s mut Tape,
    /// Offset of the payload within the buffer that tape ranges refer to.
    pub base: usize,
}

impl Decoder<'_> {
    fn string_slot(&mut self, r: &Reader, bytes: &[u8], intern: bool) -> f64 {
        let start = self.base + r.position() - bytes.len();
        if intern {
            if let Some(id) = self.strings.intern(bytes, start, self.tape) {
                return id as f64;
            }
        }
        self.tape.transient_string(start, bytes.len())
    }

    fn bytes_slot(&mut self, r: &Reader, bytes: &[u8]) -> f64 {
        let start = self.base + r.position() - bytes.len();
        self.tape.object(Obj::Bytes { start, len: bytes.len() })
    }

    /// Decodes method arguments onto the tape: fixed slots first, table data after them.
    pub fn method_args(&mut self, method: &MethodSpec, r: &mut Reader) -> Result<()> {
        let fixed = self.tape.reserve(crate::spec_types::fixed_slots(method.args));
        let mut slot = fixed;
        let mut bits = 0u8;
        let mut bit_index = 8;
        for arg in method.args {
            if arg.ty == ArgType::Bit {
                if bit_index == 8 {
                    bits = r.u8()?;
                    bit_index = 0;
                }
                self.tape.set(slot, ((bits >> bit_index) & 1) as f64);
                bit_index += 1;
            } else {
                bit_index = 8;
                self.arg(arg, r, slot)?;
            }
            slot += arg.slots();
        }
        Ok(())
    }

    /// Decodes content properties: the flags slot, then one slot per property (0 when absent).
    pub fn properties(&mut self, props: &PropertiesSpec, r: &mut Reader) -> Result<()> {
        let fixed = self.tape.reserve(1 + crate::spec_types::fixed_slots(props.args));
        let flags = r.u16()?;
        self.tape.set(fixed, flags as f64);
        let mut slot = fixed + 1;
        for (n, arg) in props.args.iter().enumerate() {
            if flags & (1 << (15 - n)) != 0 && arg.ty != ArgType::Bit {
                self.arg(arg, r, slot)?;
            }
            slot += arg.slots();
        }
        Ok(())
    }

    fn arg(&mut self, arg: &Arg, r: &mut Reader, slot: usize) -> Result<()> {
        let value = match arg.ty {
            ArgType::Octet => r.u8()? as f64,
            ArgType::Short => r.u16()? as f64,
            ArgType::Long => r.u32()? as f64,
            ArgType::LongLong | ArgType::Timestamp => r.u64()? as f64,
            ArgType::ShortStr => {
                let bytes = r.sized(false)?;
                self.string_slot(r, bytes, arg.intern)
            }
            ArgType::LongStr => {
                let bytes = r.sized(true)?;
                self.bytes_slot(r, bytes)
            }
            ArgType::Table => {
                let len = r.u32()? as usize;
                let body = r.take(len)?;
                let base = self.base;
                self.base += r.position() - len;
                let result = self.table_at(&mut Reader::new(body), slot);
                self.base = base;
                return result;
            }
            ArgType::Bit => unreachable!("bits are unpacked by method_args"),
        };
        self.tape.set(slot, value);
        Ok(())
    }

    /// Decodes a table body (without its length prefix) as a whole value: two slots, the
    /// first slot of its entries and their number of slots.
    pub fn table_slots(&mut self, r: &mut Reader) -> Result<()> {
        let slot = self.tape.reserve(2);
        self.table_at(r, slot)
    }

    fn table_at(&mut self, r: &mut Reader, slot: usize) -> Result<()> {
        let start = self.tape.len();
        self.table(r, 0)?;
        self.tape.set(slot, start as f64);
        self.tape.set(slot + 1, (self.tape.len() - start) as f64);
        Ok(())
    }

    /// Decodes the entries of a table body onto the end of the tape as `key, tag, value...`.
    fn table(&mut self, r: &mut Reader, depth: usize) -> Result<()> {
        if depth >= MAX_TABLE_DEPTH {
            return Err(CodecError::TooDeep);
        }
        while !r.is_empty() {
            let key = r.sized(false)?;
            let slot = self.string_slot(r, key, true);
            self.tape.push(slot);
            self.field_value(r, depth)?;
        }
        Ok(())
    }

    fn array(&mut self, r: &mut Reader, depth: usize) -> Result<()> {
        if depth >= MAX_TABLE_DEPTH {
            return Err(CodecError::TooDeep);
        }
        while !r.is_empty() {
            self.field_value(r, depth)?;
        }
        Ok(())
    }

    /// One tagged value: the tag's char code, then its slots. Nested tables and arrays are
    /// written inline after a slot holding the number of slots they take.
    fn field_value(&mut self, r: &mut Reader, depth: usize) -> Result<()> {
        let tag = r.u8()?;
        self.tape.push(tag as f64);
        match tag {
            b'b' => self.tape.push(r.u8()? as i8 as f64),
            b'B' => self.tape.push(r.u8()? as f64),
            b's' => self.tape.push(r.u16()? as i16 as f64),
            b'u' => self.tape.push(r.u16()? as f64),
            b'I' => self.tape.push(r.u32()? as i32 as f64),
            b'i' => self.tape.push(r.u32()? as f64),
            b'l' => self.tape.push(r.u64()? as i64 as f64),
            b'T' => self.tape.push(r.u64()? as f64),
            b'd' => self.tape.push(f64::from_bits(r.u64()?)),
            b'f' => self.tape.push(f32::from_bits(r.u32()?) as f64),
            b't' => self.tape.push((r.u8()? != 0) as u8 as f64),
            b'V' => {}
            b'D' => {
                let places = r.u8()?;
                let digits = r.u32()?;
                self.tape.push(places as f64);
                self.tape.push(digits as f64);
            }
            b'S' => {
                // Short values repeat (regions, tenants, content kinds): intern them; long ones
                // are mostly unique (trace ids, payloads) and would only churn the table.
                let bytes = r.sized(true)?;
                let slot = self.string_slot(r, bytes, bytes.len() <= MAX_INTERNED_VALUE);
                self.tape.push(slot);
            }
            b'x' => {
                let bytes = r.sized(true)?;
                let slot = self.bytes_slot(r, bytes);
                self.tape.push(slot);
            }
            b'F' | b'A' => {
                let len = r.u32()? as usize;
                let body = r.take(len)?;
                let count_slot = self.tape.reserve(1);
                let base = self.base;
                self.base += r.position() - len;
                let mut inner = Reader::new(body);
                let result = if tag == b'F' { self.table(&mut inner, depth + 1) } else { self.array(&mut inner, depth + 1) };
                self.base = base;
                result?;
                let count = self.tape.len() - count_slot - 1;
                self.tape.set(count_slot, count as f64);
            }
            other => return Err(CodecError::UnexpectedTag(other)),
        }
        Ok(())
    }
}


#[cfg(test)]
mod tests {
    use crate::test_support::{TapeView, TestValue};
    use super::*;
    use proptest::prelude::*;

    fn encode(value: &TestValue) -> Vec<u8> {
        let mut out = Vec::new();
        encode_table(&mut out, value).unwrap();
        out
    }

    fn decode(bytes: &[u8]) -> TestValue {
        let mut tape = Tape::new();
        let mut strings = Interner::new();
        let body = &bytes[4..];
        let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 4 };
        decoder.table_slots(&mut Reader::new(body)).unwrap();
        let slots = tape.to_slots();
        let view = TapeView::new(&slots, &tape, bytes);
        view.table(view.base)
    }

    #[test]
    fn numbers_take_the_smallest_type_amqplib_infers() {
        assert_eq!(infer_number_tag(112.0), b'b');
        assert_eq!(infer_number_tag(-129.0), b's');
        assert_eq!(infer_number_tag(32768.0), b'I');
        assert_eq!(infer_number_tag(2147483648.0), b'l');
        assert_eq!(infer_number_tag(0.5), b'd');
        // Large integers stay integers; so do non-integers beyond 2^50 (amqplib's cut-off).
        assert_eq!(infer_number_tag(2f64.powi(52) + 0.0), b'l');
    }

    #[test]
    fn known_encodings_match_amqplib() {
        // Cases from amqplib's codec tests, generated there with RabbitMQ's own encoder.
        let t = TestValue::object(&[("short", TestValue::Num(-129.0))]);
        assert_eq!(&encode(&t)[4..], &[5, 115, 104, 111, 114, 116, 115, 255, 127]);
        let t = TestValue::object(&[(
            "decimal",
            TestValue::object(&[
                ("!", TestValue::Str("decimal".into())),
                ("value", TestValue::object(&[("digits", TestValue::Num(2345.0)), ("places", TestValue::Num(2.0))])),
            ]),
        )]);
        assert_eq!(&encode(&t)[4..], &[7, 100, 101, 99, 105, 109, 97, 108, 68, 2, 0, 0, 9, 41]);
    }

    #[test]
    fn wrong_types_report_the_field_and_what_it_must_be() {
        let fields = TestValue::object(&[("exchange", TestValue::Num(1.0))]);
        let mut out = Vec::new();
        let err = encode_args(&mut out, &crate::spec::BASIC_PUBLISH, &fields, FrameBudget::UNBOUNDED).unwrap_err();
        let expected = Report { id: ErrorId::WrongType, params: vec![Param::Text("exchange"), Param::Text("a string (up to 255 chars)")] };
        assert_eq!(err.report(), expected);
        let err = encode_args(&mut out, &crate::spec::BASIC_DELIVER, &TestValue::object(&[]), FrameBudget::UNBOUNDED).unwrap_err();
        assert_eq!(err.report(), Report { id: ErrorId::Missing, params: vec![Param::Text("consumerTag")] });
        let long = TestValue::object(&[("exchange", TestValue::Str("x".repeat(256)))]);
        assert!(encode_args(&mut out, &crate::spec::BASIC_PUBLISH, &long, FrameBudget::UNBOUNDED).is_err());
    }

    /// Every error reports parameters of the kinds its id has (JS reads them by those).
    #[test]
    fn each_report_has_the_parameters_its_id_declares() {
        use crate::boundary::ParamKind;
        let errors = [
            CodecError::WrongType { field: "f".into(), expected: "e" },
            CodecError::Missing("f".into()),
            CodecError::OutOfRange { min: 0.0, max: 255.0, got: 300.0 },
            CodecError::OutOfRange64 { signed: true, got: 2f64.powi(64) },
            CodecError::NotAnInteger(1.5),
            CodecError::UnknownEncodeType("symbol".into()),
            CodecError::BadDecimal("{}".into()),
            CodecError::UnexpectedTag(b'Z'),
            CodecError::Truncated,
            CodecError::TooDeep,
            CodecError::TooDeepToEncode,
            CodecError::UnknownMethod,
            CodecError::UnknownProperties,
            CodecError::TableTooLarge,
            CodecError::FrameTooLarge { size: 5000, max: 4096 },
            CodecError::NoRoomForBody(8),
            CodecError::Source("thrown".into()),
        ];
        for error in &errors {
            let report = error.report();
            let kinds: Vec<ParamKind> = report.params.iter().map(|p| if matches!(p, Param::Text(_)) { ParamKind::Text } else { ParamKind::Number }).collect();
            assert_eq!(kinds, report.id.params(), "{error:?}");
        }
        assert_eq!(CodecError::OutOfRange64 { signed: true, got: -1.0 }.report(), Report::numbers(ErrorId::OutOfRange64, &[1.0, -1.0]));
        assert_eq!(CodecError::TooDeep.report(), Report::numbers(ErrorId::TooDeep, &[MAX_TABLE_DEPTH as f64]));
    }

    #[test]
    fn nesting_beyond_the_bound_is_refused_not_recursed() {
        // 'F' tables nested 10,000 deep, written by hand (the encoder would recurse too).
        let depth = 10_000;
        let mut body = Vec::new();
        for _ in 0..depth {
            body.extend_from_slice(&[1, b'k', b'F']);
        }
        // Lengths are wrong on purpose: the decoder must stop at the depth bound or at the
        // first bad length, never overflow the stack.
        let mut tape = Tape::new();
        let mut strings = Interner::new();
        let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
        assert!(decoder.table_slots(&mut Reader::new(&body)).is_err());
    }

    #[test]
    fn a_table_is_read_no_further_than_the_frame_budget() {
        // A table of many entries of 100 bytes (10,000; under Miri, whose every allocation is
        // slow, 200: still five frames' worth), for a frame of 4096: refused once the frame
        // passes 4096 bytes, some 40 entries in, with what it had encoded by then.
        let many = if cfg!(miri) { 200 } else { 10_000 };
        let entries: Vec<(String, TestValue)> = (0..many).map(|i| (format!("k{i}"), TestValue::Str("x".repeat(100)))).collect();
        let fields = TestValue::object(&[("queue", TestValue::Str("q".into())), ("arguments", TestValue::Object(entries))]);
        let mut out = Vec::new();
        let refused = encode_args(&mut out, &crate::spec::QUEUE_DECLARE, &fields, FrameBudget::new(0, 4096));
        assert!(matches!(refused, Err(CodecError::FrameTooLarge { size, max: 4096 }) if size > 4096 && size < 4096 + 200), "{refused:?}");
        assert!(out.len() < 4096 + 200, "stopped at the budget: {} bytes", out.len());
        // The same with an array as long as its budget allows, in a frame that started earlier.
        let array = TestValue::Array(vec![TestValue::Num(1.0); many * 50]);
        let mut out = vec![0; 1000];
        let refused = encode_args(&mut out, &crate::spec::QUEUE_DECLARE, &TestValue::object(&[("arguments", TestValue::object(&[("a", array)]))]), FrameBudget::new(1000, 4096));
        assert!(matches!(refused, Err(CodecError::FrameTooLarge { max: 4096, .. })), "{refused:?}");
        assert!(out.len() < 1000 + 4096 + 10);
    }

    /// Arguments of every type, made from a seed (tables small, strings short).
    #[test]
    fn tables_too_deep_or_too_large_to_send_are_refused_not_recursed() {
        let mut nested = TestValue::object(&[]);
        for _ in 0..MAX_TABLE_DEPTH {
            nested = TestValue::object(&[("a", nested)]);
        }
        let mut out = Vec::new();
        assert_eq!(encode_table(&mut out, &nested), Err(CodecError::TooDeepToEncode));
        let mut array = TestValue::Array(vec![]);
        for _ in 0..MAX_TABLE_DEPTH - 2 {
            array = TestValue::Array(vec![array]);
        }
        let mut out = Vec::new();
        assert!(encode_table(&mut out, &TestValue::object(&[("a", array)])).is_ok(), "up to the bound is fine");
        // A table over the size bound is refused once past it (in JS, shared parts can
        // double the size at each level: encoding stops there, not after 2^depth values).
        let mut shared = TestValue::Str("x".repeat(1 << 20));
        for _ in 0..5 {
            shared = TestValue::object(&[("a", shared.clone()), ("b", shared)]);
        }
        let mut out = Vec::new();
        assert_eq!(encode_table(&mut out, &shared), Err(CodecError::TableTooLarge));
        assert!(out.len() <= 2 * MAX_TABLE_BYTES + 4096);
    }

    fn random_fields(args: &[crate::spec_types::Arg], seed: u64) -> TestValue {
        let mut state = seed | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let entries = args
            .iter()
            .map(|arg| {
                let n = next();
                let value = match arg.ty {
                    ArgType::Octet => TestValue::Num((n % 256) as f64),
                    ArgType::Short => TestValue::Num((n % 65536) as f64),
                    ArgType::Long => TestValue::Num((n % 4294967296) as f64),
                    ArgType::LongLong | ArgType::Timestamp => TestValue::Num((n % (1 << 53)) as f64),
                    ArgType::Bit => TestValue::Bool(n % 2 == 0),
                    ArgType::ShortStr => TestValue::Str(format!("s{}", n % 1000)),
                    ArgType::LongStr => TestValue::Bytes(n.to_be_bytes().to_vec()),
                    ArgType::Table => TestValue::object(&[("k", TestValue::Num((n % 100) as f64))]),
                };
                (arg.name.to_string(), value)
            })
            .collect();
        TestValue::Object(entries)
    }

    /// The fields of a decoded method, read back from its fixed slots.
    fn read_fields(view: &TapeView, args: &[crate::spec_types::Arg]) -> TestValue {
        let mut slot = view.base;
        let entries = args
            .iter()
            .map(|arg| {
                let v = view.slots[slot];
                let value = match arg.ty {
                    ArgType::Bit => TestValue::Bool(v != 0.0),
                    ArgType::ShortStr => TestValue::Str(view.string(v)),
                    ArgType::LongStr => TestValue::Bytes(view.bytes(v)),
                    ArgType::Table => view.table(slot),
                    _ => TestValue::Num(v),
                };
                slot += arg.slots();
                (arg.name.to_string(), value)
            })
            .collect();
        TestValue::Object(entries)
    }

    fn leaf() -> impl Strategy<Value = TestValue> {
        prop_oneof![
            Just(TestValue::Null),
            any::<bool>().prop_map(TestValue::Bool),
            (-(1i64 << 53)..(1i64 << 53)).prop_map(|n| TestValue::Num(n as f64)),
            (-1e9f64..1e9).prop_filter("non-integers", |f| f.fract() != 0.0).prop_map(TestValue::Num),
            ".{0,40}".prop_map(TestValue::Str),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(TestValue::Bytes),
        ]
    }

    fn table() -> impl Strategy<Value = TestValue> {
        let value = leaf().prop_recursive(4, 64, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(TestValue::Array),
                proptest::collection::btree_map("[a-z]{1,8}", inner, 0..6)
                    .prop_map(|m| TestValue::Object(m.into_iter().collect())),
            ]
        });
        proptest::collection::btree_map("[a-zA-Z0-9_-]{1,12}", value, 0..8)
            .prop_map(|m| TestValue::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn tables_round_trip(t in table()) {
            prop_assert_eq!(decode(&encode(&t)), t);
        }

        // The fuzz_ tests take random input to each decoder: no panic, no hang, and what they
        // produce is bounded by what they were given. `npm run fuzz` runs them far longer.

        #[test]
        fn fuzz_table_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut tape = Tape::new();
            let mut strings = Interner::new();
            let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
            let _ = decoder.table_slots(&mut Reader::new(&bytes));
            prop_assert!(tape.len() <= 2 + 2 * bytes.len());
            prop_assert!(tape.objects.len() <= bytes.len());
        }

        #[test]
        fn fuzz_method_decoder(index in 0usize..crate::spec::METHODS.len(), bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let method = crate::spec::METHODS[index];
            let mut tape = Tape::new();
            let mut strings = Interner::new();
            let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
            let _ = decoder.method_args(method, &mut Reader::new(&bytes));
            prop_assert!(tape.len() <= 2 * crate::spec_types::fixed_slots(method.args) + 2 * bytes.len());
            prop_assert!(tape.objects.len() <= bytes.len() + method.args.len());
        }

        #[test]
        fn fuzz_properties_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let props = &crate::spec::BASIC_PROPERTIES;
            let mut tape = Tape::new();
            let mut strings = Interner::new();
            let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
            let _ = decoder.properties(props, &mut Reader::new(&bytes));
            prop_assert!(tape.len() <= 1 + crate::spec_types::fixed_slots(props.args) + 2 * bytes.len());
        }

        #[test]
        fn methods_round_trip(index in 0usize..crate::spec::METHODS.len(), seed in any::<u64>()) {
            let method = crate::spec::METHODS[index];
            let fields = random_fields(method.args, seed);
            let mut out = Vec::new();
            encode_args(&mut out, method, &fields, FrameBudget::UNBOUNDED).unwrap();
            let mut tape = Tape::new();
            let mut strings = Interner::new();
            let mut decoder = Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
            decoder.method_args(method, &mut Reader::new(&out)).unwrap();
            let slots = tape.to_slots();
            let view = TapeView::new(&slots, &tape, &out);
            prop_assert_eq!(read_fields(&view, method.args), fields);
        }
    }
}
