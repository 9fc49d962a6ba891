//! The native socket's driver: a connection core's TCP socket and the libuv poll handle that
//! watches it on Node's loop, with no Node-API. The bindings create it, and when the poll
//! callback fires they pull from a [`Wake`], one [`Step`] at a time, what to tell JS. No
//! borrow of the driver or the core is held between steps, so the JS a step runs may use the
//! connection freely (send, flush, end or destroy the socket).

use crate::boundary::{SocketEvent, READ_BUDGET};
use crate::connection::Connection;
use crate::tls::TlsSession;
use crate::transport::TcpSocket;
use crate::uv;
use std::ffi::{c_int, c_void};
use std::io;

// One wake-up reads at most READ_BUDGET (core/src/boundary.rs) before it returns to the event loop
// (and comes back on the next turn, the socket being still readable), so a broker that keeps
// the socket full cannot starve timers, I/O of other handles, or Node-API finalizers (which
// run in the loop's check phase and free the contents JS has dropped). libuv's own stream
// reads on Unix stop after 32 reads of 64 KB in the same way.

pub struct Driver {
    pub tcp: TcpSocket,
    /// amqps://: the TLS session over `tcp`, whose plaintext the core reads and writes.
    pub tls: Option<TlsSession>,
    poll: *mut c_void,
    connecting: bool,
    /// Close once everything queued has been written (JS asked to end).
    ending: bool,
    /// Output could not all be written; tell JS when it has been.
    drain_owed: bool,
    /// A socket error found (by the poll, or by a write) but not yet told to JS: what the
    /// kernel still holds is read and handed over first, so that a server's last words (a
    /// connection.close sent just before it reset the socket) are heard before the error.
    failure: Option<Failure>,
    /// The words of a TLS failure reported (see `Failure`), for JS to read as it hears of it.
    pub tls_failure: Option<String>,
    /// The bindings' poll callback, given again whenever the events polled for change.
    on_poll: uv::PollCallback,
}

/// A socket error, as JS is told it (`read ECONNRESET`, `write EPIPE`); for a TLS failure,
/// errno 0 and Node's code for it in `syscall` (its words are the driver's `tls_failure`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Failure {
    pub errno: i32,
    pub syscall: &'static str,
}

/// What the bindings do next for a wake-up.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Tell JS (for `Data`, handing over what the core decoded).
    Emit(SocketEvent),
    /// Tell JS of the error, then close the socket.
    Fail { errno: i32, syscall: &'static str },
    /// Tell JS the socket is closed (everything asked for was written), then close it.
    Close,
}

impl Step {
    fn failed(failure: Failure) -> Step {
        Step::Fail { errno: failure.errno, syscall: failure.syscall }
    }
}

/// Where a wake-up is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Start,
    Reading,
    /// JS has had a read's events: write its replies, then read on.
    Replying,
    Writing,
    Done,
}

/// One poll callback's work, pulled step by step.
pub struct Wake {
    status: c_int,
    events: c_int,
    stage: Stage,
    budget: usize,
    /// The last read filled all it was offered: more may wait.
    more: bool,
}

/// The errno of an I/O error, as JS is told it (EIO when there is none).
pub fn errno_of(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

impl Driver {
    /// Starts connecting to `ip:port`, polled on `event_loop`, whose callbacks get `data`;
    /// with `tls`, the connect event waits for its handshake.
    ///
    /// # Safety
    /// `event_loop` is Node's live uv loop, on this thread; `data` stays valid until
    /// [`close`](Self::close).
    pub unsafe fn connect(event_loop: *mut c_void, ip: std::net::IpAddr, port: u16, tls: Option<TlsSession>, on_poll: uv::PollCallback, data: *mut c_void) -> io::Result<Driver> {
        let uv = uv::uv().map_err(io::Error::other)?;
        let tcp = TcpSocket::connect(ip, port)?;
        let poll = uv::alloc_poll(uv)?;
        // SAFETY: `poll` is zeroed memory of uv_poll_t's size; the fd is a live socket.
        let init = unsafe { (uv.poll_init)(event_loop, poll, tcp.fd()) };
        if init < 0 {
            // SAFETY: libuv did not take the handle.
            unsafe { uv::free_poll(poll) };
            return Err(io::Error::from_raw_os_error(-init));
        }
        // SAFETY: the handle is initialised; the caller keeps `data` valid until close.
        unsafe { uv::set_data(poll, data) };
        let driver = Driver { tcp, tls, poll, connecting: true, ending: false, drain_owed: false, failure: None, tls_failure: None, on_poll };
        driver.poll_for(uv::WRITABLE);
        Ok(driver)
    }

    fn poll_for(&self, events: c_int) {
        if let Ok(uv) = uv::uv() {
            // SAFETY: the poll handle is live until `close`.
            unsafe { (uv.poll_start)(self.poll, events, self.on_poll) };
        }
    }

    /// Stops polling and closes the socket.
    pub fn close(self) {
        if let Ok(uv) = uv::uv() {
            // SAFETY: the handle is live; libuv frees nothing until the close callback,
            // which only releases the handle's memory.
            unsafe {
                (uv.poll_stop)(self.poll);
                (uv.close)(self.poll, Some(uv::free_poll));
            }
        }
        // Dropping `self.tcp` closes the descriptor.
    }

    /// Writes what `core` has queued: true when all is written; false when the rest waits
    /// for writability (a drain follows).
    fn write_out(&mut self, core: &mut Connection) -> io::Result<bool> {
        let tcp = &mut self.tcp;
        let all = match &mut self.tls {
            None => core.write_with(|bytes| tcp.write(bytes))?,
            Some(tls) => match tls.flush(tcp) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => false,
                Err(e) => return Err(e),
                Ok(()) => core.write_with(|bytes| tls.write(tcp, bytes))? && !tls.wants_write(),
            },
        };
        if !all {
            self.drain_owed = true;
            self.poll_for(uv::READABLE | uv::WRITABLE);
        }
        Ok(all)
    }

    /// Writes what is queued, from JS: 1 all written, or 0 the rest waits (a drain follows).
    /// A write that fails is reported by the poll callback, once it has read what the socket
    /// still holds (see `failure`).
    pub fn flush(&mut self, core: &mut Connection) -> i32 {
        if self.connecting || self.drain_owed || self.failure.is_some() {
            return 0; // the poll callback writes when the socket is ready
        }
        match self.write_out(core) {
            Ok(all) => all as i32,
            Err(e) => {
                self.fail_after_reads(Failure { errno: errno_of(&e), syscall: "write" });
                0
            }
        }
    }

    /// The TCP connection is up: without TLS, connected; with it, the handshake starts (its
    /// first flight leaves now) and the connect event waits for its end.
    fn connected(&mut self) -> Option<Step> {
        let Some(tls) = &mut self.tls else {
            self.poll_for(uv::READABLE);
            return Some(Step::Emit(SocketEvent::Connect));
        };
        match tls.flush(&mut self.tcp) {
            Ok(()) => self.poll_for(uv::READABLE),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.poll_for(uv::READABLE | uv::WRITABLE),
            Err(e) => return Some(Step::Fail { errno: errno_of(&e), syscall: "write" }),
        }
        None
    }

    /// How a read's error is reported: a socket's errno, or a TLS failure's code and words.
    fn read_failure(&mut self, e: &io::Error) -> Failure {
        match crate::tls::tls_failure(e) {
            Some(tls) => {
                self.tls_failure = Some(tls.message.clone());
                Failure { errno: 0, syscall: tls.code }
            }
            None => Failure { errno: errno_of(e), syscall: "read" },
        }
    }

    /// Keeps the first error found, to be reported once nothing is left to read; the poll
    /// (which libuv stops on a socket error) is asked to come back for those reads.
    fn fail_after_reads(&mut self, failure: Failure) {
        self.failure.get_or_insert(failure);
        self.poll_for(uv::READABLE | uv::WRITABLE);
    }

    /// Asks to close once what is queued is written: true if that is now (the caller closes),
    /// else a `Close` step follows.
    pub fn end(&mut self, core: &mut Connection) -> bool {
        if let Some(tls) = &mut self.tls {
            tls.close();
        }
        match self.write_out(core) {
            Ok(false) => {
                self.ending = true;
                false
            }
            _ => true,
        }
    }

    /// A poll callback's `status` and `events`, to be worked through with [`Wake::next`].
    pub fn wake(status: c_int, events: c_int) -> Wake {
        Wake { status, events, stage: Stage::Start, budget: READ_BUDGET, more: false }
    }
}

impl Wake {
    /// The next step of this wake-up, or None when it is done.
    pub fn next(&mut self, driver: &mut Driver, core: &mut Connection) -> Option<Step> {
        loop {
            let step = match self.stage {
                Stage::Start => self.start(driver),
                Stage::Reading => self.read(driver, core),
                Stage::Replying => self.reply(driver, core),
                Stage::Writing => self.write(driver, core),
                Stage::Done => return None,
            };
            if step.is_some() {
                return step;
            }
        }
    }

    fn start(&mut self, driver: &mut Driver) -> Option<Step> {
        self.stage = Stage::Done;
        if self.status < 0 {
            // libuv reports a socket error (POLLERR) as EBADF; the socket knows the real one.
            let errno = match driver.tcp.take_error() {
                Ok(Some(e)) => errno_of(&e),
                _ => -self.status,
            };
            // A broken pipe is what a write finds, as Node names it ("write EPIPE").
            let syscall = match (driver.connecting, errno) {
                (true, _) => "connect",
                (false, libc::EPIPE) => "write",
                _ => "read",
            };
            if driver.connecting {
                return Some(Step::Fail { errno, syscall });
            }
            driver.fail_after_reads(Failure { errno, syscall });
        }
        if driver.failure.is_some() {
            self.stage = Stage::Reading;
            return None;
        }
        if driver.connecting {
            if self.events & uv::WRITABLE == 0 {
                return None;
            }
            driver.connecting = false;
            return match driver.tcp.take_error() {
                Ok(None) => driver.connected(),
                Ok(Some(e)) | Err(e) => Some(Step::Fail { errno: errno_of(&e), syscall: "connect" }),
            };
        }
        self.stage = if self.events & uv::READABLE != 0 { Stage::Reading } else { Stage::Writing };
        None
    }

    /// One read into the core: its events for JS, the end of the stream, or nothing more.
    fn read(&mut self, driver: &mut Driver, core: &mut Connection) -> Option<Step> {
        let Driver { tcp, tls, .. } = driver;
        let received = match tls {
            None => core.receive_with(|buf| tcp.read(buf)),
            Some(tls) => core.receive_with(|buf| tls.read(tcp, buf)),
        };
        match received {
            Ok(read) if read.filled == 0 => {
                self.stage = Stage::Done;
                Some(driver.failure.map_or(Step::Emit(SocketEvent::End), Step::failed))
            }
            Ok(read) => {
                self.more = read.filled == read.offered;
                self.budget = self.budget.saturating_sub(read.filled);
                if core.has_events() {
                    self.stage = Stage::Replying;
                    return Some(Step::Emit(SocketEvent::Data));
                }
                // Nothing for JS, but perhaps an answer of the core's own: it leaves now too.
                if core.has_output() {
                    self.stage = Stage::Replying;
                    return None;
                }
                self.after_read(driver);
                None
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if let Some(failure) = driver.failure {
                    self.stage = Stage::Done;
                    return Some(Step::failed(failure));
                }
                if driver.tls.as_mut().is_some_and(TlsSession::newly_established) {
                    // Connected at last; then read on, for what came with the handshake.
                    return Some(Step::Emit(SocketEvent::Connect));
                }
                self.stage = Stage::Writing;
                None
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => None,
            Err(e) => {
                // An error from a read comes only once the data before it has been read.
                self.stage = Stage::Done;
                Some(Step::failed(driver.failure.unwrap_or_else(|| driver.read_failure(&e))))
            }
        }
    }

    /// Reads on while the socket may have more (until it has nothing left, when a failure
    /// waits) and the budget lasts; then writes.
    fn after_read(&mut self, driver: &mut Driver) {
        let draining = driver.failure.is_some();
        self.stage = match (self.budget > 0, draining) {
            (true, true) => Stage::Reading,
            (true, false) if self.more => Stage::Reading,
            // When the budget is spent, more may wait: the poll fires again on the next turn
            // (a failure waiting has asked it to).
            (false, true) => Stage::Done,
            _ => Stage::Writing,
        };
    }

    /// A reply to what was read leaves before this read returns; if it cannot, the failure
    /// waits for the rest of what is readable.
    fn reply(&mut self, driver: &mut Driver, core: &mut Connection) -> Option<Step> {
        if driver.failure.is_none() {
            if let Err(e) = driver.write_out(core) {
                driver.fail_after_reads(Failure { errno: errno_of(&e), syscall: "write" });
            }
        }
        self.after_read(driver);
        None
    }

    fn write(&mut self, driver: &mut Driver, core: &mut Connection) -> Option<Step> {
        self.stage = Stage::Done;
        if self.events & uv::WRITABLE == 0 {
            return None;
        }
        match driver.write_out(core) {
            Err(e) => {
                driver.fail_after_reads(Failure { errno: errno_of(&e), syscall: "write" });
                self.stage = Stage::Reading;
                None
            }
            Ok(false) => None,
            Ok(true) if driver.ending => Some(Step::Close),
            Ok(true) => {
                driver.poll_for(uv::READABLE);
                std::mem::take(&mut driver.drain_owed).then_some(Step::Emit(SocketEvent::Drain))
            }
        }
    }
}
