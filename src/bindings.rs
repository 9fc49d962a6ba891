//! The Node-API surface: the connection core as a JS class, and the codec entry points the
//! compat adapters need. Every entry point catches panics (`catch_unwind`), so a Rust panic
//! reaches JS as a thrown Error, never as an abort.
//!
//! JS values are read through raw Node-API calls behind [`JsVal`], which implements the
//! codec's [`Value`] trait; decoded events go back as `[tape: Float64Array, objects: Array]`
//! (see `tape.rs`), one crossing per read.

use crate::codec::{CodecError, ErrorKind, Kind, Value};
use crate::connection::Session;
use crate::spec;
use crate::strings::Interner;
use crate::tape::{Obj, Tape};
use crate::transport::TcpSocket;
use crate::uv;
use std::ffi::{c_int, c_void};
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::collections::HashMap;
use std::ptr;

mod hot;

/// Index of each cached property key in the keys array, by the key's address.
type KeyIndex = HashMap<usize, u32, std::hash::BuildHasherDefault<crate::strings::Fnv>>;

// ---------------------------------------------------------------- errors

/// Throws `e` as the kind of JS error amqplib raises for it (TypeError, RangeError or Error),
/// unless a JS exception is already pending (a throwing getter), which then propagates.
fn throw(env: sys::napi_env, e: &CodecError) -> Error {
    let mut pending = false;
    // SAFETY: env is the live env of the current call (all callers are napi entry points).
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if !pending {
        let message = std::ffi::CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
        let code = e.code().map(|code| std::ffi::CString::new(code).expect("codes have no NUL"));
        let code = code.as_ref().map_or(ptr::null(), |code| code.as_ptr());
        // SAFETY: as above; message and code are NUL-terminated (or null) and outlive the call.
        unsafe {
            match e.kind() {
                ErrorKind::Type => sys::napi_throw_type_error(env, code, message.as_ptr()),
                ErrorKind::Range => sys::napi_throw_range_error(env, code, message.as_ptr()),
                ErrorKind::Plain => sys::napi_throw_error(env, code, message.as_ptr()),
            };
        }
    }
    Error::new(Status::PendingException, e.to_string())
}

fn check(status: sys::napi_status) -> crate::codec::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(CodecError::Source(format!("Node-API call failed with status {status}")))
    }
}

// ---------------------------------------------------------------- reading JS values

/// A JS value of the current call, read through Node-API.
pub struct JsVal {
    env: sys::napi_env,
    value: sys::napi_value,
    /// The kind, once asked: the encoder asks more than once of the same value.
    kind: std::cell::Cell<Option<Kind>>,
}

impl JsVal {
    fn new(env: sys::napi_env, value: sys::napi_value) -> Self {
        JsVal { env, value, kind: std::cell::Cell::new(None) }
    }

    /// typeof, refined for null, arrays and Buffers.
    fn read_kind(&self) -> crate::codec::Result<Kind> {
        let mut ty = 0;
        // SAFETY (all calls in this impl): env and value belong to the current napi call
        // and are used before it returns; out-pointers point at live locals.
        check(unsafe { sys::napi_typeof(self.env, self.value, &mut ty) })?;
        Ok(match ty {
            sys::ValueType::napi_undefined => Kind::Undefined,
            sys::ValueType::napi_null => Kind::Null,
            sys::ValueType::napi_boolean => Kind::Bool,
            sys::ValueType::napi_number => Kind::Number,
            sys::ValueType::napi_string => Kind::String,
            sys::ValueType::napi_object => {
                let mut yes = false;
                check(unsafe { sys::napi_is_array(self.env, self.value, &mut yes) })?;
                if yes {
                    return Ok(Kind::Array);
                }
                check(unsafe { sys::napi_is_buffer(self.env, self.value, &mut yes) })?;
                if yes && self.is_node_buffer()? {
                    Kind::Bytes
                } else {
                    Kind::Object
                }
            }
            sys::ValueType::napi_function => Kind::Other("function"),
            sys::ValueType::napi_symbol => Kind::Other("symbol"),
            sys::ValueType::napi_bigint => Kind::Other("bigint"),
            _ => Kind::Other("external"),
        })
    }


    /// `Buffer.isBuffer`: Node-API's own test takes any typed array or DataView, which
    /// amqplib encodes as tables (of their indices), not as byte arrays.
    fn is_node_buffer(&self) -> crate::codec::Result<bool> {
        let mut global = ptr::null_mut();
        let mut constructor = ptr::null_mut();
        let mut yes = false;
        check(unsafe { sys::napi_get_global(self.env, &mut global) })?;
        check(unsafe { sys::napi_get_property(self.env, global, self.key("Buffer")?, &mut constructor) })?;
        check(unsafe { sys::napi_instanceof(self.env, self.value, constructor, &mut yes) })?;
        Ok(yes)
    }

    fn of(env: &Env, value: &Unknown) -> Self {
        JsVal::new(env.raw(), value.raw())
    }

    /// The JS string for a property name, made once per thread (each thread has one env) and
    /// kept in a JS array: fetching it back is cheaper than making and internalising a new
    /// string for every property read of every publish.
    fn key(&self, key: &'static str) -> crate::codec::Result<sys::napi_value> {
        thread_local! {
            // Keyed by the name's address: the names are static, so that identifies them
            // without hashing their text.
            static KEYS: std::cell::RefCell<Option<(sys::napi_ref, KeyIndex)>> =
                const { std::cell::RefCell::new(None) };
        }
        KEYS.with(|cell| {
            let mut cell = cell.borrow_mut();
            if cell.is_none() {
                let mut array = ptr::null_mut();
                let mut reference = ptr::null_mut();
                // SAFETY: env is live for the call; the array is kept by a strong reference.
                check(unsafe { sys::napi_create_array(self.env, &mut array) })?;
                check(unsafe { sys::napi_create_reference(self.env, array, 1, &mut reference) })?;
                *cell = Some((reference, KeyIndex::default()));
            }
            let (reference, indices) = cell.as_mut().expect("initialised above");
            let mut array = ptr::null_mut();
            let mut out = ptr::null_mut();
            // SAFETY: the reference is strong, so the array is live.
            check(unsafe { sys::napi_get_reference_value(self.env, *reference, &mut array) })?;
            if let Some(&index) = indices.get(&(key.as_ptr() as usize)) {
                check(unsafe { sys::napi_get_element(self.env, array, index, &mut out) })?;
                return Ok(out);
            }
            // SAFETY: key points at key.len() valid bytes.
            check(unsafe { sys::napi_create_string_utf8(self.env, key.as_ptr().cast(), key.len() as isize, &mut out) })?;
            let index = indices.len() as u32;
            check(unsafe { sys::napi_set_element(self.env, array, index, out) })?;
            indices.insert(key.as_ptr() as usize, index);
            Ok(out)
        })
    }

    fn string_of(&self, value: sys::napi_value) -> crate::codec::Result<String> {
        let mut bytes = Vec::new();
        JsVal::new(self.env, value).append_utf8(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Value for JsVal {
    fn kind(&self) -> crate::codec::Result<Kind> {
        if let Some(kind) = self.kind.get() {
            return Ok(kind);
        }
        let kind = self.read_kind()?;
        self.kind.set(Some(kind));
        Ok(kind)
    }

    fn append_utf8_within(&self, out: &mut Vec<u8>, max: usize) -> crate::codec::Result<bool> {
        // One call, with room for 4 bytes more than allowed (and the NUL). V8 writes whole
        // characters only, and one is at most 4 bytes: so a longer string always writes more
        // than `max`, never stops short of it.
        out.reserve(max + 5);
        let at = out.len();
        let mut written = 0usize;
        // SAFETY: `out` has room for max + 5 bytes past `at`.
        check(unsafe {
            sys::napi_get_value_string_utf8(self.env, self.value, out.as_mut_ptr().add(at).cast(), max + 5, &mut written)
        })?;
        if written > max {
            return Ok(false);
        }
        // SAFETY: Node-API initialised `written` bytes (without the NUL).
        unsafe { out.set_len(at + written) };
        Ok(true)
    }

    fn truthy(&self) -> crate::codec::Result<bool> {
        let mut coerced = ptr::null_mut();
        let mut out = false;
        check(unsafe { sys::napi_coerce_to_bool(self.env, self.value, &mut coerced) })?;
        check(unsafe { sys::napi_get_value_bool(self.env, coerced, &mut out) })?;
        Ok(out)
    }

    fn number(&self) -> crate::codec::Result<f64> {
        let mut out = 0.0;
        if unsafe { sys::napi_get_value_double(self.env, self.value, &mut out) } == sys::Status::napi_ok {
            return Ok(out);
        }
        // Not a number: coerce as `+value` does (valueOf may run, and may throw).
        let mut coerced = ptr::null_mut();
        check(unsafe { sys::napi_coerce_to_number(self.env, self.value, &mut coerced) })?;
        check(unsafe { sys::napi_get_value_double(self.env, coerced, &mut out) })?;
        Ok(out)
    }

    fn append_utf8(&self, out: &mut Vec<u8>) -> crate::codec::Result<()> {
        let mut len = 0usize;
        check(unsafe { sys::napi_get_value_string_utf8(self.env, self.value, ptr::null_mut(), 0, &mut len) })?;
        out.reserve(len + 1);
        let at = out.len();
        let mut written = 0usize;
        // SAFETY: `out` has room for len + 1 bytes past `at` (the NUL Node-API writes).
        check(unsafe {
            sys::napi_get_value_string_utf8(
                self.env,
                self.value,
                out.as_mut_ptr().add(at).cast(),
                len + 1,
                &mut written,
            )
        })?;
        // SAFETY: Node-API initialised `written` bytes (without the NUL).
        unsafe { out.set_len(at + written) };
        Ok(())
    }

    fn append_bytes(&self, out: &mut Vec<u8>) -> crate::codec::Result<()> {
        let mut data = ptr::null_mut();
        let mut len = 0usize;
        check(unsafe { sys::napi_get_buffer_info(self.env, self.value, &mut data, &mut len) })?;
        if len > 0 {
            // SAFETY: Node-API gives the Buffer's live backing store of `len` bytes.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) });
        }
        Ok(())
    }

    fn items(&self) -> crate::codec::Result<Vec<Self>> {
        let mut len = 0u32;
        check(unsafe { sys::napi_get_array_length(self.env, self.value, &mut len) })?;
        (0..len)
            .map(|i| {
                let mut item = ptr::null_mut();
                check(unsafe { sys::napi_get_element(self.env, self.value, i, &mut item) })?;
                Ok(JsVal::new(self.env, item))
            })
            .collect()
    }

    fn entries(&self) -> crate::codec::Result<Vec<(String, Self)>> {
        let mut keys = ptr::null_mut();
        check(unsafe { sys::napi_get_property_names(self.env, self.value, &mut keys) })?;
        JsVal::new(self.env, keys)
            .items()?
            .into_iter()
            .map(|key| {
                let mut value = ptr::null_mut();
                check(unsafe { sys::napi_get_property(self.env, self.value, key.value, &mut value) })?;
                Ok((self.string_of(key.value)?, JsVal::new(self.env, value)))
            })
            .collect()
    }

    fn get(&self, key: &'static str) -> crate::codec::Result<Self> {
        let mut value = ptr::null_mut();
        let key = self.key(key)?;
        check(unsafe { sys::napi_get_property(self.env, self.value, key, &mut value) })?;
        Ok(JsVal::new(self.env, value))
    }

    fn has_own(&self, key: &'static str) -> crate::codec::Result<bool> {
        let mut out = false;
        let key = self.key(key)?;
        check(unsafe { sys::napi_has_own_property(self.env, self.value, key, &mut out) })?;
        Ok(out)
    }
}

// ---------------------------------------------------------------- handing events to JS

fn napi_ok(status: sys::napi_status) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::GenericFailure, format!("Node-API call failed with status {status}")))
    }
}

unsafe extern "C" fn drop_content(env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box<Vec<u8>> leaked in `content_buffer`, finalised exactly once.
    let content = unsafe { Box::from_raw(hint.cast::<Vec<u8>>()) };
    let mut total = 0;
    // SAFETY: finalizers run on the env's own thread.
    unsafe { sys::napi_adjust_external_memory(env, -(content.capacity() as i64), &mut total) };
}

/// A Buffer that takes ownership of an assembled body, without copying it again.
fn content_buffer(env: sys::napi_env, content: Vec<u8>) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    if content.is_empty() {
        let mut data = ptr::null_mut();
        // SAFETY: env is live; creates an empty JS-owned Buffer.
        napi_ok(unsafe { sys::napi_create_buffer(env, 0, &mut data, &mut out) })?;
        return Ok(out);
    }
    let mut boxed = Box::new(content);
    let (data, len, capacity) = (boxed.as_mut_ptr(), boxed.len(), boxed.capacity());
    let hint = Box::into_raw(boxed);
    // SAFETY: the Vec stays alive (leaked into `hint`) until Node runs `drop_content`.
    let status = unsafe {
        sys::napi_create_external_buffer(env, len, data.cast(), Some(drop_content), hint.cast(), &mut out)
    };
    if status == sys::Status::napi_ok {
        // Tell V8 about memory it cannot see, so that it collects these Buffers as promptly
        // as its own; the finalizer takes the amount back.
        let mut total = 0;
        // SAFETY: env is live on this thread.
        unsafe { sys::napi_adjust_external_memory(env, capacity as i64, &mut total) };
        return Ok(out);
    }
    // External buffers not allowed (e.g. a sandboxed runtime): fall back to one copy.
    // SAFETY: `hint` was not taken by Node since the call failed; reclaim it.
    let content = unsafe { Box::from_raw(hint) };
    let mut copied = ptr::null_mut();
    napi_ok(unsafe { sys::napi_create_buffer_copy(env, len, content.as_ptr().cast(), &mut copied, &mut out) })?;
    Ok(out)
}

fn js_string(env: sys::napi_env, bytes: &[u8]) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    // SAFETY: env is live; bytes is a valid slice for the duration of the call.
    napi_ok(unsafe { sys::napi_create_string_utf8(env, bytes.as_ptr().cast(), bytes.len() as isize, &mut out) })?;
    Ok(out)
}

fn js_object(env: sys::napi_env, obj: Obj, source: &[u8]) -> Result<sys::napi_value> {
    match obj {
        Obj::Str { start, len } => js_string(env, &source[start..start + len]),
        Obj::Text(text) => js_string(env, text.as_bytes()),
        Obj::Bytes { start, len } => {
            let mut out = ptr::null_mut();
            let mut data = ptr::null_mut();
            let bytes = &source[start..start + len];
            // SAFETY: env is live; copies `len` bytes from a valid slice.
            napi_ok(unsafe { sys::napi_create_buffer_copy(env, len, bytes.as_ptr().cast(), &mut data, &mut out) })?;
            Ok(out)
        }
        Obj::Content(content) => content_buffer(env, content),
    }
}

/// Bytes the objects of `tape` and its content slab will copy out of the decoded buffer.
fn bytes_to_copy(tape: &Tape) -> u64 {
    let objects: usize = tape.objects.iter().map(|o| if let Obj::Bytes { len, .. } = o { *len } else { 0 }).sum();
    (objects + tape.pooled_bytes()) as u64
}

/// The read's content slab: one Buffer with the pooled bodies back to back (see `tape.rs`),
/// or undefined when there are none.
fn content_slab(env: sys::napi_env, tape: &Tape, source: &[u8]) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    if tape.pooled.is_empty() {
        napi_ok(unsafe { sys::napi_get_undefined(env, &mut out) })?;
        return Ok(out);
    }
    let mut data = ptr::null_mut();
    // SAFETY: env is live; `data` receives a fresh store of `pooled_bytes` bytes, which the
    // ranges (each within `source`, together exactly that many bytes) fill completely.
    unsafe {
        napi_ok(sys::napi_create_buffer(env, tape.pooled_bytes(), &mut data, &mut out))?;
        let slab = std::slice::from_raw_parts_mut(data.cast::<u8>(), tape.pooled_bytes());
        let mut at = 0;
        for &(start, len) in &tape.pooled {
            slab[at..at + len].copy_from_slice(&source[start..start + len]);
            at += len;
        }
    }
    Ok(out)
}

/// `[tape, objects, slab]`: the tape as a Float64Array, its objects as an Array, and the
/// read's content slab.
fn hand_over(env: sys::napi_env, tape: &mut Tape, source: &[u8]) -> Result<sys::napi_value> {
    let slots = tape.total_slots();
    let mut array_buffer = ptr::null_mut();
    let mut data = ptr::null_mut();
    // SAFETY: env is live; `data` receives a fresh JS-owned store of `slots` f64s (8-byte
    // aligned, as V8 allocates array buffers) that `write_slots` fills completely.
    unsafe {
        napi_ok(sys::napi_create_arraybuffer(env, slots * 8, &mut data, &mut array_buffer))?;
        tape.write_slots(std::slice::from_raw_parts_mut(data.cast::<f64>(), slots));
    }
    let slab = content_slab(env, tape, source)?;
    let mut typed = ptr::null_mut();
    let mut objects = ptr::null_mut();
    let mut pair = ptr::null_mut();
    // SAFETY: env is live; all handles were created in this call.
    unsafe {
        napi_ok(sys::napi_create_typedarray(env, sys::TypedarrayType::float64_array, slots, array_buffer, 0, &mut typed))?;
        napi_ok(sys::napi_create_array_with_length(env, tape.objects.len(), &mut objects))?;
        for (i, obj) in tape.objects.drain(..).enumerate() {
            let value = js_object(env, obj, source)?;
            napi_ok(sys::napi_set_element(env, objects, i as u32, value))?;
        }
        napi_ok(sys::napi_create_array_with_length(env, 3, &mut pair))?;
        napi_ok(sys::napi_set_element(env, pair, 0, typed))?;
        napi_ok(sys::napi_set_element(env, pair, 1, objects))?;
        napi_ok(sys::napi_set_element(env, pair, 2, slab))?;
    }
    Ok(pair)
}

/// `[tape, objects, slab]` for what `core` last received, counting the bytes they copy.
fn hand_over_received(env: sys::napi_env, core: &mut Session) -> Result<sys::napi_value> {
    core.bytes_copied += bytes_to_copy(&core.tape);
    let (tape, read) = (&mut core.tape as *mut Tape, core.read_buffer());
    // SAFETY: `tape` and the read buffer are disjoint fields of `core`.
    hand_over(env, unsafe { &mut *tape }, read)
}

// ---------------------------------------------------------------- the connection core

/// One connection's codec state: its read buffer, body assembly, string table and output;
/// and, for amqp://, the TCP socket it reads and writes itself (see `socket` below).
#[napi(js_name = "Session")]
pub struct JsSession {
    core: Session,
    socket: Option<Box<SocketState>>,
}

#[napi]
impl JsSession {
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        JsSession { core: Session::new(), socket: None }
    }

    /// A handle for the hot entry points (see `hot.rs`), which keeps this session alive.
    #[napi(catch_unwind)]
    pub fn hot_handle(&mut self, env: Env, this: This) -> Result<Unknown<'_>> {
        let handle = hot::handle(env.raw(), self, this.object.raw())?;
        // SAFETY: `handle` was created in this call's env.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), handle) })
    }

    /// Each send returns the bytes now waiting to be written, which the connection needs for
    /// backpressure anyway: one crossing instead of two.
    #[napi(catch_unwind)]
    pub fn send_method(&mut self, env: Env, channel: u32, method_id: u32, fields: Unknown) -> Result<u32> {
        let _encoding = hot::Encoding::enter(self);
        let fields = JsVal::of(&env, &fields);
        self.core.send_method(channel as u16, method_id, &fields).map_err(|e| throw(env.raw(), &e))?;
        Ok(self.core.out.len() as u32)
    }

    #[napi(catch_unwind)]
    #[allow(clippy::too_many_arguments)]
    pub fn send_message(
        &mut self,
        env: Env,
        channel: u32,
        method_id: u32,
        fields: Unknown,
        class_id: u32,
        properties: Unknown,
        content: BufferSlice,
    ) -> Result<u32> {
        let _encoding = hot::Encoding::enter(self);
        let fields = JsVal::of(&env, &fields);
        let properties = JsVal::of(&env, &properties);
        self.core
            .send_message(channel as u16, method_id, &fields, class_id as u16, &properties, &content)
            .map_err(|e| throw(env.raw(), &e))?;
        Ok(self.core.out.len() as u32)
    }

    #[napi(catch_unwind)]
    pub fn send_heartbeat(&mut self) {
        self.core.send_heartbeat();
    }

    #[napi(catch_unwind)]
    pub fn send_bytes(&mut self, bytes: BufferSlice) {
        self.core.send_bytes(&bytes);
    }

    /// Bytes encoded and not yet taken by the transport.
    #[napi(getter, catch_unwind)]
    pub fn pending_output(&self) -> u32 {
        self.core.out.len() as u32
    }

    /// The connection is over: give back the buffers' memory now (see `release_buffers`).
    #[napi(catch_unwind)]
    pub fn release(&mut self) {
        self.close_socket();
        self.core.release_buffers();
    }

    #[napi(catch_unwind)]
    pub fn set_frame_max(&mut self, frame_max: u32) {
        self.core.set_frame_max(frame_max as usize);
    }

    /// The largest frame payload accepted from the peer; 0 for no limit.
    #[napi(catch_unwind)]
    pub fn set_max_frame_size(&mut self, max: f64) {
        self.core.set_max_frame_size(if max >= usize::MAX as f64 { 0 } else { max as usize });
    }
}

// ---------------------------------------------------------------- standalone codec

fn method_spec(env: &Env, id: u32) -> Result<&'static crate::spec_types::MethodSpec> {
    spec::method(id).ok_or_else(|| throw(env.raw(), &CodecError::UnknownMethod))
}

fn properties_spec(env: &Env, class_id: u32) -> Result<&'static crate::spec_types::PropertiesSpec> {
    spec::properties(class_id as u16).ok_or_else(|| throw(env.raw(), &CodecError::UnknownProperties))
}

/// A whole method frame as a Buffer (amqplib's `defs.encodeMethod`).
#[napi(catch_unwind)]
pub fn encode_method<'env>(env: &'env Env, method_id: u32, channel: u32, fields: Unknown) -> Result<BufferSlice<'env>> {
    let method = method_spec(env, method_id)?;
    let mut out = Vec::new();
    crate::frame::write_method(&mut out, channel as u16, method, &JsVal::of(env, &fields))
        .map_err(|e| throw(env.raw(), &e))?;
    BufferSlice::from_data(env, out)
}

/// A whole content-header frame as a Buffer (amqplib's `defs.encodeProperties`).
#[napi(catch_unwind)]
pub fn encode_properties<'env>(
    env: &'env Env,
    class_id: u32,
    channel: u32,
    body_size: f64,
    fields: Unknown,
) -> Result<BufferSlice<'env>> {
    let props = properties_spec(env, class_id)?;
    let mut out = Vec::new();
    crate::frame::write_header(&mut out, channel as u16, props, body_size as u64, &JsVal::of(env, &fields), u16::MAX)
        .map_err(|e| throw(env.raw(), &e))?;
    BufferSlice::from_data(env, out)
}

/// A field table, with its 4-byte length prefix.
#[napi(catch_unwind)]
pub fn encode_table<'env>(env: &'env Env, table: Unknown) -> Result<BufferSlice<'env>> {
    let mut out = Vec::new();
    crate::codec::encode_table(&mut out, &JsVal::of(env, &table)).map_err(|e| throw(env.raw(), &e))?;
    BufferSlice::from_data(env, out)
}

/// Decodes with a fresh string table, so every string is handed over as new.
fn decode_standalone<F>(env: &Env, bytes: &[u8], decode: F) -> Result<Unknown<'static>>
where
    F: FnOnce(&mut crate::codec::Decoder, &mut crate::codec::Reader) -> crate::codec::Result<()>,
{
    let mut tape = Tape::new();
    let mut strings = Interner::new();
    let mut decoder = crate::codec::Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
    let mut reader = crate::codec::Reader::new(bytes);
    decode(&mut decoder, &mut reader).map_err(|e| throw(env.raw(), &e))?;
    let pair = hand_over(env.raw(), &mut tape, bytes)?;
    // SAFETY: `pair` was created in this call's env.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), pair) })
}

/// Method arguments (the payload after the method id) onto a tape of their fixed slots.
#[napi(catch_unwind)]
pub fn decode_method(env: Env, method_id: u32, args: BufferSlice) -> Result<Unknown<'static>> {
    let method = method_spec(&env, method_id)?;
    decode_standalone(&env, &args, |d, r| d.method_args(method, r))
}

/// Content properties (flags, then values) onto a tape: the flags slot, then the values.
#[napi(catch_unwind)]
pub fn decode_properties(env: Env, class_id: u32, bytes: BufferSlice) -> Result<Unknown<'static>> {
    let props = properties_spec(&env, class_id)?;
    decode_standalone(&env, &bytes, |d, r| d.properties(props, r))
}

/// A field table body (without its length prefix): two fixed slots, start and count.
#[napi(catch_unwind)]
pub fn decode_table(env: Env, body: BufferSlice) -> Result<Unknown<'static>> {
    decode_standalone(&env, &body, |d, r| d.table_slots(r))
}

// ---------------------------------------------------------------- the native socket
//
// For amqp:// the session owns a non-blocking TCP socket, polled by a libuv poll handle on
// Node's own loop. The poll callback reads straight into the session's read buffer, hands
// the events of each read to JS in one call (`napi_make_callback`, which also runs the
// microtasks that call queues), then writes whatever JS queued in reply, before returning to
// the loop. JS learns of the socket's life through one callback, `onEvent(kind, a, b)`.

const EVENT_CONNECT: i32 = 1;
const EVENT_DATA: i32 = 2;
const EVENT_DRAIN: i32 = 3;
const EVENT_END: i32 = 4;
const EVENT_ERROR: i32 = 5;
const EVENT_CLOSE: i32 = 6;

/// The most one wake-up reads before it returns to the event loop (and comes back on the
/// next turn, the socket being still readable), so a broker that keeps the socket full
/// cannot starve timers, I/O of other handles, or Node-API finalizers (which run in the
/// loop's check phase and free the contents JS has dropped). libuv's own stream reads
/// stop after 32 reads of 64 KB in the same way.
const READ_BUDGET: usize = 2 * 1024 * 1024;

struct SocketState {
    tcp: TcpSocket,
    poll: *mut c_void,
    env: sys::napi_env,
    callback: sys::napi_ref,
    async_context: sys::napi_async_context,
    connecting: bool,
    /// Close once everything queued has been written (JS called `endSocket`).
    ending: bool,
    /// Output could not all be written; tell JS when it has been.
    drain_owed: bool,
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Arguments of an event callback, made inside the handle scope of the call.
enum EventArgs {
    None,
    Data,
    Error { errno: i32, syscall: &'static str },
}

impl JsSession {
    fn socket_mut(&mut self) -> Result<&mut SocketState> {
        self.socket.as_deref_mut().ok_or_else(|| Error::new(Status::GenericFailure, "The socket is closed"))
    }

    fn poll_for(&mut self, events: c_int) {
        if let (Some(state), Ok(uv)) = (self.socket.as_deref(), uv::uv()) {
            // SAFETY: the poll handle is live while `socket` is Some.
            unsafe { (uv.poll_start)(state.poll, events, on_poll) };
        }
    }

    /// Writes what is queued; 1 when all is written, 0 when the rest waits for writability,
    /// or a negative errno.
    fn write_out(&mut self) -> i32 {
        let JsSession { core, socket } = self;
        let Some(state) = socket.as_deref_mut() else { return -libc::EPIPE };
        match core.write_with(|bytes| state.tcp.write(bytes)) {
            Ok(true) => 1,
            Ok(false) => {
                state.drain_owed = true;
                self.poll_for(uv::READABLE | uv::WRITABLE);
                0
            }
            Err(e) => -errno_of(&e),
        }
    }

    /// Writes what is queued: 1 all written, 0 the rest waits (a drain event follows), or a
    /// negative errno.
    fn flush_socket(&mut self) -> i32 {
        if self.socket.as_deref().is_some_and(|s| s.connecting || s.drain_owed) {
            return 0; // the poll callback writes when the socket is ready
        }
        self.write_out()
    }

    /// Stops polling and closes the socket; JS hears no more from it.
    fn close_socket(&mut self) {
        let Some(state) = self.socket.take() else { return };
        // SAFETY: the hook was added with exactly this function and argument in connect_socket.
        unsafe { sys::napi_remove_env_cleanup_hook(state.env, Some(close_at_env_exit), (self as *mut JsSession).cast()) };
        if let Ok(uv) = uv::uv() {
            // SAFETY: the handle is live; libuv frees nothing until the close callback,
            // which only releases the handle's memory.
            unsafe {
                (uv.poll_stop)(state.poll);
                (uv.close)(state.poll, Some(uv::free_poll));
            }
        }
        // SAFETY: the reference and async context were made in this env for this socket.
        unsafe {
            sys::napi_delete_reference(state.env, state.callback);
            sys::napi_async_destroy(state.env, state.async_context);
        }
        // Dropping `state.tcp` closes the descriptor.
    }

    /// Calls JS's `onEvent(kind, ...)` from the poll callback, in a handle scope of its own.
    /// A throw inside it becomes an uncaught exception, as for any I/O callback.
    ///
    /// # Safety
    /// Only from the poll callback, on the JS thread, with `this` the session it polls for.
    unsafe fn emit(this: *mut JsSession, kind: i32, args: EventArgs) {
        // SAFETY: the caller guarantees `this` is live; borrows end before JS runs.
        let (env, callback, context) = match unsafe { (*this).socket.as_deref() } {
            Some(s) => (s.env, s.callback, s.async_context),
            None => return,
        };
        let mut scope = ptr::null_mut();
        // SAFETY: env is the env the socket was made in, on its own thread.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        // SAFETY: as above; `this` is live and not otherwise borrowed while JS is not running.
        let values = unsafe { event_values(env, &mut *this, kind, args) };
        if let Ok(values) = values {
            let mut func = ptr::null_mut();
            let mut recv = ptr::null_mut();
            let mut result = ptr::null_mut();
            // SAFETY: the callback reference is live until close_socket deletes it.
            unsafe {
                sys::napi_get_reference_value(env, callback, &mut func);
                // MakeCallback needs an object as receiver: the global one, as for timers.
                sys::napi_get_global(env, &mut recv);
                let status = sys::napi_make_callback(env, context, recv, func, values.len(), values.as_ptr(), &mut result);
                if status == sys::Status::napi_pending_exception {
                    let mut exception = ptr::null_mut();
                    sys::napi_get_and_clear_last_exception(env, &mut exception);
                    sys::napi_fatal_exception(env, exception);
                }
            }
        }
        // SAFETY: closes the scope opened above.
        unsafe { sys::napi_close_handle_scope(env, scope) };
    }
}

fn event_values(env: sys::napi_env, this: &mut JsSession, kind: i32, args: EventArgs) -> Result<Vec<sys::napi_value>> {
    let mut kind_value = ptr::null_mut();
    // SAFETY: env is live on this thread.
    napi_ok(unsafe { sys::napi_create_int32(env, kind, &mut kind_value) })?;
    let mut values = vec![kind_value];
    match args {
        EventArgs::None => {}
        EventArgs::Data => values.push(hand_over_received(env, &mut this.core)?),
        EventArgs::Error { errno, syscall } => {
            let mut errno_value = ptr::null_mut();
            // SAFETY: env is live on this thread.
            napi_ok(unsafe { sys::napi_create_int32(env, errno, &mut errno_value) })?;
            values.push(errno_value);
            values.push(js_string(env, syscall.as_bytes())?);
        }
    }
    Ok(values)
}

/// Node-API cleanup hook: the env is going away with the socket still open.
unsafe extern "C" fn close_at_env_exit(session: *mut c_void) {
    // SAFETY: registered with a live session, and removed whenever the socket closes first.
    unsafe { (*session.cast::<JsSession>()).close_socket() };
}

/// The poll callback: connect completion, readability, writability.
unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    // SAFETY: handle->data is the session that started this poll, kept alive by the strong
    // reference to its JS callback (which holds the JS socket, which holds the session).
    let this = unsafe { uv::data(handle) }.cast::<JsSession>();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { poll_ready(this, status, events) }));
    if outcome.is_err() {
        // A bug on our side: never unwind into libuv. Report it as a socket error.
        unsafe {
            JsSession::emit(this, EVENT_ERROR, EventArgs::Error { errno: libc::EIO, syscall: "poll" });
            (*this).close_socket();
        }
    }
}

/// # Safety
/// As for `on_poll`: `this` is the live session the poll belongs to.
unsafe fn poll_ready(this: *mut JsSession, status: c_int, events: c_int) {
    let fail = move |errno: i32, syscall: &'static str| unsafe {
        JsSession::emit(this, EVENT_ERROR, EventArgs::Error { errno, syscall });
        (*this).close_socket();
    };
    // SAFETY (throughout): short borrows of `*this`, none held while JS runs.
    let Some(state) = (unsafe { (*this).socket.as_deref_mut() }) else { return };
    if status < 0 {
        // libuv reports a socket error (POLLERR) as EBADF; the socket knows the real one.
        let errno = match state.tcp.take_error() {
            Ok(Some(e)) => errno_of(&e),
            _ => -status,
        };
        // A broken pipe is what a write finds, as Node names it ("write EPIPE").
        let syscall = match (state.connecting, errno) {
            (true, _) => "connect",
            (false, libc::EPIPE) => "write",
            _ => "read",
        };
        return fail(errno, syscall);
    }
    if state.connecting {
        if events & uv::WRITABLE == 0 {
            return;
        }
        state.connecting = false;
        match state.tcp.take_error() {
            Ok(None) => {
                unsafe { (*this).poll_for(uv::READABLE) };
                unsafe { JsSession::emit(this, EVENT_CONNECT, EventArgs::None) };
            }
            Ok(Some(e)) | Err(e) => fail(errno_of(&e), "connect"),
        }
        return;
    }
    if events & uv::READABLE != 0 {
        let mut budget = READ_BUDGET;
        loop {
            let session = unsafe { &mut *this };
            let JsSession { core, socket } = session;
            let Some(state) = socket.as_deref_mut() else { return };
            match core.receive_with(|buf| state.tcp.read(buf)) {
                Ok(read) if read.filled == 0 => {
                    unsafe { JsSession::emit(this, EVENT_END, EventArgs::None) };
                    return;
                }
                Ok(read) => {
                    if !core.tape.is_empty() {
                        unsafe { JsSession::emit(this, EVENT_DATA, EventArgs::Data) };
                        // A reply to what was read leaves before this read returns.
                        let written = unsafe { (*this).write_out() };
                        if written < 0 {
                            return fail(-written, "write");
                        }
                    }
                    if read.filled < read.offered {
                        break; // the socket had no more for now
                    }
                    budget = budget.saturating_sub(read.filled);
                    if budget == 0 {
                        break; // more may wait: the poll fires again on the next turn
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return fail(errno_of(&e), "read"),
            }
        }
    }
    if events & uv::WRITABLE != 0 {
        let written = unsafe { (*this).write_out() };
        if written < 0 {
            return fail(-written, "write");
        }
        if written == 1 {
            let Some(state) = (unsafe { (*this).socket.as_deref_mut() }) else { return };
            if state.ending {
                // Everything is written: tell JS it is over (its last event), then close.
                unsafe {
                    JsSession::emit(this, EVENT_CLOSE, EventArgs::None);
                    (*this).close_socket();
                }
                return;
            }
            let owed = std::mem::take(&mut state.drain_owed);
            unsafe { (*this).poll_for(uv::READABLE) };
            if owed {
                unsafe { JsSession::emit(this, EVENT_DRAIN, EventArgs::None) };
            }
        }
    }
}

#[napi]
impl JsSession {
    /// Starts connecting to `address` (an IP literal) and `port`; events go to `on_event`.
    /// Returns 0, or the errno of a failure known at once.
    #[napi(catch_unwind)]
    pub fn connect_socket(&mut self, env: Env, address: String, port: u32, on_event: Function<'_>) -> Result<i32> {
        if self.socket.is_some() {
            return Err(Error::new(Status::GenericFailure, "Already connected"));
        }
        let uv = uv::uv().map_err(|e| Error::new(Status::GenericFailure, e))?;
        let ip: std::net::IpAddr = address.parse().map_err(|_| Error::new(Status::InvalidArg, format!("Not an IP address: {address}")))?;
        let tcp = match TcpSocket::connect(ip, port as u16) {
            Ok(tcp) => tcp,
            Err(e) => return Ok(errno_of(&e)),
        };
        let raw_env = env.raw();
        let mut event_loop = ptr::null_mut();
        let mut callback = ptr::null_mut();
        let mut context = ptr::null_mut();
        let name = js_string(raw_env, b"amqplib-rs:socket")?;
        // SAFETY: env is the live env of this call; the handle is fresh memory for libuv.
        unsafe {
            napi_ok(sys::napi_get_uv_event_loop(raw_env, &mut event_loop))?;
            napi_ok(sys::napi_create_reference(raw_env, on_event.raw(), 1, &mut callback))?;
            napi_ok(sys::napi_async_init(raw_env, ptr::null_mut(), name, &mut context))?;
        }
        let poll = uv::alloc_poll(uv);
        // SAFETY: `poll` is zeroed memory of uv_poll_t's size; the fd is a live socket.
        let init = unsafe { (uv.poll_init)(event_loop.cast(), poll, tcp.fd()) };
        if init < 0 {
            // SAFETY: libuv did not take the handle; free it, and the references just made.
            unsafe {
                uv::free_poll(poll);
                sys::napi_delete_reference(raw_env, callback);
                sys::napi_async_destroy(raw_env, context);
            }
            return Ok(-init);
        }
        // SAFETY: the handle is initialised; `self` lives in napi-rs's box for as long as the
        // JS object, which the callback reference keeps alive until close_socket.
        unsafe { uv::set_data(poll, (self as *mut JsSession).cast()) };
        self.socket = Some(Box::new(SocketState {
            tcp,
            poll,
            env: raw_env,
            callback,
            async_context: context,
            connecting: true,
            ending: false,
            drain_owed: false,
        }));
        // A worker (or the process) may end with the connection open: close the socket then,
        // so the poll handle neither leaks nor keeps the worker's loop alive.
        // SAFETY: `self` stays valid until close_socket, which removes the hook first.
        unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close_at_env_exit), (self as *mut JsSession).cast()) };
        self.poll_for(uv::WRITABLE);
        Ok(0)
    }

    /// TCP_NODELAY; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_no_delay(&mut self, on: bool) -> Result<i32> {
        Ok(self.socket_mut()?.tcp.set_no_delay(on).err().map_or(0, |e| errno_of(&e)))
    }

    /// SO_KEEPALIVE with the idle time in seconds; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_keep_alive(&mut self, on: bool, idle_secs: u32) -> Result<i32> {
        Ok(self.socket_mut()?.tcp.set_keep_alive(on, idle_secs).err().map_or(0, |e| errno_of(&e)))
    }

    /// Closes after what is queued has been written. True if closed at once; otherwise a
    /// close event follows.
    #[napi(catch_unwind)]
    pub fn end_socket(&mut self) -> bool {
        if self.socket.is_none() {
            return true;
        }
        if self.write_out() == 0 {
            if let Some(state) = self.socket.as_deref_mut() {
                state.ending = true;
            }
            return false;
        }
        self.close_socket();
        true
    }

    /// Closes now, dropping anything not yet written.
    #[napi(catch_unwind)]
    pub fn destroy_socket(&mut self) {
        self.close_socket();
    }

    /// Socket writes made, for the benchmarks (and the tests of write coalescing).
    #[napi(getter, catch_unwind)]
    pub fn socket_writes(&self) -> f64 {
        self.socket.as_deref().map_or(0.0, |s| s.tcp.writes as f64)
    }

    /// Received bytes copied in memory so far (see `Session::bytes_copied`).
    #[napi(getter, catch_unwind)]
    pub fn bytes_copied(&self) -> f64 {
        self.core.bytes_copied as f64
    }

    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_written(&self) -> f64 {
        self.socket.as_deref().map_or(0.0, |s| s.tcp.bytes_written as f64)
    }

    /// Bytes read from the socket so far (net.Socket's `bytesRead`).
    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_read(&self) -> f64 {
        self.socket.as_deref().map_or(0.0, |s| s.tcp.bytes_read as f64)
    }
}

/// Panics with `message`. It exists so the tests can check the guard every entry point has:
/// a Rust panic reaches JS as a thrown Error, and the process carries on.
#[napi(js_name = "__panicForTest", catch_unwind)]
pub fn panic_for_test(message: String) {
    panic!("{message}");
}

/// Adds the hot entry points (`hot.rs`) to the module's exports.
#[napi(module_exports)]
pub fn register_hot_entry_points(exports: Object, env: Env) -> Result<()> {
    hot::register(env.raw(), exports.raw())
}
