//! The scheduler loop: `schedule`, `find_runnable`, `execute`, `wakep`, `startm`,
//! and the entry points the rest of the runtime uses (`ready`, `spawn_g`, `yield_now`,
//! `park_current_g`). See the module doc of `sched` for the protocols cited here.

use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corosensei::CoroutineResult;
use crossbeam_deque::Steal;

use super::g::{GRef, GStatus, Request, G};
use super::idle::{pidleget_locked, pidleput_locked};
use super::m::{current_g_ptr, current_m, newm, M};
use super::p::{fastrand, HeldP, PStatus, P};
use super::runq::{runq_empty, runq_get, runq_put, runq_steal, spin_pause};
use super::timers;
use super::{
    fatal, rt, rt_started, Runtime, GLOBAL_CHECK_TICKS, GOID_BATCH, SPIN_BUDGET_NS,
    SPIN_PASS_GAP_NS, STEAL_ROUNDS, UNMADE_BACKLOG,
};
use crate::stack::{self, overflow};

/// An M's life: find a G, run it, repeat. A panic on the scheduler's
/// stack (a park commit, or a bug) cannot be recovered from: it is fatal.
///
/// Returns only when the M leaves the pool (an idle M the blocking calls no longer
/// need; see `M::stopm`), so its thread can end.
pub(crate) fn m_loop(m: &'static M) {
    let r = catch_unwind(AssertUnwindSafe(|| loop {
        // An M bound to a pinned G runs nothing else (Go: schedule's lockedg check).
        let (g, inherit) = if m.locked_g().is_null() {
            if !m.has_p() {
                // Our P was taken while a coroutine ran (or lost in a blocking call):
                // any idle P, else sleep until handed one (Go: exitsyscall0).
                reacquire_or_stop(m);
            }
            schedule(m)
        } else {
            (m.stoplockedm(), false)
        };
        execute(m, g, inherit);
    }));
    let msg = match &r {
        Err(e) if e.is::<super::m::ExitM>() => return,
        Err(e) => super::panic_message(&**e),
        Ok(()) => "the loop ended",
    };
    fatal!("m_loop: M {} panicked on its scheduler stack: {msg}", m.id)
}

/// Finds the next G for this M (Go: schedule). Returns it and whether it inherits
/// the current time slice. The M is not spinning when it returns: an M that was
/// started spinning and finds work on any path stops spinning and, if it was the
/// last spinner, wakes another (`reset_spinning`).
fn schedule(m: &'static M) -> (GRef, bool) {
    let r = schedule_spinning(m);
    if m.spin.is_spinning() {
        reset_spinning(m);
    }
    r
}

fn schedule_spinning(m: &'static M) -> (GRef, bool) {
    if let Some(r) = schedule_local(m) {
        return r;
    }
    find_runnable(m)
}

/// The quick part of `schedule`: due timers, now and then the global queue, then the
/// local queue. None: look harder (`find_runnable`, which may let go of the P).
#[inline]
fn schedule_local(m: &'static M) -> Option<(GRef, bool)> {
    let rt = rt_started();
    let p = m.held_p();
    if p.id >= rt.procs() {
        return None;
    }
    timers::check_timers(&p);
    let local = p.local();
    if local.tick.get() % GLOBAL_CHECK_TICKS == 0 || local.slice_ended.get() {
        return schedule_turn(&p);
    }
    runq_get(&p)
}

/// `schedule_local` on its 61st tick, or after sysmon ended a slice: other Ps' due
/// timers, then the global queue before the local one (fairness); after a slice that
/// sysmon ended, whatever runs next starts a fresh slice.
#[cold]
fn schedule_turn(p: &HeldP<'_>) -> Option<(GRef, bool)> {
    let rt = rt_started();
    let local = p.local();
    let ended = local.slice_ended.replace(false);
    if local.tick.get() % GLOBAL_CHECK_TICKS == 0 {
        // A P stuck in a long coroutine holds its timers until an idle P steals them,
        // and there may be none.
        timers::steal_timers(p);
    }
    if !rt.injector.is_empty() {
        loop {
            match rt.injector.steal() {
                Steal::Success(g) => return Some((g, false)),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }
    // A `runnext` G would inherit the slice that just ended, and sysmon would find it
    // over at once (or, its holder outside goro, retake the P).
    runq_get(p).map(|(g, inherit)| (g, inherit && !ended))
}

/// Finds a G, stealing or sleeping as needed (Go: findRunnable). Returns with the M
/// holding a P, possibly still spinning (`schedule` resets that).
fn find_runnable(m: &'static M) -> (GRef, bool) {
    let rt = rt_started();
    loop {
        if m.held_p().id >= rt.procs() && retire_p(m) {
            continue;
        }
        if let Some(r) = find_spinning(m) {
            return r;
        }

        // Nothing to do: give the P back.
        {
            let mut s = rt.sched.lock();
            if !rt.injector.is_empty() {
                drop(s);
                if let Some(g) = globrunqget(&m.held_p()) {
                    return (g, false);
                }
                continue;
            }
            let p = m.releasep();
            if p.id >= rt.procs() {
                // Relaxed: under `sched`, which the next holder (a resize) takes too.
                p.transition(PStatus::Idle, PStatus::Dead, Ordering::Relaxed);
            } else {
                pidleput_locked(&mut s, &rt.spinning, p);
            }
        }

        // Leave spinning, then re-check every source of work (the spinning protocol).
        // (`stop` first: the re-check must come after the count is dropped.)
        if m.spin.stop(&rt.spinning).is_some() && (work_available(rt) || timers::due_anywhere()) {
            let p = {
                let mut s = rt.sched.lock();
                pidleget_locked(&mut s, &rt.spinning)
            };
            if let Some(p) = p {
                m.acquirep(p);
                m.spin.start(&rt.spinning);
                continue;
            }
        }

        // Sleep: in the netpoller until the earliest timer if there is one and no
        // other M is there already, else on this M's own parker.
        // The coroutines the poller readies go to the global queue without a wakep
        // each: this M takes a P and runs the first itself, and wakes another M only
        // if there is more than one (Go: injectglist). On a single connection that
        // saves a futex wake-up per round trip.
        let mut woken = m.poll_batch.take();
        let blocked = rt.netpoll.block(timers::earliest, &mut woken);
        let readied = inject_global(&mut woken);
        m.poll_batch.set(woken);
        if blocked {
            let p = {
                let mut s = rt.sched.lock();
                pidleget_locked(&mut s, &rt.spinning)
            };
            match p {
                Some(p) => {
                    m.acquirep(p);
                    if readied > 1 {
                        wakep();
                    }
                }
                None => {
                    if readied > 0 {
                        wakep();
                    }
                    if timers::due_within(crate::netpoll::MAX_EARLY_NS) {
                        // Woken for a timer (the poller wakes up to MAX_EARLY_NS early)
                        // that no free P will run: every P is held, and a holder may be
                        // stuck in the kernel without telling goro. Have sysmon watch
                        // closely now rather than look at its next round.
                        super::sysmon::note_stuck_timer();
                    }
                    m.stopm();
                }
            }
            continue;
        }
        m.stopm();
    }
}

/// The part of `find_runnable` that holds the P: its queues and timers, the global
/// queue, a quick poll, then spinning (stealing) for a while. None: give the P back.
fn find_spinning(m: &'static M) -> Option<(GRef, bool)> {
    let rt = rt_started();
    let p = m.held_p();
    timers::check_timers(&p);
    if let Some(r) = runq_get(&p) {
        return Some(r);
    }
    // Our queue is empty, and only we can refill it: clear our summary bit.
    rt.summary.clear(p.id);
    if let Some(g) = globrunqget(&p) {
        return Some((g, false));
    }
    // Sockets someone waits on, and no M in the poller: poll without blocking.
    // The coroutines it readies go on our queue.
    if rt.netpoll.has_waiters() && !rt.netpoll.busy() {
        let mut woken = m.poll_batch.take();
        rt.netpoll.poll_now(&mut woken);
        if !woken.is_empty() {
            for g in woken.drain(..) {
                g.transition(GStatus::Waiting, GStatus::Runnable);
                runq_put(&p, g, false);
            }
            // Published (a SeqCst fence): others may help with what we queued.
            fence(Ordering::SeqCst);
            wakep();
        }
        m.poll_batch.set(woken);
        if let Some(r) = runq_get(&p) {
            return Some(r);
        }
    }

    // Steal, if few enough Ms are at it already. While another P is busy, keep at
    // it for up to SPIN_BUDGET_NS: that P is likely to queue more work soon, and a
    // spinning M turns its wakeps into no-ops instead of futex wake-ups. But not while
    // callers wait on sockets and no M watches the poller: a spinning M does not poll,
    // so the work a network server waits for would sit in the kernel meanwhile, and
    // the spin is pure CPU (an echo server's user time per round trip halved without
    // it, docs/benchmark-journal.md); the M goes to sleep in the poller instead, where the
    // sockets wake it. While a timer is due within the poller's early-wake margin,
    // keep at it too: sleeping would wake late (see netpoll.rs, "waking early").
    if m.spin.is_spinning() || rt.spinning.may_spin(rt.procs()) {
        m.spin.start(&rt.spinning);
        let spin_start = Instant::now();
        loop {
            if let Some(g) = steal_work(&p) {
                return Some((g, false));
            }
            timers::check_timers(&p);
            if let Some(r) = runq_get(&p) {
                return Some(r);
            }
            let sockets_unwatched = rt.netpoll.has_waiters() && !rt.netpoll.busy();
            let busy_others = rt.spinning.others_busy(rt.procs())
                && spin_start.elapsed() < Duration::from_nanos(SPIN_BUDGET_NS)
                && !sockets_unwatched;
            if !busy_others && !timers::due_within(rt.netpoll.early_margin()) {
                break;
            }
            // Rest between passes without touching the busy Ps' cache lines: each
            // read of a victim's queue costs the victim a cache-line transfer.
            spin_pause(SPIN_PASS_GAP_NS);
        }
    }
    None
}

/// A spinning M found work: stop spinning, and if it was the last spinner, wake
/// another to look for more (Go: resetspinning). Nothing if the M was not spinning.
fn reset_spinning(m: &M) {
    if m.spin.stop(&rt().spinning) == Some(0) {
        wakep();
    }
}

/// Whether any queue has work, summary first (used after leaving spinning).
fn work_available(rt: &Runtime) -> bool {
    !rt.injector.is_empty() || work_queued(rt)
}

/// Whether any P's local queue or `runnext` holds a coroutine.
pub(crate) fn work_queued(rt: &Runtime) -> bool {
    // Acquire: pairs with the Release in `resize_locked`: Ps below `n` are created.
    let n = rt.nprocs_created.load(Ordering::Acquire);
    let bits = rt.summary.snapshot(n);
    (0..n)
        .filter(|&id| bits[id / 64] & (1 << (id % 64)) != 0)
        .any(|id| !runq_empty(rt.p(id)))
}

/// Takes a batch from the global queue into `p`'s and returns one G (Go: globrunqget).
fn globrunqget(p: &HeldP<'_>) -> Option<GRef> {
    let rt = rt_started();
    loop {
        match rt.injector.steal_batch_and_pop(&p.local().runq) {
            Steal::Success(g) => {
                if !p.local().runq.is_empty() {
                    rt.summary.mark(p.id);
                }
                return Some(g);
            }
            Steal::Retry => continue,
            Steal::Empty => return None,
        }
    }
}

/// Steals from other Ps: [`STEAL_ROUNDS`] rounds from a random start, only over Ps
/// whose summary bit is set, `runnext` in the last round (Go: stealWork).
fn steal_work(p: &HeldP<'_>) -> Option<GRef> {
    let rt = rt_started();
    // Due timers of other Ps first: their functions ready coroutines into our queue.
    if timers::steal_timers(p) > 0 {
        if let Some((g, _)) = runq_get(p) {
            return Some(g);
        }
    }
    // Acquire: as in `work_queued`.
    let n = rt.nprocs_created.load(Ordering::Acquire);
    for round in 0..STEAL_ROUNDS {
        let last = round == STEAL_ROUNDS - 1;
        let bits = rt.summary.snapshot(n);
        if bits.iter().all(|&w| w == 0) {
            return globrunqget(p);
        }
        let start = fastrand(p) as usize % n;
        for i in 0..n {
            let id = (start + i) % n;
            if id == p.id || bits[id / 64] & (1 << (id % 64)) == 0 {
                continue;
            }
            if let Some(g) = runq_steal(p, rt.p(id), last) {
                return Some(g);
            }
        }
        if let Some(g) = globrunqget(p) {
            return Some(g);
        }
    }
    None
}

/// Retires this M's P, which is above `gomaxprocs`: its Gs go to the global queue,
/// its stacks to the pool. Then takes an idle P or stops. Returns false if the P turned
/// out to be wanted again (a concurrent `set_maxprocs` raised the count).
fn retire_p(m: &'static M) -> bool {
    let rt = rt_started();
    let id = {
        let _s = rt.sched.lock();
        let p = m.held_p();
        if p.id < rt.procs() {
            return false;
        }
        while let Some((g, _)) = runq_get(&p) {
            rt.injector.push(g);
        }
        rt.summary.clear(p.id);
        rt.stacks.flush(&p.local().stacks);
        p.local().shells.clear(&rt.g_free);
        drop(p);
        let p = m.releasep();
        // Relaxed: under `sched`, which the next holder (a resize) takes too.
        p.transition(PStatus::Idle, PStatus::Dead, Ordering::Relaxed);
        p.id
    };
    timers::migrate(id, 0);
    m.spin.stop(&rt.spinning);
    wakep();
    reacquire_or_stop(m);
    true
}

/// Runs `g` until it yields, parks or ends (Go: execute + the part of gopark and
/// goexit that runs on g0).
fn execute(m: &'static M, g: GRef, inherit: bool) {
    let rt = rt_started();
    // SAFETY: we own `g` (taken from a queue or handed to us).
    if unsafe { g.is_locked() } && !bind_pinned(m, &g) {
        startlockedm(m, g);
        return;
    }
    {
        let p = m.held_p();
        let local = p.local();
        // A G from `runnext` inherits the running slice: the tick stays, so sysmon's
        // clock for the slice keeps running and ends it on time, however many hand-offs
        // it holds (Go: execute's inheritTime; "time slices" in the module doc).
        if !inherit {
            let t = local.tick.get().wrapping_add(1);
            local.tick.set(t);
            // Relaxed: sysmon only compares successive values.
            p.tick_pub.store(t, Ordering::Relaxed);
            // A new time slice: a request to yield meant for the last one is void
            // (Go clears gp.preempt in execute). Relaxed: a hint, like the flag.
            if p.preempt.load(Ordering::Relaxed) {
                p.preempt.store(false, Ordering::Relaxed);
            }
        }
    }
    // SAFETY: we took `g` from a run queue or runnext, so we are its owner, and `g` is
    // a strong reference of ours.
    let unmade = unsafe { super::park::adopt(&g) };
    g.transition(GStatus::Runnable, GStatus::Running);
    if unmade {
        // A plain thread's spawn, first run: make its coroutine now that it is
        // `Running` and no dump holds it (the scan handshake, as before a resume: a
        // dump that saw it `Runnable` could otherwise inspect it while it is made).
        g.scan.begin_run(m.expedited);
        // SAFETY: we own `g`; `adopt` said it is unmade.
        unsafe { g.make() };
    }
    loop {
        m.set_curg(Arc::as_ptr(&g));
        overflow::set_running(&g.guard);
        // A dump may be walking its stack: wait until it is done (the scan handshake).
        g.scan.begin_run(m.expedited);
        // Leave goro for the coroutine's user code, enter again when it comes back:
        // meanwhile sysmon may take the P (the retake handshake, p.rs).
        m.leave(g.id);
        // SAFETY: we own `g`, we are on the M's own stack, and `g` is published as
        // the current G. No catch_unwind here: its frame would sit between the switch
        // and this loop and cost a return misprediction per switch. Coroutine bodies
        // catch their own panics; anything else unwinds out of m_loop and is fatal.
        let r = unsafe { g.resume() };
        // Still holding a P? (Lost if sysmon took it while the coroutine ran, or if a
        // blocking call lost it; the coroutine may have got another one back.)
        let held = m.enter();
        overflow::set_running(std::ptr::null());
        m.set_curg(std::ptr::null());
        match r {
            CoroutineResult::Yield(request @ (Request::Yield | Request::Preempt)) => {
                if !held {
                    return requeue_without_p(g);
                }
                let p = m.held_p();
                let global_empty = rt.injector.is_empty();
                // SAFETY: we own `g`: it suspended back to us.
                if unsafe { g.is_locked() } && runq_empty(p.p()) && global_empty {
                    // Nothing else to run: spare the pinned G two hand-offs.
                    continue;
                }
                g.transition(GStatus::Running, GStatus::Runnable);
                if matches!(request, Request::Preempt) {
                    p.local().slice_ended.set(true);
                }
                if global_empty {
                    // Behind this P's queue: where the global queue would have it run
                    // too, without the queue's cost ("time slices" in the module doc).
                    runq_put(&p, g, false);
                } else {
                    // Behind what waits in the global queue (Go: goschedImpl), which
                    // this P's queue would otherwise keep waiting while a pair inherits;
                    // after a preemption, what waits there runs next (`schedule_turn`).
                    // Then an idle P is woken for it, as Go's goschedImpl does
                    // (globrunqput, wakep): this P may run its own queue for a slice
                    // before it looks at the global queue again.
                    publish_global(g);
                    wakep();
                }
                return;
            }
            CoroutineResult::Yield(Request::Park(commit)) => {
                // SAFETY: `commit` came from park_current_g, whose frame stays
                // suspended until the G runs again; we own `g`.
                if unsafe { super::park::commit_park(&g, commit) } {
                    // Parked: our reference now keeps the G alive (see G's doc) and
                    // whoever readies it owns it from here.
                    std::mem::forget(g);
                    return;
                }
                // Woken before it slept: run it again at once, same time slice (or,
                // without a P, queue it).
                if !held {
                    return requeue_without_p(g);
                }
            }
            CoroutineResult::Yield(Request::ExitSyscall) => {
                // Back from a blocking call that lost its P.
                return requeue_without_p(g);
            }
            CoroutineResult::Yield(Request::Inspected) => {
                fatal!(
                    "execute: coroutine {} answered an inspection it was not asked",
                    g.id
                )
            }
            CoroutineResult::Return(()) => {
                if !held {
                    return g_exited(m, g, None);
                }
                return g_exited(m, g, Some(&m.held_p()));
            }
        }
    }
}

/// A coroutine returned: its G is dead and leaves the registry, its stack goes to the
/// P's cache (or the global pool, if the M lost its P meanwhile).
#[inline]
fn g_exited(m: &'static M, g: GRef, p: Option<&HeldP<'_>>) {
    let rt = rt_started();
    g.transition(GStatus::Running, GStatus::Dead);
    // SAFETY: we own `g`: it returned to us.
    if unsafe { g.is_locked() } {
        // The M goes back to the pool. (Go ends the thread instead, since the goroutine
        // may have left it in a special state; goro's pinning is for affinity, and
        // thread-locals it set stay set.)
        m.set_locked_g(std::ptr::null());
    }
    rt.allgs.remove(&g);
    // SAFETY: owner, and the coroutine has returned.
    let stack = unsafe { g.take_stack() };
    match p {
        Some(p) => {
            if let Some(stack) = stack {
                rt.stacks.put(Some(&p.local().stacks), stack);
            }
            p.add_gcount(-1);
            p.local().shells.put(g, &rt.g_free);
        }
        None => {
            if let Some(stack) = stack {
                rt.stacks.put(None, stack);
            }
            // Relaxed: a count (see the field); the P's own count stays with the P.
            rt.nextern_spawned.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// An M without a P takes an idle one, or parks until it is handed one.
fn reacquire_or_stop(m: &'static M) {
    let rt = rt_started();
    let p = {
        let mut s = rt.sched.lock();
        pidleget_locked(&mut s, &rt.spinning)
    };
    match p {
        Some(p) => m.acquirep(p),
        None => m.stopm(),
    }
}

/// A running G whose M came back from it without a P (sysmon took the P while the G
/// ran user code, or a blocking call lost it) goes to the global queue; `m_loop` then
/// finds the M a P or parks it (Go: exitsyscall0), and a pinned G's M waits for the G
/// in `stoplockedm`.
#[cold]
fn requeue_without_p(g: GRef) {
    g.transition(GStatus::Running, GStatus::Runnable);
    publish_global(g);
    wakep();
}

/// Binds a pinned `g` to `m` on its first run. Returns whether `m` is `g`'s M.
fn bind_pinned(m: &'static M, g: &GRef) -> bool {
    // SAFETY: execute's caller took `g` off a queue, so we own it.
    let lm = unsafe { g.locked_m() };
    if lm.is_null() {
        // SAFETY: as above.
        unsafe { g.set_locked_m(m) };
        m.set_locked_g(Arc::as_ptr(g));
        return true;
    }
    std::ptr::eq(lm, m)
}

/// Hands this M's P and the pinned `g` to `g`'s own M, then parks this M until it is
/// handed a P again (Go: startlockedm).
fn startlockedm(m: &'static M, g: GRef) {
    // SAFETY: we own `g` (see execute); `bind_pinned` saw it bound.
    let lm = unsafe { &*g.locked_m() };
    let p = m.releasep();
    lm.shared.hand_locked(p, g);
    m.stopm();
}

/// Finds a holder for `p`, which its M gave up (a retaken blocking call, or the M of a
/// pinned G going to sleep) (Go: handoffp): an M to run its queued work, a spinning M
/// if nobody is looking for work, or the idle list, waking the poller for its timers.
pub(crate) fn handoffp(p: &'static P) {
    let rt = rt();
    if !runq_empty(p) || !rt.injector.is_empty() {
        startm_with(p, false);
        return;
    }
    if rt.spinning.nmspinning() + rt.spinning.npidle() == 0 && rt.spinning.try_reserve() {
        startm_with(p, true);
        return;
    }
    let when = p.timers.when0();
    {
        let mut s = rt.sched.lock();
        pidleput_locked(&mut s, &rt.spinning, p);
    }
    if when != 0 && !rt.netpoll.timer_added(when) {
        wakep();
    }
}

/// Makes `g` runnable (Go: ready). From an M that holds a P, `g` goes to that P's
/// `runnext`, to run next and inherit the slice; from anywhere else, to the global
/// queue. Then wakes an idle P if no M is spinning.
pub(crate) fn ready(g: GRef) {
    g.transition(GStatus::Waiting, GStatus::Runnable);
    let m = current_m();
    match m.and_then(|m| m.p()) {
        Some(p) => publish(&p, g, true),
        None => publish_global(g),
    }
    wakep();
}

/// Queues `gs` (coroutines a poll readied, drained from the vector) on the global
/// queue, without a `wakep`: the caller decides how many Ms to wake (Go: injectglist).
/// Returns how many.
pub(crate) fn inject_global(gs: &mut Vec<GRef>) -> usize {
    let n = gs.len();
    if n > 0 {
        for g in gs.drain(..) {
            g.transition(GStatus::Waiting, GStatus::Runnable);
            rt().injector.push(g);
        }
        // The publish half of the spinning protocol, for the caller's wakep.
        fence(Ordering::SeqCst);
    }
    n
}

/// The "publish" half of the spinning protocol for a local queue: queues `g` on `p`,
/// then a SeqCst fence orders that before the loads of a following `wakep`.
///
/// The fence is kept even after a `runnext` swap, whose SeqCst read-modify-write would
/// do by the C++ model: loom models SeqCst fences exactly but treats SeqCst accesses
/// as AcqRel, so only the fenced form is checked by `tests/loom_spinning.rs`; and after
/// the swap's `xchg` the fence costs ~1.5 ns here (~10 ns after a plain store).
fn publish(p: &HeldP<'_>, g: GRef, next: bool) {
    runq_put(p, g, next);
    fence(Ordering::SeqCst);
}

/// The "publish" half of the spinning protocol for the global queue.
fn publish_global(g: GRef) {
    rt().injector.push(g);
    fence(Ordering::SeqCst);
}

/// Starts a spinning M on an idle P if there is an idle P and no M is spinning
/// (Go: wakep). The caller must have published its work first, ending with a SeqCst
/// fence (`publish`, `publish_global`): see the spinning protocol.
pub(crate) fn wakep() {
    let rt = rt();
    if rt.spinning.should_wake() {
        startm(true);
    }
}

/// Hands an idle P to an idle or new M (Go: startm). With `spinning`, the caller has
/// reserved a spinning slot, which is released if there is no idle P after all.
fn startm(spinning: bool) {
    let rt = rt();
    let (p, m) = {
        let mut s = rt.sched.lock();
        match pidleget_locked(&mut s, &rt.spinning) {
            Some(p) => (p, s.idle_ms.pop()),
            None => {
                drop(s);
                if spinning {
                    rt.spinning.cancel_spinning();
                }
                return;
            }
        }
    };
    match m {
        Some(m) => m.hand(p, spinning),
        None => newm(p, spinning),
    }
}

/// Whether an idle M is parked, to take a P without a new thread (`convoy`).
pub(crate) fn idle_m_ready() -> bool {
    !rt().sched.lock().idle_ms.is_empty()
}

/// Hands `p`, which nobody holds (`Idle`) and which is not on the idle list (sysmon
/// retook it from a blocking call, or a pinned coroutine's M let go of it), to an idle
/// or new M.
pub(crate) fn startm_with(p: &'static P, spinning: bool) {
    let m = rt().sched.lock().idle_ms.pop();
    match m {
        Some(m) => m.hand(p, spinning),
        None => newm(p, spinning),
    }
}

/// Creates a G running `main` and queues it: in the current P's `runnext` when called
/// from an M with a P (Go: newproc), in the global queue otherwise. Returns its id.
pub(crate) fn spawn_g(
    name: Option<Arc<str>>,
    spawned_at: Option<&'static std::panic::Location<'static>>,
    stack_size: Option<usize>,
    pinned: bool,
    main: impl FnOnce() + Send + 'static,
) -> io::Result<u64> {
    let rt = rt();
    let usable = match stack_size {
        Some(s) => stack::usable_size(s)?,
        None => rt.stacks.default_usable(),
    };
    let p = current_m().and_then(|m| m.p());
    if p.is_none() {
        // A plain thread's spawn: in a forked child, nothing would ever run it. (A
        // coroutine's spawn does not check: a forked child has no coroutine running
        // unless it forked on one, and then its one M still runs them.)
        super::not_in_forked_child();
    }
    let stack = rt
        .stacks
        .get(p.as_ref().map(|p| &p.local().stacks), usable)?;
    let id = alloc_goid(p.as_ref());
    let shell = match &p {
        Some(p) => p.local().shells.get(&rt.g_free),
        // A plain thread's spawn takes one from the global list, which its coroutines'
        // exits on the Ps fill.
        None => rt.g_free.take(),
    };
    let g = match p {
        // A plain thread's coroutine is made by the M that first runs it, while the Ms
        // keep up (see UNMADE_BACKLOG).
        None if rt.injector.len() < UNMADE_BACKLOG => {
            G::new_unmade(shell, id, name, spawned_at, pinned, stack, main)
        }
        _ => G::new(shell, id, name, spawned_at, pinned, stack, main),
    };
    rt.allgs.add(&g);
    match p {
        Some(p) => {
            p.add_gcount(1);
            publish(&p, g, true);
        }
        None => {
            // Relaxed: a count for the trace and the deadlock check; the G itself is published
            // by `publish_global`.
            rt.nextern_spawned.fetch_add(1, Ordering::Relaxed);
            publish_global(g);
        }
    }
    wakep();
    Ok(id)
}

/// A new goroutine id, from the P's batch when there is a P.
fn alloc_goid(p: Option<&HeldP<'_>>) -> u64 {
    let rt = rt();
    let Some(p) = p else {
        // Relaxed: the RMW alone makes ids unique; nothing is published with them.
        return rt.next_goid.fetch_add(1, Ordering::Relaxed);
    };
    let l = p.local();
    if l.goid_next.get() == l.goid_end.get() {
        // Relaxed: as above.
        let start = rt.next_goid.fetch_add(GOID_BATCH, Ordering::Relaxed);
        l.goid_next.set(start);
        l.goid_end.set(start + GOID_BATCH);
    }
    let id = l.goid_next.get();
    l.goid_next.set(id + 1);
    id
}

/// Yields the processor (Go: Gosched): the running coroutine goes behind the global
/// queue if anything waits there, else to the tail of its P's queue (see `execute`).
/// On a plain thread, `std::thread::yield_now`.
#[inline]
pub(crate) fn yield_now() {
    let g = current_g_ptr();
    if g.is_null() {
        std::thread::yield_now();
        return;
    }
    // SAFETY: `g` is the running G (alive while it runs) and we are on its stack.
    unsafe { (*g).suspend(Request::Yield) };
}

/// Ends the running coroutine's time slice at sysmon's request (Go: gopreempt_m): as
/// `yield_now`, and the P looks at the global queue first. Only from a coroutine.
pub(crate) fn preempt_yield() {
    let g = current_g_ptr();
    debug_assert!(!g.is_null(), "preempt_yield off a coroutine");
    // SAFETY: as in `yield_now`; the caller checked that a coroutine is running.
    unsafe { (*g).suspend(Request::Preempt) };
}
