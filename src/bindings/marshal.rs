//! Reading JS values: [`JsVal`] implements the codec's [`Value`] trait through napi-rs's
//! safe value methods, so the encoder reads a user's objects (getters, valueOf and all) as
//! amqplib's JS encoder would.

use super::env::{Js, JsEnv};
use crate::codec::{CodecError, Kind, Value};
#[cfg(feature = "codec-exports")]
use napi::bindgen_prelude::{Env, Unknown};
use napi::bindgen_prelude::{JsObjectValue, JsValue, Object, ValueType};
use napi::sys;
use std::marker::PhantomData;

/// A JS value of the current call. It borrows the call (`'call`): reading it may run JS
/// (getters, valueOf), so nothing else read from the call, such as a Buffer's bytes or the
/// connection, can be held at the same time (see `hot.rs`).
pub struct JsVal<'call> {
    env: JsEnv<'call>,
    value: Js<'call>,
    /// The kind, once asked: the encoder asks more than once of the same value.
    kind: std::cell::Cell<Option<Kind>>,
    call: PhantomData<&'call mut ()>,
}

/// A failed Node-API call while reading a user's value, as a codec error (a getter that
/// throws makes the call fail with its exception pending, which then goes on as it is).
fn read<T>(result: napi::Result<T>) -> crate::codec::Result<T> {
    result.map_err(|e| CodecError::Source(format!("Node-API call failed with status {}", e.status)))
}

impl<'call> JsVal<'call> {
    pub(super) fn new(env: JsEnv<'call>, value: Js<'call>) -> Self {
        JsVal { env, value, kind: std::cell::Cell::new(None), call: PhantomData }
    }

    /// A value of the same call.
    fn sibling(&self, value: &impl JsValue<'call>) -> Self {
        JsVal::new(self.env, Js::of(value))
    }

    /// The value, for napi-rs's methods of any value (each may run JS).
    fn unknown(&self) -> napi::bindgen_prelude::Unknown<'call> {
        self.value.unknown(self.env)
    }

    /// The value, for napi-rs's methods of objects (each may run JS). On anything else,
    /// Node-API refuses them with a status, as it does the raw calls.
    fn object(&self) -> Object<'call> {
        Object::from_raw(self.env.raw(), self.value.raw())
    }

    /// typeof, refined for null, arrays and Buffers.
    fn read_kind(&self) -> crate::codec::Result<Kind> {
        let value = self.unknown();
        Ok(match read(value.get_type())? {
            ValueType::Undefined => Kind::Undefined,
            ValueType::Null => Kind::Null,
            ValueType::Boolean => Kind::Bool,
            ValueType::Number => Kind::Number,
            ValueType::String => Kind::String,
            ValueType::Object => {
                if read(value.is_array())? {
                    return Ok(Kind::Array);
                }
                if read(value.is_buffer())? && self.is_node_buffer()? {
                    Kind::Bytes
                } else {
                    Kind::Object
                }
            }
            ValueType::Function => Kind::Other("function"),
            ValueType::Symbol => Kind::Other("symbol"),
            ValueType::BigInt => Kind::Other("bigint"),
            _ => Kind::Other("external"),
        })
    }

    /// `Buffer.isBuffer`: Node-API's own test takes any typed array or DataView, which
    /// amqplib encodes as tables (of their indices), not as byte arrays.
    fn is_node_buffer(&self) -> crate::codec::Result<bool> {
        let global = JsVal::new(self.env, self.env.global()?);
        let constructor = global.property(self.key("Buffer")?)?;
        read(self.unknown().instanceof(constructor.unknown()))
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
        let value: napi::bindgen_prelude::Unknown<'call> = read(self.object().get_property_unchecked(key.unknown(self.env)))?;
        Ok(self.sibling(&value))
    }

    fn string_of(&self, value: &Self) -> crate::codec::Result<String> {
        let mut bytes = Vec::new();
        value.append_utf8(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

impl<'call> Value for JsVal<'call> {
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
        read(self.unknown().coerce_to_bool())
    }

    fn number(&self) -> crate::codec::Result<f64> {
        if let Some(number) = self.env.get_f64(self.value) {
            return Ok(number);
        }
        // Not a number: coerce as `+value` does (valueOf may run, and may throw).
        let value = self.unknown();
        let coerced = read(value.coerce_to_number())?;
        read(coerced.get_double())
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

    fn length(&self) -> crate::codec::Result<u32> {
        read(self.object().get_array_length_unchecked())
    }

    fn item(&self, index: u32) -> crate::codec::Result<Self> {
        let item: napi::bindgen_prelude::Unknown<'call> = read(self.object().get_element(index))?;
        Ok(self.sibling(&item))
    }

    fn keys(&self) -> crate::codec::Result<Self> {
        Ok(self.sibling(&read(self.object().get_property_names())?))
    }

    fn entry(&self, key: &Self) -> crate::codec::Result<(String, Self)> {
        Ok((self.string_of(key)?, self.property(key.value)?))
    }

    fn get(&self, key: &'static str) -> crate::codec::Result<Self> {
        self.property(self.key(key)?)
    }

    fn json(&self) -> crate::codec::Result<String> {
        let json = JsVal::new(self.env, self.env.global()?).property(self.key("JSON")?)?;
        let stringify = json.property(self.key("stringify")?)?;
        let mut out = std::ptr::null_mut();
        // SAFETY: the env and the three handles are the call's, live for `'call`; `argv` is one
        // live handle; `out` a live local, a handle of this call once the call succeeds (only
        // then is `written` used). A throw (a BigInt, a cycle) stays pending and goes on, as
        // amqplib's would (`errors::throw`).
        let (status, written) = unsafe {
            let status = sys::napi_call_function(self.env.raw(), json.value.raw(), stringify.value.raw(), 1, &self.value.raw(), &mut out);
            (status, napi::bindgen_prelude::Unknown::from_raw_unchecked(self.env.raw(), out))
        };
        if status != sys::Status::napi_ok {
            return Err(CodecError::Source(format!("JSON.stringify failed with status {status}")));
        }
        let written = self.sibling(&written);
        if written.kind()? != Kind::String {
            return Ok("undefined".into());
        }
        self.string_of(&written)
    }

    fn has_own(&self, key: &'static str) -> crate::codec::Result<bool> {
        let key = self.key(key)?;
        read(self.object().has_own_property_js(key.unknown(self.env)))
    }
}
