//! The sans-IO core of amqplib-rs: bytes in, frames and events out, with no Node-API and no
//! system calls, so that every test here runs under Miri (`npm run test:miri`). The addon
//! crate (the repository's root) drives it from a socket or a Node stream and hands its events
//! to JS.
//!
//! Layers, from the wire up:
//! - [`spec`] (generated) and [`spec_types`]: the AMQP 0-9-1 protocol tables.
//! - [`boundary`] (generated): the event kinds and slot positions of what JS is handed.
//! - [`codec`]: method arguments, content properties and field tables.
//! - [`frame`]: the frame envelope, and writing frames into an output buffer.
//! - [`content`]: the content rules of a channel (method, header, body), with amqplib's errors.
//! - [`event`]: what the core yields for what it reads, typed.
//! - [`connection`]: the core of one connection (bytes in, events out).
//! - [`channels`]: each channel's one record, from its opening to the end of its close: its
//!   state (what may be sent, what is handed on), with its content stage and its acks.
//! - [`unsettled`]: which deliveries of a channel wait for an ack, from what crosses the
//!   wire, so that the connection can write consecutive acks as one.
//! - [`serializer`], with [`tape`] and [`strings`]: what the bindings run over each read's
//!   events: the tape JS reads (laid out as `boundary` says), with the bounded
//!   interned-string table.
//!
//! Test helpers (`test_support`, under `cargo test` only) include a `Pair`: a client core
//! reading what a scripted server core sends, without a network.
//!
//! # Unsafe code
//!
//! Only `connection::Connection::{receive_with, receive_direct}`: `set_len` after a read into
//! spare capacity (of the read buffer, or of a body's assembly), relying on the reader having
//! initialised exactly the bytes it reports (asserted not to exceed what it was given). The
//! other modules have none.

#[rustfmt::skip]
pub mod boundary;
pub mod channels;
pub mod codec;
pub mod connection;
pub mod content;
pub mod event;
pub mod frame;
#[rustfmt::skip]
pub mod spec;
pub mod spec_types;
pub mod serializer;
pub mod strings;
pub mod tape;
pub mod unsettled;
#[cfg(test)]
mod test_support;
