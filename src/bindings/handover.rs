//! Handing decoded events to JS: the tape as a Float64Array, its objects (strings, Buffers)
//! as an Array, and the read's content slab (see `tape.rs`). A tape JS has released is
//! written again by the next read that fits, so that a read at a broker's pace (a message or
//! a few) costs no new typed array: per read, only the slab is new.

use super::env::{Js, JsEnv};
use super::errors::JsError;
use crate::connection::Connection;
use crate::serializer::Serializer;
use crate::boundary::TAPE_HELD;
use crate::tape::{Obj, Tape};
use napi::sys;
use std::io::Write;
use std::ptr;

type Result<T> = std::result::Result<T, JsError>;

fn js_object<'call>(env: JsEnv<'call>, obj: Obj, source: &[u8]) -> Result<Js<'call>> {
    match obj {
        Obj::Str { start, len } => env.string(&source[start..start + len]),
        Obj::Text(text) => env.string(text.as_bytes()),
        Obj::Bytes { start, len } => env.buffer_copy(&source[start..start + len]),
        Obj::Content(content) => env.external_buffer(content),
    }
}

/// A new Array of `values` (see [`define_elements`]).
pub(super) fn js_array<'call>(env: JsEnv<'call>, values: &[Js<'call>]) -> Result<Js<'call>> {
    let array = env.array_with_length(values.len())?;
    define_elements(env, array, 0, values)?;
    Ok(array)
}

/// Puts `values` into `array` from index `from` on, as own data properties defined
/// (CreateDataProperty) rather than set: setting an element that does not exist yet consults
/// Array.prototype, where an indexed accessor would run the user's JS (see `mod.rs`).
fn define_elements<'call>(env: JsEnv<'call>, array: Js<'call>, from: usize, values: &[Js<'call>]) -> Result<()> {
    // The index names, each NUL-terminated, back to back.
    let mut names = Vec::with_capacity(values.len() * 4);
    for i in from..from + values.len() {
        write!(names, "{i}\0").expect("a Vec takes any write");
    }
    env.define_properties(array, &names, values)
}

/// Bytes the objects of `tape` and its content slab will copy out of the decoded buffer.
fn bytes_to_copy(tape: &Tape) -> u64 {
    let objects: usize = tape.objects.iter().map(|o| if let Obj::Bytes { len, .. } = o { *len } else { 0 }).sum();
    (objects + tape.pooled_bytes()) as u64
}

/// The read's content slab: one ArrayBuffer with the pooled bodies back to back (see
/// `tape.rs`), or undefined when there are none. JS makes each body a Buffer view of it, so the
/// slab itself need not be a Buffer (which would cost a typed array and a prototype per read).
fn content_slab<'call>(env: JsEnv<'call>, tape: &Tape, source: &[u8]) -> Result<Js<'call>> {
    if tape.pooled.is_empty() {
        return env.undefined();
    }
    // The ranges (each within `source`) add up to exactly the slab's size.
    env.arraybuffer_with(tape.pooled_bytes(), |slab| {
        let mut at = 0;
        for &(start, len) in &tape.pooled {
            slab[at..at + len].copy_from_slice(&source[start..start + len]);
            at += len;
        }
    })
}

/// What one read hands to JS: the tape as a Float64Array, its objects as an Array (undefined
/// when there are none) and the read's content slab.
pub(super) struct HandedOver<'call> {
    pub tape: Js<'call>,
    pub objects: Js<'call>,
    pub slab: Js<'call>,
    /// The tape is the spare one given, written again (the native socket keeps a new one).
    #[cfg_attr(not(native_socket), allow(dead_code))]
    pub reused: bool,
}

impl<'call> HandedOver<'call> {
    /// `[tape, objects, slab]`, for the calls that return what they parsed.
    pub fn into_array(self, env: JsEnv<'call>) -> Result<Js<'call>> {
        js_array(env, &[self.tape, self.objects, self.slab])
    }
}

/// A new tape has room for this many slots at least, and a power of two: reused from read to
/// read, it soon fits every read.
const MIN_TAPE_SLOTS: usize = 1024;

/// Writes `tape` into `spare` (a Float64Array JS handed back) if JS is done with it and it has
/// room; false otherwise (and for anything else given as a spare).
fn write_into_spare(env: JsEnv<'_>, spare: Js<'_>, tape: &Tape) -> bool {
    let mut kind = sys::TypedarrayType::int8_array;
    let (mut length, mut data, mut buffer, mut offset) = (0, ptr::null_mut(), ptr::null_mut(), 0);
    // SAFETY: env and spare are live for the call; fails (and the spare is not used) if it is
    // not a typed array.
    let status = unsafe { sys::napi_get_typedarray_info(env.raw(), spare.raw(), &mut kind, &mut length, &mut data, &mut buffer, &mut offset) };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::float64_array || length < tape.total_slots() {
        return false;
    }
    // SAFETY: a Float64Array's `length` f64s at `data` (aligned, as V8 lays them out), kept
    // alive by the `spare` handle of this call; no JS runs while the slice is in use. `length`
    // covers the header (`total_slots` counts it), so `TAPE_HELD` is in it.
    let slots = unsafe { std::slice::from_raw_parts_mut(data.cast::<f64>(), length) };
    if slots[TAPE_HELD] != 0.0 {
        return false;
    }
    tape.write_slots(slots);
    true
}

/// The tape as a Float64Array: written into `spare` when JS is done with it and it has room,
/// else into a new one. True when the spare was used.
fn tape_array<'call>(env: JsEnv<'call>, tape: &Tape, spare: Option<Js<'call>>) -> Result<(Js<'call>, bool)> {
    if let Some(spare) = spare.filter(|&spare| write_into_spare(env, spare, tape)) {
        return Ok((spare, true));
    }
    // Room to be reused where a spare will be given back (a connection's reads); exactly the
    // slots otherwise (the codec's one-off decodes).
    let needed = tape.total_slots();
    let capacity = if spare.is_some() { needed.next_power_of_two().max(MIN_TAPE_SLOTS) } else { needed };
    Ok((env.float64_array_with(capacity, |slots| tape.write_slots(slots))?, false))
}

/// Hands `tape` to JS: its slots into `spare` or a new Float64Array, its objects as an Array,
/// and the read's content slab.
pub(super) fn hand_over<'call>(env: JsEnv<'call>, tape: &mut Tape, source: &[u8], spare: Option<Js<'call>>) -> Result<HandedOver<'call>> {
    let (typed, reused) = tape_array(env, tape, spare)?;
    let slab = content_slab(env, tape, source)?;
    let objects = if tape.objects.is_empty() {
        env.undefined()?
    } else {
        let values = tape.objects.drain(..).map(|obj| js_object(env, obj, source)).collect::<Result<Vec<_>>>()?;
        js_array(env, &values)?
    };
    Ok(HandedOver { tape: typed, objects, slab, reused })
}

/// What `core` last received, handed to JS: its events, taken onto the tape by the
/// connection's serializer (counting the bytes they copy), into `spare` when JS is done with it.
pub(super) fn hand_over_received<'call>(
    env: JsEnv<'call>,
    core: &mut Connection,
    serializer: &mut Serializer,
    spare: Option<Js<'call>>,
) -> Result<HandedOver<'call>> {
    serializer.serialize_read(core);
    core.bytes_copied += bytes_to_copy(&serializer.tape);
    hand_over(env, &mut serializer.tape, core.read_buffer(), spare)
}
