//! TCP: [`TcpListener`] and [`TcpStream`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::poll::Dir;
use super::socket::{each_addr, Registered};
use crate::sys;

/// The first back-off after `accept` finds no descriptor left (EMFILE, ENFILE).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest one.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A TCP listener on the netpoller.
pub struct TcpListener {
    reg: Registered<std::net::TcpListener>,
}

impl TcpListener {
    /// Binds to `addr` and listens, with the largest backlog the system allows
    /// (`net.core.somaxconn`, as Go's `net.Listen`; std asks for 128, which a burst of
    /// connects overflows into SYN cookies and resets).
    pub fn bind(addr: impl ToSocketAddrs) -> io::Result<TcpListener> {
        let l = each_addr(addr, listen)?;
        Ok(TcpListener {
            reg: Registered::new(l)?,
        })
    }

    /// Waits for a connection. When the process runs out of file descriptors (EMFILE,
    /// ENFILE) it backs off (5 ms, doubling up to 1 s) and retries rather than failing
    /// or spinning; connections wait in the kernel's backlog meanwhile.
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let mut backoff = ACCEPT_BACKOFF_MIN;
        loop {
            // accept4 with SOCK_NONBLOCK: the new socket is non-blocking at birth.
            let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
            match self.reg.io(Dir::Read, |l| {
                sys::os_err(sys::accept4(l.as_raw_fd(), flags))
            }) {
                Ok((fd, addr)) => {
                    // SAFETY: accept4 just returned `fd`, which nothing else owns.
                    let s = std::net::TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
                    let addr = addr.as_socket().ok_or_else(|| {
                        io::Error::new(io::ErrorKind::InvalidData, "accept: not an IP address")
                    })?;
                    return Ok((TcpStream::from_std(s)?, addr));
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) =>
                {
                    crate::time::sleep(backoff);
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// An endless iterator of `accept` results.
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// Stops the listener: blocked and later `accept` calls fail. The descriptor is
    /// released when the listener is dropped.
    pub fn close(&self) {
        self.reg.close();
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }
}

/// The iterator of [`TcpListener::incoming`].
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    fn next(&mut self) -> Option<Self::Item> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

/// A TCP connection on the netpoller.
pub struct TcpStream {
    reg: Registered<std::net::TcpStream>,
}

impl TcpStream {
    fn from_std(s: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            reg: Registered::new(s)?,
        })
    }

    /// Connects to `addr`, trying each resolved address in turn.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| connect_one(a, None))
    }

    /// Connects to `addr`, giving up after `timeout` (`ErrorKind::TimedOut`).
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        connect_one(addr, Instant::now().checked_add(timeout))
    }

    /// Shuts down reading, writing, or both (the peer sees EOF on a write shutdown).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.reg.sock.shutdown(how)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.peer_addr()
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// Sets `TCP_NODELAY`.
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.reg.sock.set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    pub fn nodelay(&self) -> io::Result<bool> {
        self.reg.sock.nodelay()
    }

    /// A second handle to the same connection (a duplicated descriptor, registered on
    /// its own).
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        TcpStream::from_std(self.reg.sock.try_clone()?)
    }

    /// Each read waits at most `timeout` (`None`: no limit); expiry is
    /// `ErrorKind::TimedOut` and leaves the stream usable.
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Read, timeout)
    }

    /// Each write waits at most `timeout` (`None`: no limit).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Write, timeout)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Write))
    }

    /// Closes the connection: shuts it down both ways and wakes blocked readers and
    /// writers with an error; later operations fail too. The descriptor is released
    /// when the stream is dropped.
    pub fn close(&self) {
        let _ = self.reg.sock.shutdown(Shutdown::Both);
        self.reg.close();
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }

    fn read_bytes(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.reg.io_draining(
            Dir::Read,
            |s| sys::os_err(sys::recv(s.as_raw_fd(), buf, 0)),
            |&n| 0 < n && n < len,
        )
    }

    /// One `readv` into all of `bufs`, as std's.
    fn read_vectored_bytes(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        self.reg.io_draining(
            Dir::Read,
            |s| sys::os_err(sys::readv(s.as_raw_fd(), bufs)),
            |&n| 0 < n && n < len,
        )
    }

    fn write_bytes(&self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len();
        self.reg.io_draining(
            Dir::Write,
            |s| sys::os_err(sys::send(s.as_raw_fd(), buf, libc::MSG_NOSIGNAL)),
            |&n| 0 < n && n < len,
        )
    }

    fn write_vectored_bytes(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.reg.io(Dir::Write, |s| {
            sys::os_err(sys::writev(s.as_raw_fd(), bufs))
        })
    }
}

/// A new non-blocking TCP socket for `addr`'s address family.
fn tcp_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let sock = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// A non-blocking listening socket on `addr` (SO_REUSEADDR, as std and Go set it).
fn listen(addr: &SocketAddr) -> io::Result<std::net::TcpListener> {
    let sock = tcp_socket(addr)?;
    sock.set_reuse_address(true)?;
    sock.bind(&SockAddr::from(*addr))?;
    // Linux caps the backlog at `net.core.somaxconn`; asking for more gets the cap.
    sock.listen(i32::MAX)?;
    Ok(sock.into())
}

/// One non-blocking connect: start it, register, wait for writability, check the
/// socket error. Registered after the start, not before: a socket that is not yet
/// connecting reports a hang-up, which the descriptor would keep (see
/// `PollDesc::clear`); a connect that completes before the registration is reported
/// by it.
fn connect_one(addr: &SocketAddr, deadline: Option<Instant>) -> io::Result<TcpStream> {
    let sock = tcp_socket(addr)?;
    let started = sock.connect(&SockAddr::from(*addr));
    let stream = match started {
        Ok(()) => return TcpStream::from_std(sock.into()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => TcpStream::from_std(sock.into())?,
        Err(e) => return Err(e),
    };
    super::socket::wait_connected(&stream.reg.pd, &stream.reg.sock, deadline)?;
    Ok(stream)
}

impl Read for TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_bytes(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_vectored_bytes(bufs)
    }
}

impl Read for &TcpStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_bytes(buf)
    }
    fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        self.read_vectored_bytes(bufs)
    }
}

impl Write for TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_bytes(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored_bytes(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_bytes(buf)
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.write_vectored_bytes(bufs)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

super::socket::impl_socket!(TcpListener, TcpStream);
