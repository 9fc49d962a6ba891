//! The Node-API layer over the core, one concern per file:
//! - [`env`]: the safe layer over the Node-API calls that run no JS (`JsEnv`, `Js`);
//! - [`errors`]: the one conversion of errors (and caught panics) into thrown JS errors;
//! - [`marshal`]: reading JS values for the encoder ([`marshal::JsVal`]);
//! - [`handover`]: a read's events, through the connection's serializer (`serializer.rs`), to JS;
//! - [`instance`]: the state kept per env;
//! - [`native_connection`]: the class JS makes once per connection;
//! - [`hot`]: the entry points called per message or per read, as plain Node-API callbacks;
//! - `socket` (Linux and macOS): the Node-API side of the native socket driver;
//! - `codec_exports` (cargo feature `codec-exports`, development builds only): the codec
//!   with no connection, for lib/defs.js and lib/codec.js; `unsettled_export` (the same): a
//!   channel's record of deliveries waiting for an ack on its own, for lib/unsettled.js.
//!
//! Every entry point catches panics, so a Rust panic reaches JS as a thrown Error, never as
//! an abort.
//!
//! # No borrow across JS
//!
//! JS run in the middle of a call may call into the addon again, for this connection or any
//! other: ack, publish, close it (which frees its buffers), or parse another read into its
//! read buffer and tape. So while the user's JS may run, nothing may be borrowed that such a
//! call could move, free or write: no connection (`&mut NativeConnection`, its core or
//! serializer), no slice of its read buffer, no tape, no bytes of a Buffer (a call may detach
//! them), no instance state ([`instance`]). The Node-API calls that may run the user's JS:
//! - `napi_call_function`, `napi_make_callback`: run it outright (socket events, `socket.rs`);
//! - `napi_async_init`: runs async_hooks' init hooks (so `socket.rs` makes a socket's async
//!   context in a call of its own, before `connectSocket` borrows the connection);
//! - `napi_set_element`, `napi_set_property`, `napi_set_named_property`: a [[Set]] of a
//!   property the object does not have yet consults its prototype chain, where an accessor
//!   (on Array.prototype or Object.prototype, for a fresh array or object) runs. So does
//!   `napi_throw_*` given a code (it sets the Error's `code`): we throw once an entry point's
//!   body has returned (`errors::guarded`), its borrows over;
//! - `napi_get_property`, `napi_get_named_property`, `napi_get_element`,
//!   `napi_has_property`, `napi_has_own_property`, `napi_get_property_names`, `napi_instanceof`
//!   on a user's value: getters, proxy traps, `Symbol.hasInstance` (`marshal.rs`, which
//!   makes them through napi-rs's methods of `Unknown` and `Object`);
//! - `napi_coerce_to_*`: `valueOf`, `toString`, `Symbol.toPrimitive`.
//!
//! These do not: making values (strings, numbers, Buffers, typed arrays, externals, empty
//! arrays and objects), reading primitives without coercion (`napi_get_value_*` fails on an
//! object rather than calling its `valueOf`), `napi_typeof`, `napi_is_*`, references, type
//! tags, instance data, and `napi_define_properties` with data properties, which defines own
//! properties whatever the prototypes hold. So what a read hands to JS is built with those alone:
//! an Array's elements are defined (`handover::define_elements`), never set. And where the
//! user's JS must run (reading a publish's arguments, emitting a socket event), the borrows
//! end first: see [`hot`] (a user's value and the connection borrow the call exclusively of
//! each other) and `socket.rs` (each step's borrow ends before JS hears of it).

use napi::bindgen_prelude::*;
use napi_derive::napi;

#[cfg(feature = "codec-exports")]
mod codec_exports;
mod env;
mod errors;
mod handover;
mod hot;
mod instance;
mod marshal;
mod native_connection;
#[cfg(native_socket)]
mod socket;
#[cfg(feature = "codec-exports")]
mod unsettled_export;

/// Whether amqp:// gets the native socket on this platform (see `build.rs`); where it does
/// not, the JS side connects with `net.connect`, as for TLS.
#[napi(catch_unwind)]
pub fn has_native_socket() -> bool {
    cfg!(native_socket)
}

/// Panics with `message`. It exists so the tests can check the guard every entry point has:
/// a Rust panic reaches JS as a thrown Error, and the process carries on.
#[napi(js_name = "__panicForTest", catch_unwind)]
pub fn panic_for_test(message: String) {
    panic!("{message}");
}

/// Gives the env its state (`instance.rs`) and adds the hot entry points (`hot.rs`) to the
/// module's exports.
#[napi(module_exports)]
pub fn register_hot_entry_points(exports: Object, env: Env) -> Result<()> {
    let js_env = env::JsEnv::of(&env);
    instance::install(js_env).and_then(|()| hot::register(js_env, env::Js::of(&exports))).map_err(|e| errors::thrown(env.raw(), e))
}

/// Takes the function that words the core's errors (lib/core_errors.js's `coreError`), for this
/// env: lib/native.js gives it as the addon loads.
#[napi(js_name = "setErrorWords", catch_unwind)]
pub fn set_error_words(env: Env, words: Function<'_, errors::WordsArgs, Unknown<'static>>) -> Result<()> {
    instance::set_error_words(&env, words).map_err(|e| errors::thrown(env.raw(), e))
}
