//! Timer channels: [`after`], [`at`], [`tick`], [`never`], and [`Ticker`].
//!
//! They follow Go 1.23's timer channels:
//!
//! - **Synchronous.** A timer channel has no `Sender`; its [`Schedule`] is the channel's
//!   [`TimerHook`], which every receive runs first: a due value is delivered on the
//!   spot. So an expired timer channel is ready to a `select!` with `default`, or a
//!   `try_recv`, at once, even if the runtime timer has not fired yet (and
//!   `after(Duration::ZERO)`, or `at` a past instant, is always ready). The runtime
//!   timer delivers the value when nobody is receiving, for a receiver that parks.
//! - **The value is the scheduled instant**, not the moment the firing code ran: `after(d)`
//!   sends `start + d`, `at(t)` sends `t`, a ticker `start + k × period`.
//! - **Missed ticks are dropped.** The channel buffers one value; a tick that finds it
//!   full is dropped, and the next tick is the first one after now (as the runtime
//!   heap's rule for periodic timers: one step past missed periods).
//! - **No stale values after `stop` / `reset`.** Both hold the schedule's lock while they
//!   change it and drain the channel; a delivery happens under the same lock, so a
//!   firing from before either finds nothing due.
//! - **Collected with their channel.** When the last receiver (and the [`Ticker`]) is
//!   gone, the schedule is dropped and stops its runtime timer.
//!
//! Lock order: the schedule's lock, then the channel's lock.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use goro_runtime::time::RawTimer;

use super::{Chan, Receiver, RecvError, TimerHook, TryRecv};

/// A channel that receives once, `d` from now, the instant it was due (Go:
/// `time.After`).
///
/// A `Duration` too large to add to now means never. Dropping the receiver stops the
/// timer.
pub fn after(d: Duration) -> Receiver<Instant> {
    at(start_after(d))
}

/// A channel that receives once, at `deadline`, the instant `deadline` itself: [`after`]
/// with an instant instead of a duration (crossbeam's `at`).
///
/// A deadline that has passed is ready at once (to `try_recv` and a `select!` with
/// `default` too); one too far ahead for the runtime clock waits forever rather than
/// wrapping round to the past. Dropping the receiver stops the timer.
///
/// ```
/// use goro::chan::at;
/// use std::time::{Duration, Instant};
///
/// let then = Instant::now() + Duration::from_millis(5);
/// assert_eq!(at(then).recv(), Ok(then));
/// assert!(Instant::now() >= then);
///
/// let past = Instant::now() - Duration::from_millis(1);
/// assert_eq!(at(past).try_recv(), Ok(past)); // ready at once
/// ```
pub fn at(deadline: Instant) -> Receiver<Instant> {
    timer_channel(deadline, None).0
}

/// A channel that receives every `d`, starting `d` from now, the instant each tick was
/// due; ticks a slow reader misses are dropped (Go: `time.Tick`). The ticking stops
/// once every receiver is dropped.
///
/// # Panics
///
/// If `d` is zero: "non-positive interval for tick". This is a deliberate difference
/// from Go, whose `time.Tick(0)` returns a nil channel that blocks forever: a silent
/// hang is the worst way to report a bad interval. A caller that wants Go's behaviour
/// writes `if d.is_zero() { never() } else { tick(d) }`.
pub fn tick(d: Duration) -> Receiver<Instant> {
    assert!(!d.is_zero(), "non-positive interval for tick");
    timer_channel(start_after(d), Some(d)).0
}

/// A channel that never receives anything (Go: a nil channel in a select). Its
/// capacity is 0, as `cap` of a nil channel is.
pub fn never<T>() -> Receiver<T> {
    Receiver {
        chan: Arc::new(Chan::new(0, 0, None)),
    }
}

/// `now + d`, or an instant far enough to be never (35 000 years) if that overflows.
fn start_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(1 << 40))
}

/// A timer channel of capacity 1, armed for `at` (then every `period`), and its schedule.
fn timer_channel(at: Instant, period: Option<Duration>) -> (Receiver<Instant>, Arc<Schedule>) {
    let mut schedule = None;
    let chan = Arc::new_cyclic(|chan: &Weak<Chan<Instant>>| {
        let s = Arc::new_cyclic(|me: &Weak<Schedule>| {
            let me = me.clone();
            Schedule {
                chan: chan.clone(),
                next: Mutex::new(Next { at: None, period }),
                timer: RawTimer::new(move || {
                    if let Some(s) = me.upgrade() {
                        s.deliver_due();
                    }
                }),
            }
        });
        schedule = Some(s.clone());
        Chan::new(1, 0, Some(s as Arc<dyn TimerHook>))
    });
    let schedule = schedule.expect("new_cyclic ran its closure");
    schedule.arm(&mut schedule.lock(), at, period);
    (Receiver { chan }, schedule)
}

/// A timer channel's timer: when its next value is due, and the runtime timer that
/// delivers it to a parked receiver.
struct Schedule {
    chan: Weak<Chan<Instant>>,
    /// Held while a value is delivered and while `stop` / `reset` change the schedule
    /// and drain the channel (see the module doc).
    next: Mutex<Next>,
    timer: RawTimer,
}

struct Next {
    /// The instant the next value is due; `None` when stopped (or a one-shot fired).
    at: Option<Instant>,
    period: Option<Duration>,
}

impl Schedule {
    fn lock(&self) -> MutexGuard<'_, Next> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the schedule and arms the runtime timer for it (schedule lock held).
    fn arm(&self, next: &mut Next, at: Instant, period: Option<Duration>) {
        next.at = Some(at);
        next.period = period;
        self.timer.reset_at(at, period);
    }

    /// Stops the schedule and drains the channel (schedule lock held): no value from
    /// before can be received after this.
    fn disarm(&self, next: &mut Next) {
        next.at = None;
        self.timer.stop();
        if let Some(chan) = self.chan.upgrade() {
            while let TryRecv::Got(_) = chan.try_recv() {}
        }
    }
}

impl TimerHook for Schedule {
    fn deliver_due(&self) {
        let mut next = self.lock();
        let Some(at) = next.at else { return };
        let now = Instant::now();
        if at > now {
            return;
        }
        next.at = next.period.and_then(|p| first_tick_after(at, p, now));
        if let Some(chan) = self.chan.upgrade() {
            // Full: a slow reader missed this tick; it is dropped (Go's ticker rule).
            let _ = chan.try_send(at);
        }
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        // The channel is gone: nobody can receive what the timer would send.
        self.timer.stop();
    }
}

/// The first `at + k × period` (k ≥ 1) after `now`; `None` if that is past the end of
/// time (then the ticker never ticks again).
fn first_tick_after(at: Instant, period: Duration, now: Instant) -> Option<Instant> {
    let p = period.as_nanos();
    let k = now.saturating_duration_since(at).as_nanos() / p + 1;
    let step = p.checked_mul(k)?;
    let step = Duration::new(
        u64::try_from(step / 1_000_000_000).ok()?,
        (step % 1_000_000_000) as u32,
    );
    at.checked_add(step)
}

/// A ticker: a channel that receives, every period, the instant the tick was due (Go:
/// `time.Ticker`), with Go 1.23's guarantee that once [`stop`](Ticker::stop) or
/// [`reset`](Ticker::reset) returns, no tick from before it can be received.
pub struct Ticker {
    rx: Receiver<Instant>,
    schedule: Arc<Schedule>,
}

impl Ticker {
    /// A ticker firing every `period`, the first time `period` from now.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("non-positive interval for Ticker::new", as Go's NewTicker).
    pub fn new(period: Duration) -> Ticker {
        assert!(!period.is_zero(), "non-positive interval for Ticker::new");
        let (rx, schedule) = timer_channel(start_after(period), Some(period));
        Ticker { rx, schedule }
    }

    /// Waits for the next tick and returns the instant it was due.
    pub fn recv(&self) -> Instant {
        match self.rx.recv() {
            Ok(t) => t,
            Err(RecvError) => unreachable!("a ticker's channel never closes"),
        }
    }

    /// The channel the ticks arrive on (for `select!`).
    pub fn receiver(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Stops the ticker; no tick from before this call will be received.
    pub fn stop(&self) {
        self.schedule.disarm(&mut self.schedule.lock());
    }

    /// Makes the ticker fire every `period` from now on; no tick from before this call
    /// will be received.
    ///
    /// # Panics
    ///
    /// If `period` is zero ("non-positive interval for Ticker::reset").
    pub fn reset(&self, period: Duration) {
        assert!(!period.is_zero(), "non-positive interval for Ticker::reset");
        let mut next = self.schedule.lock();
        self.schedule.disarm(&mut next);
        self.schedule
            .arm(&mut next, start_after(period), Some(period));
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Ticker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticker").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_tick_after_skips_missed_ticks() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(first_tick_after(t0, ms(10), t0), Some(t0 + ms(10)));
        assert_eq!(first_tick_after(t0, ms(10), t0 + ms(9)), Some(t0 + ms(10)));
        assert_eq!(first_tick_after(t0, ms(10), t0 + ms(10)), Some(t0 + ms(20)));
        assert_eq!(first_tick_after(t0, ms(10), t0 + ms(35)), Some(t0 + ms(40)));
        // Past the end of time: never again, not a wrapped instant.
        assert_eq!(first_tick_after(t0, Duration::MAX, t0), None);
    }
}
