//! Unix domain sockets: [`UnixListener`], [`UnixStream`], [`UnixDatagram`] (also at
//! `goro::net`), with the API of `std::os::unix::net`, and what goes with them:
//! [`SocketAddr`] (std's own type, so an address works with std's sockets too), std's
//! [`SocketAddrExt`] for abstract names (re-exported here for convenience), and
//! [`Incoming`].
//!
//! The module is named as tokio's (`tokio::net::unix::SocketAddr` beside
//! `tokio::net::UnixStream`), which keeps the unix address from clashing with
//! `goro::net::SocketAddr`, the IP one.
//!
//! They behave as goro's TCP and UDP sockets (see `goro::net`): an operation that
//! would block parks a coroutine or blocks a plain thread, timeouts give
//! `ErrorKind::TimedOut` and leave the socket usable, `close(&self)` wakes waiters
//! with an error, writes never raise SIGPIPE.
//!
//! Abstract-namespace addresses (Linux) work through std's [`SocketAddrExt`] and the
//! `*_addr` methods:
//!
//! ```
//! use std::io::{Read, Write};
//! use goro::net::unix::{SocketAddr, SocketAddrExt};
//! use goro::net::{UnixListener, UnixStream};
//!
//! let name = format!("goro-doc-abstract-{}", std::process::id());
//! let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
//! let l = UnixListener::bind_addr(&addr).unwrap();
//! let mut c = UnixStream::connect_addr(&addr).unwrap();
//! let (mut s, _) = l.accept().unwrap();
//! c.write_all(b"hi").unwrap();
//! let mut buf = [0; 2];
//! s.read_exact(&mut buf).unwrap();
//! assert_eq!(&buf, b"hi");
//! ```
//!
//! Differences from std: no `set_nonblocking` (as for TCP and UDP: goro's sockets are
//! non-blocking underneath and block the caller by design; `into_std` gives a std
//! socket to set as one likes); `peek` and `peek_from` are here though still unstable
//! in std (`unix_socket_peek`), with std's signatures; no ancillary data or peer
//! credentials (unstable in std) yet.
//!
//! A stream `connect` to a listener whose backlog is full waits (std's blocking
//! connect waits in the kernel): Linux answers a non-blocking connect with `EAGAIN`
//! and no readiness event follows, so goro retries after 1 ms, doubling up to 100 ms.
//! Likewise an unconnected `send_to` a datagram socket whose queue is full waits for
//! the next write readiness of the sender, which the kernel raises when a datagram the
//! sender queued anywhere is taken; a connected `send` is woken when its peer's queue
//! has room.

use std::ffi::OsStr;
use std::io;
use std::net::Shutdown;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use socket2::{Domain, SockAddr, Socket, Type};

use super::socket::Registered;

#[doc(no_inline)]
pub use std::os::linux::net::SocketAddrExt;
pub use std::os::unix::net::SocketAddr;

/// The first wait of a stream connect that found the listener's backlog full.
const CONNECT_BACKOFF_MIN: Duration = Duration::from_millis(1);
/// The longest one.
const CONNECT_BACKOFF_MAX: Duration = Duration::from_millis(100);

/// std's unix address of a socket2 one (from `accept`, `recvfrom`): a path, an
/// abstract name, or unnamed. A `recvfrom` from an unbound sender gives no address
/// at all (length 0), which std also reads as unnamed.
fn std_addr(a: &SockAddr) -> io::Result<SocketAddr> {
    if a.len() == 0 {
        SocketAddr::from_pathname("")
    } else if let Some(p) = a.as_pathname() {
        SocketAddr::from_pathname(p)
    } else if let Some(name) = a.as_abstract_namespace() {
        SocketAddr::from_abstract_name(name)
    } else if a.is_unnamed() {
        // std makes an unnamed address of the empty path (its length stops at the
        // path's offset, as the kernel's for an unbound socket).
        SocketAddr::from_pathname("")
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "not a unix socket address",
        ))
    }
}

/// socket2's address of std's, for the system calls.
fn sock_addr(a: &SocketAddr) -> io::Result<SockAddr> {
    if let Some(p) = a.as_pathname() {
        SockAddr::unix(p)
    } else if let Some(name) = a.as_abstract_name() {
        // socket2 takes an abstract name as a path with a leading NUL.
        let mut bytes = Vec::with_capacity(name.len() + 1);
        bytes.push(0);
        bytes.extend_from_slice(name);
        SockAddr::unix(OsStr::from_bytes(&bytes))
    } else {
        SockAddr::unix("")
    }
}

/// socket2's address of a path, checked as std checks it (no NUL bytes, shorter than
/// `sun_path`).
fn path_addr(path: &Path) -> io::Result<SockAddr> {
    sock_addr(&SocketAddr::from_pathname(path)?)
}

/// A new non-blocking, close-on-exec unix socket of type `ty`.
fn unix_socket(ty: Type) -> io::Result<Socket> {
    Socket::new(Domain::UNIX, ty.nonblocking(), None)
}

/// A listening Unix stream socket on the netpoller.
///
/// ```
/// use std::io::{Read, Write};
/// use goro::net::{UnixListener, UnixStream};
///
/// let path = std::env::temp_dir().join(format!("goro-doc-listener-{}.sock", std::process::id()));
/// let l = UnixListener::bind(&path).unwrap();
/// let client = goro::go!({
///     let path = path.clone();
///     move || UnixStream::connect(path).unwrap().write_all(b"hello").unwrap()
/// });
/// let (mut s, _) = l.accept().unwrap();
/// let mut got = String::new();
/// s.read_to_string(&mut got).unwrap();
/// assert_eq!(got, "hello");
/// client.join().unwrap();
/// std::fs::remove_file(&path).unwrap();
/// ```
pub struct UnixListener {
    reg: Registered<std::os::unix::net::UnixListener>,
}

impl UnixListener {
    /// Binds to `path` and listens (with the largest backlog the system allows, as
    /// std). A file already at `path` is `AddrInUse`: remove a stale socket file
    /// first.
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixListener> {
        UnixListener::from_std(std::os::unix::net::UnixListener::bind(path)?)
    }

    /// Binds to `addr` (a path or an abstract name) and listens.
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixListener> {
        UnixListener::from_std(std::os::unix::net::UnixListener::bind_addr(addr)?)
    }

    /// Waits for a connection; the address is the peer's, usually unnamed. Out of file
    /// descriptors it backs off and retries, as [`TcpListener::accept`] does.
    ///
    /// [`TcpListener::accept`]: super::TcpListener::accept
    pub fn accept(&self) -> io::Result<(UnixStream, SocketAddr)> {
        let (fd, addr) = self.reg.accept()?;
        let s = UnixStream {
            reg: Registered::new(std::os::unix::net::UnixStream::from(fd))?,
        };
        Ok((s, std_addr(&addr)?))
    }

    /// An endless iterator of `accept` results (the streams only).
    pub fn incoming(&self) -> Incoming<'_> {
        self.into_iter()
    }

    /// The address bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }

    /// A second handle to the same listener (a duplicated descriptor, registered on
    /// its own).
    pub fn try_clone(&self) -> io::Result<UnixListener> {
        Ok(UnixListener {
            reg: self.reg.try_clone()?,
        })
    }

    /// Stops the listener: blocked and later `accept` calls fail. The descriptor is
    /// released (and the socket file stays, as with std) when the listener is dropped.
    pub fn close(&self) {
        self.reg.close();
    }

    /// Adopts a listener made elsewhere: sets it non-blocking and registers it.
    pub fn from_std(listener: std::os::unix::net::UnixListener) -> io::Result<UnixListener> {
        Ok(UnixListener {
            reg: Registered::adopt(listener)?,
        })
    }

    /// Hands the listener back to std: deregistered and in blocking mode again.
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixListener> {
        self.reg.into_std()
    }
}

super::socket::impl_incoming!(Incoming, UnixListener, UnixStream);

/// A Unix stream connection on the netpoller. `Read` and `Write` are implemented for
/// it and for `&UnixStream` (one reader and one writer at a time).
///
/// ```
/// use std::io::{Read, Write};
/// let (mut a, mut b) = goro::net::UnixStream::pair().unwrap();
/// a.write_all(b"ping").unwrap();
/// let mut buf = [0; 4];
/// b.read_exact(&mut buf).unwrap();
/// assert_eq!(&buf, b"ping");
/// ```
pub struct UnixStream {
    reg: Registered<std::os::unix::net::UnixStream>,
}

impl UnixStream {
    /// Connects to the socket at `path`. While the listener's backlog is full it
    /// waits (see the module docs).
    pub fn connect<P: AsRef<Path>>(path: P) -> io::Result<UnixStream> {
        UnixStream::connect_to(&path_addr(path.as_ref())?)
    }

    /// Connects to `addr` (a path or an abstract name).
    pub fn connect_addr(addr: &SocketAddr) -> io::Result<UnixStream> {
        UnixStream::connect_to(&sock_addr(addr)?)
    }

    fn connect_to(addr: &SockAddr) -> io::Result<UnixStream> {
        let sock = unix_socket(Type::STREAM)?;
        let mut backoff = CONNECT_BACKOFF_MIN;
        loop {
            match sock.connect(addr) {
                Ok(()) => return UnixStream::from_new(sock),
                // The backlog is full; no event will say when it is not.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    crate::time::sleep(backoff);
                    backoff = (backoff * 2).min(CONNECT_BACKOFF_MAX);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {
                    // Not what Linux does for unix sockets, but harmless to handle.
                    let s = UnixStream::from_new(sock)?;
                    super::socket::wait_connected(&s.reg.pd, &s.reg.sock, None)?;
                    return Ok(s);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// A connected pair of streams (`socketpair`).
    pub fn pair() -> io::Result<(UnixStream, UnixStream)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::STREAM.nonblocking(), None)?;
        Ok((UnixStream::from_new(a)?, UnixStream::from_new(b)?))
    }

    /// Registers a socket made non-blocking at birth.
    fn from_new(sock: Socket) -> io::Result<UnixStream> {
        Ok(UnixStream {
            reg: Registered::new(std::os::unix::net::UnixStream::from(
                std::os::fd::OwnedFd::from(sock),
            ))?,
        })
    }

    /// The local address (unnamed for a client).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.peer_addr()
    }

    /// Shuts down reading, writing, or both (the peer reads EOF after a write
    /// shutdown).
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.reg.sock.shutdown(how)
    }

    /// Reads what the peer sent without taking it (`MSG_PEEK`): the next read gets
    /// the same bytes. Waits, as a read does, while nothing has arrived; 0 at EOF.
    /// (Unstable in std, as `unix_socket_peek`; the same signature.)
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, libc::MSG_PEEK)
    }

    /// A second handle to the same connection (a duplicated descriptor, registered on
    /// its own): one may read while the other writes.
    pub fn try_clone(&self) -> io::Result<UnixStream> {
        Ok(UnixStream {
            reg: self.reg.try_clone()?,
        })
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }

    /// Closes the connection: shuts it down both ways and wakes blocked readers and
    /// writers with an error; later operations fail too. The descriptor is released
    /// when the stream is dropped.
    pub fn close(&self) {
        self.reg.close_shutdown();
    }

    /// Adopts a stream made elsewhere: sets it non-blocking and registers it. Data
    /// already queued stays readable.
    pub fn from_std(stream: std::os::unix::net::UnixStream) -> io::Result<UnixStream> {
        Ok(UnixStream {
            reg: Registered::adopt(stream)?,
        })
    }

    /// Hands the stream back to std: deregistered and in blocking mode again. Data in
    /// flight stays readable from the std stream.
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixStream> {
        self.reg.into_std()
    }
}

/// A Unix datagram socket on the netpoller.
///
/// ```
/// let (a, b) = goro::net::UnixDatagram::pair().unwrap();
/// a.send(b"one").unwrap();
/// let mut buf = [0; 8];
/// assert_eq!(b.recv(&mut buf).unwrap(), 3);
/// assert_eq!(&buf[..3], b"one");
/// ```
pub struct UnixDatagram {
    reg: Registered<std::os::unix::net::UnixDatagram>,
}

impl UnixDatagram {
    /// Binds to `path` (`AddrInUse` if a file is there).
    pub fn bind<P: AsRef<Path>>(path: P) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::bind(path)?)
    }

    /// Binds to `addr` (a path or an abstract name).
    pub fn bind_addr(addr: &SocketAddr) -> io::Result<UnixDatagram> {
        UnixDatagram::from_std(std::os::unix::net::UnixDatagram::bind_addr(addr)?)
    }

    /// A socket bound to no address: it can send (`send_to`, or `send` after
    /// `connect`), and receive replies only if connected or from a peer that can
    /// name it (it has no name).
    pub fn unbound() -> io::Result<UnixDatagram> {
        UnixDatagram::from_new(unix_socket(Type::DGRAM)?)
    }

    /// A connected pair of datagram sockets (`socketpair`).
    pub fn pair() -> io::Result<(UnixDatagram, UnixDatagram)> {
        let (a, b) = Socket::pair(Domain::UNIX, Type::DGRAM.nonblocking(), None)?;
        Ok((UnixDatagram::from_new(a)?, UnixDatagram::from_new(b)?))
    }

    /// Registers a socket made non-blocking at birth.
    fn from_new(sock: Socket) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            reg: Registered::new(std::os::unix::net::UnixDatagram::from(
                std::os::fd::OwnedFd::from(sock),
            ))?,
        })
    }

    /// Sets the default peer for `send` and `recv` (and receives only from it).
    pub fn connect<P: AsRef<Path>>(&self, path: P) -> io::Result<()> {
        self.reg.sock.connect(path)
    }

    /// [`connect`](Self::connect) to `addr` (a path or an abstract name).
    pub fn connect_addr(&self, addr: &SocketAddr) -> io::Result<()> {
        self.reg.sock.connect_addr(addr)
    }

    /// Sends a datagram to the connected peer.
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.reg.send(buf)
    }

    /// Receives a datagram from the connected peer (the rest of a datagram longer
    /// than `buf` is lost).
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, 0)
    }

    /// Sends a datagram to the socket at `path`.
    pub fn send_to<P: AsRef<Path>>(&self, buf: &[u8], path: P) -> io::Result<usize> {
        self.reg.send_to(buf, &path_addr(path.as_ref())?)
    }

    /// Sends a datagram to `addr` (a path or an abstract name).
    pub fn send_to_addr(&self, buf: &[u8], addr: &SocketAddr) -> io::Result<usize> {
        self.reg.send_to(buf, &sock_addr(addr)?)
    }

    /// Receives a datagram and its sender's address (unnamed for an unbound sender).
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.reg.recv_from(buf, 0)?;
        Ok((n, std_addr(&addr)?))
    }

    /// Receives the next datagram without taking it (`MSG_PEEK`): the next `recv`
    /// gets it again. Waits as `recv` does. (Unstable in std, as `unix_socket_peek`.)
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, libc::MSG_PEEK)
    }

    /// [`recv_from`](Self::recv_from) without taking the datagram (`MSG_PEEK`).
    /// (Unstable in std, as `unix_socket_peek`.)
    pub fn peek_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        let (n, addr) = self.reg.recv_from(buf, libc::MSG_PEEK)?;
        Ok((n, std_addr(&addr)?))
    }

    /// The local address (unnamed if unbound).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.local_addr()
    }

    /// The connected peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.reg.sock.peer_addr()
    }

    /// Shuts down receiving, sending, or both.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.reg.sock.shutdown(how)
    }

    /// A second handle to the same socket (a duplicated descriptor, registered on its
    /// own).
    pub fn try_clone(&self) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            reg: self.reg.try_clone()?,
        })
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
    }

    /// Closes the socket: blocked and later operations fail. The descriptor is
    /// released when the socket is dropped.
    pub fn close(&self) {
        self.reg.close();
    }

    /// Adopts a socket made elsewhere: sets it non-blocking and registers it.
    pub fn from_std(socket: std::os::unix::net::UnixDatagram) -> io::Result<UnixDatagram> {
        Ok(UnixDatagram {
            reg: Registered::adopt(socket)?,
        })
    }

    /// Hands the socket back to std: deregistered and in blocking mode again.
    pub fn into_std(self) -> io::Result<std::os::unix::net::UnixDatagram> {
        self.reg.into_std()
    }
}

super::socket::impl_socket!(UnixListener, UnixStream, UnixDatagram);
super::socket::impl_stream_io!(UnixStream);
super::socket::impl_fd_conv!(UnixListener, UnixStream, UnixDatagram);
super::socket::impl_timeouts!(UnixStream, UnixDatagram);
