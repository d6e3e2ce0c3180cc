//! The netpoller: one `polling::Poller` per runtime, where the last M to go idle sleeps
//! until the earliest timer of any P (sockets will be registered here too).
//!
//! Only one M blocks in the poller at a time (`polling` makes a second `wait` return at
//! once anyway). It publishes the deadline it sleeps until in `until`; whoever adds a
//! timer earlier than that breaks the wait with `Poller::notify` (Go: netpollBreak).
//!
//! # The poller's Dekker pair
//!
//! The blocking M stores `until`, then (after a SeqCst fence) reads every P's earliest
//! timer once more and shortens its deadline if one is earlier. A timer adder stores its
//! P's earliest `when`, then (after a SeqCst fence) reads `until`. Either the M sees the
//! new timer, or the adder sees the M's deadline and notifies it; a notification sent
//! before the wait makes the wait return at once. `polling`'s epoll backend arms a
//! timerfd for the timeout, so the wait has nanosecond resolution and no timer slack.
//!
//! # Waking early
//!
//! Resolution is not latency: on this project's VM a timerfd wait of 100 µs returns
//! ~40 µs late and one of 1 ms ~90 µs late at the median (the time for the host to run
//! a halted vCPU again), whatever the wait primitive. So the poller asks the kernel to
//! wake it [`Netpoll::early_margin`] before the deadline, and the scheduler spins the
//! rest of the way with a P in hand (`find_runnable`: a timer due within the margin
//! keeps a spinning M spinning). The margin is twice the lateness the poller has
//! observed (an exponential moving average), within [`MIN_EARLY_NS`, `MAX_EARLY_NS`]:
//! on a machine that wakes promptly it costs ~20 µs of CPU per timer expiry, here
//! ~200 µs.

use std::sync::atomic::{fence, AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use polling::{Events, Poller};

use crate::timers::{nanotime, until};
use goro_timers::MAX_WHEN;

pub(crate) struct Netpoll {
    poller: Poller,
    /// Whether an M is (about to be) blocked in the poller. Taken with a swap.
    busy: AtomicBool,
    /// The deadline the blocked M sleeps until (`MAX_WHEN`: no timeout), or 0 when no
    /// M is blocked. Written by the blocking M; read by timer adders.
    until: AtomicI64,
    events: Mutex<Events>,
    /// Moving average of how late the kernel woke the poller after a timeout, in ns.
    /// Written only by the M in the poller; read by anyone.
    late_avg: AtomicI64,
}

/// Bounds of the early-wake margin.
pub(crate) const MIN_EARLY_NS: i64 = 20_000;
pub(crate) const MAX_EARLY_NS: i64 = 250_000;

impl Netpoll {
    pub(crate) fn new() -> std::io::Result<Netpoll> {
        Ok(Netpoll {
            poller: Poller::new()?,
            busy: AtomicBool::new(false),
            until: AtomicI64::new(0),
            events: Mutex::new(Events::new()),
            late_avg: AtomicI64::new(MIN_EARLY_NS),
        })
    }

    /// How long before a timer's deadline the poller wakes (see "waking early").
    pub(crate) fn early_margin(&self) -> i64 {
        (2 * self.late_avg.load(Ordering::Relaxed)).clamp(MIN_EARLY_NS, MAX_EARLY_NS)
    }

    /// Blocks the calling M (which holds no P) until `earliest()` — the earliest timer
    /// of any P, 0 for none — or a notification. Returns false at once, without
    /// blocking, if another M is already in the poller or there is nothing to wait for.
    pub(crate) fn block(&self, earliest: impl Fn() -> i64) -> bool {
        if self.busy.swap(true, Ordering::Acquire) {
            return false;
        }
        let mut deadline = earliest();
        if deadline == 0 {
            self.busy.store(false, Ordering::Release);
            return false;
        }
        self.until.store(deadline, Ordering::SeqCst);
        // The poller half of the Dekker pair: re-read the timers after publishing.
        fence(Ordering::SeqCst);
        let again = earliest();
        if again != 0 && again < deadline {
            deadline = again;
            self.until.store(deadline, Ordering::SeqCst);
        }
        let wake_at = if deadline == MAX_WHEN {
            MAX_WHEN
        } else {
            deadline.saturating_sub(self.early_margin()).max(1)
        };
        let timeout = (wake_at != MAX_WHEN).then(|| until(nanotime(), wake_at));
        let woke_by_event = {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            events.clear();
            // An error here (EINTR) only means we wake early; the caller re-checks.
            let _ = self.poller.wait(&mut events, timeout);
            !events.is_empty()
        };
        let now = nanotime();
        if !woke_by_event && wake_at != MAX_WHEN && now >= wake_at {
            // A timeout: learn how late the kernel was (Relaxed: a tuning hint).
            let avg = self.late_avg.load(Ordering::Relaxed);
            let sample = (now - wake_at).min(10 * MAX_EARLY_NS);
            self.late_avg
                .store(avg + (sample - avg) / 8, Ordering::Relaxed);
        }
        self.until.store(0, Ordering::SeqCst);
        self.busy.store(false, Ordering::Release);
        true
    }

    /// A timer at `when` was just published (its P's earliest `when` stored). Returns
    /// true if an M is blocked in the poller (after breaking its wait if it sleeps past
    /// `when`), false if none is, in which case the caller should `wakep` so that some
    /// M comes to sleep here with the new deadline (Go: wakeNetPoller).
    pub(crate) fn timer_added(&self, when: i64) -> bool {
        // The adder half of the Dekker pair.
        fence(Ordering::SeqCst);
        let until = self.until.load(Ordering::SeqCst);
        if until == 0 {
            return false;
        }
        if when < until {
            self.notify();
        }
        true
    }

    /// Breaks the poller's wait (or makes the next one return at once).
    pub(crate) fn notify(&self) {
        let _ = self.poller.notify();
    }
}
