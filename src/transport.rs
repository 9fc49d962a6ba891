//! The TCP socket owned by the native side: a non-blocking socket whose readiness comes from a
//! libuv poll handle on Node's own event loop, so reads and writes happen on the JS thread
//! with no thread hop. This module does the system calls; `bindings` drives it from the poll
//! callback and hands what was read to the connection core.

use std::ffi::c_int;
use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct TcpSocket {
    fd: OwnedFd,
    /// Writes made and bytes written, for the benchmarks.
    pub writes: u64,
    pub bytes_written: u64,
    /// Bytes read: any byte that arrives is a sign of life, for the heartbeat, even while a
    /// large frame is still incomplete.
    pub bytes_read: u64,
    /// Reads that brought bytes (or the end), for the application's counters.
    pub reads: u64,
}

fn check(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn sockaddr(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data for which all-zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(v4) => {
            // SAFETY: plain data; all-zero is valid (and leaves sin_zero, and macOS's sin_len, 0).
            let mut sin: libc::sockaddr_in = unsafe { std::mem::zeroed() };
            sin.sin_family = libc::AF_INET as libc::sa_family_t;
            sin.sin_port = v4.port().to_be();
            sin.sin_addr = libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) };
            #[cfg(target_os = "macos")]
            {
                sin.sin_len = std::mem::size_of::<libc::sockaddr_in>() as u8;
            }
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as above.
            let mut sin6: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
            sin6.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            sin6.sin6_port = v6.port().to_be();
            sin6.sin6_flowinfo = v6.flowinfo();
            sin6.sin6_addr = libc::in6_addr { s6_addr: v6.ip().octets() };
            sin6.sin6_scope_id = v6.scope_id();
            #[cfg(target_os = "macos")]
            {
                sin6.sin6_len = std::mem::size_of::<libc::sockaddr_in6>() as u8;
            }
            // SAFETY: as above.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

fn set_option(fd: RawFd, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
    // SAFETY: `value` is a live c_int of the size passed.
    check(unsafe { libc::setsockopt(fd, level, name, (&value as *const c_int).cast(), std::mem::size_of::<c_int>() as libc::socklen_t) })?;
    Ok(())
}

// ---------------------------------------------------------------- what differs by platform

/// Flags for `send`: on Linux a write to a closed peer must be an error, not SIGPIPE.
#[cfg(target_os = "linux")]
const SEND_FLAGS: c_int = libc::MSG_NOSIGNAL;
/// macOS has no MSG_NOSIGNAL: the socket is made with SO_NOSIGPIPE instead.
#[cfg(not(target_os = "linux"))]
const SEND_FLAGS: c_int = 0;

/// The idle time before the first keepalive probe (Node's setKeepAlive delay).
#[cfg(target_os = "linux")]
const KEEPALIVE_IDLE: c_int = libc::TCP_KEEPIDLE;
#[cfg(not(target_os = "linux"))]
const KEEPALIVE_IDLE: c_int = libc::TCP_KEEPALIVE;

/// A non-blocking, close-on-exec TCP socket, in one call where Linux allows it.
#[cfg(target_os = "linux")]
fn stream_socket(domain: c_int) -> io::Result<OwnedFd> {
    // SAFETY: a plain system call; the descriptor is owned from here on.
    let fd = check(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(not(target_os = "linux"))]
fn stream_socket(domain: c_int) -> io::Result<OwnedFd> {
    stream_socket_by_fcntl(domain)
}

/// The same socket made step by step, as macOS needs (no SOCK_NONBLOCK or SOCK_CLOEXEC);
/// compiled on Linux for its test, so that the path macOS takes is run here too.
#[cfg(any(not(target_os = "linux"), test))]
fn stream_socket_by_fcntl(domain: c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain system calls on a descriptor owned (and so closed on error) from the start.
    unsafe {
        let fd = OwnedFd::from_raw_fd(check(libc::socket(domain, libc::SOCK_STREAM, 0))?);
        let raw = fd.as_raw_fd();
        check(libc::fcntl(raw, libc::F_SETFD, libc::FD_CLOEXEC))?;
        let flags = check(libc::fcntl(raw, libc::F_GETFL))?;
        check(libc::fcntl(raw, libc::F_SETFL, flags | libc::O_NONBLOCK))?;
        #[cfg(target_os = "macos")]
        set_option(raw, libc::SOL_SOCKET, libc::SO_NOSIGPIPE, 1)?;
        Ok(fd)
    }
}

impl TcpSocket {
    /// Starts a non-blocking connect; completion is signalled by writability, then
    /// [`TcpSocket::take_error`] tells whether it worked.
    pub fn connect(ip: IpAddr, port: u16) -> io::Result<TcpSocket> {
        let addr = SocketAddr::new(ip, port);
        let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        let socket = TcpSocket { fd: stream_socket(domain)?, writes: 0, bytes_written: 0, bytes_read: 0, reads: 0 };
        let (storage, len) = sockaddr(&addr);
        // SAFETY: storage holds a valid sockaddr of length `len`.
        let ret = unsafe { libc::connect(socket.fd(), (&storage as *const libc::sockaddr_storage).cast(), len) };
        if ret < 0 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(err);
            }
        }
        Ok(socket)
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn set_no_delay(&self, on: bool) -> io::Result<()> {
        set_option(self.fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, on as c_int)
    }

    /// TCP keepalive, with the idle time before the first probe (as Node's setKeepAlive).
    pub fn set_keep_alive(&self, on: bool, idle_secs: u32) -> io::Result<()> {
        set_option(self.fd(), libc::SOL_SOCKET, libc::SO_KEEPALIVE, on as c_int)?;
        if on && idle_secs > 0 {
            set_option(self.fd(), libc::IPPROTO_TCP, KEEPALIVE_IDLE, idle_secs as c_int)?;
        }
        Ok(())
    }

    /// The socket's pending error (how a non-blocking connect reports failure), if any.
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        let mut err: c_int = 0;
        let mut len = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: err and len are live locals of the sizes given.
        check(unsafe { libc::getsockopt(self.fd(), libc::SOL_SOCKET, libc::SO_ERROR, (&mut err as *mut c_int).cast(), &mut len) })?;
        Ok((err != 0).then(|| io::Error::from_raw_os_error(err)))
    }

    pub fn read(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        // SAFETY: reads at most buf.len() bytes into memory we may write.
        let n = unsafe { libc::read(self.fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.bytes_read += n as u64;
        self.reads += 1;
        Ok(n as usize)
    }

    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: writes from a valid slice; a closed peer is an error, not SIGPIPE (SEND_FLAGS).
        let n = unsafe { libc::send(self.fd(), buf.as_ptr().cast(), buf.len(), SEND_FLAGS) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.writes += 1;
        self.bytes_written += n as u64;
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(fd: &OwnedFd) -> (c_int, c_int) {
        // SAFETY: queries on a live descriptor.
        unsafe { (libc::fcntl(fd.as_raw_fd(), libc::F_GETFL), libc::fcntl(fd.as_raw_fd(), libc::F_GETFD)) }
    }

    #[test]
    fn sockets_are_non_blocking_and_close_on_exec_on_either_path() {
        for domain in [libc::AF_INET, libc::AF_INET6] {
            for fd in [stream_socket(domain).unwrap(), stream_socket_by_fcntl(domain).unwrap()] {
                let (status, descriptor) = flags(&fd);
                assert_ne!(status & libc::O_NONBLOCK, 0);
                assert_ne!(descriptor & libc::FD_CLOEXEC, 0);
            }
        }
    }

    #[test]
    fn a_refused_connect_is_reported_by_the_socket() {
        // Port 1 on loopback: nothing listens there.
        let socket = TcpSocket::connect("127.0.0.1".parse().unwrap(), 1).unwrap();
        let mut pfd = libc::pollfd { fd: socket.fd(), events: libc::POLLOUT, revents: 0 };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut pfd, 1, 2000) };
        let error = socket.take_error().unwrap().expect("a pending error");
        assert_eq!(error.raw_os_error(), Some(libc::ECONNREFUSED));
    }
}
