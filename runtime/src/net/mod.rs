//! Sockets on the netpoller: [`TcpListener`], [`TcpStream`], [`UdpSocket`].
//!
//! Each is a std socket in non-blocking mode, registered once with the runtime's
//! poller (see `netpoll.rs`, "poll descriptors"). Every operation tries the system call
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

/// `AsRawFd`, `AsFd` and std's `Debug` (`TcpStream { addr: .., peer: .., fd: 4 }`)
/// for socket types that keep their std socket in `self.reg.sock`.
macro_rules! impl_socket {
    ($($t:ty),+) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.reg.sock, f)
            }
        }

        impl std::os::fd::AsRawFd for $t {
            fn as_raw_fd(&self) -> std::os::fd::RawFd {
                std::os::fd::AsRawFd::as_raw_fd(&self.reg.sock)
            }
        }

        impl std::os::fd::AsFd for $t {
            fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
                std::os::fd::AsFd::as_fd(&self.reg.sock)
            }
        }
    )+};
}
use impl_socket;

mod tcp;
mod udp;

use std::io;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, ToSocketAddrs};
pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;

use crate::netpoll::{Dir, PollDesc};
use crate::sched::rt;

/// A non-blocking socket and its poll descriptor. Deregisters before the socket closes.
struct Registered<S: AsRawFd> {
    pd: Arc<PollDesc>,
    sock: S,
    timeouts: Timeouts,
}

impl<S: AsRawFd> Registered<S> {
    /// Registers `sock`, which must already be non-blocking.
    fn new(sock: S) -> io::Result<Self> {
        let pd = rt().netpoll.register(sock.as_raw_fd())?;
        Ok(Registered {
            pd,
            sock,
            timeouts: Timeouts::default(),
        })
    }

    /// Runs `op` until it does not return `WouldBlock`, waiting for readiness in `dir`
    /// in between, with `dir`'s timeout.
    fn io<R>(&self, dir: Dir, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.io_draining(dir, op, |_| false)
    }

    /// [`Registered::io`] for an operation that can tell when it drained the socket
    /// (`drained(&result)`: a short read or write of a stream). After one that did, the
    /// next operation in `dir` waits for an edge before its system call instead of
    /// making one that would fail with `WouldBlock` (tokio does the same).
    fn io_draining<R>(
        &self,
        dir: Dir,
        mut op: impl FnMut(&S) -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        crate::preempt_point();
        let deadline = self.timeouts.get(dir).map(|t| Instant::now() + t);
        // Whether this call holds a turn on the descriptor (see "many waiters" in
        // `netpoll.rs`): it must pass it on unless its call found the socket empty.
        let mut turn = false;
        loop {
            if self.pd.is_closed() {
                return Err(crate::netpoll::closed_error());
            }
            let seq = self.pd.seq(dir);
            if !self.pd.drained(dir, seq) {
                match op(&self.sock) {
                    Ok(r) => {
                        if drained(&r) {
                            self.pd.clear(dir, seq);
                        } else if turn {
                            self.pd.pass(dir);
                        }
                        return Ok(r);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        self.pd.clear(dir, seq);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        if turn {
                            self.pd.pass(dir);
                        }
                        return Err(e);
                    }
                }
            }
            self.pd.wait(dir, seq, deadline, turn)?;
            turn = true;
        }
    }

    fn close(&self) {
        self.pd.close();
    }
}

impl<S: AsRawFd> Drop for Registered<S> {
    fn drop(&mut self) {
        // Before `sock` is dropped (and its fd closed): the poller must not hold a
        // closed fd.
        rt().netpoll.deregister(&self.pd);
    }
}

/// Per-direction timeouts, in nanoseconds (0: none).
#[derive(Default)]
struct Timeouts {
    read: AtomicU64,
    write: AtomicU64,
}

impl Timeouts {
    fn get(&self, dir: Dir) -> Option<Duration> {
        // Relaxed: a timeout is a plain setting with nothing else to publish; a read racing
        // a `set_*_timeout` sees the old or the new value, as with std.
        let ns = match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
        }
        .load(Ordering::Relaxed);
        (ns != 0).then(|| Duration::from_nanos(ns))
    }

    /// As std: `Some(Duration::ZERO)` is an error.
    fn set(&self, dir: Dir, t: Option<Duration>) -> io::Result<()> {
        let ns = match t {
            None => 0,
            Some(d) if d.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout",
                ));
            }
            Some(d) => u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        };
        match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
        }
        .store(ns, Ordering::Relaxed);
        Ok(())
    }
}

/// Resolves `addr`: for host names a blocking `getaddrinfo`, run as a blocking call so
/// that the coroutine's P keeps serving the others.
pub(crate) fn resolve(addr: impl ToSocketAddrs) -> io::Result<Vec<SocketAddr>> {
    crate::blocking(|| addr.to_socket_addrs().map(|it| it.collect()))
}

/// Resolves `addr` and tries `f` on each address until one succeeds; the last error
/// otherwise.
fn each_addr<T>(
    addr: impl ToSocketAddrs,
    mut f: impl FnMut(&SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let mut last = None;
    for a in resolve(addr)? {
        match f(&a) {
            Ok(v) => return Ok(v),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "could not resolve to any address",
        )
    }))
}
