//! The Node-API side of the native socket (see `driver.rs`): for amqp:// the connection
//! owns a non-blocking TCP socket, polled on Node's own loop. The poll callback works through
//! the driver's steps: each read's events go to JS in one call (`napi_make_callback`, which
//! also runs the microtasks that call queues), then whatever JS queued in reply is written,
//! before the callback returns to the loop. JS learns of the socket's life through one
//! callback, `onEvent(kind, a, b, c)`. Built only where `build.rs` sets `native_socket`.

use super::errors::{napi_ok, thrown, JsError};
use super::handover::{hand_over_received, js_string};
use super::native_connection::NativeConnection;
use crate::boundary::SocketEvent;
use crate::driver::{errno_of, Driver, Step};
use crate::uv;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::ffi::{c_int, c_void};
use std::ptr;

/// The socket's driver and what Node-API needs to call JS about it.
pub(super) struct SocketState {
    driver: Driver,
    env: sys::napi_env,
    /// The connection's JS object, kept alive while the socket is open; each poll callback
    /// holds it in a local handle too, so it outlives the callback even if JS closes the
    /// socket and drops the object meanwhile.
    connection: sys::napi_ref,
    callback: sys::napi_ref,
    async_context: sys::napi_async_context,
    /// The last tape handed to JS, written again by a later read once JS is done with it
    /// (null before the first read).
    spare_tape: sys::napi_ref,
}

impl SocketState {
    fn spare_tape(&self, env: sys::napi_env) -> Option<sys::napi_value> {
        if self.spare_tape.is_null() {
            return None;
        }
        let mut tape = ptr::null_mut();
        // SAFETY: the reference was made in this env and is live until close_socket.
        unsafe { sys::napi_get_reference_value(env, self.spare_tape, &mut tape) };
        Some(tape)
    }

    /// Makes `tape` (just handed over, new) the spare for later reads. Should that fail, the
    /// old spare stays: it only costs a later read a new tape, and this read goes to JS.
    fn keep_tape(&mut self, env: sys::napi_env, tape: sys::napi_value) {
        let mut kept = ptr::null_mut();
        // SAFETY: env is live on this thread; the old reference (if any) is ours to delete.
        unsafe {
            if sys::napi_create_reference(env, tape, 1, &mut kept) != sys::Status::napi_ok {
                return;
            }
            if !self.spare_tape.is_null() {
                sys::napi_delete_reference(env, self.spare_tape);
            }
        }
        self.spare_tape = kept;
    }
}

/// A socket's reads and writes, and the bytes they moved.
#[derive(Clone, Copy, Default)]
pub(super) struct SocketCounts {
    writes: u64,
    bytes_written: u64,
    reads: u64,
    bytes_read: u64,
}

impl SocketCounts {
    fn of(tcp: &crate::transport::TcpSocket) -> Self {
        SocketCounts { writes: tcp.writes, bytes_written: tcp.bytes_written, reads: tcp.reads, bytes_read: tcp.bytes_read }
    }
}

/// Arguments of an event callback, made inside the handle scope of the call.
enum EventArgs {
    None,
    Data,
    Error { errno: i32, syscall: &'static str },
}

/// A handle scope, closed when dropped (a panic included): values made in a poll callback
/// live until its end.
struct HandleScope {
    env: sys::napi_env,
    scope: sys::napi_handle_scope,
}

impl HandleScope {
    fn open(env: sys::napi_env) -> Self {
        let mut scope = ptr::null_mut();
        // SAFETY: env is live on this thread (poll callbacks run on the env's loop).
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        HandleScope { env, scope }
    }
}

impl Drop for HandleScope {
    fn drop(&mut self) {
        // SAFETY: closes the scope `open` opened, on the same thread, innermost first.
        unsafe { sys::napi_close_handle_scope(self.env, self.scope) };
    }
}

impl NativeConnection {
    fn socket_mut(&mut self) -> Result<&mut SocketState> {
        self.socket.as_deref_mut().ok_or_else(|| Error::new(Status::GenericFailure, "The socket is closed"))
    }

    /// The open socket's counts, else what the last one had counted when it closed.
    fn socket_counts(&self) -> SocketCounts {
        self.socket.as_deref().map_or(self.closed_socket_counts, |s| SocketCounts::of(&s.driver.tcp))
    }

    /// Writes what is queued: 1 all written, 0 the rest waits (a drain event follows), or a
    /// negative errno.
    pub(super) fn flush_socket(&mut self) -> i32 {
        let NativeConnection { core, socket, .. } = self;
        socket.as_deref_mut().map_or(-libc::EPIPE, |state| state.driver.flush(core))
    }

    /// Stops polling and closes the socket; JS hears no more from it.
    pub(super) fn close_socket(&mut self) {
        let Some(state) = self.socket.take() else { return };
        self.closed_socket_counts = SocketCounts::of(&state.driver.tcp);
        // SAFETY: the hook was added with exactly this function and argument in connect_socket.
        unsafe { sys::napi_remove_env_cleanup_hook(state.env, Some(close_at_env_exit), (self as *mut NativeConnection).cast()) };
        state.driver.close();
        // SAFETY: the references and async context were made in this env for this socket.
        unsafe {
            sys::napi_delete_reference(state.env, state.connection);
            sys::napi_delete_reference(state.env, state.callback);
            if !state.spare_tape.is_null() {
                sys::napi_delete_reference(state.env, state.spare_tape);
            }
            sys::napi_async_destroy(state.env, state.async_context);
        }
    }

    /// Calls JS's `onEvent(kind, ...)` from the poll callback, in a handle scope of its own.
    /// A throw inside it becomes an uncaught exception, as for any I/O callback.
    ///
    /// # Safety
    /// Only from the poll callback, on the JS thread, with `this` the connection it polls for.
    unsafe fn emit(this: *mut NativeConnection, kind: SocketEvent, args: EventArgs) {
        // SAFETY: the caller guarantees `this` is live; borrows end before JS runs.
        let (env, callback, context) = match unsafe { (*this).socket.as_deref() } {
            Some(s) => (s.env, s.callback, s.async_context),
            None => return,
        };
        let _scope = HandleScope::open(env);
        // SAFETY: as above; `this` is live and not otherwise borrowed while JS is not running.
        let Ok(values) = (unsafe { event_values(env, &mut *this, kind, args) }) else { return };
        let mut func = ptr::null_mut();
        let mut recv = ptr::null_mut();
        let mut result = ptr::null_mut();
        // SAFETY: the callback reference is live until close_socket deletes it.
        unsafe {
            sys::napi_get_reference_value(env, callback, &mut func);
            // MakeCallback needs an object as receiver: the global one, as for timers.
            sys::napi_get_global(env, &mut recv);
            let status = sys::napi_make_callback(env, context, recv, func, values.len(), values.as_ptr(), &mut result);
            if status == sys::Status::napi_pending_exception {
                let mut exception = ptr::null_mut();
                sys::napi_get_and_clear_last_exception(env, &mut exception);
                sys::napi_fatal_exception(env, exception);
            }
        }
    }
}

fn event_values(env: sys::napi_env, this: &mut NativeConnection, kind: SocketEvent, args: EventArgs) -> std::result::Result<Vec<sys::napi_value>, JsError> {
    let mut kind_value = ptr::null_mut();
    // SAFETY: env is live on this thread.
    napi_ok(unsafe { sys::napi_create_int32(env, kind as i32, &mut kind_value) })?;
    let mut values = vec![kind_value];
    match args {
        EventArgs::None => {}
        EventArgs::Data => {
            let NativeConnection { core, serializer, socket, .. } = this;
            let Some(state) = socket.as_deref_mut() else { return Err(JsError::plain("The socket is closed")) };
            let handed = hand_over_received(env, core, serializer, state.spare_tape(env))?;
            if !handed.reused {
                state.keep_tape(env, handed.tape);
            }
            values.extend([handed.tape, handed.objects, handed.slab]);
        }
        EventArgs::Error { errno, syscall } => {
            let mut errno_value = ptr::null_mut();
            // SAFETY: env is live on this thread.
            napi_ok(unsafe { sys::napi_create_int32(env, errno, &mut errno_value) })?;
            values.push(errno_value);
            values.push(js_string(env, syscall.as_bytes())?);
        }
    }
    Ok(values)
}

/// Node-API cleanup hook: the env is going away with the socket still open.
unsafe extern "C" fn close_at_env_exit(connection: *mut c_void) {
    // SAFETY: registered with a live connection, and removed whenever the socket closes first.
    unsafe { (*connection.cast::<NativeConnection>()).close_socket() };
}

/// The poll callback: connect completion, readability, writability.
unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    // SAFETY: handle->data is the connection that started this poll, kept alive by the
    // socket's strong reference to its JS object while the poll handle is open.
    let this = unsafe { uv::data(handle) }.cast::<NativeConnection>();
    let Some((env, connection)) = (unsafe { (*this).socket.as_deref() }).map(|s| (s.env, s.connection)) else { return };
    // Hold the connection's JS object in a local handle for the whole callback: JS run by
    // the steps below may close the socket (deleting the socket's reference to it) and drop
    // its last reference, and the connection must outlive this callback all the same.
    let _scope = HandleScope::open(env);
    let mut alive = ptr::null_mut();
    // SAFETY: the reference is live while the socket is open, as it is here.
    unsafe { sys::napi_get_reference_value(env, connection, &mut alive) };
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { run_steps(this, status, events) }));
    if outcome.is_err() {
        // A bug on our side: never unwind into libuv. Report it as a socket error.
        unsafe {
            NativeConnection::emit(this, SocketEvent::Error, EventArgs::Error { errno: libc::EIO, syscall: "poll" });
            (*this).close_socket();
        }
    }
}

/// Works through the steps of one wake-up, telling JS what each says.
///
/// # Safety
/// As for `on_poll`: `this` is the live connection the poll belongs to.
unsafe fn run_steps(this: *mut NativeConnection, status: c_int, events: c_int) {
    let mut wake = Driver::wake(status, events);
    loop {
        // SAFETY: a short borrow of `*this`, ended before any JS runs; JS may have closed
        // the socket since the last step, and then there is nothing more to do.
        let step = {
            let NativeConnection { core, socket, .. } = unsafe { &mut *this };
            let Some(state) = socket.as_deref_mut() else { return };
            wake.next(&mut state.driver, core)
        };
        // SAFETY (each arm): `this` is live (see `on_poll`), and no borrow of it is held.
        match step {
            None => return,
            Some(Step::Emit(SocketEvent::Data)) => unsafe { NativeConnection::emit(this, SocketEvent::Data, EventArgs::Data) },
            Some(Step::Emit(event)) => unsafe { NativeConnection::emit(this, event, EventArgs::None) },
            Some(Step::Fail { errno, syscall }) => unsafe {
                NativeConnection::emit(this, SocketEvent::Error, EventArgs::Error { errno, syscall });
                (*this).close_socket();
            },
            Some(Step::Close) => unsafe {
                // Everything is written: tell JS it is over (its last event), then close.
                NativeConnection::emit(this, SocketEvent::Close, EventArgs::None);
                (*this).close_socket();
            },
        }
    }
}

/// Marks the Externals of [`socket_async_context`].
const ASYNC_CONTEXT_TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x616d_7170_6c69_6272, upper: 0x7273_2d61_7379_0001 };

/// What a [`socket_async_context`] External holds: the context, until `connect_socket` takes it.
struct PendingContext {
    context: std::cell::Cell<sys::napi_async_context>,
}

unsafe extern "C" fn drop_pending_context(env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Box<PendingContext> leaked in `socket_async_context`, finalised once.
    let pending = unsafe { Box::from_raw(data.cast::<PendingContext>()) };
    let context = pending.context.get();
    if !context.is_null() {
        // SAFETY: made in this env and never taken; async_hooks' destroy hooks run later.
        unsafe { sys::napi_async_destroy(env, context) };
    }
}

/// `socketAsyncContext()`: the async context of a native socket's events, for
/// `connectSocket`. Made apart from it because making one runs async_hooks' init hooks, the
/// user's JS, which may call into the connection: `connectSocket` has it borrowed throughout
/// (see `mod.rs`).
#[napi(catch_unwind)]
pub fn socket_async_context(env: Env) -> Result<Unknown<'static>> {
    let raw_env = env.raw();
    let made = js_string(raw_env, b"amqplib-rs:socket").and_then(|name| {
        let mut context = ptr::null_mut();
        // SAFETY: env is the live env of this call; nothing is borrowed while the hooks run.
        napi_ok(unsafe { sys::napi_async_init(raw_env, ptr::null_mut(), name, &mut context) })?;
        let pending = Box::into_raw(Box::new(PendingContext { context: std::cell::Cell::new(context) }));
        let mut external = ptr::null_mut();
        // SAFETY: Node owns the Box from here (`drop_pending_context`), unless it refuses the
        // External, and then the Box and the context are given back here.
        unsafe {
            if sys::napi_create_external(raw_env, pending.cast(), Some(drop_pending_context), ptr::null_mut(), &mut external) != sys::Status::napi_ok {
                drop_pending_context(raw_env, pending.cast(), ptr::null_mut());
                return Err(JsError::plain("Could not make a socket's async context"));
            }
            napi_ok(sys::napi_type_tag_object(raw_env, external, &ASYNC_CONTEXT_TAG))?;
        }
        Ok(external)
    });
    // SAFETY: the External was created in this call's env.
    made.map(|external| unsafe { Unknown::from_raw_unchecked(raw_env, external) }).map_err(|e| thrown(raw_env, e))
}

/// Takes the context out of a [`socket_async_context`] External, once.
fn take_async_context(env: sys::napi_env, external: sys::napi_value) -> std::result::Result<sys::napi_async_context, JsError> {
    let mut tagged = false;
    // SAFETY: env and value belong to the current call; neither call runs JS.
    napi_ok(unsafe { sys::napi_check_object_type_tag(env, external, &ASYNC_CONTEXT_TAG, &mut tagged) })?;
    if !tagged {
        return Err(JsError::plain("Not a socket async context"));
    }
    let mut data = ptr::null_mut();
    napi_ok(unsafe { sys::napi_get_value_external(env, external, &mut data) })?;
    // SAFETY: tagged Externals hold a PendingContext (see `socket_async_context`), alive while
    // the External is, which this call's argument keeps.
    let context = unsafe { &*data.cast::<PendingContext>() }.context.replace(ptr::null_mut());
    if context.is_null() {
        return Err(JsError::plain("The socket async context was already used"));
    }
    Ok(context)
}

#[napi]
impl NativeConnection {
    /// Starts connecting to `address` (an IP literal) and `port`; events go to `on_event`, in
    /// `context` (from `socketAsyncContext()`, which this takes). Returns 0, or the errno of a
    /// failure known at once.
    #[napi(catch_unwind)]
    pub fn connect_socket(&mut self, env: Env, this: This, address: String, port: u32, on_event: Function<'_>, context: Unknown<'_>) -> Result<i32> {
        let raw_env = env.raw();
        let thrown = |e| thrown(raw_env, e);
        let context = take_async_context(raw_env, context.raw()).map_err(thrown)?;
        // From here every way out but success destroys the context, which is ours now.
        let destroy = |context| {
            // SAFETY: made in this env, and not kept anywhere.
            unsafe { sys::napi_async_destroy(raw_env, context) };
        };
        if self.socket.is_some() {
            destroy(context);
            return Err(Error::new(Status::GenericFailure, "Already connected"));
        }
        let Ok(ip) = address.parse::<std::net::IpAddr>() else {
            destroy(context);
            return Err(Error::new(Status::InvalidArg, format!("Not an IP address: {address}")));
        };
        let mut event_loop = ptr::null_mut();
        // SAFETY: env is the live env of this call.
        if let Err(e) = napi_ok(unsafe { sys::napi_get_uv_event_loop(raw_env, &mut event_loop) }) {
            destroy(context);
            return Err(thrown(e));
        }
        let data = (self as *mut NativeConnection).cast();
        // SAFETY: the loop is Node's, on this thread; `self` lives in napi-rs's box for as
        // long as its JS object, which the `connection` reference below keeps alive until
        // close_socket closes the poll handle.
        let driver = match unsafe { Driver::connect(event_loop.cast(), ip, port as u16, on_poll, data) } {
            Ok(driver) => driver,
            Err(e) => {
                destroy(context);
                return Ok(errno_of(&e));
            }
        };
        let mut connection = ptr::null_mut();
        let mut callback = ptr::null_mut();
        // SAFETY: env is the live env of this call; neither call runs JS.
        let made = unsafe {
            napi_ok(sys::napi_create_reference(raw_env, this.object.raw(), 1, &mut connection))
                .and_then(|()| napi_ok(sys::napi_create_reference(raw_env, on_event.raw(), 1, &mut callback)))
        };
        if let Err(e) = made {
            driver.close();
            destroy(context);
            // SAFETY: only what was made is deleted (null otherwise).
            unsafe {
                if !connection.is_null() {
                    sys::napi_delete_reference(raw_env, connection);
                }
                if !callback.is_null() {
                    sys::napi_delete_reference(raw_env, callback);
                }
            }
            return Err(thrown(e));
        }
        self.socket = Some(Box::new(SocketState { driver, env: raw_env, connection, callback, async_context: context, spare_tape: ptr::null_mut() }));
        // A worker (or the process) may end with the connection open: close the socket then,
        // so the poll handle neither leaks nor keeps the worker's loop alive.
        // SAFETY: `self` stays valid until close_socket, which removes the hook first.
        unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close_at_env_exit), data) };
        Ok(0)
    }

    /// TCP_NODELAY; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_no_delay(&mut self, on: bool) -> Result<i32> {
        Ok(self.socket_mut()?.driver.tcp.set_no_delay(on).err().map_or(0, |e| errno_of(&e)))
    }

    /// SO_KEEPALIVE with the idle time in seconds; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_keep_alive(&mut self, on: bool, idle_secs: u32) -> Result<i32> {
        Ok(self.socket_mut()?.driver.tcp.set_keep_alive(on, idle_secs).err().map_or(0, |e| errno_of(&e)))
    }

    /// Closes after what is queued has been written. True if closed at once; otherwise a
    /// close event follows.
    #[napi(catch_unwind)]
    pub fn end_socket(&mut self) -> bool {
        let NativeConnection { core, socket, .. } = self;
        let Some(state) = socket.as_deref_mut() else { return true };
        if !state.driver.end(core) {
            return false;
        }
        self.close_socket();
        true
    }

    /// Closes now, dropping anything not yet written.
    #[napi(catch_unwind)]
    pub fn destroy_socket(&mut self) {
        self.close_socket();
    }

    /// Socket writes made, for the benchmarks (and the tests of write coalescing).
    #[napi(getter, catch_unwind)]
    pub fn socket_writes(&self) -> f64 {
        self.socket_counts().writes as f64
    }

    /// Received bytes copied in memory so far (see `Connection::bytes_copied`).
    #[napi(getter, catch_unwind)]
    pub fn bytes_copied(&self) -> f64 {
        self.core.bytes_copied as f64
    }

    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_written(&self) -> f64 {
        self.socket_counts().bytes_written as f64
    }

    /// Reads from the socket so far.
    #[napi(getter, catch_unwind)]
    pub fn socket_reads(&self) -> f64 {
        self.socket_counts().reads as f64
    }

    /// Bytes read from the socket so far (net.Socket's `bytesRead`).
    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_read(&self) -> f64 {
        self.socket_counts().bytes_read as f64
    }
}
