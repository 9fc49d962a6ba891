//! amqplib-rs: the native core of a drop-in replacement for amqplib.
//!
//! Layers, from the wire up:
//! - [`spec`] (generated) and [`spec_types`]: the AMQP 0-9-1 protocol tables.
//! - [`codec`]: method arguments, content properties and field tables.
//! - [`frame`]: the frame envelope, and writing frames into an output buffer.
//! - [`strings`]: the bounded interned-string table.
//! - [`tape`]: how decoded events reach JS, one crossing per read.
//! - [`connection`]: the sans-IO core of one connection (bytes in, events out).
//! - `transport` and `uv`: the TCP socket owned by the native side, polled on Node's loop
//!   (Linux and macOS: `build.rs` decides, as the `native_socket` cfg; other platforms use
//!   Node's streams).
//! - `bindings`: the Node-API surface over all of the above; `bindings::hot`, the entry points
//!   called per message or per read, as plain Node-API callbacks; `bindings::socket`, the
//!   native socket's driver.

//!
//! # Unsafe code, and the invariant each use relies on
//!
//! `codec`, `frame`, `strings`, `tape` and `spec` have none. Every block elsewhere carries a
//! `SAFETY:` comment; by function:
//!
//! | where | what | relies on |
//! |---|---|---|
//! | `connection::Session::{receive_with, receive_direct}` | `set_len` after a read into spare capacity (of the read buffer, or of a body's assembly) | the reader initialised exactly the bytes it reports (asserted not to exceed what it was given) |
//! | `transport::sockaddr` | writing a `sockaddr_in`/`in6` into `sockaddr_storage` | the storage is large and aligned enough for any socket address |
//! | `transport::{stream_socket, stream_socket_by_fcntl, set_option}`, `TcpSocket::{connect, read, write, take_error}` | system calls | the descriptor is ours (an `OwnedFd` made from `socket()` once, owned before any later call can fail), buffers are valid for the lengths passed, a closed peer is an error not SIGPIPE (`MSG_NOSIGNAL` on Linux, `SO_NOSIGPIPE` on macOS) |
//! | `uv::uv` | `dlsym` and `transmute` to function pointers | each name is libuv's own function with the signature in uv.h, exported by the node binary that loaded us |
//! | `uv::{alloc_poll, free_poll}` | allocating and freeing a `uv_poll_t` | the size comes from `uv_handle_size`; memory is freed only in libuv's close callback |
//! | `uv::{data, set_data}` | `handle->data` | `uv_handle_t` starts with `void* data` |
//! | `bindings::JsVal` (Value impl) | Node-API reads of JS values | env and value belong to the current call and are used before it returns |
//! | `bindings::{hand_over, js_object, content_buffer, js_string}` | creating JS values and Buffers | env of the current call; a content `Vec` leaked into an external Buffer is reclaimed exactly once, by its finalizer (or at once if Node refuses external memory) |
//! | `bindings::content_slab` | copying a read's small bodies into one fresh Buffer | the ranges lie in the read buffer and add up to exactly the Buffer's size |
//! | `bindings::hot::{handle, session}` | the handle's pointer to its session | handles are made by `handle` alone (type-tagged Externals), each holding a strong reference to the session's JS object; a session marked as encoding a user's object (a getter may run JS) is refused, so no other reference to it is live |
//! | `bindings::hot` entry points | reading arguments, making results | env and values of the current call |
//! | `bindings::throw`, the `#[napi]` entry points | throwing, `Unknown::from_raw_unchecked` | values made in the same call's env |
//! | `bindings::socket` `JsSession::connect_socket` | poll handle init, `handle->data = session` | the session lives in napi-rs's box while its JS object lives; the strong reference to the socket's JS callback keeps that object alive until `close_socket`, and an env cleanup hook runs `close_socket` if the env goes first |
//! | `bindings::socket::{on_poll, poll_ready, JsSession::emit}` | the poll callback dereferencing the session | as above; no Rust reference is held while JS runs (`emit` works from the raw pointer, borrows end before `napi_make_callback`); panics are caught and never unwind into libuv |
//! | `bindings::socket` `JsSession::close_socket` | `uv_poll_stop`, `uv_close`, deleting references | the handle is live until its close callback; references and the async context were made for this socket in its env |

pub mod codec;
pub mod connection;
pub mod frame;
#[rustfmt::skip]
pub mod spec;
pub mod spec_types;
pub mod strings;
pub mod tape;
#[cfg(native_socket)]
pub mod transport;
#[cfg(native_socket)]
mod uv;

// Under `cargo test` the exported functions have no caller, which is expected.
#[cfg_attr(test, allow(dead_code))]
mod bindings;
