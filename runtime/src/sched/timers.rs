//! The scheduler's side of timers: which P a timer goes on, running and stealing due
//! timers, the earliest deadline for the poller, and moving timers off a retired P.
//! The data and the firing rule are in `timers.rs`.
//!
//! - A timer set on a coroutine goes on that coroutine's P; one set from a plain thread
//!   goes on a P chosen round-robin.
//! - Every add, and every reset that moves its P's earliest deadline earlier, tells the
//!   netpoller (`Netpoll::timer_added`): an M asleep in the poller past that deadline
//!   is woken; if no M is in the poller, `wakep` gets one going so that it ends up
//!   there. A reset that leaves the earliest deadline where it was, or moves it later,
//!   tells nobody (Go: modtimer wakes the poller for timerModifiedEarlier only).
//! - Ps run their own due timers in `schedule`, and spinning Ms run the due timers of
//!   any P (Go CL 232298, "reduce timer latency"): a timer whose P is busy in a long
//!   computation still fires on time on another P.
//! - Timers are looked for on every P ever created, live or retired, so a timer that
//!   raced with a P's retirement is never stranded.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::m::current_m;
use super::p::HeldP;
use super::{rt, wakep};
use crate::timers::{nanotime, Loc, TimerInner};

/// Sets `t` to fire at `when` (then every `period` ns if `period > 0`), whether or not
/// it is pending now. Returns whether it was pending (Go: modtimer / resettimer).
///
/// # Panics
///
/// If `when <= 0` ("timer when must be positive") or `period < 0` ("timer period must
/// be non-negative"), before anything changes.
pub(crate) fn reset(t: &Arc<TimerInner>, when: i64, period: i64) -> bool {
    goro_timers::check_when(when);
    goro_timers::check_period(period);
    let rt = rt();
    let mut loc = t.lock_loc();
    let was_pending = loc.is_some();
    if let Some(l) = *loc {
        let modified = rt.p(l.p).timers.lock().modify(l.key, when, period);
        if let Some(earlier) = modified {
            drop(loc);
            // A P's earliest deadline that did not move earlier needs nobody woken:
            // whoever watched it still wakes in time (at worst early, and looks again).
            if earlier {
                timer_published(when);
            }
            return true;
        }
        // Popped by a runner that has not fired it yet: add it afresh below; the
        // runner will see the new location and skip the stale firing.
    }
    let p = home_p();
    let key = rt.p(p).timers.lock().add(when, period, t.clone());
    *loc = Some(Loc { p, key });
    drop(loc);
    timer_published(when);
    was_pending
}

/// Stops `t`. Returns whether it was pending (Go: deltimer / stopTimer).
pub(crate) fn stop(t: &TimerInner) -> bool {
    let mut loc = t.lock_loc();
    match loc.take() {
        None => false,
        Some(l) => {
            // If the heap no longer has it, a runner popped it and will find `loc`
            // cleared: it does not fire, so this stop did stop it.
            rt().p(l.p).timers.lock().delete(l.key);
            true
        }
    }
}

/// The P a new timer goes on: the caller's, or round-robin from a plain thread.
fn home_p() -> usize {
    if let Some(p) = current_m().and_then(|m| m.p()) {
        return p.id;
    }
    let rt = rt();
    // Relaxed: a round-robin cursor; any spread of the timers will do.
    rt.timer_rr.fetch_add(1, Ordering::Relaxed) % rt.procs()
}

/// A deadline was published: make sure some M will be awake for it.
fn timer_published(when: i64) {
    if !rt().netpoll.timer_added(when) {
        // Nobody sleeps in the poller: get an idle P's M going (timer_added fenced
        // after the publication, as wakep requires).
        wakep();
    }
}

/// Runs `p`'s own due timers. Cheap when it has none: one atomic load.
#[inline]
pub(crate) fn check_timers(p: &HeldP<'_>) -> usize {
    let w = p.timers.when0();
    if w == 0 {
        return 0;
    }
    let now = nanotime();
    if w > now {
        return 0;
    }
    p.timers.run_due(p.id, now)
}

/// Runs the due timers of every other P (Go: the timer half of stealWork). Their
/// functions run here, so the coroutines they ready land in this P's queue.
pub(crate) fn steal_timers(p: &HeldP<'_>) -> usize {
    let rt = rt();
    // Acquire: pairs with the Release in `resize_locked`: Ps below `n` are created.
    let n = rt.nprocs_created.load(Ordering::Acquire);
    let mut now = 0;
    let mut fired = 0;
    for id in (0..n).filter(|&id| id != p.id) {
        let victim = &rt.p(id).timers;
        let w = victim.when0();
        if w == 0 {
            continue;
        }
        if now == 0 {
            now = nanotime();
        }
        if w <= now {
            fired += victim.run_due(id, now);
        }
    }
    fired
}

/// The earliest deadline of any timer on any P, or 0 if there is none.
pub(crate) fn earliest() -> i64 {
    let rt = rt();
    // Acquire: as in `steal_timers`.
    let n = rt.nprocs_created.load(Ordering::Acquire);
    (0..n)
        .map(|id| rt.p(id).timers.when0())
        .filter(|&w| w != 0)
        .min()
        .unwrap_or(0)
}

/// Whether some timer somewhere is due now.
pub(crate) fn due_anywhere() -> bool {
    due_within(0)
}

/// Whether some timer somewhere is due within `ns` nanoseconds.
pub(crate) fn due_within(ns: i64) -> bool {
    let e = earliest();
    e != 0 && e <= nanotime().saturating_add(ns)
}

/// Moves every timer of P `from` (being retired) to P `to`.
pub(crate) fn migrate(from: usize, to: usize) {
    let rt = rt();
    let drained = rt.p(from).timers.lock().drain();
    let mut min = 0;
    for (key, when, period, t) in drained {
        let mut loc = t.lock_loc();
        if *loc != Some(Loc { p: from, key }) {
            continue; // stopped or reset meanwhile
        }
        let nkey = rt.p(to).timers.lock().add(when, period, t.clone());
        *loc = Some(Loc { p: to, key: nkey });
        min = if min == 0 { when } else { min.min(when) };
    }
    if min != 0 {
        timer_published(min);
    }
}
