//! The connection core as a JS class (`native.NativeConnection`): made once per connection, it owns
//! the sans-IO core and, where the platform has it, the native socket. What is called per
//! message or per read goes through `hot.rs` instead, with a handle made here.

use super::env::{Js, JsEnv};
use super::hot;
use crate::channels::ChannelHandle;
use crate::connection::Connection;
use crate::serializer::Serializer;
use napi::bindgen_prelude::*;
use napi_derive::napi;

/// One connection's codec state (read buffer, body assembly, string table, output) and, for
/// amqp:// where the platform has the native socket, the TCP socket it reads and writes
/// itself (see `socket.rs`).
#[napi]
pub struct NativeConnection {
    pub(super) core: Connection,
    /// Turns the core's events into what JS is handed, with the interned-string table.
    pub(super) serializer: Serializer,
    #[cfg(native_socket)]
    pub(super) socket: Option<Box<super::socket::SocketState>>,
    /// What the socket had counted when it closed: the application's counters outlive it.
    #[cfg(native_socket)]
    pub(super) closed_socket_counts: super::socket::SocketCounts,
}

impl NativeConnection {
    /// This connection as a pointer to keep past the call (the handle's, the poll callback's):
    /// the one napi-rs wrapped `this` with (see `JsEnv::wrapped`), never one made from `self`.
    pub(super) fn kept(&mut self, env: JsEnv<'_>, this: Js<'_>) -> std::result::Result<*mut NativeConnection, super::errors::JsError> {
        let wrapped = env.wrapped(this)?.cast::<NativeConnection>();
        // `this` is the object napi-rs unwrapped `self` from: anything else is a bug of ours.
        if !std::ptr::eq(wrapped, self) {
            return Err(super::errors::JsError::plain("The connection's object does not wrap it".to_string()));
        }
        Ok(wrapped)
    }
}

#[napi]
impl NativeConnection {
    #[napi(constructor, catch_unwind)]
    pub fn new() -> Self {
        NativeConnection {
            core: Connection::new(),
            serializer: Serializer::default(),
            #[cfg(native_socket)]
            socket: None,
            #[cfg(native_socket)]
            closed_socket_counts: super::socket::SocketCounts::default(),
        }
    }

    /// A handle for the per-message entry points (see `hot.rs`), which keeps this
    /// connection alive.
    #[napi(catch_unwind)]
    pub fn handle<'env>(&mut self, env: &'env Env, this: This<'env>) -> Result<Unknown<'env>> {
        let js_env = JsEnv::of(env);
        let this = Js::of(&this.object);
        let handle = self.kept(js_env, this).and_then(|connection| hot::handle(js_env, connection, this));
        Ok(handle.map_err(|e| super::errors::thrown(env.raw(), e))?.into_unknown(env))
    }

    #[napi(catch_unwind)]
    pub fn send_heartbeat(&mut self) {
        self.core.send_heartbeat();
    }

    #[napi(catch_unwind)]
    pub fn send_bytes(&mut self, bytes: BufferSlice) {
        self.core.send_bytes(&bytes);
    }

    /// Frames received and sent so far, for the application's counters.
    #[napi(getter, catch_unwind)]
    pub fn frames_received(&self) -> f64 {
        self.core.frames_received as f64
    }

    #[napi(getter, catch_unwind)]
    pub fn frames_sent(&self) -> f64 {
        self.core.frames_sent as f64
    }

    /// Bytes encoded and not yet taken by the transport.
    #[napi(getter, catch_unwind)]
    pub fn pending_output(&self) -> u32 {
        self.core.out.len() as u32
    }

    /// The connection is over: give back the buffers' memory now (see `release_buffers`).
    #[napi(catch_unwind)]
    #[cfg_attr(not(native_socket), allow(unused_variables))]
    pub fn release(&mut self, env: Env) {
        #[cfg(native_socket)]
        self.close_socket(JsEnv::of(&env));
        self.core.release_buffers();
        self.serializer = Serializer::default();
    }

    /// A channel about to be opened on `number`: its handle, which the send entry points take
    /// (see `channels.rs`).
    #[napi(catch_unwind)]
    pub fn open_channel(&mut self, number: u32) -> f64 {
        self.core.open_channel(number as u16).0 as f64
    }

    /// Why nothing may be sent on the channel `handle` names now (a `Refusal`), or 0.
    #[napi(catch_unwind)]
    pub fn channel_refusal(&self, handle: f64) -> i32 {
        match self.core.may_send(ChannelHandle(handle as u64), 0) {
            Ok(_) => 0,
            Err(refusal) => refusal as i32,
        }
    }

    /// How many deliveries of the channel `handle` names wait for an ack, or -1 when that cannot
    /// be told (after ackAll, a recover, ...: core/src/unsettled.rs) or the channel is gone.
    #[napi(catch_unwind)]
    pub fn channel_unsettled(&self, handle: f64) -> i64 {
        self.core.channels.unsettled(ChannelHandle(handle as u64)).map_or(-1, |count| count as i64)
    }

    /// The connection has closed: so has every channel.
    #[napi(catch_unwind)]
    pub fn close_channels(&mut self) {
        self.core.channels.clear();
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
