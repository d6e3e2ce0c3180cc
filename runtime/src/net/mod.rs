//! Sockets on the netpoller: [`TcpListener`], [`TcpStream`], [`UdpSocket`], and the
//! Unix domain sockets [`UnixListener`], [`UnixStream`], [`UnixDatagram`] (their
//! address type and iterator are in [`unix`]).
//!
//! Each is a std socket in non-blocking mode, registered once with the runtime's
//! poller (see `net/poll.rs`). Every operation tries the system call
//! first; on `WouldBlock` it waits on the descriptor's slot — parking a coroutine, or
//! blocking a plain thread — and retries when the slot is readied. So the same socket
//! works from coroutines and threads, and one reader and one writer may use a stream
//! at the same time (`Read` and `Write` are implemented for `&TcpStream`).
//!
//! Timeouts (`set_read_timeout`, `set_write_timeout`) are per operation, as std's: a
//! deadline is a runtime timer, and expiry gives `ErrorKind::TimedOut` and leaves the
//! socket usable. `close(&self)` shuts a socket down and wakes its waiters with an
//! error (Go's `Close`); the descriptor is released when the value is dropped.
//!
//! The TCP streams goro makes (`connect`, `accept`) have `TCP_NODELAY` on, as Go's do
//! (see the `tcp` module's "Go's socket defaults"); Unix streams have no Nagle's
//! algorithm to turn off.
//!
//! Writes never raise SIGPIPE (std sends with `MSG_NOSIGNAL`); a reset peer is an
//! `Err`. Name resolution (`ToSocketAddrs`, a blocking `getaddrinfo` for host names)
//! runs inside [`blocking`](crate::blocking), so a slow DNS server holds up only the
//! coroutine that asked.
//!
//! There is no `set_nonblocking`: the sockets are non-blocking underneath and block
//! their caller by design; a caller that wants `WouldBlock` takes the std socket
//! (`into_std`) and sets it as it likes.
//!
//! # Conversions
//!
//! Every socket type converts from and to std's, in tokio's shape:
//!
//! - `from_std(std_socket) -> io::Result<Self>` adopts a socket made elsewhere (by
//!   std, socket2, or inherited from systemd): it sets it non-blocking and registers
//!   it with the poller. Data already queued on it stays. `TryFrom<OwnedFd>` does the
//!   same for a descriptor. There is no `From<OwnedFd>`, as in tokio: registration can
//!   fail (the poller's `fs.epoll.max_user_watches`, a descriptor that is not a
//!   socket), and `From` could only panic then.
//! - `FromRawFd` (unsafe, for descriptors inherited by number) has no way to return
//!   the error either, so it **panics** with a message naming the type and the error;
//!   code that must not panic writes `Self::try_from(unsafe { OwnedFd::from_raw_fd(fd) })`.
//! - `into_std(self) -> io::Result<std_socket>`, `From<Self> for OwnedFd` and
//!   `IntoRawFd` deregister the socket and hand it over **in blocking mode again**, so
//!   the std socket behaves as std's own do (a read blocks rather than failing with
//!   `WouldBlock`). tokio leaves it non-blocking; goro's sockets look blocking to
//!   their users, and so does what they become. Nothing in flight is lost.
//! - `AsFd`, `AsRawFd` borrow the descriptor.
//!
//! ```
//! use std::io::{Read, Write};
//! use std::os::fd::OwnedFd;
//! use goro::net::{TcpListener, TcpStream};
//!
//! let l = TcpListener::bind("127.0.0.1:0").unwrap();
//! let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
//! let (s, _) = l.accept().unwrap();
//! c.write_all(b"in flight").unwrap();
//! // Out to a descriptor and back: the bytes are still there.
//! let fd = OwnedFd::from(s);
//! let mut s = TcpStream::try_from(fd).unwrap();
//! let mut buf = [0; 9];
//! s.read_exact(&mut buf).unwrap();
//! assert_eq!(&buf, b"in flight");
//! ```

pub(crate) mod poll;
pub(crate) mod socket;
mod tcp;
mod udp;
pub mod unix;

pub use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, ToSocketAddrs};
pub use tcp::{ConnectAbort, Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
pub use unix::{UnixDatagram, UnixListener, UnixStream};
