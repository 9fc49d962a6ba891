//! amqplib-rs: the native core of a drop-in replacement for amqplib.
//!
//! Layers, from the wire up:
//! - [`spec`] (generated) and [`spec_types`]: the AMQP 0-9-1 protocol tables.
//! - [`codec`]: method arguments, content properties and field tables.
//! - [`frame`]: the frame envelope, and writing frames into an output buffer.
//! - [`strings`]: the bounded interned-string table.
//! - [`tape`]: how decoded events reach JS, one crossing per read.
//! - [`connection`]: the sans-IO core of one connection (bytes in, events out).
//! - [`transport`] and `uv`: the TCP socket owned by the native side, polled on Node's loop.
//! - `bindings`: the Node-API surface over all of the above.

pub mod codec;
pub mod connection;
pub mod frame;
#[rustfmt::skip]
pub mod spec;
pub mod spec_types;
pub mod strings;
pub mod tape;
pub mod transport;
mod uv;

// Under `cargo test` the exported functions have no caller, which is expected.
#[cfg_attr(test, allow(dead_code))]
mod bindings;
