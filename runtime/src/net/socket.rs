//! What every socket type shares: its registration with the poller (`Registered`,
//! which runs the try-wait-retry loop of each operation), the operations of stream and
//! datagram sockets on it, `accept`, its timeouts, name resolution, the conversions
//! to and from std's sockets and descriptors, and the `AsFd`/`Debug` impls.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::net::{SocketAddr, ToSocketAddrs};

use socket2::SockAddr;

use super::poll::{closed_error, Dir, PollDesc};
use crate::sys;

/// The first back-off after `accept` finds no descriptor left (EMFILE, ENFILE).
/// Accept back-offs so far, process-wide (`debug::stats().accept_backoffs`). Relaxed:
/// a count for display.
pub(crate) static ACCEPT_BACKOFFS: AtomicU64 = AtomicU64::new(0);

/// When the last back-off line went to stderr (`nanotime`), 0 for never.
static ACCEPT_BACKOFF_SAID: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// An accept failed for want of descriptors or memory and backs off for `wait`: count
/// it, and say so on stderr at most once a second, as Go's `net/http` server logs
/// "Accept error: ...; retrying in ...". A server that leaks descriptors stops
/// accepting; this is how its operator learns why.
fn accept_backoff(e: &io::Error, wait: Duration) {
    ACCEPT_BACKOFFS.fetch_add(1, Ordering::Relaxed);
    let now = crate::timers::nanotime();
    // Relaxed: a rate limit; the exchange decides who prints, nothing else is read.
    let last = ACCEPT_BACKOFF_SAID.load(Ordering::Relaxed);
    if (last == 0 || now - last >= 1_000_000_000)
        && ACCEPT_BACKOFF_SAID
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        eprintln!(
            "goro: net: accept error: {e}; retrying in {wait:?} ({} back-offs so far)",
            ACCEPT_BACKOFFS.load(Ordering::Relaxed)
        );
    }
}

const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(5);
/// The longest one.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

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

/// `Read` and `Write` for a stream socket type and for a shared reference to it (one
/// reader and one writer at a time, as std's), on `self.reg`'s stream operations.
macro_rules! impl_stream_io {
    ($($t:ty),+) => {$(
        super::socket::impl_stream_io!(@one $t);
        super::socket::impl_stream_io!(@one &$t);
    )+};
    (@one $t:ty) => {
        impl std::io::Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
                self.reg.read(buf)
            }
            fn read_vectored(
                &mut self,
                bufs: &mut [std::io::IoSliceMut<'_>],
            ) -> std::io::Result<usize> {
                self.reg.read_vectored(bufs)
            }
        }

        impl std::io::Write for $t {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.reg.write(buf)
            }
            fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
                self.reg.write_vectored(bufs)
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
    };
}
pub(crate) use impl_stream_io;

/// std's four timeout methods for socket types whose `self.reg` has per-direction
/// timeouts (all but the listeners).
macro_rules! impl_timeouts {
    ($($t:ty),+) => {$(
        impl $t {
            /// Each read (receive) waits at most `timeout` (`None`: no limit); expiry is
            /// `ErrorKind::TimedOut` and leaves the socket usable. `Some(Duration::ZERO)`
            /// is an `InvalidInput` error, as in std.
            pub fn set_read_timeout(
                &self,
                timeout: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.reg.timeouts.set(super::poll::Dir::Read, timeout)
            }

            /// Each write (send) waits at most `timeout` (`None`: no limit), as
            /// [`set_read_timeout`](Self::set_read_timeout) for reads.
            pub fn set_write_timeout(
                &self,
                timeout: Option<std::time::Duration>,
            ) -> std::io::Result<()> {
                self.reg.timeouts.set(super::poll::Dir::Write, timeout)
            }

            /// The read timeout.
            pub fn read_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.reg.timeouts.get(super::poll::Dir::Read))
            }

            /// The write timeout.
            pub fn write_timeout(&self) -> std::io::Result<Option<std::time::Duration>> {
                Ok(self.reg.timeouts.get(super::poll::Dir::Write))
            }
        }
    )+};
}
pub(crate) use impl_timeouts;

/// std's `incoming` iterator `$it` of listener `$l` (its `accept`'s streams `$s`),
/// and `IntoIterator for &$l` giving it.
macro_rules! impl_incoming {
    ($it:ident, $l:ty, $s:ty) => {
        /// The endless iterator of the listener's `incoming`: each item is an
        /// `accept`'s stream (or its error).
        pub struct $it<'a> {
            listener: &'a $l,
        }

        impl Iterator for $it<'_> {
            type Item = std::io::Result<$s>;
            fn next(&mut self) -> Option<Self::Item> {
                Some(self.listener.accept().map(|(s, _)| s))
            }
        }

        impl<'a> IntoIterator for &'a $l {
            type Item = std::io::Result<$s>;
            type IntoIter = $it<'a>;
            fn into_iter(self) -> $it<'a> {
                $it { listener: self }
            }
        }
    };
}
pub(crate) use impl_incoming;

/// The descriptor conversions of a socket type with `from_std` and `self.reg`:
/// `TryFrom<OwnedFd>` (registration can fail, so not `From`: tokio offers neither),
/// `From<T> for OwnedFd` and `IntoRawFd` (deregistered and back in blocking mode, as
/// `into_std`), and `FromRawFd`, whose signature cannot fail: it panics if the
/// registration does (see "Conversions" in `net/mod.rs`).
macro_rules! impl_fd_conv {
    ($($t:ident),+) => {$(
        impl TryFrom<std::os::fd::OwnedFd> for $t {
            type Error = std::io::Error;
            /// [`from_std`](Self::from_std) of the descriptor: non-blocking, registered.
            fn try_from(fd: std::os::fd::OwnedFd) -> std::io::Result<$t> {
                $t::from_std(fd.into())
            }
        }

        impl From<$t> for std::os::fd::OwnedFd {
            /// The descriptor, deregistered and in blocking mode again.
            fn from(s: $t) -> std::os::fd::OwnedFd {
                s.reg.into_blocking().into()
            }
        }

        impl std::os::fd::IntoRawFd for $t {
            /// As `OwnedFd::from`: deregistered, blocking.
            fn into_raw_fd(self) -> std::os::fd::RawFd {
                std::os::fd::IntoRawFd::into_raw_fd(std::os::fd::OwnedFd::from(self))
            }
        }

        impl std::os::fd::FromRawFd for $t {
            /// Adopts `fd` as [`TryFrom<OwnedFd>`](TryFrom) does.
            ///
            /// # Panics
            ///
            /// If the descriptor cannot be made non-blocking or registered with the
            /// poller (not a socket, the poller's limit `fs.epoll.max_user_watches`
            /// reached): the trait's signature cannot return the error. Code that must
            /// not panic uses `TryFrom<OwnedFd>` or `from_std`.
            ///
            /// # Safety
            ///
            /// As `OwnedFd::from_raw_fd`: `fd` is open and owned by nothing else.
            unsafe fn from_raw_fd(fd: std::os::fd::RawFd) -> $t {
                // SAFETY: the caller's contract, passed on.
                let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
                $t::try_from(owned).unwrap_or_else(|e| {
                    panic!(
                        concat!(
                            "goro::net::",
                            stringify!($t),
                            "::from_raw_fd({}): the descriptor could not be adopted ",
                            "(made non-blocking and registered with the poller): {}"
                        ),
                        fd, e
                    )
                })
            }
        }
    )+};
}
pub(crate) use impl_fd_conv;

/// Sets or clears `O_NONBLOCK` on `fd`; returns whether it changed anything (so
/// `goro::io::PollFd` can put back what it found). Through libc's `fcntl`, so that
/// with the `hooks` feature the hooks learn the user's mode (a descriptor non-blocking
/// by the user's wish has its calls left alone).
pub(crate) fn set_nonblocking(fd: impl AsFd, on: bool) -> io::Result<bool> {
    let fd = fd.as_fd().as_raw_fd();
    // SAFETY: F_GETFL takes no argument and touches no memory.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(io::Error::last_os_error());
    }
    let new = if on {
        fl | libc::O_NONBLOCK
    } else {
        fl & !libc::O_NONBLOCK
    };
    if new == fl {
        return Ok(false);
    }
    // SAFETY: F_SETFL takes an int of flags and touches no memory.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, new) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(true)
}

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
        io_loop(
            &self.pd,
            dir,
            self.deadline(dir),
            || op(&self.sock),
            drained,
        )
    }

    /// When an operation in `dir` starting now gives up: its timeout from now.
    pub(crate) fn deadline(&self, dir: Dir) -> Option<Instant> {
        self.timeouts.get(dir).map(|t| Instant::now() + t)
    }

    pub(crate) fn close(&self) {
        self.pd.close();
    }

    /// Deregisters and hands back the socket, still non-blocking.
    pub(crate) fn into_inner(self) -> S {
        let me = std::mem::ManuallyDrop::new(self);
        // As in `drop`: off the poller before the socket can be closed.
        me.pd.deregister();
        // SAFETY: `me` is never used or dropped again, so each field moved out here is
        // moved out once; `timeouts` (plain atomics) needs no drop.
        let (pd, sock) = unsafe { (std::ptr::read(&me.pd), std::ptr::read(&me.sock)) };
        drop(pd);
        sock
    }

    /// Waits for a connection (`accept4`, the new socket non-blocking and close-on-exec
    /// at birth). When the process runs out of file descriptors (EMFILE, ENFILE) or
    /// memory it backs off (5 ms, doubling up to 1 s) and retries rather than failing
    /// or spinning; connections wait in the kernel's backlog meanwhile. Each back-off
    /// counts in `debug::stats().accept_backoffs` and is said on stderr, at most once
    /// a second (see [`accept_backoff`]). A connection aborted before it was accepted
    /// is skipped.
    pub(crate) fn accept(&self) -> io::Result<(OwnedFd, SockAddr)> {
        let mut backoff = ACCEPT_BACKOFF_MIN;
        let flags = libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
        loop {
            match self.io(Dir::Read, |l| {
                sys::os_err(sys::accept4(l.as_fd().as_raw_fd(), flags))
            }) {
                Ok((fd, addr)) => {
                    // SAFETY: accept4 just returned `fd`, which nothing else owns.
                    return Ok((unsafe { OwnedFd::from_raw_fd(fd) }, addr));
                }
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
                    ) =>
                {
                    accept_backoff(&e, backoff);
                    crate::time::sleep(backoff);
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
                Err(e) if e.raw_os_error() == Some(libc::ECONNABORTED) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// A stream read (`recv`); a short one drained the socket.
    pub(crate) fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.io_draining(
            Dir::Read,
            |s| sys::os_err(sys::recv(s.as_fd().as_raw_fd(), buf, 0)),
            |&n| 0 < n && n < len,
        )
    }

    /// One `readv` into all of `bufs`, as std's.
    pub(crate) fn read_vectored(&self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        self.io_draining(
            Dir::Read,
            |s| sys::os_err(sys::readv(s.as_fd().as_raw_fd(), bufs)),
            |&n| 0 < n && n < len,
        )
    }

    /// A stream write (`send` with `MSG_NOSIGNAL`); a short one filled the socket.
    pub(crate) fn write(&self, buf: &[u8]) -> io::Result<usize> {
        let len = buf.len();
        self.io_draining(
            Dir::Write,
            |s| sys::os_err(sys::send(s.as_fd().as_raw_fd(), buf, libc::MSG_NOSIGNAL)),
            |&n| 0 < n && n < len,
        )
    }

    /// One `writev` from all of `bufs`.
    pub(crate) fn write_vectored(&self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.io(Dir::Write, |s| {
            sys::os_err(sys::writev(s.as_fd().as_raw_fd(), bufs))
        })
    }

    /// A `recv` with `flags` (`MSG_PEEK` for a peek): a datagram, or a stream's bytes
    /// without the drained hint (a peek leaves the bytes queued, so a short one says
    /// nothing about the next read).
    pub(crate) fn recv(&self, buf: &mut [u8], flags: libc::c_int) -> io::Result<usize> {
        self.io(Dir::Read, |s| {
            sys::os_err(sys::recv(s.as_fd().as_raw_fd(), buf, flags))
        })
    }

    /// A `recvfrom` with `flags`: a datagram and its sender.
    pub(crate) fn recv_from(
        &self,
        buf: &mut [u8],
        flags: libc::c_int,
    ) -> io::Result<(usize, SockAddr)> {
        self.io(Dir::Read, |s| {
            sys::os_err(sys::recv_from(s.as_fd().as_raw_fd(), buf, flags))
        })
    }

    /// A datagram to the connected peer.
    pub(crate) fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.io(Dir::Write, |s| {
            sys::os_err(sys::send(s.as_fd().as_raw_fd(), buf, libc::MSG_NOSIGNAL))
        })
    }

    /// A datagram to `addr`.
    pub(crate) fn send_to(&self, buf: &[u8], addr: &SockAddr) -> io::Result<usize> {
        self.io(Dir::Write, |s| {
            sys::os_err(sys::send_to(
                s.as_fd().as_raw_fd(),
                buf,
                addr,
                libc::MSG_NOSIGNAL,
            ))
        })
    }
}

impl<S: AsRawFd + AsFd + From<OwnedFd> + Into<OwnedFd>> Registered<S> {
    /// A stream's `close`: closes the descriptor (its waiters wake with the close
    /// error), then shuts the socket down both ways (the peer reads EOF). In this
    /// order a waiter cannot be woken by the shutdown's edge first and read an EOF.
    pub(crate) fn close_shutdown(&self) {
        self.close();
        let _ = socket2::SockRef::from(&self.sock).shutdown(std::net::Shutdown::Both);
    }

    /// A second registration of the same socket under a duplicated descriptor
    /// (`try_clone`): non-blocking as the original, since the mode belongs to the
    /// open socket.
    pub(crate) fn try_clone(&self) -> io::Result<Self> {
        Registered::new(S::from(self.sock.as_fd().try_clone_to_owned()?))
    }

    /// Adopts a socket made elsewhere (`from_std`): sets non-blocking mode and
    /// registers it.
    ///
    /// If the poller already holds the descriptor (with the `hooks`, a std socket a
    /// coroutine has blocked on is registered by the hooks; without them, a descriptor
    /// a second goro socket was made from), the socket is adopted under a duplicate
    /// descriptor and the original closed, which also ends that registration (the
    /// hooks' `close`). Its `as_raw_fd` then differs from the one given.
    pub(crate) fn adopt(sock: S) -> io::Result<Self> {
        set_nonblocking(&sock, true)?;
        match PollDesc::register(sock.as_raw_fd()) {
            Ok(pd) => Ok(Registered {
                pd,
                sock,
                timeouts: Timeouts::default(),
            }),
            Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {
                let fd: OwnedFd = sock.into();
                let dup = fd.try_clone()?;
                drop(fd);
                Registered::new(S::from(dup))
            }
            Err(e) => Err(e),
        }
    }

    /// Deregisters and hands back the socket in blocking mode, as std makes them
    /// (`into_std`).
    pub(crate) fn into_std(self) -> io::Result<S> {
        let sock = self.into_inner();
        set_nonblocking(&sock, false)?;
        Ok(sock)
    }

    /// [`Registered::into_std`] for conversions that cannot fail (`OwnedFd::from`):
    /// `FIONBIO` on an open descriptor fails only for a descriptor that is not open
    /// (`EBADF`), which an owned socket is not, so its result is not needed.
    pub(crate) fn into_blocking(self) -> S {
        let sock = self.into_inner();
        let _ = set_nonblocking(&sock, false);
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
                    pd.clear_empty(dir, seq);
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
