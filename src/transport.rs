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
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is large and aligned enough for any sockaddr.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

impl TcpSocket {
    /// Starts a non-blocking connect; completion is signalled by writability, then
    /// [`TcpSocket::take_error`] tells whether it worked.
    pub fn connect(ip: IpAddr, port: u16) -> io::Result<TcpSocket> {
        let addr = SocketAddr::new(ip, port);
        let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
        // SAFETY: plain system calls on a descriptor we own from here on.
        let fd = check(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) })?;
        // SAFETY: `fd` was just returned by socket() and is owned by nothing else.
        let socket = TcpSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) }, writes: 0, bytes_written: 0, bytes_read: 0 };
        let (storage, len) = sockaddr(&addr);
        // SAFETY: storage holds a valid sockaddr of length `len`.
        let ret = unsafe { libc::connect(fd, (&storage as *const libc::sockaddr_storage).cast(), len) };
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

    fn set_option(&self, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
        // SAFETY: `value` is a live c_int of the size passed.
        check(unsafe {
            libc::setsockopt(self.fd(), level, name, (&value as *const c_int).cast(), std::mem::size_of::<c_int>() as libc::socklen_t)
        })?;
        Ok(())
    }

    pub fn set_no_delay(&self, on: bool) -> io::Result<()> {
        self.set_option(libc::IPPROTO_TCP, libc::TCP_NODELAY, on as c_int)
    }

    /// TCP keepalive, with the idle time before the first probe (as Node's setKeepAlive).
    pub fn set_keep_alive(&self, on: bool, idle_secs: u32) -> io::Result<()> {
        self.set_option(libc::SOL_SOCKET, libc::SO_KEEPALIVE, on as c_int)?;
        if on && idle_secs > 0 {
            self.set_option(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle_secs as c_int)?;
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
        Ok(n as usize)
    }

    pub fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: writes from a valid slice; MSG_NOSIGNAL so a closed peer is an error, not SIGPIPE.
        let n = unsafe { libc::send(self.fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.writes += 1;
        self.bytes_written += n as u64;
        Ok(n as usize)
    }
}
