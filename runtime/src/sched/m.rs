//! M: an OS thread that runs coroutines while it holds a P.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use super::g::{GRef, G};
use super::idle::SpinState;
use super::p::{HeldP, PStatus, P};
use super::{fatal, rt};
use crate::lockrank::{Mutex, Rank};

/// An M's own state, used on its thread only. It lives as long as its thread: an M
/// that leaves the pool (see `stopm`) frees it as the thread ends. Nothing else keeps a
/// pointer to an M except a pinned G (`G::locked_m`), and an M bound to a live pinned
/// G never leaves the pool.
pub(crate) struct M {
    pub(crate) id: usize,
    /// What other threads use to hand this M a P and wake it.
    pub(crate) shared: Arc<MShared>,
    /// The P this M holds.
    p: Cell<Option<&'static P>>,
    /// Live `HeldP` borrows of `p`, counted in debug builds (see `HeldP`): `releasep`
    /// refuses while any is.
    p_borrows: Cell<u32>,
    /// The P this M held when it entered a blocking call (see "the syscall hand-off").
    oldp: Cell<Option<&'static P>>,
    /// The G this M is running (set around each resume), or null.
    curg: Cell<*const G>,
    /// Whether this M is counted in `nmspinning`.
    pub(crate) spin: SpinState,
    /// The vector this M's polls return their readied coroutines in, kept between
    /// polls so that a poll with events does not allocate (empty between uses).
    pub(crate) poll_batch: Cell<Vec<GRef>>,
    /// The pinned coroutine this M is dedicated to (Go: lockedg), or null.
    locked_g: Cell<*const G>,
}

/// The part of an M that other threads touch: its wake-up hand-off.
pub(crate) struct MShared {
    /// What `hand` gives the parked M.
    next: Mutex<Option<Handoff>>,
    /// Set (Release) by whoever hands this M a P, after `next` is filled; cleared and
    /// read by the M when it wakes (Acquire swap).
    woken: AtomicBool,
    thread: Thread,
}

/// A P handed to a parked M: to spin with, or (for the M of a pinned coroutine) to run
/// that coroutine on.
pub(crate) struct Handoff {
    pub(crate) p: &'static P,
    pub(crate) spinning: bool,
    pub(crate) g: Option<GRef>,
}

impl MShared {
    /// Hands `p` to this parked M and wakes it (Go: notewakeup(&mp.park)).
    pub(crate) fn hand(&self, p: &'static P, spinning: bool) {
        self.hand_over(Handoff {
            p,
            spinning,
            g: None,
        });
    }

    /// Hands `p` and the pinned coroutine `g` to `g`'s own M (Go: startlockedm).
    pub(crate) fn hand_locked(&self, p: &'static P, g: GRef) {
        self.hand_over(Handoff {
            p,
            spinning: false,
            g: Some(g),
        });
    }

    fn hand_over(&self, h: Handoff) {
        *self.next.lock() = Some(h);
        // Release: pairs with the Acquire swap in `wait_for_p`.
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// Parks the calling M until `hand` gives it a P (Go: notesleep), or `timeout`
    /// passes (`None`).
    fn wait_for_p(&self, timeout: Option<Duration>) -> Option<Handoff> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            // Acquire: pairs with the Release store in `hand_over`.
            if self.woken.swap(false, Ordering::Acquire) {
                if let Some(next) = self.next.lock().take() {
                    return Some(next);
                }
            }
            match deadline {
                None => thread::park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return None;
                    }
                    thread::park_timeout(d - now);
                }
            }
        }
    }
}

/// Unwinds an exiting M's scheduler stack back to `m_loop` (an idle M beyond the pool
/// it needs; see `M::stopm`). Raised with `resume_unwind`, so no panic hook runs.
pub(crate) struct ExitM;

thread_local! {
    /// The M of this thread, or null on a thread that is not an M. Const-initialised
    /// and without destructor: a plain TLS load.
    static CURRENT_M: Cell<*const M> = const { Cell::new(std::ptr::null()) };
}

/// The current thread's M, if it is one.
///
/// `#[inline(never)]` on purpose: a G that suspends may resume on another thread, and
/// the compiler may keep a thread-local's address in a register across a call it
/// believes returns on the same thread. Every read of per-M state after a switch goes
/// through a fresh call to this function.
#[inline(never)]
pub(crate) fn current_m() -> Option<&'static M> {
    let m = CURRENT_M.with(|c| c.get());
    // SAFETY: a non-null CURRENT_M points at this thread's M, which lives until the
    // thread clears CURRENT_M as it ends.
    (!m.is_null()).then(|| unsafe { &*m })
}

/// The G running on this thread, or null. `#[inline(never)]` for the same reason as
/// [`current_m`].
#[inline(never)]
pub(crate) fn current_g_ptr() -> *const G {
    match current_m() {
        Some(m) => m.curg.get(),
        None => std::ptr::null(),
    }
}

impl M {
    /// The right to the local state of the P this M holds, if it holds one (see
    /// `HeldP`). Must be called on the M's own thread.
    #[inline]
    pub(crate) fn p(&self) -> Option<HeldP<'_>> {
        let p = self.p.get()?;
        // SAFETY: `self.p` is the P this M holds (set by acquirep / reacquirep, cleared
        // by releasep / enter_syscall), `self` is the calling thread's M (Ms are
        // reached through CURRENT_M only), and `p_borrows` is its borrow count.
        Some(unsafe { HeldP::new(p, &self.p_borrows) })
    }

    /// The P this M must hold here.
    #[inline]
    pub(crate) fn held_p(&self, who: &str) -> HeldP<'_> {
        match self.p() {
            Some(p) => p,
            None => fatal!("{who}: M {} holds no P", self.id),
        }
    }

    /// Takes `p` as this M's P (Go: acquirep): `Idle -> Running`. `p` must have come
    /// off the idle list or a hand-off (`startm`, `handoffp`), so nobody else holds it.
    pub(crate) fn acquirep(&self, p: &'static P) {
        if self.p.get().is_some() {
            fatal!("acquirep: M {} already holds a P", self.id);
        }
        // Relaxed: the P came through the idle list's lock or a hand-off's mutex,
        // which order the previous holder's accesses before ours.
        p.transition(PStatus::Idle, PStatus::Running, Ordering::Relaxed);
        self.p.set(Some(p));
        super::sysmon::wake_if_asleep();
    }

    /// Takes back `p`, the P this M held before a blocking call, after winning it back
    /// with the `Syscall -> Running` CAS (the blocking call's fast path: no status
    /// store, and sysmon cannot be in its deep sleep while a P was in a call).
    #[inline]
    pub(crate) fn reacquirep(&self, p: &'static P) {
        self.p.set(Some(p));
    }

    /// Aborts if a `HeldP` of this M is alive: the M is about to let go of its P, or
    /// its coroutine to switch away (and perhaps resume on another M).
    /// Debug builds only (see `HeldP`).
    #[inline]
    pub(crate) fn check_unborrowed(&self, who: &str) {
        if cfg!(debug_assertions) && self.p_borrows.get() != 0 {
            fatal!(
                "{who}: M {} lets go of its P while its local state is borrowed",
                self.id
            );
        }
    }

    /// Gives up this M's P (Go: releasep): `Running -> Idle`; the caller puts it on the
    /// idle list, hands it over, or retires it.
    pub(crate) fn releasep(&self) -> &'static P {
        self.check_unborrowed("releasep");
        match self.p.take() {
            Some(p) => {
                // Relaxed: whoever takes the P next gets it through the idle list's
                // lock or a hand-off's mutex.
                p.transition(PStatus::Running, PStatus::Idle, Ordering::Relaxed);
                p
            }
            None => fatal!("releasep: M {} holds no P", self.id),
        }
    }

    /// Lets go of the P for a blocking call (`Running -> Syscall`), remembering it as
    /// `oldp` (see "the syscall hand-off").
    pub(crate) fn enter_syscall(&self) {
        self.check_unborrowed("enter_syscall");
        let Some(p) = self.p.take() else {
            fatal!("enter_syscall: M {} holds no P", self.id)
        };
        // Release: publishes the P's local state, as this M left it, to whoever wins
        // it (sysmon's CAS, AcqRel).
        p.transition(PStatus::Running, PStatus::Syscall, Ordering::Release);
        self.oldp.set(Some(p));
    }

    /// The P held before the blocking call (no longer necessarily ours).
    pub(crate) fn leave_syscall(&self) -> &'static P {
        match self.oldp.take() {
            Some(p) => p,
            None => fatal!("leave_syscall: M {} was not in a blocking call", self.id),
        }
    }

    pub(crate) fn set_curg(&self, g: *const G) {
        self.curg.set(g);
    }

    /// Parks this M until it is handed a P (Go: stopm). Must hold no P.
    ///
    /// An M that waits longer than the idle timeout while more Ms exist than the Ps
    /// need (blocking calls grew the pool) leaves the pool and its thread exits.
    pub(crate) fn stopm(&self) {
        if self.p.get().is_some() {
            fatal!("stopm: M {} still holds a P", self.id);
        }
        let rt = rt();
        rt.sched.lock().idle_ms.push(self.shared.clone());
        loop {
            if let Some(h) = self.shared.wait_for_p(Some(idle_m_timeout())) {
                if h.g.is_some() {
                    fatal!("stopm: M {} was handed a pinned coroutine", self.id);
                }
                self.acquirep(h.p);
                self.spin.adopt(h.spinning);
                return;
            }
            // Idle for a while: leave if the pool is bigger than the Ps need.
            // Relaxed: a heuristic; a stale count keeps us one more timeout, or lets us
            // go a little early (`startm` makes a new M if one is missing).
            if rt.nm_alive.load(Ordering::Relaxed) <= rt.procs() + 1 {
                continue;
            }
            let mut s = rt.sched.lock();
            if let Some(i) = s.idle_ms.iter().position(|x| Arc::ptr_eq(x, &self.shared)) {
                s.idle_ms.swap_remove(i);
                drop(s);
                std::panic::resume_unwind(Box::new(ExitM));
            }
            // Not on the list: someone is handing us a P right now.
        }
    }

    /// The pinned coroutine this M is dedicated to, or null.
    pub(crate) fn locked_g(&self) -> *const G {
        self.locked_g.get()
    }

    pub(crate) fn set_locked_g(&self, g: *const G) {
        self.locked_g.set(g);
    }

    /// Gives this M's P away and waits for its pinned coroutine to be handed back with a
    /// P (Go: stoplockedm). Returns the coroutine.
    pub(crate) fn stoplockedm(&self) -> GRef {
        // No P after a blocking call whose P was retaken (see execute's ExitSyscall).
        if self.p.get().is_some() {
            let p = self.releasep();
            super::schedule::handoffp(p);
        }
        loop {
            if let Some(h) = self.shared.wait_for_p(None) {
                match h.g {
                    Some(g) => {
                        self.acquirep(h.p);
                        return g;
                    }
                    None => fatal!(
                        "stoplockedm: M {} was handed a P without its coroutine",
                        self.id
                    ),
                }
            }
        }
    }
}

/// How long an idle M beyond the pool's needs waits before it exits
/// (`GORO_IDLE_M_EXIT_MS`, default 5 s).
fn idle_m_timeout() -> Duration {
    rt().idle_m_exit
}

/// Starts a new M holding `p` (Go: newm). Aborts if the OS refuses a thread (the
/// runtime cannot keep its promise to run queued coroutines without one), or if the
/// Ms alive would pass `GORO_MAX_THREADS` (Go's thread limit).
pub(crate) fn newm(p: &'static P, spinning: bool) {
    let rt = rt();
    // Relaxed: a unique id, and a count for heuristics and the limit (see the fields):
    // the RMW makes concurrent starters see distinct counts, so the limit holds.
    let id = rt.nm.fetch_add(1, Ordering::Relaxed);
    let alive = rt.nm_alive.fetch_add(1, Ordering::Relaxed) + 1;
    if alive > rt.max_threads {
        // Go: "runtime: program exceeds 10000-thread limit", "thread exhaustion".
        fatal!(
            "newm: the program needs more than {} threads to run its coroutines \
             (GORO_MAX_THREADS): {} are running or blocked in calls that lost their P. \
             Raise GORO_MAX_THREADS, or bound the blocking calls (a \
             goro::sync::Semaphore around them)",
            rt.max_threads,
            alive - 1
        );
    }
    let spawned = thread::Builder::new()
        .name(format!("goro-m{id}"))
        .spawn(move || {
            let altstack = crate::stack::overflow::ensure_altstack();
            let shared = Arc::new(MShared {
                next: Mutex::new(Rank::MHandoff, None),
                woken: AtomicBool::new(false),
                thread: thread::current(),
            });
            let m: *mut M = Box::into_raw(Box::new(M {
                id,
                shared,
                p: Cell::new(None),
                p_borrows: Cell::new(0),
                oldp: Cell::new(None),
                curg: Cell::new(std::ptr::null()),
                spin: SpinState::new(spinning),
                locked_g: Cell::new(std::ptr::null()),
                poll_batch: Cell::new(Vec::new()),
            }));
            CURRENT_M.with(|c| c.set(m));
            // SAFETY: `m` is valid until the Box is freed below, after the loop.
            let m_ref: &'static M = unsafe { &*m };
            super::sysmon::start();
            m_ref.acquirep(p);
            super::schedule::m_loop(m_ref);
            // The M left the pool (see stopm): it holds no P and no G, and no pinned G
            // is bound to it, so nothing refers to it any more. Its thread ends here.
            CURRENT_M.with(|c| c.set(std::ptr::null()));
            // SAFETY: made by Box::into_raw above; the last use of `m_ref` was m_loop.
            drop(unsafe { Box::from_raw(m) });
            drop(altstack);
            // Relaxed: see `Runtime::nm_alive`.
            super::rt().nm_alive.fetch_sub(1, Ordering::Relaxed);
        });
    if let Err(e) = spawned {
        // Relaxed: as above.
        rt.nm_alive.fetch_sub(1, Ordering::Relaxed);
        fatal!("newm: cannot start an OS thread for M {id}: {e}");
    }
}
