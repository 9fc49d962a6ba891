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
use std::ptr;

// ---------------------------------------------------------------- errors

/// Throws `e` as the kind of JS error amqplib raises for it (TypeError, RangeError or Error),
/// unless a JS exception is already pending (a throwing getter), which then propagates.
fn throw(env: sys::napi_env, e: &CodecError) -> Error {
    let mut pending = false;
    // SAFETY: env is the live env of the current call (all callers are napi entry points).
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if !pending {
        let message = std::ffi::CString::new(e.to_string().replace('\0', " ")).unwrap_or_default();
        // SAFETY: as above; message is NUL-terminated and outlives the call.
        unsafe {
            match e.kind() {
                ErrorKind::Type => sys::napi_throw_type_error(env, ptr::null(), message.as_ptr()),
                ErrorKind::Range => sys::napi_throw_range_error(env, ptr::null(), message.as_ptr()),
                ErrorKind::Plain => sys::napi_throw_error(env, ptr::null(), message.as_ptr()),
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
#[derive(Clone, Copy)]
pub struct JsVal {
    env: sys::napi_env,
    value: sys::napi_value,
}

impl JsVal {
    fn new(env: sys::napi_env, value: sys::napi_value) -> Self {
        JsVal { env, value }
    }

    fn of(env: &Env, value: &Unknown) -> Self {
        JsVal::new(env.raw(), value.raw())
    }

    fn key(&self, key: &str) -> crate::codec::Result<sys::napi_value> {
        let mut out = ptr::null_mut();
        // SAFETY: env is live for the call; key points at key.len() valid bytes.
        check(unsafe { sys::napi_create_string_utf8(self.env, key.as_ptr().cast(), key.len() as isize, &mut out) })?;
        Ok(out)
    }

    fn string_of(&self, value: sys::napi_value) -> crate::codec::Result<String> {
        let mut bytes = Vec::new();
        JsVal::new(self.env, value).append_utf8(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Value for JsVal {
    fn kind(&self) -> crate::codec::Result<Kind> {
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
                if yes {
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

    fn truthy(&self) -> crate::codec::Result<bool> {
        let mut coerced = ptr::null_mut();
        let mut out = false;
        check(unsafe { sys::napi_coerce_to_bool(self.env, self.value, &mut coerced) })?;
        check(unsafe { sys::napi_get_value_bool(self.env, coerced, &mut out) })?;
        Ok(out)
    }

    fn number(&self) -> crate::codec::Result<f64> {
        let mut out = 0.0;
        check(unsafe { sys::napi_get_value_double(self.env, self.value, &mut out) })?;
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

    fn get(&self, key: &str) -> crate::codec::Result<Self> {
        let mut value = ptr::null_mut();
        let key = self.key(key)?;
        check(unsafe { sys::napi_get_property(self.env, self.value, key, &mut value) })?;
        Ok(JsVal::new(self.env, value))
    }

    fn has_own(&self, key: &str) -> crate::codec::Result<bool> {
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

unsafe extern "C" fn drop_content(_env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box<Vec<u8>> leaked in `content_buffer`, finalised exactly once.
    drop(unsafe { Box::from_raw(hint.cast::<Vec<u8>>()) });
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
    let (data, len) = (boxed.as_mut_ptr(), boxed.len());
    let hint = Box::into_raw(boxed);
    // SAFETY: the Vec stays alive (leaked into `hint`) until Node runs `drop_content`.
    let status = unsafe {
        sys::napi_create_external_buffer(env, len, data.cast(), Some(drop_content), hint.cast(), &mut out)
    };
    if status == sys::Status::napi_ok {
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

/// `[tape, objects]`: the tape as a Float64Array and its objects as an Array.
fn hand_over(env: sys::napi_env, tape: &mut Tape, source: &[u8]) -> Result<sys::napi_value> {
    let slots = tape.to_slots();
    let mut array_buffer = ptr::null_mut();
    let mut data = ptr::null_mut();
    let bytes = std::mem::size_of_val(slots.as_slice());
    // SAFETY: env is live; `data` receives a fresh JS-owned store of `bytes` bytes that
    // `copy_nonoverlapping` fills completely.
    unsafe {
        napi_ok(sys::napi_create_arraybuffer(env, bytes, &mut data, &mut array_buffer))?;
        ptr::copy_nonoverlapping(slots.as_ptr().cast::<u8>(), data.cast::<u8>(), bytes);
    }
    let mut typed = ptr::null_mut();
    let mut objects = ptr::null_mut();
    let mut pair = ptr::null_mut();
    // SAFETY: env is live; all handles were created in this call.
    unsafe {
        napi_ok(sys::napi_create_typedarray(env, sys::TypedarrayType::float64_array, slots.len(), array_buffer, 0, &mut typed))?;
        napi_ok(sys::napi_create_array_with_length(env, tape.objects.len(), &mut objects))?;
        for (i, obj) in tape.objects.drain(..).enumerate() {
            let value = js_object(env, obj, source)?;
            napi_ok(sys::napi_set_element(env, objects, i as u32, value))?;
        }
        napi_ok(sys::napi_create_array_with_length(env, 2, &mut pair))?;
        napi_ok(sys::napi_set_element(env, pair, 0, typed))?;
        napi_ok(sys::napi_set_element(env, pair, 1, objects))?;
    }
    Ok(pair)
}

// ---------------------------------------------------------------- the connection core

/// One connection's codec state: its read buffer, body assembly, string table and output.
#[napi(js_name = "Session")]
pub struct JsSession {
    core: Session,
}

#[napi]
impl JsSession {
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        JsSession { core: Session::new() }
    }

    /// Parses what the transport read; returns `[tape, objects]` for every complete frame.
    #[napi(catch_unwind)]
    pub fn receive(&mut self, env: Env, chunk: BufferSlice) -> Result<Unknown<'_>> {
        self.core.receive(&chunk);
        let (tape, read) = (&mut self.core.tape as *mut Tape, self.core.read_buffer());
        // SAFETY: `tape` and the read buffer are disjoint fields of `self.core`.
        let pair = hand_over(env.raw(), unsafe { &mut *tape }, read)?;
        // SAFETY: `pair` was created in this call's env.
        Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), pair) })
    }

    #[napi(catch_unwind)]
    pub fn send_method(&mut self, env: Env, channel: u32, method_id: u32, fields: Unknown) -> Result<()> {
        let fields = JsVal::of(&env, &fields);
        self.core.send_method(channel as u16, method_id, &fields).map_err(|e| throw(env.raw(), &e))
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
    ) -> Result<()> {
        let fields = JsVal::of(&env, &fields);
        let properties = JsVal::of(&env, &properties);
        self.core
            .send_message(channel as u16, method_id, &fields, class_id as u16, &properties, &content)
            .map_err(|e| throw(env.raw(), &e))
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

    /// Everything encoded since the last call, as one Buffer (null when nothing is waiting).
    #[napi(catch_unwind)]
    pub fn take_output<'env>(&mut self, env: &'env Env) -> Result<Option<BufferSlice<'env>>> {
        if self.core.out.is_empty() {
            return Ok(None);
        }
        let out = BufferSlice::copy_from(env, &self.core.out)?;
        self.core.out.clear();
        Ok(Some(out))
    }

    #[napi(catch_unwind)]
    pub fn set_frame_max(&mut self, frame_max: u32) {
        self.core.set_frame_max(frame_max as usize);
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
    crate::frame::write_header(&mut out, channel as u16, props, body_size as u64, &JsVal::of(env, &fields))
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
