//! The entry points called once per message or per read, as plain Node-API callbacks.
//!
//! napi-rs's class methods track every borrow of the native object in a global, locked map,
//! which costs about 0.35 µs a call: more than the work of an acknowledgement or a repeated
//! publish. These functions take instead a handle (an External made by
//! `NativeConnection#handle`) that points at the connection and holds a strong reference
//! to its JS object, so the connection lives at least as long as the handle.
//!
//! Sound by construction, through [`Call`]: reading a user's value may run JS (getters,
//! valueOf), and that JS may call any entry point again, for this connection or another. So
//! a user's values borrow the call mutably, while the connection and a Buffer's bytes
//! borrow it immutably: the compiler rules out holding either while JS may run. Every
//! entry point that reads a user's values therefore encodes them into scratch memory
//! first, with no connection borrowed, and only then takes its connection to append the
//! frames (a message sent from inside a getter goes first, whole).
//!
//! Their registration and the decoding of their arguments, which come by position, are
//! generated (`hot_generated.rs`, a child module, so that it reaches `Call`) from the one
//! description in scripts/hot-entry-points.js, which lib/native.d.ts declares them from too:
//! each function here gets its arguments by name.

use super::errors::{napi_ok, JsError};
use super::handover::hand_over_received;
use super::marshal::JsVal;
use super::native_connection::NativeConnection;
use crate::frame::{self, write_publish_head, Publish};
use crate::spec;
use napi::sys;
use std::cell::Cell;
use std::ptr;

#[cfg(native_socket)]
use generated::FlushSocketArgs;
use generated::{
    ReceiveArgs, SendAcknowledgementArgs, SendMessageArgs, SendMessageValues, SendMethodArgs, SendMethodValues, SendPublishAgainArgs, SendPublishArgs,
    SendPublishValues, TakeOutputArgs,
};

#[path = "hot_generated.rs"]
mod generated;
pub(super) use generated::register;

type Result<T> = std::result::Result<T, JsError>;

/// What a handle's External holds.
struct Handle {
    connection: *mut NativeConnection,
    reference: sys::napi_ref,
}

/// Marks our handles, so that no other External is taken for one.
const HANDLE_TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x616d_7170_6c69_6272, upper: 0x7273_2d68_6f74_0001 };

unsafe extern "C" fn drop_handle(env: sys::napi_env, data: *mut std::ffi::c_void, _hint: *mut std::ffi::c_void) {
    // SAFETY: `data` is the Box<Handle> leaked in `handle`, finalised exactly once.
    let handle = unsafe { Box::from_raw(data.cast::<Handle>()) };
    // SAFETY: the reference was made in this env, and is deleted only here.
    unsafe { sys::napi_delete_reference(env, handle.reference) };
}

/// A handle for `connection`, whose JS object is `this`.
pub(super) fn handle(env: sys::napi_env, connection: *mut NativeConnection, this: sys::napi_value) -> Result<sys::napi_value> {
    let mut reference = ptr::null_mut();
    let mut out = ptr::null_mut();
    // SAFETY: env and `this` belong to the current call; the Box is reclaimed by
    // `drop_handle`, or here if Node refuses the External.
    unsafe {
        napi_ok(sys::napi_create_reference(env, this, 1, &mut reference))?;
        let handle = Box::into_raw(Box::new(Handle { connection, reference }));
        let status = sys::napi_create_external(env, handle.cast(), Some(drop_handle), ptr::null_mut(), &mut out);
        if status != sys::Status::napi_ok {
            drop_handle(env, handle.cast(), ptr::null_mut());
            return Err(JsError::plain("Could not make a connection handle"));
        }
        napi_ok(sys::napi_type_tag_object(env, out, &HANDLE_TAG))?;
    }
    Ok(out)
}

/// One call of an entry point: its env and its `N` arguments (missing ones undefined).
struct Call<const N: usize> {
    env: sys::napi_env,
    args: [sys::napi_value; N],
    /// The connection has been taken: a call takes it once, so there is one `&mut` to it.
    connection_taken: Cell<bool>,
}

impl<const N: usize> Call<N> {
    fn new(env: sys::napi_env, info: sys::napi_callback_info) -> Result<Self> {
        let mut args = [ptr::null_mut(); N];
        let mut argc = N;
        // SAFETY: `args` has room for `argc` values.
        napi_ok(unsafe { sys::napi_get_cb_info(env, info, &mut argc, args.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) })?;
        Ok(Call { env, args, connection_taken: Cell::new(false) })
    }

    fn u32(&self, i: usize) -> Result<u32> {
        let mut out = 0;
        // SAFETY: env and argument belong to this call; no coercion, so no JS runs.
        napi_ok(unsafe { sys::napi_get_value_uint32(self.env, self.args[i], &mut out) })?;
        Ok(out)
    }

    fn f64(&self, i: usize) -> Result<f64> {
        let mut out = 0.0;
        // SAFETY: as for `u32`.
        napi_ok(unsafe { sys::napi_get_value_double(self.env, self.args[i], &mut out) })?;
        Ok(out)
    }

    fn bool(&self, i: usize) -> Result<bool> {
        let mut out = false;
        // SAFETY: as for `u32`.
        napi_ok(unsafe { sys::napi_get_value_bool(self.env, self.args[i], &mut out) })?;
        Ok(out)
    }

    /// The bytes of a Buffer argument, for as long as nothing can run JS (which could
    /// detach them): they borrow the call, as [`user_values`](Self::user_values) cannot.
    fn bytes(&self, i: usize) -> Result<&[u8]> {
        let mut data = ptr::null_mut();
        let mut len = 0;
        // SAFETY: env and argument belong to this call, and the argument keeps the store alive.
        napi_ok(unsafe { sys::napi_get_buffer_info(self.env, self.args[i], &mut data, &mut len) })?;
        // SAFETY: Node-API gives the live store of `len` bytes.
        Ok(if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) } })
    }

    /// Arguments given by the user, to be read by the encoder (which may run JS).
    fn user_values<const K: usize>(&mut self, indices: [usize; K]) -> [JsVal<'_>; K] {
        // SAFETY: the arguments belong to this call, which the values borrow.
        indices.map(|i| unsafe { JsVal::new(self.env, self.args[i]) })
    }

    /// The connection behind the handle argument `i`, once per call. It borrows the call
    /// immutably so that no user's value can be read (and no JS run) while it is held; it
    /// is not memory of the call's, and the once-per-call flag keeps it unique.
    #[allow(clippy::mut_from_ref)]
    fn connection(&self, i: usize) -> Result<&mut NativeConnection> {
        let mut tagged = false;
        // SAFETY: env and argument belong to this call.
        napi_ok(unsafe { sys::napi_check_object_type_tag(self.env, self.args[i], &HANDLE_TAG, &mut tagged) })?;
        if !tagged {
            return Err(JsError::plain("Not a connection handle"));
        }
        if self.connection_taken.replace(true) {
            return Err(JsError::plain("The connection was already taken in this call"));
        }
        let mut data = ptr::null_mut();
        // SAFETY: as above.
        napi_ok(unsafe { sys::napi_get_value_external(self.env, self.args[i], &mut data) })?;
        // SAFETY: tagged handles are made by `handle` only and hold a strong reference to the
        // connection's JS object, which owns it. No other reference to it is live: none is
        // held while JS runs (a `JsVal` and this borrow exclude each other), an outer call
        // is therefore not holding one, and this call takes it once.
        Ok(unsafe { &mut *(*data.cast::<Handle>()).connection })
    }
}

thread_local! {
    /// Where frames that read a user's values are encoded before they join the output.
    static SCRATCH: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// Runs `encode` on this thread's scratch buffer (cleared first): taken, not borrowed, so an
/// entry point called from inside a getter gets an empty one of its own.
fn with_scratch<T>(encode: impl FnOnce(&mut Vec<u8>) -> Result<T>) -> Result<T> {
    let mut scratch = SCRATCH.with(Cell::take);
    scratch.clear();
    let result = encode(&mut scratch);
    SCRATCH.with(|cell| cell.set(scratch));
    result
}

// The entry points' work, each given its arguments decoded by name (generated from
// scripts/hot-entry-points.js, which documents each); their registration is generated too.

fn send_method(mut args: SendMethodArgs) -> Result<f64> {
    let method = spec::method(args.method_id).ok_or(crate::codec::CodecError::UnknownMethod)?;
    let channel = args.channel;
    with_scratch(|scratch| {
        let SendMethodValues { fields } = args.values();
        frame::write_method(scratch, channel, method, &fields)?;
        let connection = args.connection()?;
        connection.core.send_frames(scratch)?;
        Ok(connection.core.out.len() as f64)
    })
}

fn send_message(mut args: SendMessageArgs) -> Result<f64> {
    let method = spec::method(args.method_id).ok_or(crate::codec::CodecError::UnknownMethod)?;
    let props = spec::properties(args.class_id).ok_or(crate::codec::CodecError::UnknownProperties)?;
    let size = args.content()?.len();
    let channel = args.channel;
    with_scratch(|scratch| {
        let SendMessageValues { fields, properties } = args.values();
        frame::write_method(scratch, channel, method, &fields)?;
        frame::write_header(scratch, channel, props, size as u64, &properties, u16::MAX)?;
        let content = same_content(args.content()?, size)?;
        let connection = args.connection()?;
        connection.core.send_content(channel, scratch, content)?;
        Ok(connection.core.out.len() as f64)
    })
}

/// The content, read again after the user's values were (a getter may have detached or
/// replaced its store): refused if its size is no longer the one encoded.
fn same_content(content: &[u8], size: usize) -> Result<&[u8]> {
    if content.len() != size {
        return Err(JsError::plain("The content changed while the message was encoded"));
    }
    Ok(content)
}

/// See `Connection::send_publish_head`.
fn send_publish(mut args: SendPublishArgs) -> Result<f64> {
    let (channel, mandatory, immediate, present) = (args.channel, args.mandatory, args.immediate, args.present);
    let size = args.content()?.len();
    with_scratch(|scratch| {
        let SendPublishValues { exchange, routing_key, properties } = args.values();
        let publish = Publish { exchange: &exchange, routing_key: &routing_key, mandatory, immediate, properties: &properties, present };
        write_publish_head(scratch, channel, &publish, size)?;
        let content = same_content(args.content()?, size)?;
        let connection = args.connection()?;
        connection.core.send_publish_head(channel, scratch, content)?;
        Ok(connection.core.out.len() as f64)
    })
}

/// See `Connection::send_publish_again`.
fn send_publish_again(args: SendPublishAgainArgs) -> Result<f64> {
    let content = args.content()?;
    let connection = args.connection()?;
    Ok(if connection.core.send_publish_again(args.channel, content) { connection.core.out.len() as f64 } else { -1.0 })
}

/// See `Connection::send_acknowledgement`; JS sends only safe-integer tags this way.
fn send_acknowledgement(args: SendAcknowledgementArgs) -> Result<f64> {
    let connection = args.connection()?;
    connection.core.send_acknowledgement(args.channel, args.method_id, args.delivery_tag as u64, args.flags)?;
    Ok(connection.core.out.len() as f64)
}

/// `[tape, objects, slab]`, as `HandedOver::into_array` makes it.
fn receive(env: sys::napi_env, args: ReceiveArgs) -> Result<sys::napi_value> {
    let chunk = args.chunk()?;
    let connection = args.connection()?;
    connection.core.receive(chunk);
    hand_over_received(env, &mut connection.core, &mut connection.serializer, Some(args.spare))?.into_array(env)
}

fn take_output(env: sys::napi_env, args: TakeOutputArgs) -> Result<sys::napi_value> {
    let connection = args.connection()?;
    let mut out = ptr::null_mut();
    let pending = &connection.core.out;
    if pending.is_empty() {
        // SAFETY: env is live for this call.
        napi_ok(unsafe { sys::napi_get_null(env, &mut out) })?;
        return Ok(out);
    }
    // A copy, not the Vec itself: V8 accounts for memory it allocated, but Buffers over
    // outside memory are collected too late at high rates (RSS passed 1 GB sending 64 KB
    // messages), and the connection keeps its buffer's capacity for the next turn.
    let mut data = ptr::null_mut();
    // SAFETY: copies `pending.len()` bytes from a live Vec into the fresh Buffer.
    napi_ok(unsafe { sys::napi_create_buffer_copy(env, pending.len(), pending.as_ptr().cast(), &mut data, &mut out) })?;
    connection.core.clear_output();
    Ok(out)
}

#[cfg(native_socket)]
fn flush_socket(args: FlushSocketArgs) -> Result<f64> {
    Ok(args.connection()?.flush_socket() as f64)
}
