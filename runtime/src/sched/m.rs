//! M: an OS thread that runs coroutines while it holds a P.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};
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
    /// The G in a blocking call on this M (`curg` is null meanwhile: the G runs as a
    /// plain thread), or null. Set and cleared by `blocking`, on the G's stack.
    blocking_g: Cell<*const G>,
    /// Whether this M is counted in `nmspinning`.
    pub(crate) spin: SpinState,
    /// The vector this M's polls return their readied coroutines in, kept between
    /// polls so that a poll with events does not allocate (empty between uses).
    pub(crate) poll_batch: Cell<Vec<GRef>>,
    /// The pinned coroutine this M is dedicated to (Go: lockedg), or null.
    locked_g: Cell<*const G>,
    /// The retake word of the P this M holds as it expects it on entering goro
    /// (`RetakeWord::held_word` of the epoch `RetakeWord::acquire` gave it).
    held_word: Cell<u64>,
    /// `membarrier::expedited()`, copied here where `enter` and the scan handshake
    /// (`execute`) read it.
    pub(crate) expedited: bool,
}

/// The part of an M that other threads touch: its wake-up hand-off.
pub(crate) struct MShared {
    /// The M's id (`M::id`), for the dump.
    pub(crate) id: usize,
    /// What `hand` gives the parked M.
    next: Mutex<Option<Handoff>>,
    /// Set (Release) by whoever hands this M a P, after `next` is filled; cleared and
    /// read by the M when it wakes (Acquire swap).
    woken: AtomicBool,
    thread: Thread,
    /// The id of the coroutine whose user code this M runs, 0 while it is inside goro:
    /// outside, sysmon may take its P (see "the retake handshake" in `p.rs`), and the
    /// dump names the coroutine. Written by the M only (`leave_goro` / `enter_goro`);
    /// read by sysmon and the dump.
    pub(crate) outside: crate::loom::AtomicU64,
    /// This M's thread CPU clock (`pthread_getcpuclockid`), which sysmon samples to tell
    /// a thread blocked in the kernel from one that computes. Set at the start.
    pub(crate) cpu_clock: libc::clockid_t,
    /// When sysmon took this M's P while its coroutine ran outside goro (the runtime
    /// clock), 0 once the coroutine is back in goro or the M holds a P; and why
    /// (`LOST_BLOCKED` or `LOST_COMPUTING`). For the dump: written by sysmon and the M
    /// (`enter`, `acquirep`), read by `dump` (Relaxed all: informational).
    pub(crate) lost_p_at: AtomicI64,
    pub(crate) lost_p_why: AtomicU8,
    /// The M's thread id (`gettid`), for `kernel_wait`.
    pub(crate) tid: libc::pid_t,
    /// The futex word this M waited on when sysmon took its P, 0 if none or once the
    /// M is back in goro (see `convoy`).
    pub(crate) futex_wait: std::sync::atomic::AtomicUsize,
}

/// Why sysmon took an M's P (see `MShared::lost_p_why`): its thread sat in the kernel.
pub(crate) const LOST_BLOCKED: u8 = 1;
/// ... or it ran user code past its slice and the preempt request.
pub(crate) const LOST_COMPUTING: u8 = 2;

/// An M's `outside` word, reached through its shared part (for `p::try_retake`).
pub(crate) struct OutsideOf(pub(crate) Arc<MShared>);

impl std::ops::Deref for OutsideOf {
    type Target = crate::loom::AtomicU64;
    fn deref(&self) -> &crate::loom::AtomicU64 {
        &self.0.outside
    }
}

impl MShared {
    /// Where this M's thread is in the kernel (/proc/self/task/TID/syscall: the call
    /// it sleeps in, a futex's word): a thread whose CPU clock stands still because
    /// other threads have the CPUs is not blocked, and taking its P would only add a
    /// thread to the contention. Read only when the clock has stood still, so rarely.
    pub(crate) fn kernel_wait(&self) -> super::procfs::InKernel {
        use super::procfs::InKernel;
        // Through the descriptors sysmon holds, with the reserve behind the open, so
        // that EMFILE does not blind it (see `procfs`). If the state still cannot be
        // read, count the thread as asleep: taking the P of a thread that was only
        // waiting for a CPU costs a thread; leaving a blocked one's P costs every
        // coroutine queued behind it.
        match super::procfs::wait_of_tid(self.tid) {
            Ok(w) => w,
            // The thread has ended.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {
                InKernel::Runnable
            }
            Err(_) => InKernel::Asleep,
        }
    }

    /// CPU time this M's thread has used, in nanoseconds (None if it has ended).
    pub(crate) fn cpu_ns(&self) -> Option<i64> {
        // A thread that has exited gives EINVAL (`None`); an unknown clock (-1) too.
        let ts = nix::time::clock_gettime(nix::time::ClockId::from_raw(self.cpu_clock)).ok()?;
        Some(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
    }
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
    this_thread_m()
}

/// The TLS read behind [`current_m`], [`current_g_ptr`] and [`running_g_ptr`]: inlined
/// into each of them (which are out of line themselves), so that each costs one call,
/// not two (the yield path reads [`current_g_ptr`] once per yield).
#[inline(always)]
fn this_thread_m() -> Option<&'static M> {
    let m = CURRENT_M.with(|c| c.get());
    // SAFETY: a non-null CURRENT_M points at this thread's M, which lives until the
    // thread clears CURRENT_M as it ends.
    (!m.is_null()).then(|| unsafe { &*m })
}

/// The G running on this thread, or null. `#[inline(never)]` for the same reason as
/// [`current_m`].
#[inline(never)]
pub(crate) fn current_g_ptr() -> *const G {
    match this_thread_m() {
        Some(m) => m.curg.get(),
        None => std::ptr::null(),
    }
}

/// The G whose code runs on this thread, also inside a `blocking` call (where
/// [`current_g_ptr`] is null), or null. `#[inline(never)]` as [`current_g_ptr`].
#[inline(never)]
pub(crate) fn running_g_ptr() -> *const G {
    match this_thread_m() {
        Some(m) if !m.curg.get().is_null() => m.curg.get(),
        Some(m) => m.blocking_g.get(),
        None => std::ptr::null(),
    }
}

/// Whether a coroutine runs on this thread, for a test made before anything that can
/// switch (the libc hooks' first test, on every call): inlined, a TLS load and two
/// compares. [`current_g_ptr`] stays out of line for reads after a switch.
#[cfg(feature = "hooks")]
#[inline(always)]
pub(crate) fn on_coroutine_here() -> bool {
    this_thread_m().is_some_and(|m| !m.curg.get().is_null())
}

impl M {
    /// The right to the local state of the P this M holds, if it holds one (see
    /// `HeldP`). Must be called on the M's own thread.
    ///
    /// On a coroutine, this enters goro: it learns whether sysmon took the P while the
    /// coroutine ran user code (then it returns None: the caller goes on without a P,
    /// as after a blocking call that lost its P), and the `HeldP` leaves goro again when
    /// dropped. On the scheduler's stack the M is inside goro already.
    #[inline]
    pub(crate) fn p(&self) -> Option<HeldP<'_>> {
        let p = self.p.get()?;
        let on_g = !self.curg.get().is_null();
        // On a coroutine the M is outside goro, its `outside` word holding the running
        // coroutine's id: the value to restore when the borrow ends. (Inside a borrow
        // taken earlier it is 0, and restoring 0 keeps the M inside for the outer
        // one.) Relaxed: our own last store.
        let outside = on_g.then(|| self.shared.outside.load(Ordering::Relaxed));
        if on_g && !self.enter() {
            return None;
        }
        let leave = outside.map(|g| (&self.shared.outside, g));
        // SAFETY: `self.p` is the P this M holds (set by acquirep / reacquirep, cleared
        // by releasep / enter_syscall / a lost retake), `self` is the calling thread's M
        // (Ms are reached through CURRENT_M only), `p_borrows` is its borrow count, and
        // on a coroutine it has just entered goro (above) and leaves on drop.
        Some(unsafe { HeldP::new(p, &self.p_borrows, leave) })
    }

    /// Whether this M holds a P (on the scheduler's stack, where no handshake is
    /// needed to know it).
    #[inline]
    pub(crate) fn has_p(&self) -> bool {
        self.p.get().is_some()
    }

    /// Leaves goro: this M is about to run user code (resume a coroutine, or return
    /// to one), and sysmon may take its P meanwhile (see "the retake handshake").
    #[inline]
    pub(crate) fn leave(&self, g: u64) {
        super::p::leave_goro(&self.shared.outside, g);
    }

    /// Enters goro: returns whether this M still holds its P. If sysmon took it, the
    /// M lets go of it (without touching it) and runs on without a P.
    #[inline]
    pub(crate) fn enter(&self) -> bool {
        let Some(p) = self.p.get() else {
            return false;
        };
        let (word, fast) = (self.held_word.get(), self.expedited);
        if super::p::enter_goro(&self.shared.outside, &p.retake, word, fast) {
            return true;
        }
        self.lost_p();
        false
    }

    /// Back in goro, this M learnt that sysmon took its P.
    #[cold]
    #[inline(never)]
    fn lost_p(&self) {
        self.p.set(None);
        // Relaxed: for the dump (back in goro: no longer "outside without a P").
        self.shared.lost_p_at.store(0, Ordering::Relaxed);
        // Acquire: `enter_goro` read sysmon's commit (a Release CAS) or a value after
        // it, Relaxed; this fence makes what sysmon wrote before the commit (the
        // convoy's mark) visible below.
        std::sync::atomic::fence(Ordering::Acquire);
        super::convoy::back(&self.shared);
    }

    /// The P this M must hold here, on the scheduler's stack (where the M is inside
    /// goro: nothing to enter, nothing to leave on drop).
    #[inline]
    #[track_caller]
    pub(crate) fn held_p(&self) -> HeldP<'_> {
        debug_assert!(self.curg.get().is_null(), "held_p on a coroutine");
        match self.p.get() {
            // SAFETY: as in `p`.
            Some(p) => unsafe { HeldP::new(p, &self.p_borrows, None) },
            None => self.no_p(std::panic::Location::caller()),
        }
    }

    #[cold]
    #[inline(never)]
    fn no_p(&self, at: &std::panic::Location<'_>) -> ! {
        fatal!("{at}: M {} holds no P", self.id)
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
        // Relaxed: our own flag, read by sysmon only for the epoch we are about to hold
        // (it finds us through `P::owner`, set under its lock with the epoch).
        self.shared.outside.store(0, Ordering::Relaxed);
        self.shared.lost_p_at.store(0, Ordering::Relaxed);
        self.own(p);
        self.p.set(Some(p));
        // A request to yield meant for the last holder's slice is void (after a retake
        // it would make the first coroutine this M runs yield at once). Relaxed: a
        // hint, as everywhere.
        p.preempt.store(false, Ordering::Relaxed);
        super::sysmon::wake_if_asleep();
        super::sysmon::note_running();
    }

    /// Takes back `p`, the P this M held before a blocking call, after winning it back
    /// with the `Syscall -> Running` CAS (the blocking call's fast path: no status
    /// store, and sysmon cannot be in its deep sleep while a P was in a call).
    ///
    /// The CAS can also win a P that sysmon retook meanwhile and another M acquired and
    /// took into a blocking call of its own (an ABA: that M's own CAS then fails and it
    /// goes without). Then the P's retake epoch is that M's: the winner starts an epoch
    /// of its own, as `acquirep` does.
    #[inline]
    pub(crate) fn reacquirep(&self, p: &'static P) {
        if super::p::RetakeWord::held_word(p.retake.epoch()) != self.held_word.get() {
            self.own(p);
        }
        self.p.set(Some(p));
    }

    /// Starts this M's retake epoch on `p` and records this M as its holder for that
    /// epoch, both under `P::owner`'s lock, so that sysmon never pairs an epoch with
    /// another M's `outside` flag.
    fn own(&self, p: &'static P) {
        let mut owner = p.owner.lock();
        let epoch = p.retake.acquire();
        match &mut *owner {
            // The same M again (the common case: a P goes idle and its M takes it
            // back): a new epoch, no reference-count traffic.
            Some((e, m)) if Arc::ptr_eq(m, &self.shared) => *e = epoch,
            o => *o = Some((epoch, self.shared.clone())),
        }
        self.held_word.set(super::p::RetakeWord::held_word(epoch));
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
    /// `oldp` (see "the syscall hand-off"). Takes the caller's `HeldP` without leaving
    /// goro: sysmon's retake of a running P must not race this status change, and from
    /// `Syscall` on the syscall hand-off's own CASes decide who owns the P.
    pub(crate) fn enter_syscall(&self, held: HeldP<'_>) {
        held.forget();
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

    /// Records the G entering (non-null) or leaving (null) a blocking call on this M.
    pub(crate) fn set_blocking_g(&self, g: *const G) {
        self.blocking_g.set(g);
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
    super::publish_started(rt);
    let spawned = thread::Builder::new()
        .name(format!("goro-m{id}"))
        .spawn(move || {
            let altstack = crate::stack::overflow::ensure_altstack();
            let mut cpu_clock: libc::clockid_t = 0;
            // SAFETY: our own thread's handle and a valid out-pointer.
            if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut cpu_clock) } != 0 {
                cpu_clock = -1; // unknown: sysmon then only sees CPU-bound runs (`cpu_ns` is None)
            }
            let shared = Arc::new(MShared {
                id,
                next: Mutex::new(Rank::MHandoff, None),
                woken: AtomicBool::new(false),
                thread: thread::current(),
                outside: crate::loom::AtomicU64::new(0),
                cpu_clock,
                lost_p_at: AtomicI64::new(0),
                lost_p_why: AtomicU8::new(0),
                futex_wait: std::sync::atomic::AtomicUsize::new(0),
                tid: nix::unistd::gettid().as_raw(),
            });
            let shared_for_list = shared.clone();
            let m: *mut M = Box::into_raw(Box::new(M {
                id,
                shared,
                p: Cell::new(None),
                p_borrows: Cell::new(0),
                oldp: Cell::new(None),
                curg: Cell::new(std::ptr::null()),
                blocking_g: Cell::new(std::ptr::null()),
                spin: SpinState::new(spinning),
                locked_g: Cell::new(std::ptr::null()),
                poll_batch: Cell::new(Vec::new()),
                held_word: Cell::new(0),
                expedited: crate::membarrier::expedited(),
            }));
            super::rt().allm.lock().push(shared_for_list);
            CURRENT_M.with(|c| c.set(m));
            // SAFETY: `m` is valid until the Box is freed below, after the loop.
            let m_ref: &'static M = unsafe { &*m };
            super::sysmon::start();
            m_ref.acquirep(p);
            super::schedule::m_loop(m_ref);
            // The M left the pool (see stopm): it holds no P and no G, and no pinned G
            // is bound to it, so nothing refers to it any more. Its thread ends here.
            CURRENT_M.with(|c| c.set(std::ptr::null()));
            super::rt()
                .allm
                .lock()
                .retain(|s| !Arc::ptr_eq(s, &m_ref.shared));
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
