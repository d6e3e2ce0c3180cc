//! Sleeping and timers.
//!
//! Timers live in per-P heaps and are run by the scheduler (see `timers.rs` and
//! `sched/timers.rs`); the idle runtime sleeps in the netpoller until the earliest one,
//! with nanosecond resolution. Deadlines follow Go's rules (`goro_timers::rules`): a
//! deadline that would overflow is pinned to the end of time, never wrapped, so
//! `sleep(Duration::MAX)` sleeps forever and disturbs nobody.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goro_timers::when_after;

use crate::lockrank::{Mutex as RankedMutex, Rank};
use crate::park::{self, WaitReason};
use crate::sched::{self, timers as sched_timers};
use crate::timers::{nanotime, when_of_instant, TimerInner};

/// A function whose calls, from any number of coroutines, run one at a time in
/// arrival order; a caller that finds it busy parks (never spins, never blocks its M).
struct Serial<F> {
    /// Whether a call is running, and who waits for their turn.
    state: RankedMutex<(bool, VecDeque<park::Unparker>)>,
    /// Not ranked (see lockrank.rs): held while user code runs.
    f: Mutex<F>,
}

impl<F: FnMut()> Serial<F> {
    fn new(f: F) -> Serial<F> {
        Serial {
            state: RankedMutex::new(Rank::TimeSerial, (false, VecDeque::new())),
            f: Mutex::new(f),
        }
    }

    fn call(&self) {
        loop {
            let mut st = self.state.lock();
            if !st.0 {
                st.0 = true;
                break;
            }
            st.1.push_back(park::prepare());
            // The lock is released after the switch: the releaser's wake-up cannot
            // come before we are parked and lost.
            park::park_commit(WaitReason::Mutex, move || drop(st));
        }
        /// Ends the turn even if `f` panics, and hands it to the next caller.
        struct Turn<'a>(&'a RankedMutex<(bool, VecDeque<park::Unparker>)>);
        impl Drop for Turn<'_> {
            fn drop(&mut self) {
                let next = {
                    let mut st = self.0.lock();
                    st.0 = false;
                    st.1.pop_front()
                };
                if let Some(u) = next {
                    u.unpark();
                }
            }
        }
        let _turn = Turn(&self.state);
        // Only the turn's holder gets here, so this lock is never contended.
        (self.f.lock().unwrap_or_else(|e| e.into_inner()))();
    }
}

/// Sleeps for `d`: parks the calling coroutine, or blocks the calling plain thread
/// (`std::thread::sleep`). A zero duration returns at once; `Duration::MAX` sleeps
/// forever (the coroutine stays parked, see docs/caveats.md).
pub fn sleep(d: Duration) {
    crate::preempt_point();
    if d.is_zero() {
        return;
    }
    if sched::current_id().is_none() {
        std::thread::sleep(d);
        return;
    }
    sleep_when(when_after(nanotime(), d));
}

/// Sleeps until `deadline`; returns at once if it has passed.
pub fn sleep_until(deadline: Instant) {
    crate::preempt_point();
    let now = Instant::now();
    if deadline <= now {
        return;
    }
    if sched::current_id().is_none() {
        std::thread::sleep(deadline - now);
        return;
    }
    sleep_when(when_of_instant(deadline));
}

fn sleep_when(when: i64) {
    let u = park::prepare();
    let t = TimerInner::new(Box::new(move || {
        u.clone().unpark();
    }));
    sched_timers::reset(&t, when, 0);
    // Only the timer holds this wait's unparker: waking means it fired.
    park::park(WaitReason::Sleep);
}

/// The timer [`after_func`] makes: it runs a function on its own coroutine when it
/// fires (Go's `time.AfterFunc`, whose `*Timer` this is; Go's `time.NewTimer`, a timer
/// with a channel, is `goro::time::Timer`).
///
/// Dropping it does not stop it. [`stop`](AfterFunc::stop) and
/// [`reset`](AfterFunc::reset) follow Go: each reports whether the timer was pending.
pub struct AfterFunc {
    raw: RawTimer,
}

/// Calls `f` on a new coroutine once `d` has passed, and again each time the timer is
/// reset and fires (Go's `time.AfterFunc`). Firings never run `f` concurrently with
/// itself: a firing that finds the previous call still running waits for it. A panic
/// in `f` ends the program, as in Go (nobody joins a firing's coroutine).
///
/// ```
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let fired = Arc::new(AtomicBool::new(false));
/// let f = fired.clone();
/// let t = goro::time::after_func(Duration::from_millis(1), move || f.store(true, Ordering::SeqCst));
/// goro::time::sleep(Duration::from_millis(50));
/// assert!(fired.load(Ordering::SeqCst));
/// assert!(!t.stop(), "already fired");
/// ```
#[track_caller]
pub fn after_func<F: FnMut() + Send + 'static>(d: Duration, f: F) -> AfterFunc {
    AfterFunc::start(d, f, std::panic::Location::caller())
}

impl AfterFunc {
    fn start<F: FnMut() + Send + 'static>(
        d: Duration,
        f: F,
        at: &'static std::panic::Location<'static>,
    ) -> AfterFunc {
        let f = Arc::new(Serial::new(f));
        // Each firing's coroutine is attributed to the user's call (the dump's
        // "created at").
        let raw = RawTimer::new(move || {
            let f = f.clone();
            // A spawn failure (no memory for a stack) cannot be reported to anyone
            // here; the timer's firing is lost, and the runtime says so.
            let spawned = crate::Builder::new()
                .name("timer")
                .spawned_at(at)
                .spawn(move || f.call());
            if let Err(e) = spawned {
                eprintln!("goro: after_func: cannot start a coroutine for a firing: {e}");
            }
        });
        raw.reset(d);
        AfterFunc { raw }
    }

    /// Stops the timer. Returns true if this call stopped a pending timer, false if it
    /// had already fired or been stopped.
    pub fn stop(&self) -> bool {
        self.raw.stop()
    }

    /// Makes the timer fire after `d` from now (again, if it already fired). Returns
    /// true if it was pending, false if it had fired or been stopped.
    pub fn reset(&self, d: Duration) -> bool {
        self.raw.reset(d)
    }
}

impl fmt::Debug for AfterFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterFunc").finish_non_exhaustive()
    }
}

/// A runtime timer whose function runs on the scheduler's own stack when it fires.
///
/// The building block for timer-driven primitives (channel timers, timeouts). The
/// function must be short and must not block or park: readying a coroutine
/// (`Unparker::unpark`), spawning one, or a non-blocking channel send are fine. It runs
/// with no lock held, on whichever P ran the timer.
///
/// Hidden from the docs: goro-sync's channel timers and goro-bench's ticker need it
/// from other crates, but users have [`AfterFunc`] and the channel timers, whose callbacks
/// may block.
#[doc(hidden)]
pub struct RawTimer {
    inner: Arc<TimerInner>,
}

impl RawTimer {
    /// A stopped timer that will call `f` each time it fires.
    pub fn new(f: impl Fn() + Send + Sync + 'static) -> RawTimer {
        RawTimer {
            inner: TimerInner::new(Box::new(f)),
        }
    }

    /// Fires once, `d` from now. Returns whether the timer was pending.
    pub fn reset(&self, d: Duration) -> bool {
        sched_timers::reset(&self.inner, when_after(nanotime(), d), 0)
    }

    /// Fires at `deadline` (at once if it has passed), then every `period` if one is
    /// given. Returns whether the timer was pending.
    ///
    /// # Panics
    ///
    /// If `period` is `Some(Duration::ZERO)`: a periodic timer needs a positive period.
    pub fn reset_at(&self, deadline: Instant, period: Option<Duration>) -> bool {
        let period = match period {
            None => 0,
            Some(p) => {
                assert!(!p.is_zero(), "timer period must be positive");
                i64::try_from(p.as_nanos()).unwrap_or(i64::MAX)
            }
        };
        sched_timers::reset(&self.inner, when_of_instant(deadline), period)
    }

    /// Fires at the raw runtime deadline `when` (nanoseconds on the runtime clock),
    /// then every `period` ns if `period > 0`. Exposed for tests of the timer rules.
    ///
    /// # Panics
    ///
    /// If `when <= 0` or `period < 0` (Go's rules: "timer when must be positive",
    /// "timer period must be non-negative").
    #[doc(hidden)]
    pub fn reset_raw(&self, when: i64, period: i64) -> bool {
        sched_timers::reset(&self.inner, when, period)
    }

    /// Stops the timer. Returns true if this call stopped a pending timer.
    pub fn stop(&self) -> bool {
        sched_timers::stop(&self.inner)
    }

    /// A handle that can stop this timer without keeping it alive (for a timer
    /// function that stops its own timer).
    pub fn downgrade(&self) -> WeakRawTimer {
        WeakRawTimer {
            inner: Arc::downgrade(&self.inner),
        }
    }
}

/// A weak handle to a [`RawTimer`] (see [`RawTimer::downgrade`]).
#[derive(Clone, Debug, Default)]
#[doc(hidden)]
pub struct WeakRawTimer {
    inner: std::sync::Weak<TimerInner>,
}

impl WeakRawTimer {
    /// Stops the timer if it still exists. Returns true if this call stopped a pending
    /// timer.
    pub fn stop(&self) -> bool {
        self.inner.upgrade().is_some_and(|t| sched_timers::stop(&t))
    }
}

impl fmt::Debug for TimerInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerInner").finish_non_exhaustive()
    }
}

impl fmt::Debug for RawTimer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawTimer")
            .field("pending", &self.inner.lock_loc().is_some())
            .finish()
    }
}

/// The runtime clock now, in nanoseconds (always positive). For tests of the timer
/// rules.
#[doc(hidden)]
pub fn runtime_nanotime() -> i64 {
    nanotime()
}
