//! Blocking socket calls, emulated over non-blocking ones: on a coroutine they park on
//! the netpoller; on a plain thread, for a socket the hooks made non-blocking
//! underneath, they wait in `poll(2)`. Either way the caller sees what the blocking
//! call would have done (see "std's semantics" in the module doc of `hooks`).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

use libc::{c_int, c_short};

use super::fdtable::{entry, parking, Entry, OUR_NB};
use crate::net::poll::{Dir, PollDesc};
use crate::net::socket;
use crate::sys;

/// A raw result: the count, or the errno.
pub(crate) type Raw = Result<usize, c_int>;

/// How a blocking call on one descriptor waits when its attempt finds it not ready.
pub(crate) struct Call {
    fd: RawFd,
    e: &'static Entry,
    dir: Dir,
    deadline: Option<Instant>,
    /// Park on the poller (a coroutine), else wait in `poll(2)` (a plain thread).
    park: bool,
}

impl Call {
    /// The blocking call a coroutine makes on `fd`, if the hooks emulate it: `fd` is a
    /// socket the user sees as blocking (made non-blocking underneath here, once).
    /// None: make the real call.
    pub(crate) fn on_coroutine(fd: RawFd, dir: Dir) -> Option<Call> {
        let e = entry(fd)?;
        let st = e.known(fd);
        if !st.managed() {
            return None;
        }
        if !st.has(OUR_NB) {
            let fl = sys::fcntl(fd, libc::F_GETFL, 0).ok()?;
            if fl as c_int & libc::O_NONBLOCK == 0 {
                sys::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK as usize).ok()?;
            }
            e.set(OUR_NB, true);
        }
        crate::preempt_point();
        Some(Call::new(fd, e, dir, true))
    }

    /// The blocking call a plain thread made on `fd`, which just failed with `EAGAIN`:
    /// Some if the hooks made the socket non-blocking underneath, so the thread must
    /// wait as a blocking call would.
    pub(crate) fn on_thread(fd: RawFd, dir: Dir) -> Option<Call> {
        let e = entry(fd)?;
        e.state().emulated().then(|| Call::new(fd, e, dir, false))
    }

    fn new(fd: RawFd, e: &'static Entry, dir: Dir, park: bool) -> Call {
        let deadline = e
            .timeout(dir == Dir::Read)
            .and_then(|t| Instant::now().checked_add(t));
        Call {
            fd,
            e,
            dir,
            deadline,
            park,
        }
    }

    /// Whether the socket is a stream (its sends queue everything).
    pub(crate) fn stream(&self) -> bool {
        self.e.state().has(super::fdtable::STREAM)
    }

    /// Runs `op` (a non-blocking attempt) until it does not fail with `EAGAIN`, waiting
    /// in between, until the socket's timeout (then `EAGAIN`, as the kernel reports
    /// an expired `SO_RCVTIMEO` / `SO_SNDTIMEO`). `drained(n)`: a result that emptied
    /// (filled) the socket, so the next call waits for an edge first.
    pub(crate) fn io(&self, mut op: impl FnMut() -> Raw, drained: impl Fn(usize) -> bool) -> Raw {
        if !self.park {
            return self.io_polling(op);
        }
        let pd = match self.e.pd_if_any() {
            Some(pd) => pd,
            None => {
                // The first wait on this descriptor: try before registering.
                match op() {
                    Err(libc::EAGAIN) => {}
                    r => return r,
                }
                self.e.pd(self.fd)?
            }
        };
        let r = socket::io_loop(
            &pd,
            self.dir,
            self.deadline,
            || sys::os_err(op()),
            |&n| drained(n),
        );
        r.map_err(|e| errno_of(&e))
    }

    /// `io` for a plain thread: wait in `poll(2)` for the direction's readiness.
    fn io_polling(&self, mut op: impl FnMut() -> Raw) -> Raw {
        let events = match self.dir {
            Dir::Read => libc::POLLIN,
            Dir::Write => libc::POLLOUT,
        };
        loop {
            match op() {
                Err(libc::EAGAIN) => {}
                Err(libc::EINTR) => continue,
                r => return r,
            }
            self.wait_polling(events)?;
        }
    }

    /// Waits in `poll(2)` for `events` until the deadline (then `EAGAIN`).
    fn wait_polling(&self, events: c_short) -> Result<(), c_int> {
        loop {
            let left = match self.deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => return Err(libc::EAGAIN),
                },
            };
            match sys::poll_one(self.fd, events, left) {
                Ok(0) => continue, // the deadline check above decides
                Ok(_) => return Ok(()),
                Err(libc::EINTR) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// A blocking call of `len` bytes: `op(done)` attempts the part after the first
    /// `done` bytes. `all`: the call is not complete until all `len` bytes went (a
    /// stream send, `MSG_WAITALL`), or the peer closed (a read of 0), or the timeout
    /// or an error came after some did (then the partial count, as the kernel).
    /// `all` and `flags` as for [`blocking_call`] (`None`: all on a stream); a short
    /// result empties the socket unless the call peeks (`MSG_PEEK`).
    pub(crate) fn transfer(
        &self,
        len: usize,
        all: Option<bool>,
        flags: c_int,
        mut op: impl FnMut(usize) -> Raw,
    ) -> Raw {
        let all = all.unwrap_or_else(|| self.stream());
        let stream = flags & libc::MSG_PEEK == 0 && self.stream();
        let mut done = 0usize;
        loop {
            let want = len - done;
            match self.io(|| op(done), |n| stream && 0 < n && n < want) {
                Ok(0) => return Ok(done),
                Ok(n) => {
                    done += n;
                    if !all || done >= len {
                        return Ok(done);
                    }
                }
                Err(e) => return if done > 0 { Ok(done) } else { Err(e) },
            }
        }
    }

    /// A blocking `connect` that found the connection in progress (`EINPROGRESS`):
    /// waits for it to finish and reports its outcome; `EINPROGRESS` again at the
    /// `SO_SNDTIMEO` timeout, as Linux reports it.
    pub(crate) fn connected(&self) -> Raw {
        let done = if self.park {
            // Registered after the start (see `net::tcp::connect_one`).
            let pd: Arc<PollDesc> = self.e.pd(self.fd)?;
            // SAFETY: the caller's fd is open for the duration of its call.
            let sock = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
            socket::wait_connected(&pd, sock, self.deadline).map_err(|e| errno_of(&e))
        } else {
            self.wait_polling(libc::POLLOUT)
        };
        match done {
            Err(libc::EAGAIN) => return Err(libc::EINPROGRESS),
            Err(e) => return Err(e),
            Ok(()) => {}
        }
        match sys::getsockopt::<c_int>(self.fd, libc::SOL_SOCKET, libc::SO_ERROR)? {
            0 => Ok(0),
            e => Err(e),
        }
    }
}

/// The errno for an error of the poller's loop: the system call's own, `EAGAIN` for a
/// timeout, `EBADF` for a descriptor closed under the call.
fn errno_of(e: &std::io::Error) -> c_int {
    match e.raw_os_error() {
        Some(n) => n,
        None if e.kind() == std::io::ErrorKind::TimedOut => libc::EAGAIN,
        None => libc::EBADF,
    }
}

/// Runs a blocking call on `fd` in `dir` as the caller's blocking call: `op(done)`
/// attempts the bytes after `done` of `len` (see [`Call::transfer`]); `flags`: the
/// call's `MSG_*` flags (`MSG_DONTWAIT`: a non-blocking attempt, the real call;
/// `MSG_PEEK`: the data read stays queued); `all`: whether the
/// call waits for all `len` bytes on a stream (`Some(true)` always, `Some(false)`
/// never, `None` if the socket is a stream: a send).
#[inline(always)]
pub(crate) fn blocking_call(
    fd: RawFd,
    dir: Dir,
    flags: c_int,
    len: usize,
    all: Option<bool>,
    mut op: impl FnMut(usize) -> Raw,
) -> Raw {
    if !parking() {
        // A plain thread: the real call, and only if the socket turned out
        // non-blocking underneath, the emulation.
        let r = op(0);
        if r == Err(libc::EAGAIN) && flags & libc::MSG_DONTWAIT == 0 {
            return thread_would_block(fd, dir, flags, len, all, op);
        }
        return r;
    }
    coroutine_call(fd, dir, flags, len, all, op)
}

/// A plain thread's call failed with `EAGAIN`: wait if the hooks made the socket
/// non-blocking underneath (see [`blocking_call`]).
#[cold]
#[inline(never)]
fn thread_would_block(
    fd: RawFd,
    dir: Dir,
    flags: c_int,
    len: usize,
    all: Option<bool>,
    op: impl FnMut(usize) -> Raw,
) -> Raw {
    match Call::on_thread(fd, dir) {
        Some(call) => call.transfer(len, all, flags, op),
        None => Err(libc::EAGAIN),
    }
}

/// A coroutine's call (see [`blocking_call`]).
#[inline(never)]
fn coroutine_call(
    fd: RawFd,
    dir: Dir,
    flags: c_int,
    len: usize,
    all: Option<bool>,
    mut op: impl FnMut(usize) -> Raw,
) -> Raw {
    if flags & libc::MSG_DONTWAIT != 0 {
        return op(0);
    }
    let Some(call) = Call::on_coroutine(fd, dir) else {
        return op(0);
    };
    call.transfer(len, all, flags, op)
}
