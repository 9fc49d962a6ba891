//! Reading JS values: [`JsVal`] implements the codec's [`Value`] trait through raw
//! Node-API calls, so the encoder reads a user's objects (getters, valueOf and all) as
//! amqplib's JS encoder would.

use super::env::{Js, JsEnv};
use super::errors::check;
use crate::codec::{Kind, Value};
#[cfg(feature = "codec-exports")]
use napi::bindgen_prelude::{Env, Unknown};
use napi::sys;
use std::marker::PhantomData;
use std::ptr;

/// A JS value of the current call, read through Node-API. It borrows the call (`'call`):
/// reading it may run JS (getters, valueOf), so nothing else read from the call, such as a
/// Buffer's bytes or the connection, can be held at the same time (see `hot.rs`).
pub struct JsVal<'call> {
    env: JsEnv<'call>,
    value: Js<'call>,
    /// The kind, once asked: the encoder asks more than once of the same value.
    kind: std::cell::Cell<Option<Kind>>,
    call: PhantomData<&'call mut ()>,
}

impl<'call> JsVal<'call> {
    pub(super) fn new(env: JsEnv<'call>, value: Js<'call>) -> Self {
        JsVal { env, value, kind: std::cell::Cell::new(None), call: PhantomData }
    }

    /// A value of the same call.
    fn sibling(&self, value: Js<'call>) -> Self {
        JsVal::new(self.env, value)
    }

    /// Reads through `read`, which calls Node-API with the env, this value and an
    /// out-pointer. These calls may run JS (see `mod.rs`): a `JsVal` borrows its call
    /// mutably, so that nothing else of the call is borrowed meanwhile.
    fn read<T: Default>(&self, read: impl FnOnce(sys::napi_env, sys::napi_value, &mut T) -> sys::napi_status) -> crate::codec::Result<T> {
        let mut out = T::default();
        check(read(self.env.raw(), self.value.raw(), &mut out))?;
        Ok(out)
    }

    /// As [`read`](Self::read), for a value.
    fn read_value(&self, read: impl FnOnce(sys::napi_env, sys::napi_value, &mut sys::napi_value) -> sys::napi_status) -> crate::codec::Result<Self> {
        let mut out = ptr::null_mut();
        check(read(self.env.raw(), self.value.raw(), &mut out))?;
        // SAFETY: Node-API made the handle in this call.
        Ok(self.sibling(unsafe { Js::from_raw(out) }))
    }

    /// typeof, refined for null, arrays and Buffers.
    fn read_kind(&self) -> crate::codec::Result<Kind> {
        // SAFETY (each Node-API call of a `read` in this impl): the env and value are the
        // call's, live for `'call`; the out-pointer is `read`'s live local; any key is a handle
        // of the same call.
        let ty = self.read(|env, value, out| unsafe { sys::napi_typeof(env, value, out) })?;
        Ok(match ty {
            sys::ValueType::napi_undefined => Kind::Undefined,
            sys::ValueType::napi_null => Kind::Null,
            sys::ValueType::napi_boolean => Kind::Bool,
            sys::ValueType::napi_number => Kind::Number,
            sys::ValueType::napi_string => Kind::String,
            sys::ValueType::napi_object => {
                if self.read(|env, value, out| unsafe { sys::napi_is_array(env, value, out) })? {
                    return Ok(Kind::Array);
                }
                if self.read(|env, value, out| unsafe { sys::napi_is_buffer(env, value, out) })? && self.is_node_buffer()? {
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
        let constructor = self.sibling(self.env.global()?).property(self.key("Buffer")?)?.value.raw();
        self.read(|env, value, out| unsafe { sys::napi_instanceof(env, value, constructor, out) })
    }

    /// An argument of a napi-rs entry point (the codec exports').
    #[cfg(feature = "codec-exports")]
    pub(super) fn of(env: &'call Env, value: &'call Unknown) -> Self {
        JsVal::new(JsEnv::of(env), Js::of(value))
    }

    /// The JS string for a property name, kept per env (see `instance.rs`).
    fn key(&self, key: &'static str) -> crate::codec::Result<Js<'call>> {
        Ok(super::instance::key(self.env, key)?)
    }

    /// The property `key` (getters run).
    fn property(&self, key: Js<'call>) -> crate::codec::Result<Self> {
        self.read_value(|env, value, out| unsafe { sys::napi_get_property(env, value, key.raw(), out) })
    }

    fn string_of(&self, value: Js<'call>) -> crate::codec::Result<String> {
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
        let at = out.len();
        if self.env.append_utf8(self.value, out, max + 5)? > max {
            out.truncate(at);
            return Ok(false);
        }
        Ok(true)
    }

    fn truthy(&self) -> crate::codec::Result<bool> {
        let coerced = self.read_value(|env, value, out| unsafe { sys::napi_coerce_to_bool(env, value, out) })?;
        Ok(self.env.get_bool(coerced.value).unwrap_or(false))
    }

    fn number(&self) -> crate::codec::Result<f64> {
        if let Some(number) = self.env.get_f64(self.value) {
            return Ok(number);
        }
        // Not a number: coerce as `+value` does (valueOf may run, and may throw).
        let coerced = self.read_value(|env, value, out| unsafe { sys::napi_coerce_to_number(env, value, out) })?;
        Ok(self.env.get_f64(coerced.value).unwrap_or(f64::NAN))
    }

    fn append_utf8(&self, out: &mut Vec<u8>) -> crate::codec::Result<()> {
        let len = self.env.utf8_len(self.value)?;
        // Room for the NUL Node-API writes too.
        self.env.append_utf8(self.value, out, len + 1)?;
        Ok(())
    }

    fn append_bytes(&self, out: &mut Vec<u8>) -> crate::codec::Result<()> {
        let (data, len) = self.env.buffer_info(self.value)?;
        if len > 0 {
            // SAFETY: Node-API gave the Buffer's live store of `len` bytes, and no JS runs
            // before the copy is made.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(data, len) });
        }
        Ok(())
    }

    fn items(&self) -> crate::codec::Result<Vec<Self>> {
        let len: u32 = self.read(|env, value, out| unsafe { sys::napi_get_array_length(env, value, out) })?;
        (0..len).map(|i| self.read_value(|env, value, out| unsafe { sys::napi_get_element(env, value, i, out) })).collect()
    }

    fn entries(&self) -> crate::codec::Result<Vec<(String, Self)>> {
        let keys = self.read_value(|env, value, out| unsafe { sys::napi_get_property_names(env, value, out) })?;
        keys.items()?.into_iter().map(|key| Ok((self.string_of(key.value)?, self.property(key.value)?))).collect()
    }

    fn get(&self, key: &'static str) -> crate::codec::Result<Self> {
        self.property(self.key(key)?)
    }

    fn has_own(&self, key: &'static str) -> crate::codec::Result<bool> {
        let key = self.key(key)?;
        self.read(|env, value, out| unsafe { sys::napi_has_own_property(env, value, key.raw(), out) })
    }
}
