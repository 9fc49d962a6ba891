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
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::collections::HashMap;
use std::ptr;

mod hot;
#[cfg(native_socket)]
mod socket;

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
/// and, for amqp:// where the platform has the native socket, the TCP socket it reads and
/// writes itself (see `socket.rs`).
#[napi(js_name = "Session")]
pub struct JsSession {
    core: Session,
    #[cfg(native_socket)]
    socket: Option<Box<socket::SocketState>>,
}

#[napi]
impl JsSession {
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        JsSession {
            core: Session::new(),
            #[cfg(native_socket)]
            socket: None,
        }
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
        #[cfg(native_socket)]
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

/// Whether amqp:// gets the native socket on this platform (see `build.rs`); where it does
/// not, the JS side connects with `net.connect`, as for TLS.
#[napi(catch_unwind)]
pub fn has_native_socket() -> bool {
    cfg!(native_socket)
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
