//! Timer channels: [`after`], [`at`], [`tick`], [`Timer`] and [`Ticker`]; and the channels
//! that never receive or send, [`never`] and [`never_sender`] (Go's nil channels).
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
//! - **Lazy resets** (Go's `timerModifiedLater`): moving a [`Timer`] later leaves its
//!   runtime timer where it was; when that fires early, the schedule sets it again.
//! - **Collected with their channel.** When the last receiver (and the [`Ticker`]) is
//!   gone, the schedule is dropped and stops its runtime timer.
//!
//! Lock order: the schedule's lock, then the channel's lock.

use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use goro_runtime::time::RawTimer;

use super::{Chan, Receiver, RecvError, Sender, TimerHook, TryRecv};

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

/// A sender that can never send (Go: a nil channel in a `select`'s send case): its
/// rendezvous channel has no receiver and never closes, so a `send` arm on it is never
/// ready, `send` waits forever, `try_send` is always `Full` and `send_timeout` always
/// times out. It switches a `select!` send arm off at run time, as Go code does by
/// setting the channel variable to nil:
///
/// ```
/// use goro::chan::{channel, never_sender, Sender};
///
/// let (out_tx, out_rx) = channel::<u32>(1);
/// let (in_tx, in_rx) = channel::<u32>(4);
/// let off = never_sender();
/// let mut queue = std::collections::VecDeque::new();
/// in_tx.send(7).unwrap();
/// for _ in 0..2 {
///     // Offer the head of the queue only when there is one.
///     let (out, head): (&Sender<u32>, u32) = match queue.front() {
///         Some(&v) => (&out_tx, v),
///         None => (&off, 0),
///     };
///     goro::select! {
///         send(out, head) -> r => { r.unwrap(); queue.pop_front(); }
///         recv(in_rx) -> v => queue.push_back(v.unwrap()),
///     }
/// }
/// assert_eq!(out_rx.recv(), Ok(7));
/// ```
pub fn never_sender<T>() -> Sender<T> {
    // One sender, and the receiver count `Chan::new` starts at 1 with no `Receiver` to
    // drop it: the channel is open for as long as the sender lives, and nobody ever
    // waits to receive.
    Sender {
        chan: Arc::new(Chan::new(0, 1, None)),
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
                next: Mutex::new(Next {
                    at: None,
                    period,
                    delivered: false,
                    armed: None,
                }),
                timer: RawTimer::new(move || {
                    if let Some(s) = me.upgrade() {
                        s.fired();
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
    /// A value was sent since the channel was last drained (a receiver may have taken
    /// it since). Values are sent only under the schedule's lock, so while this is
    /// false the channel is empty and a drain can be skipped.
    delivered: bool,
    /// When the runtime timer of a one-shot schedule is set to fire, if it is pending
    /// (`None` for a periodic one, whose runtime timer is always set exactly). It may
    /// be earlier than `at`: see "lazy resets".
    armed: Option<Instant>,
}

// Lazy resets. Moving a one-shot schedule later leaves its runtime timer where it is
// (Go's timerModifiedLater): when that fires, early, `fired` finds nothing due and sets
// the runtime timer for `at`. A reset in a loop that keeps pushing a timeout back (the
// idle-timeout idiom) then costs no timer-heap operation, and the runtime timer fires
// at most once per period of the first deadline. Moving it earlier, and stopping it,
// change the runtime timer at once.

impl Schedule {
    fn lock(&self) -> MutexGuard<'_, Next> {
        self.next.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the schedule and arms the runtime timer for it (schedule lock held); a
    /// one-shot runtime timer pending no later than `at` stays as it is (see "lazy
    /// resets").
    fn arm(&self, next: &mut Next, at: Instant, period: Option<Duration>) {
        next.at = Some(at);
        next.period = period;
        if period.is_none() && next.armed.is_some_and(|armed| armed <= at) {
            return;
        }
        self.timer.reset_at(at, period);
        next.armed = if period.is_none() { Some(at) } else { None };
    }

    /// Stops the schedule and drains the channel (schedule lock held): no value from
    /// before can be received after this. Returns whether a value was on its way: due
    /// later, due now but not delivered, or delivered and not received (Go 1.23's
    /// `Stop` result).
    fn disarm(&self, next: &mut Next) -> bool {
        let pending = next.at.take().is_some();
        if !next.idle() {
            self.timer.stop();
            next.armed = None;
        }
        self.drain(next) || pending
    }

    /// Re-arms the schedule for `at` (then every `period`) and drains the channel
    /// (schedule lock held), as `disarm` then `arm` would, with one change of the
    /// runtime timer instead of a stop and an add. Returns what `disarm` would.
    fn rearm(&self, next: &mut Next, at: Instant, period: Option<Duration>) -> bool {
        let pending = next.at.is_some();
        let drained = self.drain(next);
        self.arm(next, at, period);
        pending || drained
    }

    /// Takes back what was sent and not received (schedule lock held); whether
    /// anything was.
    fn drain(&self, next: &mut Next) -> bool {
        if !std::mem::take(&mut next.delivered) {
            return false; // nothing sent since the last drain: the channel is empty
        }
        let mut any = false;
        if let Some(chan) = self.chan.upgrade() {
            while let TryRecv::Got(_) = chan.try_recv() {
                any = true;
            }
        }
        any
    }
}

impl Schedule {
    /// The runtime timer fired: deliver what is due, and if a lazy reset moved a
    /// one-shot schedule past this firing, set the runtime timer for it.
    fn fired(&self) {
        let mut next = self.lock();
        if next.period.is_some() {
            self.deliver_locked(&mut next);
            return;
        }
        next.armed = None; // a one-shot runtime timer is not pending once it fired
        self.deliver_locked(&mut next);
        if let Some(at) = next.at {
            self.timer.reset_at(at, None);
            next.armed = Some(at);
        }
    }

    /// Sends the due value, if any (schedule lock held).
    fn deliver_locked(&self, next: &mut Next) {
        let Some(at) = next.at else { return };
        let now = Instant::now();
        if at > now {
            return;
        }
        next.at = next.period.and_then(|p| first_tick_after(at, p, now));
        if let Some(chan) = self.chan.upgrade() {
            // Full: a slow reader missed this tick; it is dropped (Go's ticker rule).
            if let super::TrySend::Sent = chan.try_send(at) {
                next.delivered = true;
            }
        }
    }
}

impl TimerHook for Schedule {
    fn deliver_due(&self) {
        self.deliver_locked(&mut self.lock());
    }
}

impl Next {
    /// Whether the runtime timer is certainly not pending: a one-shot schedule's that
    /// was never armed, fired, or was stopped (a periodic one's is never known idle).
    fn idle(&self) -> bool {
        self.period.is_none() && self.armed.is_none()
    }
}

impl Drop for Schedule {
    fn drop(&mut self) {
        // The channel is gone: nobody can receive what the timer would send.
        let next = self.next.get_mut().unwrap_or_else(|e| e.into_inner());
        if !next.idle() {
            self.timer.stop();
        }
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

/// A timer whose channel receives once, when it fires, the instant it was due (Go's
/// `time.NewTimer`, with Go 1.23's semantics): [`receiver`](Timer::receiver) is Go's
/// `t.C`, [`stop`](Timer::stop) and [`reset`](Timer::reset) change it, and once either
/// returns, no value from before it can be received, so the Go idiom of draining `t.C`
/// after a `Stop` is never needed. Dropping the `Timer` stops it.
///
/// Unlike [`after`], it can be stopped and re-armed: the timeout-in-a-loop idiom.
///
/// ```
/// use goro::chan::{channel, Timer};
/// use std::time::Duration;
///
/// let (tx, rx) = channel::<u32>(8);
/// goro::go!(move || (0..3).for_each(|i| tx.send(i).unwrap()));
/// // An idle timeout: each message moves it on.
/// let idle = Timer::new(Duration::from_secs(5));
/// let mut got = Vec::new();
/// loop {
///     goro::select! {
///         recv(rx) -> v => match v {
///             Ok(v) => { got.push(v); idle.reset(Duration::from_secs(5)); }
///             Err(_) => break, // the sender is done
///         },
///         recv(idle.receiver()) -> _ => panic!("idle for 5 s"),
///     }
/// }
/// assert_eq!(got, [0, 1, 2]);
/// assert!(idle.stop()); // it was pending
/// assert!(idle.receiver().try_recv().is_err()); // nothing stale after a stop
/// ```
pub struct Timer {
    rx: Receiver<Instant>,
    schedule: Arc<Schedule>,
}

impl Timer {
    /// A timer that fires `d` from now. `Duration::ZERO` fires at once (its value is
    /// ready to the first receive, a `select!` with `default` included); a `d` too
    /// large to add to now never fires.
    pub fn new(d: Duration) -> Timer {
        let (rx, schedule) = timer_channel(start_after(d), None);
        Timer { rx, schedule }
    }

    /// The channel the value arrives on (Go's `t.C`), for `select!`. It has capacity
    /// 1 and never closes.
    pub fn receiver(&self) -> &Receiver<Instant> {
        &self.rx
    }

    /// Waits for the timer to fire and returns the instant it was due. After a `stop`
    /// (or once its value was received) it waits until a `reset` makes it fire again,
    /// or forever, as Go's `<-t.C` does.
    pub fn recv(&self) -> Instant {
        match self.rx.recv() {
            Ok(t) => t,
            Err(RecvError) => unreachable!("a timer's channel never closes"),
        }
    }

    /// Stops the timer. Returns true if that stopped a pending firing: the timer had
    /// not fired, or had fired with nobody receiving the value yet (which this call
    /// takes back, as Go 1.23 does). False if it had been stopped already or its value
    /// was received. Either way, nothing is received from it until a `reset`.
    pub fn stop(&self) -> bool {
        let mut next = self.schedule.lock();
        self.schedule.disarm(&mut next)
    }

    /// Makes the timer fire `d` from now (`Duration::ZERO`: at once), whether it was
    /// pending, stopped or fired. Returns what [`stop`](Self::stop) would have: true
    /// if a firing was pending. No value from before this call is received after it.
    pub fn reset(&self, d: Duration) -> bool {
        let at = start_after(d);
        let mut next = self.schedule.lock();
        self.schedule.rearm(&mut next, at, None)
    }
}

impl Drop for Timer {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Timer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timer")
            .field("pending", &self.schedule.lock().at.is_some())
            .finish_non_exhaustive()
    }
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
        let at = start_after(period);
        let mut next = self.schedule.lock();
        self.schedule.rearm(&mut next, at, Some(period));
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
