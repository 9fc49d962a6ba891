//! Errors crossing into JS. There is one conversion, [`JsError`], and one way to throw it
//! ([`throw`]): a codec error keeps the kind amqplib raises for it (TypeError, RangeError
//! or Error, with `code` where Node's writers set one), a failed Node-API call or a caught
//! panic is a plain Error, and an exception a getter already threw goes on unchanged.

use crate::codec::{CodecError, ErrorKind};
use napi::sys;
use std::ffi::CString;
use std::ptr;

/// An error to throw in JS.
#[derive(Debug)]
pub(super) struct JsError {
    kind: ErrorKind,
    message: String,
    code: Option<&'static str>,
}

impl JsError {
    pub(super) fn plain(message: impl Into<String>) -> Self {
        JsError { kind: ErrorKind::Plain, message: message.into(), code: None }
    }
}

impl From<CodecError> for JsError {
    fn from(e: CodecError) -> Self {
        JsError { kind: e.kind(), message: e.to_string(), code: e.code() }
    }
}

/// A failed Node-API call in the middle of an encoding (see `instance::key`).
impl From<JsError> for CodecError {
    fn from(e: JsError) -> Self {
        CodecError::Source(e.message)
    }
}

impl From<napi::Error> for JsError {
    fn from(e: napi::Error) -> Self {
        JsError::plain(e.reason.clone())
    }
}

/// The status of a Node-API call as a Result.
pub(super) fn napi_ok(status: sys::napi_status) -> Result<(), JsError> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(JsError::plain(format!("Node-API call failed with status {status}")))
    }
}

/// Throws `e` in `env`, unless a JS exception is already pending (a throwing getter), which
/// then propagates as it is.
pub(super) fn throw(env: sys::napi_env, e: &JsError) {
    let mut pending = false;
    // SAFETY: env is the live env of the current call (all callers are entry points).
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if pending {
        return;
    }
    let message = CString::new(e.message.replace('\0', " ")).unwrap_or_default();
    let code = e.code.map(|code| CString::new(code).expect("codes have no NUL"));
    let code = code.as_ref().map_or(ptr::null(), |code| code.as_ptr());
    // SAFETY: as above; message and code are NUL-terminated (or null) and outlive the call.
    unsafe {
        match e.kind {
            ErrorKind::Type => sys::napi_throw_type_error(env, code, message.as_ptr()),
            ErrorKind::Range => sys::napi_throw_range_error(env, code, message.as_ptr()),
            ErrorKind::Plain => sys::napi_throw_error(env, code, message.as_ptr()),
        };
    }
}

/// For napi-rs entry points: throws `e` and returns the error that tells napi-rs an
/// exception is already pending (so it throws nothing of its own).
pub(super) fn thrown(env: sys::napi_env, e: impl Into<JsError>) -> napi::Error {
    let e = e.into();
    throw(env, &e);
    napi::Error::new(napi::Status::PendingException, e.message)
}

/// Runs a plain Node-API entry point's body: an Err is thrown, and a panic likewise (as a
/// plain Error), so neither crosses into JS as anything else. Returns the body's value, or
/// null when it threw.
pub(super) fn guarded<F>(env: sys::napi_env, body: F) -> sys::napi_value
where
    F: FnOnce() -> Result<sys::napi_value, JsError>,
{
    let error = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e,
        Err(panic) => JsError::plain(panic_message(panic.as_ref())),
    };
    throw(env, &error);
    ptr::null_mut()
}

pub(super) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    format!("Panic in amqplib-rs: {}", text.unwrap_or("(no message)"))
}
