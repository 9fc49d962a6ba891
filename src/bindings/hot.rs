//! The entry points called once per message or per read, as plain Node-API callbacks.
//!
//! napi-rs's class methods track every borrow of the native object in a global, locked map,
//! which costs about 0.35 µs a call: more than the work of an acknowledgement or a repeated
//! publish. These functions take instead a handle (an External made by `Session#hotHandle`)
//! that points at the session and holds a strong reference to its JS object, so the session
//! lives at least as long as the handle.
//!
//! None of them runs JS while it holds a reference to its session: `sendPublish`, which reads
//! a user's properties (getters may run), encodes them before it takes one. The one way they
//! could overlap another borrow of the same session is a JS getter reached while that
//! session encodes a user's object in a napi-rs method (`send_method` and the like) calling
//! back in: those methods mark the session as encoding (see [`Encoding`]), and a hot call
//! for it is then refused with an Error before any reference to it is made.

use super::{hand_over_received, napi_ok, throw, JsSession, JsVal};
use crate::frame::{write_publish_head, Publish};
use napi::bindgen_prelude::*;
use napi::sys;
use std::cell::Cell;
use std::ptr;

thread_local! {
    /// The address of the session whose entry point is reading JS objects on this thread, or 0.
    static ENCODING: Cell<usize> = const { Cell::new(0) };
}

/// Marks a session as reading JS objects until dropped (restoring whatever was marked before:
/// a getter may encode for another connection).
pub(super) struct Encoding(usize);

impl Encoding {
    pub(super) fn enter(session: *const JsSession) -> Self {
        Encoding(ENCODING.with(|e| e.replace(session as usize)))
    }
}

impl Drop for Encoding {
    fn drop(&mut self) {
        ENCODING.with(|e| e.set(self.0));
    }
}

/// What a handle's External holds.
struct Hot {
    session: *mut JsSession,
    reference: sys::napi_ref,
}

/// Marks our handles, so that no other External is taken for one.
const HANDLE_TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x616d_7170_6c69_6272, upper: 0x7273_2d68_6f74_0001 };

unsafe extern "C" fn drop_hot(env: sys::napi_env, data: *mut std::ffi::c_void, _hint: *mut std::ffi::c_void) {
    // SAFETY: `data` is the Box<Hot> leaked in `handle`, finalised exactly once.
    let hot = unsafe { Box::from_raw(data.cast::<Hot>()) };
    // SAFETY: the reference was made in this env, and is deleted only here.
    unsafe { sys::napi_delete_reference(env, hot.reference) };
}

/// A handle for `session`, whose JS object is `this`.
pub(super) fn handle(env: sys::napi_env, session: *mut JsSession, this: sys::napi_value) -> Result<sys::napi_value> {
    let mut reference = ptr::null_mut();
    let mut out = ptr::null_mut();
    // SAFETY: env and `this` belong to the current call; the Box is reclaimed by `drop_hot`,
    // or here if Node refuses the External.
    unsafe {
        napi_ok(sys::napi_create_reference(env, this, 1, &mut reference))?;
        let hot = Box::into_raw(Box::new(Hot { session, reference }));
        let status = sys::napi_create_external(env, hot.cast(), Some(drop_hot), ptr::null_mut(), &mut out);
        if status != sys::Status::napi_ok {
            drop_hot(env, hot.cast(), ptr::null_mut());
            return Err(Error::new(Status::GenericFailure, "Could not make a session handle"));
        }
        napi_ok(sys::napi_type_tag_object(env, out, &HANDLE_TAG))?;
    }
    Ok(out)
}

/// The arguments of the current call (missing ones undefined).
fn arguments<const N: usize>(env: sys::napi_env, info: sys::napi_callback_info) -> Result<[sys::napi_value; N]> {
    let mut argv = [ptr::null_mut(); N];
    let mut argc = N;
    // SAFETY: `argv` has room for `argc` values.
    napi_ok(unsafe { sys::napi_get_cb_info(env, info, &mut argc, argv.as_mut_ptr(), ptr::null_mut(), ptr::null_mut()) })?;
    Ok(argv)
}

/// The session behind a handle; refused while that session is encoding a user's object.
///
/// # Safety
/// The returned reference must not outlive the current call, and the call must not run JS
/// while it is held.
unsafe fn session<'a>(env: sys::napi_env, handle: sys::napi_value) -> Result<&'a mut JsSession> {
    // SAFETY: as the caller promises.
    unsafe { session_ref(session_pointer(env, handle)?) }
}

/// # Safety
/// As for [`session`]; `session` comes from [`session_pointer`].
unsafe fn session_ref<'a>(session: *mut JsSession) -> Result<&'a mut JsSession> {
    if ENCODING.with(Cell::get) == session as usize {
        return Err(Error::new(Status::GenericFailure, "A connection cannot be used while it encodes its own arguments"));
    }
    // SAFETY: the session is live (a handle keeps it so), and no other reference to it is
    // held: none is held while JS runs, except by an encoding entry point, ruled out above.
    Ok(unsafe { &mut *session })
}

fn number(env: sys::napi_env, value: f64) -> Result<sys::napi_value> {
    let mut out = ptr::null_mut();
    // SAFETY: env is live for the current call.
    napi_ok(unsafe { sys::napi_create_double(env, value, &mut out) })?;
    Ok(out)
}

fn uint(env: sys::napi_env, value: sys::napi_value) -> Result<u32> {
    let mut out = 0;
    // SAFETY: env and value belong to the current call.
    napi_ok(unsafe { sys::napi_get_value_uint32(env, value, &mut out) })?;
    Ok(out)
}

fn double(env: sys::napi_env, value: sys::napi_value) -> Result<f64> {
    let mut out = 0.0;
    // SAFETY: env and value belong to the current call.
    napi_ok(unsafe { sys::napi_get_value_double(env, value, &mut out) })?;
    Ok(out)
}

/// The bytes of a Buffer argument, valid for the current call.
fn bytes<'a>(env: sys::napi_env, value: sys::napi_value) -> Result<&'a [u8]> {
    let mut data = ptr::null_mut();
    let mut len = 0;
    // SAFETY: env and value belong to the current call; the Buffer's store outlives the call.
    napi_ok(unsafe { sys::napi_get_buffer_info(env, value, &mut data, &mut len) })?;
    Ok(if len == 0 { &[] } else { unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) } })
}

/// Runs an entry point's body: an Err becomes a thrown Error (unless one is already pending)
/// and a panic likewise, so neither crosses into JS as anything else.
fn guarded<F>(env: sys::napi_env, body: F) -> sys::napi_value
where
    F: FnOnce() -> Result<sys::napi_value>,
{
    let error = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(e)) => e.reason.clone(),
        Err(panic) => panic_message(panic.as_ref()),
    };
    let mut pending = false;
    // SAFETY: env is live for the current call.
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if !pending {
        let message = std::ffi::CString::new(error.replace('\0', " ")).unwrap_or_default();
        // SAFETY: as above; the message is NUL-terminated and outlives the call.
        unsafe { sys::napi_throw_error(env, ptr::null(), message.as_ptr()) };
    }
    ptr::null_mut()
}

/// `sendPublishAgain(handle, channel, content)`: see `Session::send_publish_again`. The bytes
/// waiting afterwards, or -1 when the channel has no publish to repeat.
unsafe extern "C" fn send_publish_again(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle, channel, content] = arguments(env, info)?;
        let (channel, content) = (uint(env, channel)?, bytes(env, content)?);
        // SAFETY: held only for this call, which runs no JS.
        let session = unsafe { session(env, handle)? };
        let waiting = if session.core.send_publish_again(channel as u16, content) { session.core.out.len() as f64 } else { -1.0 };
        number(env, waiting)
    })
}

fn boolean(env: sys::napi_env, value: sys::napi_value) -> Result<bool> {
    let mut out = false;
    // SAFETY: env and value belong to the current call.
    napi_ok(unsafe { sys::napi_get_value_bool(env, value, &mut out) })?;
    Ok(out)
}

/// The session behind a handle, before any reference to it is made (see [`session`]).
fn session_pointer(env: sys::napi_env, handle: sys::napi_value) -> Result<*mut JsSession> {
    let mut tagged = false;
    // SAFETY: env and handle belong to the current call.
    napi_ok(unsafe { sys::napi_check_object_type_tag(env, handle, &HANDLE_TAG, &mut tagged) })?;
    if !tagged {
        return Err(Error::new(Status::InvalidArg, "Not a session handle"));
    }
    let mut data = ptr::null_mut();
    napi_ok(unsafe { sys::napi_get_value_external(env, handle, &mut data) })?;
    // SAFETY: tagged handles are made by `handle` only, and hold a strong reference to the
    // session's JS object, which owns the session.
    Ok(unsafe { (*data.cast::<Hot>()).session })
}

thread_local! {
    /// Where a publish's method and header frames are encoded before they join the output.
    static PUBLISH_HEAD: Cell<Vec<u8>> = const { Cell::new(Vec::new()) };
}

/// `sendPublish(handle, channel, exchange, routingKey, mandatory, immediate, properties,
/// present, content)`: see `Session::send_publish_head`; `present` flags the properties that are
/// neither undefined nor null, as lib/spec.js computes them. The bytes waiting afterwards.
///
/// Reading the properties may run JS (getters), which may use this very session: so they
/// are encoded first, with no reference to the session held, and the frames join its output
/// after (a publish made from inside a getter goes first).
unsafe extern "C" fn send_publish(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle, channel, exchange, routing_key, mandatory, immediate, properties, present, content] = arguments(env, info)?;
        let session = session_pointer(env, handle)?;
        let channel = uint(env, channel)? as u16;
        let (mandatory, immediate, present) = (boolean(env, mandatory)?, boolean(env, immediate)?, uint(env, present)? as u16);
        let size = bytes(env, content)?.len();
        let (exchange, routing_key, properties) = (JsVal::new(env, exchange), JsVal::new(env, routing_key), JsVal::new(env, properties));
        let publish = Publish { exchange: &exchange, routing_key: &routing_key, mandatory, immediate, properties: &properties, present };
        // Taken, not borrowed: a publish from inside a getter finds an empty one of its own.
        let mut head = PUBLISH_HEAD.with(Cell::take);
        head.clear();
        let encoded = write_publish_head(&mut head, channel, &publish, size);
        let waiting = encoded.map_err(|e| throw(env, &e)).and_then(|()| {
            // The content's bytes are taken only now: a getter may have detached its store.
            let content = bytes(env, content)?;
            if content.len() != size {
                return Err(Error::new(Status::InvalidArg, "The content changed while the message was encoded"));
            }
            // SAFETY: held only for the rest of this call, which runs no JS.
            let session = unsafe { session_ref(session)? };
            session.core.send_publish_head(channel, &head, content).map_err(|e| throw(env, &e))?;
            Ok(session.core.out.len())
        });
        PUBLISH_HEAD.with(|cell| cell.set(head));
        number(env, waiting? as f64)
    })
}

/// `sendAcknowledgement(handle, channel, methodId, deliveryTag, flags)`: see
/// `Session::send_acknowledgement`; JS sends only safe-integer tags this way. The bytes
/// waiting afterwards.
unsafe extern "C" fn send_acknowledgement(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle, channel, method, tag, flags] = arguments(env, info)?;
        let (channel, method, tag, flags) = (uint(env, channel)?, uint(env, method)?, double(env, tag)?, uint(env, flags)?);
        // SAFETY: held only for this call, which runs no JS.
        let session = unsafe { session(env, handle)? };
        session
            .core
            .send_acknowledgement(channel as u16, method, tag as u64, flags as u8)
            .map_err(|e| Error::new(Status::InvalidArg, e.to_string()))?;
        number(env, session.core.out.len() as f64)
    })
}

/// `receive(handle, chunk)`: parses what a stream transport read; `[tape, objects, slab]`
/// for every complete frame.
unsafe extern "C" fn receive(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle, chunk] = arguments(env, info)?;
        let chunk = bytes(env, chunk)?;
        // SAFETY: held only for this call, which runs no JS (making JS values runs none).
        let session = unsafe { session(env, handle)? };
        session.core.receive(chunk);
        hand_over_received(env, &mut session.core)
    })
}

/// `takeOutput(handle)`: everything encoded since the last call, as one Buffer, or null.
unsafe extern "C" fn take_output(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle] = arguments(env, info)?;
        // SAFETY: held only for this call, which runs no JS.
        let session = unsafe { session(env, handle)? };
        let mut out = ptr::null_mut();
        if session.core.out.is_empty() {
            napi_ok(unsafe { sys::napi_get_null(env, &mut out) })?;
            return Ok(out);
        }
        // A copy, not the Vec itself: V8 accounts for memory it allocated, but Buffers over
        // outside memory are collected too late at high rates (RSS passed 1 GB sending 64 KB
        // messages), and the session keeps its buffer's capacity for the next turn.
        let mut data = ptr::null_mut();
        let pending = &session.core.out;
        // SAFETY: copies `pending.len()` bytes from a live Vec into the fresh Buffer.
        napi_ok(unsafe { sys::napi_create_buffer_copy(env, pending.len(), pending.as_ptr().cast(), &mut data, &mut out) })?;
        session.core.out.clear();
        Ok(out)
    })
}

#[cfg(native_socket)]
/// `flushSocket(handle)`: writes what is queued to the native socket: 1 all written, 0 the
/// rest waits (a drain event follows), or a negative errno.
unsafe extern "C" fn flush_socket(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    guarded(env, || {
        let [handle] = arguments(env, info)?;
        // SAFETY: held only for this call, which runs no JS.
        let session = unsafe { session(env, handle)? };
        number(env, session.flush_socket() as f64)
    })
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let text = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    format!("Panic in amqplib-rs: {}", text.unwrap_or("(no message)"))
}

type Callback = unsafe extern "C" fn(sys::napi_env, sys::napi_callback_info) -> sys::napi_value;

/// Adds the hot entry points to the module's exports.
pub(super) fn register(env: sys::napi_env, exports: sys::napi_value) -> Result<()> {
    let functions: &[(&str, Callback)] = &[
        ("sendPublish", send_publish),
        ("sendPublishAgain", send_publish_again),
        ("sendAcknowledgement", send_acknowledgement),
        ("receive", receive),
        ("takeOutput", take_output),
        #[cfg(native_socket)]
        ("flushSocket", flush_socket),
    ];
    for &(name, callback) in functions {
        let mut function = ptr::null_mut();
        // SAFETY: env and exports belong to the module's initialisation call; the name is
        // passed with its length.
        unsafe {
            napi_ok(sys::napi_create_function(env, name.as_ptr().cast(), name.len() as isize, Some(callback), ptr::null_mut(), &mut function))?;
            let key = super::js_string(env, name.as_bytes())?;
            napi_ok(sys::napi_set_property(env, exports, key, function))?;
        }
    }
    Ok(())
}
