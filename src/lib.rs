//! amqplib-rs: the native addon of a drop-in replacement for amqplib.
//!
//! The protocol is the sans-IO core's (the `amqplib_rs_core` crate, `core/`), whose modules are
//! re-exported here under the same names. This crate adds what runs inside Node:
//! - `transport`, `uv` and `driver`: the TCP socket owned by the native side, the libuv poll
//!   handle that watches it on Node's loop, and the driver that reads and writes it for a
//!   connection core, step by step, with no Node-API (Linux and macOS: `build.rs` decides, as
//!   the `native_socket` cfg; other platforms use Node's streams); `tls`, the rustls session
//!   the driver puts between the core and the socket for amqps://.
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
//! | `bindings::env` | the Node-API calls that run no JS, as safe methods of `JsEnv<'call>` (the env of a call, made unsafely once where Node hands it over) on `Js<'call>` handles; references; type-tagged Externals and the instance data, Boxes Node owns; handle scopes | a `JsEnv` exists only while its env is live on this thread (an entry point's, a finalizer's, a hook's, a handle scope's), and a `Js` only while its handle is valid; out-pointers are live locals; a `Reference` is used in the env that made it, deleted once (it is moved); a Box given to Node (`JsEnv::give`) is freed once, by its finalizer, or taken back if Node refuses it; a string of `Strings` is read only from an index defined on our own Array, which no JS sees; an External tagged as `T`'s holds a `T` (each type its own tag); handle scopes close innermost first (locals); the callback of every hot entry point (`env::callback`) is called by Node with its call's env and callback info; a fresh ArrayBuffer is written before any JS has it; an external Buffer's store lives in the Box its finalizer frees |
//! | `bindings::marshal::JsVal` | a Buffer argument's bytes; `JSON.stringify` of a value, for an error's words (a user's value is otherwise read through napi-rs's safe methods; all of these may run JS) | env and value belong to the call the `JsVal` borrows mutably (`'call`), so nothing else of the call is borrowed while JS runs; a Buffer's store is copied before JS can run |
//! | `bindings::handover::write_into_spare` | writing a released spare tape | a spare tape is written only when it is a Float64Array long enough that JS has released, through a slice that lives for the write alone, with no JS running |
//! | `bindings::instance::key` | the env's instance data | it is only ever the `Instance` that `install` set, alive until the env ends; borrowed for the call alone, which runs no JS |
//! | `bindings::hot::Call::connection` | the handle's pointer to its connection | handles are made by `hot::handle` alone (tagged Externals), each holding a strong reference to the connection's JS object; a call takes its connection once, and cannot while it holds a user's value (`JsVal` borrows the call mutably), so no JS runs while a reference is held and no outer call holds one |
//! | `bindings::hot::Call::bytes` | a Buffer argument's bytes | they borrow the call, so none are held while JS runs (which could detach them) |
//! | `bindings::errors`, `bindings::env::Js::unknown` | throwing, `Unknown::from_raw_unchecked` | values made in the same call's env, or handed to it |
//! | `bindings::socket` `NativeConnection::connect_socket` | `Driver::connect` with `data = connection`; the env cleanup hook | the connection lives in napi-rs's box while its JS object lives; a strong reference to that object keeps it alive until `close_socket`, which removes the hook, and the hook runs `close_socket` if the env goes first |
//! | `bindings::socket::{on_poll, Polled, emit}` | the poll callback dereferencing the connection; calling JS | as above, and for the whole callback a local handle to its JS object keeps it alive even if JS closes the socket meanwhile; `Polled::with` lends the connection to code that runs no JS, and `emit` (the one call that runs JS) cannot run while it does (both borrow the `Polled` mutably); handle scopes close on drop, panics included; panics are caught and never unwind into libuv |
//! | `bindings::socket` `AsyncContext`, `socket_async_context` | making and destroying a socket's async context | made in a call of its own, with nothing borrowed (its init hooks run JS); destroyed once (it is moved), in its env |

pub use amqplib_rs_core::{boundary, channels, codec, connection, content, event, frame, serializer, spec, spec_types, strings, tape, unsettled};
#[cfg(native_socket)]
pub mod driver;
#[cfg(native_socket)]
pub mod tls;
#[cfg(native_socket)]
pub mod transport;
#[cfg(native_socket)]
mod uv;

// Under `cargo test` the exported functions have no caller, which is expected.
#[cfg_attr(test, allow(dead_code))]
mod bindings;
