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

use super::env::{Finalize, Js, JsEnv, Reference, Tagged};
use super::errors::JsError;
use super::handover::hand_over_received;
use super::marshal::JsVal;
use super::native_connection::NativeConnection;
use crate::boundary::Refusal;
use crate::frame::{self, write_publish_head, Publish};
use crate::spec;
use napi::sys;
use std::cell::Cell;

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
    /// Keeps the connection's JS object, which owns the connection, alive.
    reference: Reference,
}

impl Finalize for Handle {
    fn finalize(self, env: JsEnv<'_>) {
        self.reference.delete(env);
    }
}

impl Tagged for Handle {
    const TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x616d_7170_6c69_6272, upper: 0x7273_2d68_6f74_0001 };
}

/// A handle for `connection`, whose JS object is `this`.
pub(super) fn handle<'call>(env: JsEnv<'call>, connection: *mut NativeConnection, this: Js<'call>) -> Result<Js<'call>> {
    let reference = env.reference(this)?;
    env.external(Handle { connection, reference })
}

/// One call of an entry point: its env and its `N` arguments (missing ones undefined).
struct Call<'call, const N: usize> {
    env: JsEnv<'call>,
    args: [Js<'call>; N],
    /// The connection has been taken: a call takes it once, so there is one `&mut` to it.
    connection_taken: Cell<bool>,
    /// The handle argument, once looked up (a publish asks for it twice: its frame max, then
    /// the connection).
    handle: Cell<Option<&'call Handle>>,
}

impl<'call, const N: usize> Call<'call, N> {
    fn new(env: JsEnv<'call>, args: [Js<'call>; N]) -> Self {
        Call { env, args, connection_taken: Cell::new(false), handle: Cell::new(None) }
    }

    fn u32(&self, i: usize) -> Result<u32> {
        self.env.get_u32(self.args[i]).ok_or_else(|| JsError::plain(format!("Argument {i} is not a number")))
    }

    fn f64(&self, i: usize) -> Result<f64> {
        self.env.get_f64(self.args[i]).ok_or_else(|| JsError::plain(format!("Argument {i} is not a number")))
    }

    fn bool(&self, i: usize) -> Result<bool> {
        self.env.get_bool(self.args[i]).ok_or_else(|| JsError::plain(format!("Argument {i} is not a boolean")))
    }

    /// The bytes of a Buffer argument, for as long as nothing can run JS (which could
    /// detach them): they borrow the call, as [`user_values`](Self::user_values) cannot.
    fn bytes(&self, i: usize) -> Result<&[u8]> {
        let (data, len) = self.env.buffer_info(self.args[i])?;
        // SAFETY: Node-API gave the live store of `len` bytes, which the argument keeps alive
        // and no JS can detach while the call is borrowed.
        Ok(if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(data, len) } })
    }

    /// Arguments given by the user, to be read by the encoder (which may run JS).
    fn user_values<const K: usize>(&mut self, indices: [usize; K]) -> [JsVal<'_>; K] {
        indices.map(|i| JsVal::new(self.env, self.args[i]))
    }

    /// The connection behind the handle argument `i`, once per call. It borrows the call
    /// immutably so that no user's value can be read (and no JS run) while it is held; it
    /// is not memory of the call's, and the once-per-call flag keeps it unique.
    #[allow(clippy::mut_from_ref)]
    fn connection(&self, i: usize) -> Result<&mut NativeConnection> {
        let handle = self.handle(i)?;
        if self.connection_taken.replace(true) {
            return Err(JsError::plain("The connection was already taken in this call"));
        }
        // SAFETY: handles hold a strong reference to the connection's JS object, which owns
        // it. No other reference to it is live: none is held while JS runs (a `JsVal` and this
        // borrow exclude each other), an outer call is therefore not holding one, and this
        // call takes it once.
        Ok(unsafe { &mut *handle.connection })
    }

    /// The largest frame the connection behind the handle argument `i` may send, read before
    /// the user's values are, so that the encoder reads their tables no further than that.
    fn frame_max(&self, i: usize) -> Result<usize> {
        let handle = self.handle(i)?;
        if self.connection_taken.get() {
            return Err(JsError::plain("The connection was already taken in this call"));
        }
        // SAFETY: as for `connection`: live, and not borrowed now (this call has not taken it,
        // and no outer call holds it while JS runs); the shared borrow ends with this read.
        Ok(unsafe { &*handle.connection }.core.sendable_frame_max())
    }

    /// The handle argument `i` (a call has one).
    fn handle(&self, i: usize) -> Result<&'call Handle> {
        if let Some(handle) = self.handle.get() {
            return Ok(handle);
        }
        let Some(handle) = self.env.external_data::<Handle>(self.args[i])? else {
            return Err(JsError::plain("Not a connection handle"));
        };
        self.handle.set(Some(handle));
        Ok(handle)
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
    let frame_max = args.frame_max()?;
    with_scratch(|scratch| {
        let SendMethodValues { fields } = args.values();
        frame::write_method(scratch, channel.number(), method, &fields, frame_max)?;
        let connection = args.connection()?;
        // Checked once the user's values are read: a getter may have closed the channel.
        if let Err(refusal) = connection.core.may_send(channel, method.id) {
            return Ok(refused(refusal));
        }
        connection.core.send_frames(scratch)?;
        Ok(connection.core.out.len() as f64)
    })
}

fn send_message(mut args: SendMessageArgs) -> Result<f64> {
    let method = spec::method(args.method_id).ok_or(crate::codec::CodecError::UnknownMethod)?;
    let props = spec::properties(args.class_id).ok_or(crate::codec::CodecError::UnknownProperties)?;
    let size = args.content()?.len();
    let channel = args.channel;
    let frame_max = args.frame_max()?;
    with_scratch(|scratch| {
        let SendMessageValues { fields, properties } = args.values();
        frame::write_method(scratch, channel.number(), method, &fields, frame_max)?;
        frame::write_header(scratch, channel.number(), props, size as u64, &properties, u16::MAX, frame_max)?;
        let content = same_content(args.content()?, size)?;
        let connection = args.connection()?;
        let number = match connection.core.may_send(channel, method.id) {
            Ok(number) => number,
            Err(refusal) => return Ok(refused(refusal)),
        };
        connection.core.send_content(number, scratch, content)?;
        Ok(connection.core.out.len() as f64)
    })
}

/// What a send returns when it writes nothing: the channel refused it (JS words why), or
/// there was no publish to repeat.
fn refused(refusal: Refusal) -> f64 {
    refusal as i8 as f64
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
    let frame_max = args.frame_max()?;
    with_scratch(|scratch| {
        let SendPublishValues { exchange, routing_key, properties } = args.values();
        let publish = Publish { exchange: &exchange, routing_key: &routing_key, mandatory, immediate, properties: &properties, present };
        write_publish_head(scratch, channel.number(), &publish, size, frame_max)?;
        let content = same_content(args.content()?, size)?;
        let connection = args.connection()?;
        let number = match connection.core.may_send(channel, spec::BASIC_PUBLISH.id) {
            Ok(number) => number,
            Err(refusal) => return Ok(refused(refusal)),
        };
        connection.core.send_publish_head(number, scratch, content)?;
        Ok(connection.core.out.len() as f64)
    })
}

/// See `Connection::send_publish_again`.
fn send_publish_again(args: SendPublishAgainArgs) -> Result<f64> {
    let content = args.content()?;
    let connection = args.connection()?;
    let channel = match connection.core.may_send(args.channel, spec::BASIC_PUBLISH.id) {
        Ok(number) => number,
        Err(refusal) => return Ok(refused(refusal)),
    };
    Ok(if connection.core.send_publish_again(channel, content) { connection.core.out.len() as f64 } else { refused(Refusal::NoRepeat) })
}

/// See `Connection::send_acknowledgement`; JS sends only safe-integer tags this way.
fn send_acknowledgement(args: SendAcknowledgementArgs) -> Result<f64> {
    let connection = args.connection()?;
    let channel = match connection.core.may_send(args.channel, args.method_id) {
        Ok(number) => number,
        Err(refusal) => return Ok(refused(refusal)),
    };
    connection.core.send_acknowledgement(channel, args.method_id, args.delivery_tag as u64, args.flags)?;
    Ok(connection.core.out.len() as f64)
}

/// `[tape, objects, slab]`, as `HandedOver::into_array` makes it.
fn receive<'call>(env: JsEnv<'call>, args: ReceiveArgs<'call>) -> Result<Js<'call>> {
    let chunk = args.chunk()?;
    let connection = args.connection()?;
    connection.core.receive(chunk);
    hand_over_received(env, &mut connection.core, &mut connection.serializer, Some(args.spare))?.into_array(env)
}

fn take_output<'call>(env: JsEnv<'call>, args: TakeOutputArgs<'call>) -> Result<Js<'call>> {
    let connection = args.connection()?;
    let pending = &connection.core.out;
    if pending.is_empty() {
        return env.null();
    }
    // A copy, not the Vec itself: V8 accounts for memory it allocated, but Buffers over
    // outside memory are collected too late at high rates (RSS passed 1 GB sending 64 KB
    // messages), and the connection keeps its buffer's capacity for the next turn.
    let out = env.buffer_copy(pending)?;
    connection.core.clear_output();
    Ok(out)
}

#[cfg(native_socket)]
fn flush_socket(args: FlushSocketArgs) -> Result<f64> {
    Ok(args.connection()?.flush_socket() as f64)
}
