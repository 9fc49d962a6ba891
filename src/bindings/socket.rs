//! The native socket: for amqp:// the session owns a non-blocking TCP socket, polled by a
//! libuv poll handle on Node's own loop. The poll callback reads straight into the session's
//! read buffer, hands the events of each read to JS in one call (`napi_make_callback`, which
//! also runs the microtasks that call queues), then writes whatever JS queued in reply,
//! before returning to the loop. JS learns of the socket's life through one callback,
//! `onEvent(kind, a, b)`. Built only where `build.rs` sets `native_socket`.

use super::{hand_over_received, js_string, napi_ok, JsSession};
use crate::transport::TcpSocket;
use crate::uv;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::ffi::{c_int, c_void};
use std::ptr;

const EVENT_CONNECT: i32 = 1;
const EVENT_DATA: i32 = 2;
const EVENT_DRAIN: i32 = 3;
const EVENT_END: i32 = 4;
const EVENT_ERROR: i32 = 5;
const EVENT_CLOSE: i32 = 6;

/// The most one wake-up reads before it returns to the event loop (and comes back on the
/// next turn, the socket being still readable), so a broker that keeps the socket full
/// cannot starve timers, I/O of other handles, or Node-API finalizers (which run in the
/// loop's check phase and free the contents JS has dropped). libuv's own stream reads
/// stop after 32 reads of 64 KB in the same way.
const READ_BUDGET: usize = 2 * 1024 * 1024;

pub(super) struct SocketState {
    tcp: TcpSocket,
    poll: *mut c_void,
    env: sys::napi_env,
    callback: sys::napi_ref,
    async_context: sys::napi_async_context,
    connecting: bool,
    /// Close once everything queued has been written (JS called `endSocket`).
    ending: bool,
    /// Output could not all be written; tell JS when it has been.
    drain_owed: bool,
}

fn errno_of(e: &std::io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// Arguments of an event callback, made inside the handle scope of the call.
enum EventArgs {
    None,
    Data,
    Error { errno: i32, syscall: &'static str },
}

impl JsSession {
    fn socket_mut(&mut self) -> Result<&mut SocketState> {
        self.socket.as_deref_mut().ok_or_else(|| Error::new(Status::GenericFailure, "The socket is closed"))
    }

    fn poll_for(&mut self, events: c_int) {
        if let (Some(state), Ok(uv)) = (self.socket.as_deref(), uv::uv()) {
            // SAFETY: the poll handle is live while `socket` is Some.
            unsafe { (uv.poll_start)(state.poll, events, on_poll) };
        }
    }

    /// Writes what is queued; 1 when all is written, 0 when the rest waits for writability,
    /// or a negative errno.
    fn write_out(&mut self) -> i32 {
        let JsSession { core, socket } = self;
        let Some(state) = socket.as_deref_mut() else { return -libc::EPIPE };
        match core.write_with(|bytes| state.tcp.write(bytes)) {
            Ok(true) => 1,
            Ok(false) => {
                state.drain_owed = true;
                self.poll_for(uv::READABLE | uv::WRITABLE);
                0
            }
            Err(e) => -errno_of(&e),
        }
    }

    /// Writes what is queued: 1 all written, 0 the rest waits (a drain event follows), or a
    /// negative errno.
    pub(super) fn flush_socket(&mut self) -> i32 {
        if self.socket.as_deref().is_some_and(|s| s.connecting || s.drain_owed) {
            return 0; // the poll callback writes when the socket is ready
        }
        self.write_out()
    }

    /// Stops polling and closes the socket; JS hears no more from it.
    pub(super) fn close_socket(&mut self) {
        let Some(state) = self.socket.take() else { return };
        // SAFETY: the hook was added with exactly this function and argument in connect_socket.
        unsafe { sys::napi_remove_env_cleanup_hook(state.env, Some(close_at_env_exit), (self as *mut JsSession).cast()) };
        if let Ok(uv) = uv::uv() {
            // SAFETY: the handle is live; libuv frees nothing until the close callback,
            // which only releases the handle's memory.
            unsafe {
                (uv.poll_stop)(state.poll);
                (uv.close)(state.poll, Some(uv::free_poll));
            }
        }
        // SAFETY: the reference and async context were made in this env for this socket.
        unsafe {
            sys::napi_delete_reference(state.env, state.callback);
            sys::napi_async_destroy(state.env, state.async_context);
        }
        // Dropping `state.tcp` closes the descriptor.
    }

    /// Calls JS's `onEvent(kind, ...)` from the poll callback, in a handle scope of its own.
    /// A throw inside it becomes an uncaught exception, as for any I/O callback.
    ///
    /// # Safety
    /// Only from the poll callback, on the JS thread, with `this` the session it polls for.
    unsafe fn emit(this: *mut JsSession, kind: i32, args: EventArgs) {
        // SAFETY: the caller guarantees `this` is live; borrows end before JS runs.
        let (env, callback, context) = match unsafe { (*this).socket.as_deref() } {
            Some(s) => (s.env, s.callback, s.async_context),
            None => return,
        };
        let mut scope = ptr::null_mut();
        // SAFETY: env is the env the socket was made in, on its own thread.
        unsafe { sys::napi_open_handle_scope(env, &mut scope) };
        // SAFETY: as above; `this` is live and not otherwise borrowed while JS is not running.
        let values = unsafe { event_values(env, &mut *this, kind, args) };
        if let Ok(values) = values {
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
        // SAFETY: closes the scope opened above.
        unsafe { sys::napi_close_handle_scope(env, scope) };
    }
}

fn event_values(env: sys::napi_env, this: &mut JsSession, kind: i32, args: EventArgs) -> Result<Vec<sys::napi_value>> {
    let mut kind_value = ptr::null_mut();
    // SAFETY: env is live on this thread.
    napi_ok(unsafe { sys::napi_create_int32(env, kind, &mut kind_value) })?;
    let mut values = vec![kind_value];
    match args {
        EventArgs::None => {}
        EventArgs::Data => values.push(hand_over_received(env, &mut this.core)?),
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
unsafe extern "C" fn close_at_env_exit(session: *mut c_void) {
    // SAFETY: registered with a live session, and removed whenever the socket closes first.
    unsafe { (*session.cast::<JsSession>()).close_socket() };
}

/// The poll callback: connect completion, readability, writability.
unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    // SAFETY: handle->data is the session that started this poll, kept alive by the strong
    // reference to its JS callback (which holds the JS socket, which holds the session).
    let this = unsafe { uv::data(handle) }.cast::<JsSession>();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { poll_ready(this, status, events) }));
    if outcome.is_err() {
        // A bug on our side: never unwind into libuv. Report it as a socket error.
        unsafe {
            JsSession::emit(this, EVENT_ERROR, EventArgs::Error { errno: libc::EIO, syscall: "poll" });
            (*this).close_socket();
        }
    }
}

/// # Safety
/// As for `on_poll`: `this` is the live session the poll belongs to.
unsafe fn poll_ready(this: *mut JsSession, status: c_int, events: c_int) {
    let fail = move |errno: i32, syscall: &'static str| unsafe {
        JsSession::emit(this, EVENT_ERROR, EventArgs::Error { errno, syscall });
        (*this).close_socket();
    };
    // SAFETY (throughout): short borrows of `*this`, none held while JS runs.
    let Some(state) = (unsafe { (*this).socket.as_deref_mut() }) else { return };
    if status < 0 {
        // libuv reports a socket error (POLLERR) as EBADF; the socket knows the real one.
        let errno = match state.tcp.take_error() {
            Ok(Some(e)) => errno_of(&e),
            _ => -status,
        };
        // A broken pipe is what a write finds, as Node names it ("write EPIPE").
        let syscall = match (state.connecting, errno) {
            (true, _) => "connect",
            (false, libc::EPIPE) => "write",
            _ => "read",
        };
        return fail(errno, syscall);
    }
    if state.connecting {
        if events & uv::WRITABLE == 0 {
            return;
        }
        state.connecting = false;
        match state.tcp.take_error() {
            Ok(None) => {
                unsafe { (*this).poll_for(uv::READABLE) };
                unsafe { JsSession::emit(this, EVENT_CONNECT, EventArgs::None) };
            }
            Ok(Some(e)) | Err(e) => fail(errno_of(&e), "connect"),
        }
        return;
    }
    if events & uv::READABLE != 0 {
        let mut budget = READ_BUDGET;
        loop {
            let session = unsafe { &mut *this };
            let JsSession { core, socket } = session;
            let Some(state) = socket.as_deref_mut() else { return };
            match core.receive_with(|buf| state.tcp.read(buf)) {
                Ok(read) if read.filled == 0 => {
                    unsafe { JsSession::emit(this, EVENT_END, EventArgs::None) };
                    return;
                }
                Ok(read) => {
                    if !core.tape.is_empty() {
                        unsafe { JsSession::emit(this, EVENT_DATA, EventArgs::Data) };
                        // A reply to what was read leaves before this read returns.
                        let written = unsafe { (*this).write_out() };
                        if written < 0 {
                            return fail(-written, "write");
                        }
                    }
                    if read.filled < read.offered {
                        break; // the socket had no more for now
                    }
                    budget = budget.saturating_sub(read.filled);
                    if budget == 0 {
                        break; // more may wait: the poll fires again on the next turn
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return fail(errno_of(&e), "read"),
            }
        }
    }
    if events & uv::WRITABLE != 0 {
        let written = unsafe { (*this).write_out() };
        if written < 0 {
            return fail(-written, "write");
        }
        if written == 1 {
            let Some(state) = (unsafe { (*this).socket.as_deref_mut() }) else { return };
            if state.ending {
                // Everything is written: tell JS it is over (its last event), then close.
                unsafe {
                    JsSession::emit(this, EVENT_CLOSE, EventArgs::None);
                    (*this).close_socket();
                }
                return;
            }
            let owed = std::mem::take(&mut state.drain_owed);
            unsafe { (*this).poll_for(uv::READABLE) };
            if owed {
                unsafe { JsSession::emit(this, EVENT_DRAIN, EventArgs::None) };
            }
        }
    }
}

#[napi]
impl JsSession {
    /// Starts connecting to `address` (an IP literal) and `port`; events go to `on_event`.
    /// Returns 0, or the errno of a failure known at once.
    #[napi(catch_unwind)]
    pub fn connect_socket(&mut self, env: Env, address: String, port: u32, on_event: Function<'_>) -> Result<i32> {
        if self.socket.is_some() {
            return Err(Error::new(Status::GenericFailure, "Already connected"));
        }
        let uv = uv::uv().map_err(|e| Error::new(Status::GenericFailure, e))?;
        let ip: std::net::IpAddr = address.parse().map_err(|_| Error::new(Status::InvalidArg, format!("Not an IP address: {address}")))?;
        let tcp = match TcpSocket::connect(ip, port as u16) {
            Ok(tcp) => tcp,
            Err(e) => return Ok(errno_of(&e)),
        };
        let raw_env = env.raw();
        let mut event_loop = ptr::null_mut();
        let mut callback = ptr::null_mut();
        let mut context = ptr::null_mut();
        let name = js_string(raw_env, b"amqplib-rs:socket")?;
        // SAFETY: env is the live env of this call; the handle is fresh memory for libuv.
        unsafe {
            napi_ok(sys::napi_get_uv_event_loop(raw_env, &mut event_loop))?;
            napi_ok(sys::napi_create_reference(raw_env, on_event.raw(), 1, &mut callback))?;
            napi_ok(sys::napi_async_init(raw_env, ptr::null_mut(), name, &mut context))?;
        }
        let poll = uv::alloc_poll(uv);
        // SAFETY: `poll` is zeroed memory of uv_poll_t's size; the fd is a live socket.
        let init = unsafe { (uv.poll_init)(event_loop.cast(), poll, tcp.fd()) };
        if init < 0 {
            // SAFETY: libuv did not take the handle; free it, and the references just made.
            unsafe {
                uv::free_poll(poll);
                sys::napi_delete_reference(raw_env, callback);
                sys::napi_async_destroy(raw_env, context);
            }
            return Ok(-init);
        }
        // SAFETY: the handle is initialised; `self` lives in napi-rs's box for as long as the
        // JS object, which the callback reference keeps alive until close_socket.
        unsafe { uv::set_data(poll, (self as *mut JsSession).cast()) };
        self.socket = Some(Box::new(SocketState {
            tcp,
            poll,
            env: raw_env,
            callback,
            async_context: context,
            connecting: true,
            ending: false,
            drain_owed: false,
        }));
        // A worker (or the process) may end with the connection open: close the socket then,
        // so the poll handle neither leaks nor keeps the worker's loop alive.
        // SAFETY: `self` stays valid until close_socket, which removes the hook first.
        unsafe { sys::napi_add_env_cleanup_hook(raw_env, Some(close_at_env_exit), (self as *mut JsSession).cast()) };
        self.poll_for(uv::WRITABLE);
        Ok(0)
    }

    /// TCP_NODELAY; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_no_delay(&mut self, on: bool) -> Result<i32> {
        Ok(self.socket_mut()?.tcp.set_no_delay(on).err().map_or(0, |e| errno_of(&e)))
    }

    /// SO_KEEPALIVE with the idle time in seconds; returns 0 or an errno.
    #[napi(catch_unwind)]
    pub fn set_keep_alive(&mut self, on: bool, idle_secs: u32) -> Result<i32> {
        Ok(self.socket_mut()?.tcp.set_keep_alive(on, idle_secs).err().map_or(0, |e| errno_of(&e)))
    }

    /// Closes after what is queued has been written. True if closed at once; otherwise a
    /// close event follows.
    #[napi(catch_unwind)]
    pub fn end_socket(&mut self) -> bool {
        if self.socket.is_none() {
            return true;
        }
        if self.write_out() == 0 {
            if let Some(state) = self.socket.as_deref_mut() {
                state.ending = true;
            }
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
        self.socket.as_deref().map_or(0.0, |s| s.tcp.writes as f64)
    }

    /// Received bytes copied in memory so far (see `Session::bytes_copied`).
    #[napi(getter, catch_unwind)]
    pub fn bytes_copied(&self) -> f64 {
        self.core.bytes_copied as f64
    }

    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_written(&self) -> f64 {
        self.socket.as_deref().map_or(0.0, |s| s.tcp.bytes_written as f64)
    }

    /// Bytes read from the socket so far (net.Socket's `bytesRead`).
    #[napi(getter, catch_unwind)]
    pub fn socket_bytes_read(&self) -> f64 {
        self.socket.as_deref().map_or(0.0, |s| s.tcp.bytes_read as f64)
    }
}

