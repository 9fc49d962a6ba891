//! The Node-API layer over the core, one concern per file:
//! - [`errors`]: the one conversion of errors (and caught panics) into thrown JS errors;
//! - [`marshal`]: reading JS values for the encoder ([`marshal::JsVal`]);
//! - [`handover`]: a read's events, through the connection's serializer (`serializer.rs`), to JS;
//! - [`native_connection`]: the class JS makes once per connection;
//! - [`hot`]: the entry points called per message or per read, as plain Node-API callbacks;
//! - `socket` (Linux and macOS): the Node-API side of the native socket driver;
//! - `codec_exports` (cargo feature `codec-exports`, development builds only): the codec
//!   with no connection, for lib/defs.js and lib/codec.js; `unsettled_export` (the same): a
//!   channel's record of deliveries waiting for an ack on its own, for lib/unsettled.js.
//!
//! Every entry point catches panics, so a Rust panic reaches JS as a thrown Error, never as
//! an abort.

use napi::bindgen_prelude::*;
use napi_derive::napi;

#[cfg(feature = "codec-exports")]
mod codec_exports;
mod errors;
mod handover;
mod hot;
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

/// Adds the hot entry points (`hot.rs`) to the module's exports.
#[napi(module_exports)]
pub fn register_hot_entry_points(exports: Object, env: Env) -> Result<()> {
    hot::register(env.raw(), exports.raw()).map_err(|e| errors::thrown(env.raw(), e))
}
