//! Sockets on the netpoller: [`TcpListener`], [`TcpStream`], [`UdpSocket`].
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
//! Writes never raise SIGPIPE (std sends with `MSG_NOSIGNAL`); a reset peer is an
//! `Err`. Name resolution (`ToSocketAddrs`, a blocking `getaddrinfo` for host names)
//! runs inside [`blocking`](crate::blocking), so a slow DNS server holds up only the
//! coroutine that asked.

pub(crate) mod poll;
pub(crate) mod socket;
mod tcp;
mod udp;

pub use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, ToSocketAddrs};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;
