//! The Node-API side of the native socket (see `driver.rs`): for amqp:// the connection
//! owns a non-blocking TCP socket, polled on Node's own loop. The poll callback works through
//! the driver's steps: each read's events go to JS in one call (`napi_make_callback`, which
//! also runs the microtasks that call queues), then whatever JS queued in reply is written,
//! before the callback returns to the loop. JS learns of the socket's life through one
//! callback, `onEvent(kind, a, b, c)`. Built only where `build.rs` sets `native_socket`.

use super::env::{Finalize, HandleScope, Js, JsEnv, Reference, Tagged};
use super::errors::{napi_ok, thrown, JsError};
use super::handover::hand_over_received;
use super::native_connection::NativeConnection;
use crate::boundary::SocketEvent;
use crate::driver::{errno_of, Driver, Step};
use crate::tls::{TlsSession, TlsSettings};
use crate::uv;
use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;
use std::ffi::{c_int, c_void};
use std::marker::PhantomData;
use std::ptr;

/// The socket's driver and what Node-API needs to call JS about it.
pub(super) struct SocketState {
    driver: Driver,
    env: sys::napi_env,
    /// The connection's JS object, kept alive while the socket is open; each poll callback
    /// holds it in a local handle too, so it outlives the callback even if JS closes the
    /// socket and drops the object meanwhile.
    connection: Reference,
    callback: Reference,
    async_context: AsyncContext,
    /// The last tape handed to JS, written again by a later read once JS is done with it
    /// (none before the first read).
    spare_tape: Option<Reference>,
    /// The connection as the poll handle and the env cleanup hook were given it (see
    /// `NativeConnection::kept`).
    kept: *mut c_void,
}

impl SocketState {
    fn spare_tape<'call>(&self, env: JsEnv<'call>) -> Option<Js<'call>> {
        self.spare_tape.as_ref().and_then(|tape| tape.get(env).ok())
    }

    /// Makes `tape` (just handed over, new) the spare for later reads. Should that fail, the
    /// old spare stays: it only costs a later read a new tape, and this read goes to JS.
    fn keep_tape(&mut self, env: JsEnv<'_>, tape: Js<'_>) {
        if let Ok(kept) = env.reference(tape) {
            if let Some(old) = self.spare_tape.replace(kept) {
                old.delete(env);
            }
        }
    }
}

/// amqps:// on the native socket: what lib/native_socket.js makes of the connect's TLS
/// options (see `TlsSettings`).
#[napi(object)]
pub struct NativeTls {
    pub servername: String,
    /// PEM texts (several certificates each) or DER certificates.
    pub roots: Vec<Buffer>,
    pub reject_unauthorized: bool,
    /// PEM, both or neither.
    pub cert: Option<Buffer>,
    pub key: Option<Buffer>,
    pub tls12: bool,
    pub tls13: bool,
}

impl NativeTls {
    fn session(&self) -> std::result::Result<TlsSession, String> {
        let pem = |b: &Buffer| b.to_vec();
        TlsSession::new(&TlsSettings {
            server_name: self.servername.clone(),
            roots: self.roots.iter().map(pem).collect(),
            reject_unauthorized: self.reject_unauthorized,
            client_auth: self.cert.as_ref().zip(self.key.as_ref()).map(|(cert, key)| (pem(cert), pem(key))),
            tls12: self.tls12,
            tls13: self.tls13,
        })
    }
}

/// An async context of ours (`napi_async_init`), destroyed once: it is not Copy, and
/// `destroy` takes it.
pub(super) struct AsyncContext(sys::napi_async_context);

impl AsyncContext {
    fn destroy(self, env: JsEnv<'_>) {
        // SAFETY: made in this env (the only one a socket uses), and this is its last use;
        // async_hooks' destroy hooks run later, not now.
        unsafe { sys::napi_async_destroy(env.raw(), self.0) };
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
    pub(super) fn close_socket(&mut self, env: JsEnv<'_>) {
        let Some(state) = self.socket.take() else { return };
        self.closed_socket_counts = SocketCounts::of(&state.driver.tcp);
        // SAFETY: the hook was added with exactly this function and argument in connect_socket.
        unsafe { sys::napi_remove_env_cleanup_hook(state.env, Some(close_at_env_exit), state.kept) };
        state.driver.close();
        state.connection.delete(env);
        state.callback.delete(env);
        if let Some(tape) = state.spare_tape {
            tape.delete(env);
        }
        state.async_context.destroy(env);
    }
}

/// The connection a poll callback is for, live for the whole callback (see `on_poll`).
/// Borrowed only through [`with`](Self::with), which takes `&mut self`: so no borrow is live
/// while [`emit`] (which takes `&mut Polled` too) runs JS.
struct Polled<'callback> {
    connection: *mut NativeConnection,
    callback: PhantomData<&'callback mut NativeConnection>,
}

impl Polled<'_> {
    /// # Safety
    /// `connection` is the connection the running poll callback is for, live until the
    /// callback returns, and the callback is not running inside a call into the addon (it
    /// runs from the loop).
    unsafe fn new(connection: *mut NativeConnection) -> Self {
        Polled { connection, callback: PhantomData }
    }

    /// Runs `f` (which runs no JS: the one call here that does is `emit`'s, which needs this
    /// `Polled` borrowed) with the connection.
    fn with<R>(&mut self, f: impl FnOnce(&mut NativeConnection) -> R) -> R {
        // SAFETY: live for the callback (`new`); no other reference to it is live: the
        // callback runs from the loop, not inside a call that could hold one, and none is
        // held while JS runs, since `with` and `emit` exclude each other.
        f(unsafe { &mut *self.connection })
    }
}

/// Calls JS's `onEvent(kind, ...)` from the poll callback, in a handle scope of its own.
/// A throw inside it becomes an uncaught exception, as for any I/O callback.
fn emit(polled: &mut Polled<'_>, env: JsEnv<'_>, kind: SocketEvent, args: EventArgs) {
    // SAFETY: on the env's thread, inside the poll callback's scope, and closed before it
    // (a local of this function).
    let scope = unsafe { HandleScope::open(env.raw()) };
    let env = scope.env();
    let Some(Ok(func)) = polled.with(|c| c.socket.as_deref().map(|s| s.callback.get(env))) else { return };
    let Some(context) = polled.with(|c| c.socket.as_deref().map(|s| s.async_context.0)) else { return };
    let values = match polled.with(|c| event_values(env, c, kind, args)) {
        Ok(values) => values,
        // What the event carried is lost (a read already taken from the socket, say): the
        // connection cannot go on, and JS must hear that rather than nothing.
        Err(_) => match polled.with(|c| event_values(env, c, SocketEvent::Error, EventArgs::Error { errno: libc::EIO, syscall: "read" })) {
            Ok(values) => values,
            Err(_) => return,
        },
    };
    // MakeCallback needs an object as receiver: the global one, as for timers.
    let Ok(recv) = env.global() else { return };
    let mut result = ptr::null_mut();
    // SAFETY: the env, the function and the values are live in this scope; the context is the
    // socket's, live until close_socket. JS runs now, with no Rust borrow of the connection
    // (`polled` is borrowed for this call, so no `with` is running).
    let status = unsafe { sys::napi_make_callback(env.raw(), context, recv.raw(), func.raw(), values.len(), values.as_ptr(), &mut result) };
    if status == sys::Status::napi_pending_exception {
        let mut exception = ptr::null_mut();
        // SAFETY: the env is live; the pending exception is taken, and reported as uncaught.
        unsafe {
            sys::napi_get_and_clear_last_exception(env.raw(), &mut exception);
            sys::napi_fatal_exception(env.raw(), exception);
        }
    }
}

fn event_values(env: JsEnv<'_>, this: &mut NativeConnection, kind: SocketEvent, args: EventArgs) -> std::result::Result<Vec<sys::napi_value>, JsError> {
    let mut values = vec![env.int32(kind as i32)?.raw()];
    match args {
        EventArgs::None => {}
        EventArgs::Data => {
            let NativeConnection { core, serializer, socket, .. } = this;
            let Some(state) = socket.as_deref_mut() else { return Err(JsError::plain("The socket is closed")) };
            let handed = hand_over_received(env, core, serializer, state.spare_tape(env))?;
            if !handed.reused {
                state.keep_tape(env, handed.tape);
            }
            values.extend([handed.tape.raw(), handed.objects.raw(), handed.slab.raw()]);
        }
        EventArgs::Error { errno, syscall } => {
            values.push(env.int32(errno)?.raw());
            values.push(env.string(syscall.as_bytes())?.raw());
        }
    }
    Ok(values)
}

/// Node-API cleanup hook: the env is going away with the socket still open.
unsafe extern "C" fn close_at_env_exit(connection: *mut c_void) {
    // SAFETY: registered with a live connection, and removed whenever the socket closes
    // first; no JS runs in a cleanup hook.
    let connection = unsafe { &mut *connection.cast::<NativeConnection>() };
    let Some(env) = connection.socket.as_deref().map(|s| s.env) else { return };
    // SAFETY: the socket's env, live while its cleanup hooks run.
    connection.close_socket(unsafe { JsEnv::from_raw(env) });
}

/// The poll callback: connect completion, readability, writability.
unsafe extern "C" fn on_poll(handle: *mut c_void, status: c_int, events: c_int) {
    // SAFETY: handle->data is the connection that started this poll, kept alive by the
    // socket's strong reference to its JS object while the poll handle is open, and held
    // below in a local handle until the callback returns. libuv calls from its loop.
    let mut polled = unsafe { Polled::new(uv::data(handle).cast()) };
    let Some(env) = polled.with(|c| c.socket.as_deref().map(|s| s.env)) else { return };
    // SAFETY: the socket's env, on its loop's thread, outside of any call; the scope is a
    // local, closed as the callback returns.
    let scope = unsafe { HandleScope::open(env) };
    let env = scope.env();
    // Hold the connection's JS object in a local handle for the whole callback: JS run by
    // the steps below may close the socket (deleting the socket's reference to it) and drop
    // its last reference, and the connection must outlive this callback all the same.
    let _alive = polled.with(|c| c.socket.as_deref().map(|s| s.connection.get(env)));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_steps(&mut polled, env, status, events)));
    if outcome.is_err() {
        // A bug on our side: never unwind into libuv. Report it as a socket error.
        emit(&mut polled, env, SocketEvent::Error, EventArgs::Error { errno: libc::EIO, syscall: "poll" });
        polled.with(|c| c.close_socket(env));
    }
}

/// Works through the steps of one wake-up, telling JS what each says.
fn run_steps(polled: &mut Polled<'_>, env: JsEnv<'_>, status: c_int, events: c_int) {
    let mut wake = Driver::wake(status, events);
    loop {
        // JS may have closed the socket since the last step: then there is nothing more to do.
        let step = polled.with(|c| {
            let NativeConnection { core, socket, .. } = c;
            socket.as_deref_mut().and_then(|state| wake.next(&mut state.driver, core))
        });
        match step {
            None => return,
            Some(Step::Emit(SocketEvent::Data)) => emit(polled, env, SocketEvent::Data, EventArgs::Data),
            Some(Step::Emit(event)) => emit(polled, env, event, EventArgs::None),
            Some(Step::Fail { errno, syscall }) => {
                emit(polled, env, SocketEvent::Error, EventArgs::Error { errno, syscall });
                polled.with(|c| c.close_socket(env));
            }
            Some(Step::Close) => {
                // Everything is written: tell JS it is over (its last event), then close.
                emit(polled, env, SocketEvent::Close, EventArgs::None);
                polled.with(|c| c.close_socket(env));
            }
        }
    }
}

/// What a [`socket_async_context`] External holds: the context, until `connect_socket` takes it.
struct PendingContext {
    context: std::cell::Cell<Option<AsyncContext>>,
}

impl Finalize for PendingContext {
    fn finalize(self, env: JsEnv<'_>) {
        if let Some(context) = self.context.into_inner() {
            context.destroy(env);
        }
    }
}

impl Tagged for PendingContext {
    const TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x616d_7170_6c69_6272, upper: 0x7273_2d61_7379_0001 };
}

/// `socketAsyncContext()`: the async context of a native socket's events, for
/// `connectSocket`. Made apart from it because making one runs async_hooks' init hooks, the
/// user's JS, which may call into the connection: `connectSocket` has it borrowed throughout
/// (see `mod.rs`).
#[napi(catch_unwind)]
pub fn socket_async_context(env: &Env) -> Result<Unknown<'_>> {
    let js_env = JsEnv::of(env);
    let made = js_env.string(b"amqplib-rs:socket").and_then(|name| {
        let mut context = ptr::null_mut();
        // SAFETY: env is the live env of this call; nothing is borrowed while the hooks run.
        napi_ok(unsafe { sys::napi_async_init(js_env.raw(), ptr::null_mut(), name.raw(), &mut context) })?;
        js_env.external(PendingContext { context: std::cell::Cell::new(Some(AsyncContext(context))) })
    });
    made.map(|external| external.into_unknown(env)).map_err(|e| thrown(env.raw(), e))
}

/// Takes the context out of a [`socket_async_context`] External, once.
fn take_async_context(env: JsEnv<'_>, external: Js<'_>) -> std::result::Result<AsyncContext, JsError> {
    let pending = env.external_data::<PendingContext>(external)?.ok_or_else(|| JsError::plain("Not a socket async context"))?;
    pending.context.take().ok_or_else(|| JsError::plain("The socket async context was already used"))
}

#[napi]
impl NativeConnection {
    /// Starts connecting to `address` (an IP literal) and `port`, with `tls` for amqps://;
    /// events go to `on_event`, in `context` (from `socketAsyncContext()`, which this takes).
    /// Returns 0, or the errno of a failure known at once; TLS settings that cannot work throw.
    // Node-API's arguments are the JS call's: the env, `this`, and the six JS passes.
    #[allow(clippy::too_many_arguments)]
    #[napi(catch_unwind)]
    pub fn connect_socket(&mut self, env: Env, this: This, address: String, port: u32, on_event: Function<'_>, context: Unknown<'_>, tls: Option<NativeTls>) -> Result<i32> {
        let js_env = JsEnv::of(&env);
        let thrown = |e| thrown(env.raw(), e);
        let context = take_async_context(js_env, Js::of(&context)).map_err(thrown)?;
        // From here every way out but success destroys the context, which is ours now.
        if self.socket.is_some() {
            context.destroy(js_env);
            return Err(Error::new(Status::GenericFailure, "Already connected"));
        }
        let Ok(ip) = address.parse::<std::net::IpAddr>() else {
            context.destroy(js_env);
            return Err(Error::new(Status::InvalidArg, format!("Not an IP address: {address}")));
        };
        let tls = match tls.as_ref().map(NativeTls::session).transpose() {
            Ok(tls) => tls,
            Err(why) => {
                context.destroy(js_env);
                return Err(Error::new(Status::InvalidArg, why));
            }
        };
        let event_loop = match env.get_uv_event_loop() {
            Ok(event_loop) => event_loop,
            Err(e) => {
                context.destroy(js_env);
                return Err(thrown(e.into()));
            }
        };
        let data = match self.kept(js_env, Js::of(&this.object)) {
            Ok(connection) => connection.cast(),
            Err(e) => {
                context.destroy(js_env);
                return Err(thrown(e));
            }
        };
        // SAFETY: the loop is Node's, on this thread; `data` is napi-rs's own allocation of
        // this connection (`kept`), live as long as its JS object, which the `connection`
        // reference below keeps alive until close_socket closes the poll handle.
        let driver = match unsafe { Driver::connect(event_loop.cast(), ip, port as u16, tls, on_poll, data) } {
            Ok(driver) => driver,
            Err(e) => {
                context.destroy(js_env);
                return Ok(errno_of(&e));
            }
        };
        let references = js_env.reference(Js::of(&this.object)).and_then(|connection| match js_env.reference(Js::of(&on_event)) {
            Ok(callback) => Ok((connection, callback)),
            Err(e) => {
                connection.delete(js_env);
                Err(e)
            }
        });
        let (connection, callback) = match references {
            Ok(references) => references,
            Err(e) => {
                driver.close();
                context.destroy(js_env);
                return Err(thrown(e));
            }
        };
        self.socket = Some(Box::new(SocketState { driver, env: env.raw(), connection, callback, async_context: context, spare_tape: None, kept: data }));
        // A worker (or the process) may end with the connection open: close the socket then,
        // so the poll handle neither leaks nor keeps the worker's loop alive.
        // SAFETY: `self` stays valid until close_socket, which removes the hook first.
        unsafe { sys::napi_add_env_cleanup_hook(env.raw(), Some(close_at_env_exit), data) };
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

    /// amqps://: the server's certificate (DER) once the handshake has brought it.
    #[napi(catch_unwind)]
    pub fn peer_certificate(&self) -> Option<Buffer> {
        let tls = self.socket.as_deref()?.driver.tls.as_ref()?;
        tls.peer_certificate().map(|der| Buffer::from(der.to_vec()))
    }

    /// amqps:// with `rejectUnauthorized: false`: why the server's chain did not verify, as
    /// [Node's code, its words]; null for a chain that verified.
    #[napi(catch_unwind)]
    pub fn chain_failure(&self) -> Option<Vec<String>> {
        let failure = self.socket.as_deref()?.driver.tls.as_ref()?.chain_failure()?;
        Some(vec![failure.code.to_string(), failure.message])
    }

    /// The words of the TLS failure being reported (an error event with errno 0).
    #[napi(catch_unwind)]
    pub fn tls_failure(&self) -> Option<String> {
        self.socket.as_deref()?.driver.tls_failure.clone()
    }

    /// Closes after what is queued has been written. True if closed at once; otherwise a
    /// close event follows.
    #[napi(catch_unwind)]
    pub fn end_socket(&mut self, env: Env) -> bool {
        let NativeConnection { core, socket, .. } = self;
        let Some(state) = socket.as_deref_mut() else { return true };
        if !state.driver.end(core) {
            return false;
        }
        self.close_socket(JsEnv::of(&env));
        true
    }

    /// Closes now, dropping anything not yet written.
    #[napi(catch_unwind)]
    pub fn destroy_socket(&mut self, env: Env) {
        self.close_socket(JsEnv::of(&env));
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
