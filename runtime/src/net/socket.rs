//! What every socket type shares: its registration with the poller (`Registered`,
//! which runs the try-wait-retry loop of each operation), its timeouts, name
//! resolution, and the `AsFd`/`Debug` impls.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::net::{SocketAddr, ToSocketAddrs};

use super::poll::{closed_error, Dir, PollDesc};

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
pub(crate) use impl_socket;

/// A non-blocking socket and its poll descriptor. Deregisters before the socket closes.
pub(crate) struct Registered<S: AsFd> {
    pub(crate) pd: Arc<PollDesc>,
    pub(crate) sock: S,
    pub(crate) timeouts: Timeouts,
}

/// The turn a call holds on a descriptor direction (see "many waiters" in
/// `net/poll.rs`), ended exactly once: passed on, ended, or, if the call unwinds,
/// ended by `drop`.
struct Turn<'a> {
    pd: &'a PollDesc,
    dir: Dir,
    held: bool,
    /// The edge count read before the call this turn retried.
    seq: u32,
}

impl Turn<'_> {
    /// The call may have left the socket ready: the next waiter's turn.
    fn pass(&mut self) {
        if std::mem::take(&mut self.held) {
            self.pd.pass(self.dir);
        }
    }

    /// The call drained the socket: the turn ends here (unless an edge came since).
    fn end(&mut self) {
        if std::mem::take(&mut self.held) {
            self.pd.end_turn(self.dir, self.seq);
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<S: AsFd> Registered<S> {
    /// Registers `sock`, which must already be non-blocking.
    pub(crate) fn new(sock: S) -> io::Result<Self> {
        let pd = PollDesc::register(sock.as_fd().as_raw_fd())?;
        Ok(Registered {
            pd,
            sock,
            timeouts: Timeouts::default(),
        })
    }

    /// Runs `op` until it does not return `WouldBlock`, waiting for readiness in `dir`
    /// in between, with `dir`'s timeout.
    pub(crate) fn io<R>(&self, dir: Dir, op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        self.io_draining(dir, op, |_| false)
    }

    /// [`Registered::io`] for an operation that can tell when it drained the socket
    /// (`drained(&result)`: a short read or write of a stream). After one that did, the
    /// next operation in `dir` waits for an edge before its system call instead of
    /// making one that would fail with `WouldBlock` (tokio does the same).
    pub(crate) fn io_draining<R>(
        &self,
        dir: Dir,
        mut op: impl FnMut(&S) -> io::Result<R>,
        drained: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        crate::preempt_point();
        let deadline = self.timeouts.get(dir).map(|t| Instant::now() + t);
        io_loop(&self.pd, dir, deadline, || op(&self.sock), drained)
    }

    pub(crate) fn close(&self) {
        self.pd.close();
    }

    /// Deregisters the descriptor and hands it back, still open (`goro::io::PollFd`).
    pub(crate) fn into_inner(self) -> S {
        let me = std::mem::ManuallyDrop::new(self);
        me.pd.deregister();
        // SAFETY: `me` is never used nor dropped again, so each field is moved out
        // exactly once; `timeouts` holds only atomics and needs no drop.
        let (pd, sock) = unsafe { (std::ptr::read(&me.pd), std::ptr::read(&me.sock)) };
        drop(pd);
        sock
    }
}

impl<S: AsFd> Drop for Registered<S> {
    fn drop(&mut self) {
        // Before `sock` is dropped (and its fd closed): the poller must not hold a
        // closed fd.
        self.pd.deregister();
    }
}

/// The try-wait-retry loop of every operation on a registered descriptor (the body of
/// [`Registered::io_draining`], shared with the hooks): runs `op` until it does not
/// fail with `WouldBlock`, waiting for readiness in `dir` in between, until
/// `deadline` (then `TimedOut`). `drained(&result)`: the call drained the socket (a
/// short read or write of a stream), so the next operation in `dir` waits for an edge
/// before its system call instead of making one that would fail with `WouldBlock`.
pub(crate) fn io_loop<R>(
    pd: &PollDesc,
    dir: Dir,
    deadline: Option<Instant>,
    mut op: impl FnMut() -> io::Result<R>,
    drained: impl Fn(&R) -> bool,
) -> io::Result<R> {
    // The turn this call holds on the descriptor, if any (see "many waiters" in
    // `net/poll.rs`): it must pass it on, or end it, however the call ends (the guard
    // ends it on an unwind).
    let mut turn = Turn {
        pd,
        dir,
        held: false,
        seq: 0,
    };
    loop {
        if pd.is_closed() {
            return Err(closed_error());
        }
        let seq = pd.seq(dir);
        turn.seq = seq;
        if !pd.drained(dir, seq) {
            match op() {
                Ok(r) => {
                    if drained(&r) {
                        pd.clear(dir, seq);
                        turn.end();
                    } else {
                        turn.pass();
                    }
                    return Ok(r);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    pd.clear(dir, seq);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    turn.pass();
                    return Err(e);
                }
            }
        }
        // A holder that waits again gives its turn back (`wait` with `front`).
        let front = std::mem::replace(&mut turn.held, false);
        turn.held = pd.wait(dir, seq, deadline, front)?;
    }
}

/// Waits, until `deadline`, for the connect started on `sock` (registered as `pd`
/// after the start) to finish: `Ok` once connected, the socket's error if it failed.
pub(crate) fn wait_connected(
    pd: &PollDesc,
    sock: impl std::os::fd::AsFd,
    deadline: Option<Instant>,
) -> io::Result<()> {
    let sock = socket2::SockRef::from(&sock);
    loop {
        let seq = pd.seq(Dir::Write);
        if pd.wait(Dir::Write, seq, deadline, false)? {
            // The connect's wait is the descriptor's first: its turn ends here (a
            // writer after it makes its own call).
            pd.end_turn(Dir::Write, seq);
        }
        if let Some(e) = sock.take_error()? {
            return Err(e);
        }
        match sock.peer_addr() {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotConnected => continue, // not yet
            Err(e) => return Err(e),
        }
    }
}

/// Per-direction timeouts, in nanoseconds (0: none). Written by `set_*_timeout`; read
/// by every operation in that direction (Relaxed: plain settings, see `get`).
#[derive(Default)]
pub(crate) struct Timeouts {
    read: AtomicU64,
    write: AtomicU64,
}

impl Timeouts {
    pub(crate) fn get(&self, dir: Dir) -> Option<Duration> {
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
    pub(crate) fn set(&self, dir: Dir, t: Option<Duration>) -> io::Result<()> {
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
        // Relaxed: as in `get`.
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
pub(crate) fn each_addr<T>(
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
