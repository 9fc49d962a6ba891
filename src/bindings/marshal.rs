//! Reading JS values: [`JsVal`] implements the codec's [`Value`] trait through raw
//! Node-API calls, so the encoder reads a user's objects (getters, valueOf and all) as
//! amqplib's JS encoder would.

use super::errors::check;
use crate::codec::{Kind, Value};
#[cfg(feature = "codec-exports")]
use napi::bindgen_prelude::{Env, JsValue, Unknown};
use napi::sys;
use std::marker::PhantomData;
use std::ptr;

/// A JS value of the current call, read through Node-API. It borrows the call (`'call`):
/// reading it may run JS (getters, valueOf), so nothing else read from the call, such as a
/// Buffer's bytes or the connection, can be held at the same time (see `hot.rs`).
pub struct JsVal<'call> {
    env: sys::napi_env,
    value: sys::napi_value,
    /// The kind, once asked: the encoder asks more than once of the same value.
    kind: std::cell::Cell<Option<Kind>>,
    call: PhantomData<&'call mut ()>,
}

impl<'call> JsVal<'call> {
    /// # Safety
    /// `env` and `value` belong to a call that outlives `'call`.
    pub(super) unsafe fn new(env: sys::napi_env, value: sys::napi_value) -> Self {
        JsVal { env, value, kind: std::cell::Cell::new(None), call: PhantomData }
    }

    /// A value of the same call.
    fn sibling(&self, value: sys::napi_value) -> Self {
        // SAFETY: `value` was read in the same call as `self`.
        unsafe { JsVal::new(self.env, value) }
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

    /// An argument of a napi-rs entry point (the codec exports').
    #[cfg(feature = "codec-exports")]
    pub(super) fn of(env: &'call Env, value: &'call Unknown) -> Self {
        // SAFETY: both belong to the entry point's call, which they borrow.
        unsafe { JsVal::new(env.raw(), value.raw()) }
    }

    /// The JS string for a property name, kept per env (see `instance.rs`).
    fn key(&self, key: &'static str) -> crate::codec::Result<sys::napi_value> {
        Ok(super::instance::key(self.env, key)?)
    }

    fn string_of(&self, value: sys::napi_value) -> crate::codec::Result<String> {
        let mut bytes = Vec::new();
        self.sibling(value).append_utf8(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl Value for JsVal<'_> {
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
                Ok(self.sibling(item))
            })
            .collect()
    }

    fn entries(&self) -> crate::codec::Result<Vec<(String, Self)>> {
        let mut keys = ptr::null_mut();
        check(unsafe { sys::napi_get_property_names(self.env, self.value, &mut keys) })?;
        self.sibling(keys)
            .items()?
            .into_iter()
            .map(|key| {
                let mut value = ptr::null_mut();
                check(unsafe { sys::napi_get_property(self.env, self.value, key.value, &mut value) })?;
                Ok((self.string_of(key.value)?, self.sibling(value)))
            })
            .collect()
    }

    fn get(&self, key: &'static str) -> crate::codec::Result<Self> {
        let mut value = ptr::null_mut();
        let key = self.key(key)?;
        check(unsafe { sys::napi_get_property(self.env, self.value, key, &mut value) })?;
        Ok(self.sibling(value))
    }

    fn has_own(&self, key: &'static str) -> crate::codec::Result<bool> {
        let mut out = false;
        let key = self.key(key)?;
        check(unsafe { sys::napi_has_own_property(self.env, self.value, key, &mut out) })?;
        Ok(out)
    }
}

