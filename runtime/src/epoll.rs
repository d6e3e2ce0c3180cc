//! The epoll instance under the netpoller, called directly (Go: netpoll_epoll.go).
//!
//! goro first used the `polling` crate here. Its `Poller::wait` makes four more system
//! calls than the wait itself on every call, a non-blocking one included: it arms its
//! timerfd (`timerfd_settime` and an `epoll_ctl`) and re-arms its notifier (a `read`
//! of its eventfd and an `epoll_ctl`). Under the echo benchmark those came to 3% of the
//! server's CPU. And it cannot ask for `EPOLLRDHUP`, which the sockets need to keep a
//! peer's FIN from being taken for an empty socket (see `PollDesc::clear`). So this
//! module makes the calls itself:
//!
//! - a wait with a timeout arms a timerfd registered once (edge-triggered, under
//!   [`TIMER_KEY`]) and waits without one: two system calls, and no timer slack (an
//!   `epoll_pwait2` timeout would get the thread's 50 µs slack);
//! - a non-blocking poll is one `epoll_wait` with timeout 0;
//! - `notify` writes an eventfd registered edge-triggered under [`WAKE_KEY`], once
//!   until the poller acknowledges it ([`Epoll::ack_wake`]).

//!
//! The calls go through `nix` (safe wrappers that add no system call); the eventfd's
//! reads and writes go through `crate::sys`, whose raw system calls the `hooks`
//! feature never intercepts.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::epoll::{self as ep, EpollCreateFlags, EpollFlags, EpollTimeout};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

/// One event as the kernel reports it: [`events`](ep::EpollEvent::events) and the
/// registration's key as [`data`](ep::EpollEvent::data).
pub(crate) use nix::sys::epoll::EpollEvent as RawEvent;

/// The key of the notifier's events.
pub(crate) const WAKE_KEY: u64 = u64::MAX;
/// The key of the timeout timer's events.
pub(crate) const TIMER_KEY: u64 = u64::MAX - 1;

/// Event bits (as `u32`, the type of `epoll_event::events`).
pub(crate) const IN: u32 = libc::EPOLLIN as u32;
pub(crate) const PRI: u32 = libc::EPOLLPRI as u32;
pub(crate) const OUT: u32 = libc::EPOLLOUT as u32;
pub(crate) const ERR: u32 = libc::EPOLLERR as u32;
pub(crate) const HUP: u32 = libc::EPOLLHUP as u32;
pub(crate) const RDHUP: u32 = libc::EPOLLRDHUP as u32;

/// The events one poll can report: a fixed set of slots, of which a wait fills the
/// first [`len`](Events::len). The slots stay initialised between waits, so a wait
/// writes nothing but what the kernel writes.
pub(crate) struct Events {
    slots: Box<[RawEvent]>,
    len: usize,
}

impl Events {
    /// Room for `cap` events a poll (at least one).
    pub(crate) fn with_capacity(cap: usize) -> Events {
        Events {
            slots: vec![RawEvent::empty(); cap.max(1)].into_boxed_slice(),
            len: 0,
        }
    }

    /// The events of the last wait.
    pub(crate) fn as_slice(&self) -> &[RawEvent] {
        &self.slots[..self.len]
    }
}

pub(crate) struct Epoll {
    epoll: ep::Epoll,
    wake: EventFd,
    timer: TimerFd,
    /// A notification was written and not yet acknowledged. Set by `notify` (anyone);
    /// cleared by the poller's `ack_wake`, after it has read the eventfd.
    wake_pending: AtomicBool,
}

/// `fd`, borrowed for one `epoll_ctl`.
///
/// # Safety
///
/// `fd` must be open for the duration of the call.
unsafe fn borrow(fd: RawFd) -> BorrowedFd<'static> {
    // SAFETY: the caller keeps `fd` open across the one call it is borrowed for; the
    // `'static` never escapes that call.
    unsafe { BorrowedFd::borrow_raw(fd) }
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        let ep = Epoll {
            epoll: ep::Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?,
            wake: EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?,
            timer: TimerFd::new(
                ClockId::CLOCK_MONOTONIC,
                TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
            )?,
            wake_pending: AtomicBool::new(false),
        };
        let edge_in = EpollFlags::EPOLLIN | EpollFlags::EPOLLET;
        ep.epoll.add(&ep.wake, RawEvent::new(edge_in, WAKE_KEY))?;
        ep.epoll.add(&ep.timer, RawEvent::new(edge_in, TIMER_KEY))?;
        Ok(ep)
    }

    /// Registers `fd` edge-triggered for reading, writing, the peer's shutdown and
    /// urgent data under `key` (Go registers the same set but urgent data, which the
    /// sockets need: see `PollDesc::clear`). `fd` must stay open until [`delete`](Self::delete).
    pub(crate) fn add(&self, fd: RawFd, key: u64) -> io::Result<()> {
        let events = EpollFlags::EPOLLIN
            | EpollFlags::EPOLLPRI
            | EpollFlags::EPOLLOUT
            | EpollFlags::EPOLLRDHUP
            | EpollFlags::EPOLLET;
        // SAFETY: the caller's `fd` is open during the call (a bad one is EBADF).
        Ok(self
            .epoll
            .add(unsafe { borrow(fd) }, RawEvent::new(events, key))?)
    }

    /// Removes `fd`, still open, from the set.
    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        // SAFETY: as in `add`: the caller closes `fd` only after this call.
        Ok(self.epoll.delete(unsafe { borrow(fd) })?)
    }

    /// Waits for events into `buf`: `None` without timeout, `Some(ZERO)` not at all.
    /// An interrupted wait returns no events. A timeout shows as a [`TIMER_KEY`] event
    /// (or none); so may, rarely, the expiry of an earlier wait's timeout.
    pub(crate) fn wait(&self, buf: &mut Events, timeout: Option<Duration>) -> io::Result<()> {
        let ms = match timeout {
            Some(t) if t.is_zero() => EpollTimeout::ZERO,
            None => EpollTimeout::NONE,
            Some(t) => {
                // Re-arming resets the count of expiries, so an old expiry still queued
                // is not reported (epoll polls the timerfd again before reporting it).
                // `t` is not zero, which would disarm the timer instead.
                let at = Expiration::OneShot(TimeSpec::from_duration(t));
                self.timer.set(at, TimerSetTimeFlags::empty())?;
                EpollTimeout::NONE
            }
        };
        buf.len = 0;
        match self.epoll.wait(&mut buf.slots, ms) {
            Ok(n) => {
                buf.len = n;
                Ok(())
            }
            Err(nix::errno::Errno::EINTR) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Makes the current or next `wait` return (Go: netpollBreak). Writes the
    /// eventfd only if no notification is pending already.
    pub(crate) fn notify(&self) {
        // Acquire: pairs with `ack_wake`'s Release, so a notify that reads its `false`
        // writes after the poller's read(2): the write stays pending for the next wait.
        // One that finds the flag set is covered by a write not consumed yet, or by a
        // poller between its read and its clear, awake and about to re-check anyway.
        if !self.wake_pending.swap(true, Ordering::Acquire) {
            let one: u64 = 1;
            // It cannot fail but by overflowing the counter, which one pending write
            // never does.
            let _ = crate::sys::write(self.wake.as_raw_fd(), &one.to_ne_bytes());
        }
    }

    /// The poller saw a [`WAKE_KEY`] event: consume the notification. The eventfd is
    /// read first, the flag cleared after (as Go's netpoll), so a `notify` racing with
    /// this either finds the flag still set (the poller is awake anyway) or writes
    /// after the read and breaks the next wait. (Cleared first, a notify's write could
    /// land before the read and be consumed, leaving the flag set with nothing
    /// pending: every later `notify` would skip its write.)
    pub(crate) fn ack_wake(&self) {
        // The eventfd is non-blocking: EAGAIN if the counter is already 0.
        let _ = crate::sys::read(self.wake.as_raw_fd(), &mut [0u8; 8]);
        // Release: the read(2) above comes before the clear for a notify whose Acquire
        // swap reads it (see `notify`).
        self.wake_pending.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A notify racing with the poller's acknowledgement is never lost for good: while
    /// a thread keeps notifying, every wait of the poller is broken by it.
    #[test]
    fn notify_racing_ack_wake_is_never_stuck() {
        let ep = Arc::new(Epoll::new().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let notifier = {
            let (ep, stop) = (ep.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    ep.notify();
                }
            })
        };
        let mut buf = Events::with_capacity(8);
        let mut stuck = 0;
        for _ in 0..200_000 {
            ep.wait(&mut buf, Some(Duration::from_millis(200))).unwrap();
            if buf.as_slice().iter().any(|ev| ev.data() == WAKE_KEY) {
                ep.ack_wake();
            } else {
                stuck += 1;
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        notifier.join().unwrap();
        assert_eq!(
            stuck, 0,
            "a wait went unbroken while notify was being called"
        );
    }
}
