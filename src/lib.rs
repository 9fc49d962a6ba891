//! amqplib-rs: the native addon of a drop-in replacement for amqplib.
//!
//! The protocol is the sans-IO core's (the `amqplib_rs_core` crate, `core/`), whose modules are
//! re-exported here under the same names. This crate adds what runs inside Node:
//! - `transport`, `uv` and `driver`: the TCP socket owned by the native side, the libuv poll
//!   handle that watches it on Node's loop, and the driver that reads and writes it for a
//!   connection core, step by step, with no Node-API (Linux and macOS: `build.rs` decides, as
//!   the `native_socket` cfg; other platforms use Node's streams).
//! - `bindings`: the Node-API layer over all of the above (see its module documentation).
//!
//! # Unsafe code, and the invariant each use relies on
//!
//! The core's is described in its own crate. `transport` has none outside its tests: its
//! system calls are the `socket2` crate's. Every block here carries a `SAFETY:` comment; by
//! function:
//!
//! | where | what | relies on |
//! |---|---|---|
//! | `uv::uv` | `dlsym` and `transmute` to function pointers | each name is libuv's own function with the signature in uv.h, exported by the node binary that loaded us |
//! | `driver::Driver::{connect, poll_for, close}` | libuv poll init, start, stop and close | the loop is Node's, on this thread; the handle is live from init until `close`, which hands it to libuv to free in its close callback; `data` stays valid until then (the caller's promise) |
//! | `uv::{alloc_poll, free_poll}` | allocating and freeing a `uv_poll_t` | the size comes from `uv_handle_size` and is checked to be non-zero; a failed allocation (null) is an error; memory is freed only in libuv's close callback, with the same layout |
//! | `uv::{data, set_data}` | `handle->data` | `uv_handle_t` starts with `void* data` |
//! | `bindings::marshal::JsVal` | Node-API reads of JS values | env and value belong to the call the `JsVal` borrows (`'call`), and are used before it returns |
//! | `bindings::handover` | creating JS values and Buffers; copying a read's small bodies into its slab | env of the current call; a content `Vec` leaked into an external Buffer is reclaimed exactly once, by its finalizer (or at once if Node refuses external memory); the slab's ranges lie in the read buffer and add up to exactly its size; a spare tape is written only when it is a Float64Array long enough that JS has released, through a slice that lives for the write alone, with no JS running |
//! | `bindings::hot::Call::connection` | the handle's pointer to its connection | handles are made by `hot::handle` alone (type-tagged Externals), each holding a strong reference to the connection's JS object; a call takes its connection once, and cannot while it holds a user's value (`JsVal` borrows the call mutably), so no JS runs while a reference is held and no outer call holds one |
//! | `bindings::hot::Call::bytes` | a Buffer argument's bytes | they borrow the call, so none are held while JS runs (which could detach them) |
//! | `bindings::errors`, the `#[napi]` entry points | throwing, `Unknown::from_raw_unchecked` | values made in the same call's env |
//! | `bindings::socket` `NativeConnection::connect_socket` | `Driver::connect` with `data = connection` | the connection lives in napi-rs's box while its JS object lives; a strong reference to that object keeps it alive until `close_socket`, and an env cleanup hook runs `close_socket` if the env goes first |
//! | `bindings::socket::{on_poll, run_steps, NativeConnection::emit}` | the poll callback dereferencing the connection | as above, and for the whole callback a local handle to its JS object keeps it alive even if JS closes the socket meanwhile; no Rust reference is held while JS runs (`emit` works from the raw pointer, borrows end before `napi_make_callback`); handle scopes close on drop, panics included; panics are caught and never unwind into libuv |
//! | `bindings::socket` `NativeConnection::close_socket` | deleting references, the async context | made for this socket in its env, deleted once (the state is taken) |

pub use amqplib_rs_core::{boundary, codec, connection, content, event, frame, serializer, spec, spec_types, strings, tape, unsettled};
#[cfg(native_socket)]
pub mod driver;
#[cfg(native_socket)]
pub mod transport;
#[cfg(native_socket)]
mod uv;

// Under `cargo test` the exported functions have no caller, which is expected.
#[cfg_attr(test, allow(dead_code))]
mod bindings;
