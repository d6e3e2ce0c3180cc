//! Per-P timer state and the firing rule: the data half of the runtime's timers.
//!
//! Each P owns a [`PTimers`]: a `goro_timers::TimerHeap` behind a lock, plus an atomic
//! copy of its earliest `when` that anyone can read without the lock (to compute the
//! poller's timeout, or to see whether a busy P has timers due that could be stolen).
//! Which P a timer goes on, stealing and waking the poller are the scheduler's part
//! (`sched/timers.rs`); the user API is `time.rs`.
//!
//! # Timer locations
//!
//! A timer ([`TimerInner`]) records where it is pending — `Some(Loc { p, key })` — under
//! its own lock, `loc`. The lock order is `loc`, then a P's heap lock. Stop and reset
//! hold `loc` while they edit the heap; a P that runs due timers pops one under the heap
//! lock, *releases it*, then takes `loc` and fires the timer only if `loc` still names
//! the place it was popped from (the **firing rule**). So:
//!
//! - a stop that finds the timer already popped but not yet fired clears `loc` and
//!   returns true: the runner then sees `None` and does not fire it;
//! - a reset in that window re-adds the timer elsewhere; the runner sees a different
//!   `loc` and skips the stale firing;
//! - a timer's function always runs with no timer lock held: socket deadlines will take
//!   a poll descriptor's lock and then the timer lock, and calling out under the timer
//!   lock would deadlock (Go issue 35532).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use goro_timers::{Fired, TimerHeap, TimerKey, MAX_WHEN};

use crate::lockrank::{Mutex, MutexGuard, Rank};

/// A timer's function. It runs on a P's scheduler stack, with no lock held: it must be
/// short and must not park (readying a coroutine or spawning one is fine).
pub(crate) type TimerFn = Box<dyn Fn() + Send + Sync>;

/// Where a timer is pending: the P whose heap holds it, and its key there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Loc {
    pub(crate) p: usize,
    pub(crate) key: TimerKey,
}

/// A runtime timer: its location and what to do when it fires.
pub(crate) struct TimerInner {
    /// Where the timer is pending (see "timer locations").
    pub(crate) loc: Mutex<Option<Loc>>,
    f: TimerFn,
}

impl TimerInner {
    pub(crate) fn new(f: TimerFn) -> Arc<TimerInner> {
        Arc::new(TimerInner {
            loc: Mutex::new(Rank::TimerLoc, None),
            f,
        })
    }

    pub(crate) fn lock_loc(&self) -> MutexGuard<'_, Option<Loc>> {
        self.loc.lock()
    }

    /// The firing rule: after `popped` was popped from its heap (lock released), run
    /// the function if the timer still stands there. A one-shot timer stops pending.
    fn fire(&self, popped: Loc, periodic: bool) {
        let go = {
            let mut loc = self.lock_loc();
            if *loc == Some(popped) {
                if !periodic {
                    *loc = None;
                }
                true
            } else {
                false
            }
        };
        if go {
            (self.f)();
        }
    }
}

/// A P's timers.
pub(crate) struct PTimers {
    heap: Mutex<TimerHeap<Arc<TimerInner>>>,
    /// The earliest `when` in `heap`, or 0 if it is empty. Written under the heap lock;
    /// read without it by anyone (SeqCst: the timer half of the poller's Dekker pair,
    /// see `Netpoll`, and work the spinning protocol's re-check looks for; both pairs
    /// also have a SeqCst fence on each side).
    when0: AtomicI64,
}

/// The heap of a P, locked.
pub(crate) struct HeapGuard<'a> {
    heap: MutexGuard<'a, TimerHeap<Arc<TimerInner>>>,
    when0: &'a AtomicI64,
}

impl HeapGuard<'_> {
    /// Adds a timer; returns its key.
    pub(crate) fn add(&mut self, when: i64, period: i64, t: Arc<TimerInner>) -> TimerKey {
        let key = self.heap.add(when, period, t);
        self.publish();
        key
    }

    /// Changes a pending timer's deadline: `None` if `key` is not in this heap (popped
    /// by a runner that has not fired it yet), else whether the heap's earliest
    /// deadline moved earlier, the only case in which anyone has to be told (Go's
    /// modtimer wakes the poller only for `timerModifiedEarlier`). A reset that leaves
    /// the earliest deadline where it was publishes nothing: a reader of `when0` sees
    /// the same value either way.
    pub(crate) fn modify(&mut self, key: TimerKey, when: i64, period: i64) -> Option<bool> {
        if !self.heap.modify(key, when, period) {
            return None;
        }
        let new = self.heap.peek_when().unwrap_or(0);
        // Relaxed: `when0` is written only under the heap lock, which we hold.
        let old = self.when0.load(Ordering::Relaxed);
        if new == old {
            return Some(false);
        }
        self.publish();
        Some(old == 0 || new < old)
    }

    /// Removes a timer; false if it was not there.
    pub(crate) fn delete(&mut self, key: TimerKey) -> bool {
        let ok = self.heap.delete(key).is_some();
        self.publish();
        ok
    }

    /// Takes every timer out (a P being retired).
    pub(crate) fn drain(&mut self) -> Vec<(TimerKey, i64, i64, Arc<TimerInner>)> {
        let mut out = Vec::with_capacity(self.heap.len());
        while let Some((key, when)) = self.heap.peek() {
            let period = self.heap.get(key).map(|(_, p, _)| p).unwrap_or(0);
            let t = self.heap.delete(key).expect("peeked timer is present");
            out.push((key, when, period, t));
        }
        self.publish();
        out
    }

    fn pop_due(&mut self, now: i64) -> Option<Fired<Arc<TimerInner>>> {
        let f = self.heap.pop_due(now);
        if f.is_some() {
            self.publish();
        }
        f
    }

    fn publish(&self) {
        // SeqCst: the timer adder's store in the poller's Dekker pair (then the fence of
        // `timer_added`, then its load of `until`); see the field.
        self.when0
            .store(self.heap.peek_when().unwrap_or(0), Ordering::SeqCst);
    }
}

impl PTimers {
    pub(crate) fn new() -> PTimers {
        PTimers {
            heap: Mutex::new(Rank::TimerHeap, TimerHeap::new()),
            when0: AtomicI64::new(0),
        }
    }

    pub(crate) fn lock(&self) -> HeapGuard<'_> {
        HeapGuard {
            heap: self.heap.lock(),
            when0: &self.when0,
        }
    }

    /// Timers in the heap now (takes the heap lock; for `debug::stats`).
    pub(crate) fn len(&self) -> usize {
        self.heap.lock().len()
    }

    /// The earliest pending `when`, 0 if none. Lock-free.
    #[inline]
    pub(crate) fn when0(&self) -> i64 {
        // SeqCst: the blocked M's re-read in the poller's pair (after `commit`'s fence),
        // or the spinning M's re-check (after `stop_spinning`'s); elsewhere a hint.
        self.when0.load(Ordering::SeqCst)
    }

    /// Runs the timers of P `p` (this heap) that are due at `now`, one at a time with
    /// the heap unlocked while each fires. Returns how many fired.
    pub(crate) fn run_due(&self, p: usize, now: i64) -> usize {
        let mut n = 0;
        loop {
            let fired = self.lock().pop_due(now);
            let Some(f) = fired else { return n };
            f.data.fire(Loc { p, key: f.key }, f.periodic);
            n += 1;
        }
    }
}

/// The runtime's monotonic clock, in nanoseconds since it started, plus one (so it is
/// always positive, as timer deadlines must be).
pub(crate) fn nanotime() -> i64 {
    when_of_instant(Instant::now())
}

fn clock_base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

/// The timer deadline for an `Instant`: at least 1, at most `MAX_WHEN`.
pub(crate) fn when_of_instant(t: Instant) -> i64 {
    let d = t.saturating_duration_since(clock_base());
    i64::try_from(d.as_nanos()).map_or(MAX_WHEN, |n| n.saturating_add(1))
}

/// How long from `now` until `when` (zero if past).
pub(crate) fn until(now: i64, when: i64) -> Duration {
    Duration::from_nanos(when.saturating_sub(now).max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    fn counting() -> (Arc<TimerInner>, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let n2 = n.clone();
        let t = TimerInner::new(Box::new(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        }));
        (t, n)
    }

    #[test]
    fn clock_is_positive_and_monotonic() {
        let a = nanotime();
        let b = nanotime();
        assert!(a >= 1 && b >= a);
        assert_eq!(when_of_instant(clock_base() - Duration::from_secs(1)), 1);
        assert_eq!(until(10, 5), Duration::ZERO);
        assert_eq!(until(5, 10), Duration::from_nanos(5));
    }

    #[test]
    fn firing_rule() {
        let pt = PTimers::new();
        let (t, n) = counting();
        let key = pt.lock().add(100, 0, t.clone());
        *t.lock_loc() = Some(Loc { p: 0, key });
        assert_eq!(pt.when0(), 100);
        assert_eq!(pt.run_due(0, 99), 0);
        assert_eq!(pt.run_due(0, 100), 1);
        assert_eq!(n.load(Ordering::SeqCst), 1);
        assert_eq!(*t.lock_loc(), None, "a fired one-shot is not pending");
        assert_eq!(pt.when0(), 0);

        // Popped but stopped before it fired: the stale firing is skipped.
        let key = pt.lock().add(5, 0, t.clone());
        *t.lock_loc() = Some(Loc { p: 0, key });
        let f = pt.lock().pop_due(10).unwrap();
        *t.lock_loc() = None; // what stop does when delete finds nothing
        f.data.fire(Loc { p: 0, key: f.key }, f.periodic);
        assert_eq!(n.load(Ordering::SeqCst), 1);

        // Periodic timers stay pending and fire each time.
        let key = pt.lock().add(10, 10, t.clone());
        *t.lock_loc() = Some(Loc { p: 0, key });
        assert_eq!(pt.run_due(0, 10), 1);
        assert_eq!(pt.run_due(0, 35), 1); // one step past missed periods
        assert_eq!(pt.when0(), 40);
        assert_eq!(n.load(Ordering::SeqCst), 3);
        assert!(t.lock_loc().is_some());
        let drained = pt.lock().drain();
        assert_eq!(drained.len(), 1);
        assert_eq!(drained[0].1, 40);
        assert_eq!(drained[0].2, 10);
        assert_eq!(pt.when0(), 0);
    }
}
