//! The codec on its own, with no connection: amqplib's `defs.encodeMethod`,
//! `encodeProperties`, `decode*` and `codec.encodeTable`/`decodeFields`, which lib/defs.js
//! and lib/codec.js expose for code that reaches into amqplib's internals (its own test
//! suite does). Connections never call these.

use super::env::JsEnv;
use super::errors::thrown;
use super::handover::hand_over;
use super::marshal::JsVal;
use crate::codec::CodecError;
use crate::spec;
use crate::strings::Interner;
use crate::tape::Tape;
use napi::bindgen_prelude::*;
use napi_derive::napi;
fn method_spec(env: &Env, id: u32) -> Result<&'static crate::spec_types::MethodSpec> {
    spec::method(id).ok_or_else(|| thrown(env.raw(), CodecError::UnknownMethod))
}

fn properties_spec(env: &Env, class_id: u32) -> Result<&'static crate::spec_types::PropertiesSpec> {
    spec::properties(class_id as u16).ok_or_else(|| thrown(env.raw(), CodecError::UnknownProperties))
}

/// A whole method frame as a Buffer (amqplib's `defs.encodeMethod`).
#[napi(catch_unwind)]
pub fn encode_method<'env>(env: &'env Env, method_id: u32, channel: u32, fields: Unknown) -> Result<BufferSlice<'env>> {
    let method = method_spec(env, method_id)?;
    let mut out = Vec::new();
    crate::frame::write_method(&mut out, channel as u16, method, &JsVal::of(env, &fields), usize::MAX)
        .map_err(|e| thrown(env.raw(), e))?;
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
    crate::frame::write_header(&mut out, channel as u16, props, body_size as u64, &JsVal::of(env, &fields), u16::MAX, usize::MAX)
        .map_err(|e| thrown(env.raw(), e))?;
    BufferSlice::from_data(env, out)
}

/// A field table, with its 4-byte length prefix.
#[napi(catch_unwind)]
pub fn encode_table<'env>(env: &'env Env, table: Unknown) -> Result<BufferSlice<'env>> {
    let mut out = Vec::new();
    crate::codec::encode_table(&mut out, &JsVal::of(env, &table)).map_err(|e| thrown(env.raw(), e))?;
    BufferSlice::from_data(env, out)
}

/// Decodes with a fresh string table, so every string is handed over as new.
fn decode_standalone<'env, F>(env: &'env Env, bytes: &[u8], decode: F) -> Result<Unknown<'env>>
where
    F: FnOnce(&mut crate::codec::Decoder, &mut crate::codec::Reader) -> crate::codec::Result<()>,
{
    let mut tape = Tape::new();
    let mut strings = Interner::new();
    let mut decoder = crate::codec::Decoder { strings: &mut strings, tape: &mut tape, base: 0 };
    let mut reader = crate::codec::Reader::new(bytes);
    decode(&mut decoder, &mut reader).map_err(|e| thrown(env.raw(), e))?;
    let js_env = JsEnv::of(env);
    let received = hand_over(js_env, &mut tape, bytes, None).and_then(|h| h.into_array(js_env)).map_err(|e| thrown(env.raw(), e))?;
    Ok(received.into_unknown(env))
}

/// Method arguments (the payload after the method id) onto a tape of their fixed slots.
#[napi(catch_unwind)]
pub fn decode_method<'env>(env: &'env Env, method_id: u32, args: BufferSlice) -> Result<Unknown<'env>> {
    let method = method_spec(env, method_id)?;
    decode_standalone(env, &args, |d, r| d.method_args(method, r))
}

/// Content properties (flags, then values) onto a tape: the flags slot, then the values.
#[napi(catch_unwind)]
pub fn decode_properties<'env>(env: &'env Env, class_id: u32, bytes: BufferSlice) -> Result<Unknown<'env>> {
    let props = properties_spec(env, class_id)?;
    decode_standalone(env, &bytes, |d, r| d.properties(props, r))
}

/// A field table body (without its length prefix): two fixed slots, start and count.
#[napi(catch_unwind)]
pub fn decode_table<'env>(env: &'env Env, body: BufferSlice) -> Result<Unknown<'env>> {
    decode_standalone(env, &body, |d, r| d.table_slots(r))
}
