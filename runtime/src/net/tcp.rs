//! TCP: [`TcpListener`] and [`TcpStream`].
//!
//! # Go's socket defaults
//!
//! The streams goro makes, by [`TcpStream::connect`] (and `connect_timeout`) and by
//! [`TcpListener::accept`], have `TCP_NODELAY` set, as Go's `Dial` and `Accept` do:
//! a small write goes out at once instead of waiting for the peer's ACK of the previous
//! one (Nagle's algorithm), which in a request/response exchange costs a delayed-ACK
//! timeout per round trip. [`TcpStream::set_nodelay(false)`](TcpStream::set_nodelay)
//! turns Nagle back on for a stream that sends many small writes it wants batched.
//! Streams adopted with `from_std` (or from a descriptor) keep the options they came
//! with.
//!
//! Go also turns TCP keep-alive on (15 s idle, 15 s between probes); goro does not, as
//! std does not: it costs three system calls per connection, matters only for a peer
//! that vanished without a reset on an otherwise idle connection, and servers usually
//! bound idleness with a read timeout (or a context) anyway. A program that wants Go's
//! probes sets them through `socket2::SockRef::from(&stream).set_tcp_keepalive(..)`
//! (the guide's porting table shows it).

use std::io;
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

use super::socket::{each_addr, Registered};

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
    ///
    /// The stream has `TCP_NODELAY` set, as Go's accepted connections do (see the
    /// module doc).
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (fd, addr) = self.reg.accept()?;
        let s = TcpStream::from_new(std::net::TcpStream::from(fd))?;
        s.set_nodelay(true)?;
        let addr = addr.as_socket().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, "accept: not an IP address")
        })?;
        Ok((s, addr))
    }

    /// An endless iterator of `accept` results.
    pub fn incoming(&self) -> Incoming<'_> {
        self.into_iter()
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

    /// A second handle to the same listener (a duplicated descriptor, registered on
    /// its own): a connection goes to one of the two.
    ///
    /// ```
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let l2 = l.try_clone().unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let c = goro::net::TcpStream::connect(addr).unwrap();
    /// let (s, _) = l2.accept().unwrap();
    /// assert_eq!(s.peer_addr().unwrap(), c.local_addr().unwrap());
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(TcpListener {
            reg: self.reg.try_clone()?,
        })
    }

    /// Sets `IP_TTL`, the time-to-live of the packets sent by the connections it
    /// accepts.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.reg.sock.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.reg.sock.ttl()
    }

    /// Adopts a listener made elsewhere (by std, socket2, or inherited from systemd):
    /// sets it non-blocking and registers it with the poller. From here on its
    /// `accept` parks a coroutine. Fails if the descriptor cannot be registered.
    ///
    /// ```
    /// let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let l = goro::net::TcpListener::from_std(std_l).unwrap();
    /// assert!(l.local_addr().unwrap().port() != 0);
    /// ```
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<TcpListener> {
        Ok(TcpListener {
            reg: Registered::adopt(listener)?,
        })
    }

    /// Hands the listener back to std: deregistered, and in blocking mode again, so
    /// its `accept` blocks as any std listener's (tokio leaves it non-blocking; see
    /// "Conversions" in the module docs). Connections waiting in the backlog stay.
    ///
    /// ```
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let addr = l.local_addr().unwrap();
    /// let std_l = l.into_std().unwrap();
    /// assert_eq!(std_l.local_addr().unwrap(), addr);
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpListener> {
        self.reg.into_std()
    }
}

super::socket::impl_incoming!(Incoming, TcpListener, TcpStream);

/// A TCP connection on the netpoller.
pub struct TcpStream {
    reg: Registered<std::net::TcpStream>,
}

impl TcpStream {
    /// Adopts a stream made elsewhere (by std, socket2, or inherited): sets it
    /// non-blocking and registers it with the poller. Data already queued on it stays
    /// readable. Fails if the descriptor cannot be registered.
    ///
    /// ```
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let std_s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let s = goro::net::TcpStream::from_std(std_s).unwrap();
    /// assert_eq!(s.peer_addr().unwrap(), l.local_addr().unwrap());
    /// ```
    pub fn from_std(stream: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            reg: Registered::adopt(stream)?,
        })
    }

    /// Hands the stream back to std: deregistered, and in blocking mode again, so its
    /// reads block as any std stream's (tokio leaves it non-blocking; see
    /// "Conversions" in the module docs). Data in flight is not lost: what the peer
    /// sent and nobody read is read from the std stream.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut c = goro::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (s, _) = l.accept().unwrap();
    /// c.write_all(b"hi").unwrap();
    /// let mut std_s = s.into_std().unwrap();
    /// let mut buf = [0; 2];
    /// std_s.read_exact(&mut buf).unwrap();
    /// assert_eq!(&buf, b"hi");
    /// ```
    pub fn into_std(self) -> io::Result<std::net::TcpStream> {
        self.reg.into_std()
    }

    fn from_new(s: std::net::TcpStream) -> io::Result<TcpStream> {
        Ok(TcpStream {
            reg: Registered::new(s)?,
        })
    }

    /// Connects to `addr`, trying each resolved address in turn. The stream has
    /// `TCP_NODELAY` set, as Go's `Dial` does (see the module doc).
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
        each_addr(addr, |a| connect_one(a, None, &mut |_| ()))
    }

    /// Connects to `addr` as [`connect`](Self::connect) does, giving up at `deadline`
    /// (`ErrorKind::TimedOut`), and lets `watch` call it off: for each address tried,
    /// once the connect is under way, `watch` gets a [`ConnectAbort`] for it and
    /// returns a guard held until the connect has finished (dropped then). An abort
    /// ends the wait with the closed-socket error (`ErrorKind::NotConnected`).
    ///
    /// The building block of `goro::net::connect_context`, which aborts when a
    /// context ends; hidden because that is the API.
    #[doc(hidden)]
    pub fn connect_watched<G>(
        addr: impl ToSocketAddrs,
        deadline: Option<Instant>,
        mut watch: impl FnMut(ConnectAbort) -> G,
    ) -> io::Result<TcpStream> {
        each_addr(addr, |a| connect_one(a, deadline, &mut watch))
    }

    /// Connects to `addr`, giving up after `timeout` (`ErrorKind::TimedOut`). The
    /// stream has `TCP_NODELAY` set, as `connect`'s.
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cannot set a 0 duration timeout",
            ));
        }
        connect_one(addr, Instant::now().checked_add(timeout), &mut |_| ())
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

    /// Sets `TCP_NODELAY` (on for the streams goro makes, as in Go; `false` turns
    /// Nagle's algorithm back on).
    ///
    /// ```
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let c = goro::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (s, _) = l.accept().unwrap();
    /// assert!(c.nodelay().unwrap() && s.nodelay().unwrap()); // Go's default
    /// c.set_nodelay(false).unwrap();
    /// assert!(!c.nodelay().unwrap());
    /// ```
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
        Ok(TcpStream {
            reg: self.reg.try_clone()?,
        })
    }

    /// Reads what the peer sent without taking it: the next read (or peek) gets the
    /// same bytes (`recv` with `MSG_PEEK`). Waits, as a read does, while nothing has
    /// arrived; 0 at EOF.
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
    /// let mut c = goro::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    /// let (mut s, _) = l.accept().unwrap();
    /// c.write_all(b"hello").unwrap();
    /// let mut buf = [0; 5];
    /// let n = s.peek(&mut buf).unwrap();
    /// assert_eq!(&buf[..n], &b"hello"[..n]);
    /// s.read_exact(&mut buf).unwrap();
    /// assert_eq!(&buf, b"hello");
    /// ```
    pub fn peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.reg.recv(buf, libc::MSG_PEEK)
    }

    /// Sets `IP_TTL`, the time-to-live of the packets this stream sends.
    pub fn set_ttl(&self, ttl: u32) -> io::Result<()> {
        self.reg.sock.set_ttl(ttl)
    }

    /// `IP_TTL`.
    pub fn ttl(&self) -> io::Result<u32> {
        self.reg.sock.ttl()
    }

    /// Closes the connection: shuts it down both ways and wakes blocked readers and
    /// writers with an error; later operations fail too. The descriptor is released
    /// when the stream is dropped.
    pub fn close(&self) {
        self.reg.close_shutdown();
    }

    /// The pending socket error, if any (`SO_ERROR`).
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.reg.sock.take_error()
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

/// A new non-blocking TCP socket to connect from, with `TCP_NODELAY` set (Go's
/// default; the option can be set before the connect and stays on).
fn connect_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let sock = tcp_socket(addr)?;
    sock.set_nodelay(true)?;
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

/// A connect in progress that something else may call off (see
/// [`TcpStream::connect_watched`]): [`abort`](ConnectAbort::abort) closes the
/// socket's poll descriptor, which wakes the connecting caller with the closed-socket
/// error. Aborting a connect that has finished, or whose stream is gone, does nothing
/// to any other socket.
#[doc(hidden)]
#[derive(Clone)]
pub struct ConnectAbort {
    pd: std::sync::Arc<super::poll::PollDesc>,
}

impl ConnectAbort {
    /// Ends the connect's wait with the closed-socket error.
    pub fn abort(&self) {
        self.pd.close();
    }
}

impl std::fmt::Debug for ConnectAbort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectAbort").finish_non_exhaustive()
    }
}

/// One non-blocking connect: start it, register, wait for writability (holding what
/// `watch` returns for the wait), check the socket error. Registered after the start,
/// not before: a socket that is not yet connecting reports a hang-up, which the
/// descriptor would keep (see `PollDesc::clear`); a connect that completes before the
/// registration is reported by it.
fn connect_one<G>(
    addr: &SocketAddr,
    deadline: Option<Instant>,
    watch: &mut impl FnMut(ConnectAbort) -> G,
) -> io::Result<TcpStream> {
    let sock = connect_socket(addr)?;
    let started = sock.connect(&SockAddr::from(*addr));
    let stream = match started {
        Ok(()) => return TcpStream::from_new(sock.into()),
        Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => TcpStream::from_new(sock.into())?,
        Err(e) => return Err(e),
    };
    let guard = watch(ConnectAbort {
        pd: stream.reg.pd.clone(),
    });
    let connected = super::socket::wait_connected(&stream.reg.pd, &stream.reg.sock, deadline);
    drop(guard);
    connected?;
    Ok(stream)
}

super::socket::impl_stream_io!(TcpStream);
super::socket::impl_fd_conv!(TcpListener, TcpStream);
super::socket::impl_socket!(TcpListener, TcpStream);
super::socket::impl_timeouts!(TcpStream);
