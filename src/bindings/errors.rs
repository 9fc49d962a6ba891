//! Errors crossing into JS. There is one conversion, [`JsError`], and one way to throw it
//! ([`throw`]): an error the core reports is worded by JS (lib/core_errors.js's `coreError`,
//! handed over at load through `setErrorWords`), with the class and code amqplib's has; a
//! failed Node-API call or a caught panic is a plain Error; an exception a getter already
//! threw goes on unchanged.

use super::instance;
use crate::boundary::ERROR_PARAMS;
use crate::codec::{CodecError, Param};
use napi::bindgen_prelude::{Either, Env, FnArgs};
use napi::sys;
use std::ptr;

/// An error to throw in JS.
#[derive(Debug)]
pub(super) enum JsError {
    /// An error the core reports: JS words it.
    Core(CodecError),
    /// A failure of the bindings themselves: its message.
    Plain(String),
}

impl JsError {
    pub(super) fn plain(message: impl Into<String>) -> Self {
        JsError::Plain(message.into())
    }
}

impl From<CodecError> for JsError {
    fn from(e: CodecError) -> Self {
        JsError::Core(e)
    }
}

/// A failed Node-API call in the middle of an encoding (see `instance::key`).
impl From<JsError> for CodecError {
    fn from(e: JsError) -> Self {
        match e {
            JsError::Core(e) => e,
            JsError::Plain(message) => CodecError::Source(message),
        }
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

/// A parameter of a core error, as the words function takes it.
pub(super) type WordsParam = Either<f64, String>;
/// The words function's arguments: the error's id and its parameters (0 where it has fewer).
pub(super) type WordsArgs = FnArgs<(u32, WordsParam, WordsParam, WordsParam)>;
const _: () = assert!(ERROR_PARAMS == 3, "WordsArgs has a place for each parameter");

/// Throws `e` in `env`, unless a JS exception is already pending (a throwing getter), which
/// then propagates as it is. Any JS it runs (the words function, a setter of `code` on
/// Object.prototype) runs with no borrow held: every caller throws once its work is over.
pub(super) fn throw(env: sys::napi_env, e: &JsError) {
    if exception_pending(env) {
        return;
    }
    let env = Env::from_raw(env);
    let failed = match e {
        // Callers throw after their own guard against panics: this one has its own.
        JsError::Core(error) => std::panic::catch_unwind(|| throw_worded(&env, error)).unwrap_or_else(|panic| Err(panic_message(panic.as_ref()))).err(),
        JsError::Plain(message) => Some(message.clone()),
    };
    // Unworded (no words function, or it threw, which napi-rs's call catches): a plain Error
    // says which error it was.
    if let Some(message) = failed {
        let _ = env.throw_error(&message.replace('\0', " "), None);
    }
}

/// Throws the Error lib/core_errors.js makes of `error`'s report; else says what it was.
fn throw_worded(env: &Env, error: &CodecError) -> Result<(), String> {
    let report = error.report();
    let unworded = || format!("amqplib-rs: {report:?}");
    let mut params = report.params.iter().map(|param| match *param {
        Param::Number(n) => Either::A(n),
        Param::Text(text) => Either::B(text.to_owned()),
    });
    let mut next = || params.next().unwrap_or(Either::A(0.0));
    let args = FnArgs::from((report.id as u32, next(), next(), next()));
    let words = instance::error_words(env).map_err(|_| unworded())?;
    let worded = words.call(args).map_err(|_| unworded())?;
    env.throw(worded).map_err(|_| unworded())
}

fn exception_pending(env: sys::napi_env) -> bool {
    let mut pending = false;
    // SAFETY: env is the live env of the current call (all callers are entry points).
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    pending
}

/// For napi-rs entry points: throws `e` and returns the error that tells napi-rs an
/// exception is already pending (so it throws nothing of its own).
pub(super) fn thrown(env: sys::napi_env, e: impl Into<JsError>) -> napi::Error {
    let e = e.into();
    throw(env, &e);
    napi::Error::new(napi::Status::PendingException, format!("{e:?}"))
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
