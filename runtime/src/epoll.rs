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

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(crate) use libc::epoll_event as RawEvent;

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

pub(crate) struct Epoll {
    epfd: OwnedFd,
    wake: OwnedFd,
    timer: OwnedFd,
    /// A notification was written and not yet acknowledged. Set by `notify` (anyone);
    /// cleared by the poller's `ack_wake`, after it has read the eventfd.
    wake_pending: AtomicBool,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Epoll {
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain system calls; each returned descriptor is new and owned here.
        let (epfd, wake, timer) = unsafe {
            let epfd = OwnedFd::from_raw_fd(cvt(libc::epoll_create1(libc::EPOLL_CLOEXEC))?);
            let wake = OwnedFd::from_raw_fd(cvt(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?);
            let timer = OwnedFd::from_raw_fd(cvt(libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
            ))?);
            (epfd, wake, timer)
        };
        let ep = Epoll {
            epfd,
            wake,
            timer,
            wake_pending: AtomicBool::new(false),
        };
        let edge_in = IN | libc::EPOLLET as u32;
        ep.ctl(libc::EPOLL_CTL_ADD, ep.wake.as_raw_fd(), edge_in, WAKE_KEY)?;
        ep.ctl(
            libc::EPOLL_CTL_ADD,
            ep.timer.as_raw_fd(),
            edge_in,
            TIMER_KEY,
        )?;
        Ok(ep)
    }

    fn ctl(&self, op: libc::c_int, fd: RawFd, events: u32, key: u64) -> io::Result<()> {
        let mut ev = RawEvent { events, u64: key };
        // SAFETY: `ev` is a valid event for the call's duration; a bad `fd` is an error.
        cvt(unsafe { libc::epoll_ctl(self.epfd.as_raw_fd(), op, fd, &mut ev) }).map(drop)
    }

    /// Registers `fd` edge-triggered for reading, writing, the peer's shutdown and
    /// urgent data under `key` (Go registers the same set but urgent data, which the
    /// sockets need: see `PollDesc::clear`).
    pub(crate) fn add(&self, fd: RawFd, key: u64) -> io::Result<()> {
        let events = IN | PRI | OUT | RDHUP | libc::EPOLLET as u32;
        self.ctl(libc::EPOLL_CTL_ADD, fd, events, key)
    }

    pub(crate) fn delete(&self, fd: RawFd) -> io::Result<()> {
        self.ctl(libc::EPOLL_CTL_DEL, fd, 0, 0)
    }

    /// Waits for events into `buf` (its length is set to their count; its capacity
    /// is the most taken at once): `None` without timeout, `Some(ZERO)` not at all.
    /// An interrupted wait returns no events. A timeout shows as a [`TIMER_KEY`] event
    /// (or none); so may, rarely, the expiry of an earlier wait's timeout.
    pub(crate) fn wait(
        &self,
        buf: &mut Vec<RawEvent>,
        timeout: Option<Duration>,
    ) -> io::Result<()> {
        let ms = match timeout {
            Some(t) if t.is_zero() => 0,
            None => -1,
            Some(t) => {
                // Re-arming resets the count of expiries, so an old expiry still queued
                // is not reported (epoll polls the timerfd again before reporting it).
                let spec = libc::itimerspec {
                    it_interval: libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    },
                    it_value: libc::timespec {
                        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
                        tv_nsec: t.subsec_nanos() as libc::c_long,
                    },
                };
                // SAFETY: `spec` is a valid itimerspec; the old value is not asked for.
                cvt(unsafe {
                    libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut())
                })?;
                -1
            }
        };
        buf.clear();
        let cap = buf.capacity().clamp(1, i32::MAX as usize) as libc::c_int;
        buf.reserve(cap as usize);
        // SAFETY: `buf` has room for `cap` events (reserved above, from its start since it
        // is empty); the kernel writes at most `cap` of them.
        let n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), buf.as_mut_ptr(), cap, ms) };
        match cvt(n) {
            Ok(n) => {
                // SAFETY: the kernel initialised the first `n` (<= `cap`) events.
                unsafe { buf.set_len(n as usize) };
                Ok(())
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(e),
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
        let mut buf = Vec::with_capacity(8);
        let mut stuck = 0;
        for _ in 0..200_000 {
            ep.wait(&mut buf, Some(Duration::from_millis(200))).unwrap();
            if buf.iter().any(|ev| ev.u64 == WAKE_KEY) {
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
