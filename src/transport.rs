//! The TCP socket owned by the native side: a non-blocking socket whose readiness comes from a
//! libuv poll handle on Node's own event loop, so reads and writes happen on the JS thread
//! with no thread hop. This module makes the system calls (through `socket2`); `bindings`
//! drives it from the poll callback and hands what was read to the connection core.

use socket2::{Domain, SockAddr, Socket, TcpKeepalive, Type};
use std::ffi::c_int;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

pub struct TcpSocket {
    socket: Socket,
    /// Writes made and bytes written, for the benchmarks.
    pub writes: u64,
    pub bytes_written: u64,
    /// Bytes read: any byte that arrives is a sign of life, for the heartbeat, even while a
    /// large frame is still incomplete.
    pub bytes_read: u64,
    /// Reads that brought bytes (or the end), for the application's counters.
    pub reads: u64,
}

/// Flags for `send`: on Linux a write to a closed peer must be an error, not SIGPIPE.
#[cfg(target_os = "linux")]
const SEND_FLAGS: c_int = libc::MSG_NOSIGNAL;
/// macOS has no MSG_NOSIGNAL: `Socket::new` sets SO_NOSIGPIPE on the socket there instead.
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: c_int = 0;

impl TcpSocket {
    /// Starts a non-blocking connect; completion is signalled by writability, then
    /// [`TcpSocket::take_error`] tells whether it worked.
    pub fn connect(ip: IpAddr, port: u16) -> io::Result<TcpSocket> {
        let addr = SocketAddr::new(ip, port);
        // Close-on-exec (and on macOS, SO_NOSIGPIPE) come with the socket.
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        socket.set_nonblocking(true)?;
        if let Err(err) = socket.connect(&SockAddr::from(addr)) {
            if err.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(err);
            }
        }
        Ok(TcpSocket { socket, writes: 0, bytes_written: 0, bytes_read: 0, reads: 0 })
    }

    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    pub fn set_no_delay(&self, on: bool) -> io::Result<()> {
        self.socket.set_tcp_nodelay(on)
    }

    /// TCP keepalive, with the idle time before the first probe (as Node's setKeepAlive).
    pub fn set_keep_alive(&self, on: bool, idle_secs: u32) -> io::Result<()> {
        if on && idle_secs > 0 {
            self.socket.set_tcp_keepalive(&TcpKeepalive::new().with_time(Duration::from_secs(idle_secs.into())))
        } else {
            self.socket.set_keepalive(on)
        }
    }

    /// The socket's pending error (how a non-blocking connect reports failure), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.socket.take_error()
    }

    /// Reads into memory that need not be initialised (a buffer's spare capacity).
    pub fn read(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        let n = self.socket.recv(buf)?;
        self.bytes_read += n as u64;
        self.reads += 1;
        Ok(n)
    }

    /// Reads into initialised memory (rustls's buffer, for TLS).
    pub fn read_initialised(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = io::Read::read(&mut &self.socket, buf)?;
        self.bytes_read += n as u64;
        self.reads += 1;
        Ok(n)
    }

    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.socket.send_with_flags(buf, SEND_FLAGS)?;
        self.counted_write(n)
    }

    /// Several buffers in one system call (TLS records queued together).
    pub fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        let n = self.socket.send_vectored_with_flags(bufs, SEND_FLAGS)?;
        self.counted_write(n)
    }

    fn counted_write(&mut self, n: usize) -> io::Result<usize> {
        self.writes += 1;
        self.bytes_written += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// Waits (2 s at most) for the socket to be writable or failed, as a connect completes.
    fn wait_writable(socket: &TcpSocket) {
        let mut pfd = libc::pollfd { fd: socket.fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut pfd, 1, 2000) };
    }

    #[test]
    fn sockets_are_non_blocking_and_close_on_exec() {
        for ip in ["127.0.0.1", "::1"] {
            let socket = TcpSocket::connect(ip.parse().unwrap(), 1).unwrap();
            // SAFETY: queries on a live descriptor.
            let (status, descriptor) = unsafe { (libc::fcntl(socket.fd(), libc::F_GETFL), libc::fcntl(socket.fd(), libc::F_GETFD)) };
            assert_ne!(status & libc::O_NONBLOCK, 0, "{ip}");
            assert_ne!(descriptor & libc::FD_CLOEXEC, 0, "{ip}");
        }
    }

    #[test]
    fn a_refused_connect_is_reported_by_the_socket() {
        // Port 1 on loopback: nothing listens there.
        for ip in ["127.0.0.1", "::1"] {
            let socket = TcpSocket::connect(ip.parse().unwrap(), 1).unwrap();
            wait_writable(&socket);
            let error = socket.take_error().unwrap().expect("a pending error");
            assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED), "{ip}");
            assert!(socket.take_error().unwrap().is_none(), "taking the error clears it");
        }
    }

    /// An integer socket option, as the kernel has it.
    fn option(socket: &TcpSocket, level: c_int, name: c_int) -> c_int {
        let mut value: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: `value` and `len` are live locals of the sizes given.
        let ret = unsafe { libc::getsockopt(socket.fd(), level, name, (&mut value as *mut c_int).cast(), &mut len) };
        assert_eq!(ret, 0, "getsockopt {level} {name}: {}", io::Error::last_os_error());
        value
    }

    /// macOS has no MSG_NOSIGNAL: the socket itself must not raise SIGPIPE.
    #[cfg(target_os = "macos")]
    #[test]
    fn sockets_are_made_without_sigpipe() {
        let socket = TcpSocket::connect("127.0.0.1".parse().unwrap(), 1).unwrap();
        assert_ne!(option(&socket, libc::SOL_SOCKET, libc::SO_NOSIGPIPE), 0);
    }

    #[test]
    fn nodelay_and_keepalive_are_set_as_asked() {
        #[cfg(target_os = "linux")]
        const KEEPALIVE_IDLE: c_int = libc::TCP_KEEPIDLE;
        #[cfg(target_os = "macos")]
        const KEEPALIVE_IDLE: c_int = libc::TCP_KEEPALIVE;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let socket = TcpSocket::connect("127.0.0.1".parse().unwrap(), listener.local_addr().unwrap().port()).unwrap();
        let keepalive = |socket: &TcpSocket| (option(socket, libc::SOL_SOCKET, libc::SO_KEEPALIVE) != 0, option(socket, libc::IPPROTO_TCP, KEEPALIVE_IDLE));
        socket.set_no_delay(true).unwrap();
        assert_ne!(option(&socket, libc::IPPROTO_TCP, libc::TCP_NODELAY), 0);
        socket.set_no_delay(false).unwrap();
        assert_eq!(option(&socket, libc::IPPROTO_TCP, libc::TCP_NODELAY), 0);

        socket.set_keep_alive(true, 42).unwrap();
        assert_eq!(keepalive(&socket), (true, 42));
        // No delay, or keepalive off, leaves the idle time as it was.
        socket.set_keep_alive(true, 0).unwrap();
        assert_eq!(keepalive(&socket), (true, 42));
        socket.set_keep_alive(false, 30).unwrap();
        assert_eq!(keepalive(&socket), (false, 42));
        // An idle time the kernel refuses (Linux takes 32767 s at most) is its error.
        #[cfg(target_os = "linux")]
        assert_eq!(socket.set_keep_alive(true, u32::MAX).unwrap_err().raw_os_error(), Some(libc::EINVAL));
    }

    #[test]
    fn a_write_to_a_closed_peer_fails_with_epipe() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut socket = TcpSocket::connect("127.0.0.1".parse().unwrap(), port).unwrap();
        drop(listener.accept().unwrap());
        wait_writable(&socket);
        // The first write after the peer closed is answered by a reset, reported by a later
        // write as ECONNRESET; after that the socket says EPIPE, which on Linux would raise
        // SIGPIPE without MSG_NOSIGNAL. Rust ignores SIGPIPE in this process, so it is blocked
        // on this thread instead: one raised stays pending, where sigpending sees it.
        #[cfg(target_os = "linux")]
        // SAFETY: plain signal-mask calls on live sigset_t locals, for this thread only.
        let old_mask = unsafe {
            let mut block = std::mem::zeroed::<libc::sigset_t>();
            let mut old = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut block);
            libc::sigaddset(&mut block, libc::SIGPIPE);
            libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
            old
        };
        let mut errors = Vec::new();
        for _ in 0..200 {
            match socket.write(b"x") {
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => {
                    errors.push(e.raw_os_error());
                    if e.raw_os_error() == Some(libc::EPIPE) {
                        break;
                    }
                }
                _ => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        #[cfg(target_os = "linux")]
        // SAFETY: as above; the old mask is put back whatever happened.
        let sigpipe_raised = unsafe {
            let mut pending = std::mem::zeroed::<libc::sigset_t>();
            libc::sigpending(&mut pending);
            let raised = libc::sigismember(&pending, libc::SIGPIPE) == 1;
            libc::pthread_sigmask(libc::SIG_SETMASK, &old_mask, std::ptr::null_mut());
            raised
        };
        assert_eq!(errors.last(), Some(&Some(libc::EPIPE)), "errors: {errors:?}");
        assert!(errors.iter().all(|e| matches!(*e, Some(libc::EPIPE | libc::ECONNRESET))), "errors: {errors:?}");
        #[cfg(target_os = "linux")]
        assert!(!sigpipe_raised, "a write raised SIGPIPE");
    }
}
