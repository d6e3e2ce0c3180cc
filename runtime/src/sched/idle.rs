//! Idle Ps, idle Ms, and the spinning counters.

use std::cell::Cell;
use std::sync::Arc;

use super::m::MShared;
use super::p::{PStatus, P};
use crate::loom::{fence, seqcst_pair_fence, AtomicBool, AtomicUsize, Ordering};

/// The spinning protocol's counters (see the module doc of `sched`).
///
/// `nmspinning` is written by Ms entering and leaving the spinning state and by
/// `wakep`'s CAS; `npidle` mirrors the length of the idle-P list and is written under
/// `Runtime::sched`. Both are read without the lock by `wakep` and by spinning Ms.
///
/// The spinning pair rests on its two SeqCst fences (the publisher's, `stop_spinning`'s):
/// the accesses between them need no ordering of their own, and `loom_spinning` checks
/// it with SeqCst accesses modelled as AcqRel. They are SeqCst anyway (an RMW is one
/// locked instruction on x86 whatever its ordering, a load a plain `mov`), and
/// `pidle_dec` must be: it is the M's store in the deep-sleep pair, which has no fence.
pub struct Spinning {
    nmspinning: AtomicUsize,
    npidle: AtomicUsize,
}

impl Spinning {
    /// No spinning M, no idle P.
    pub fn new() -> Self {
        Spinning {
            nmspinning: AtomicUsize::new(0),
            npidle: AtomicUsize::new(0),
        }
    }

    /// Ms spinning now (a snapshot).
    pub fn nmspinning(&self) -> usize {
        // Relaxed: a snapshot for heuristics (how many may spin, handoffp, the trace);
        // the spinning pair's own reads are `should_wake`'s, after the publisher's fence.
        self.nmspinning.load(Ordering::Relaxed)
    }

    /// Idle Ps now (a snapshot).
    pub fn npidle(&self) -> usize {
        // Relaxed: a snapshot, as `nmspinning` (sysmon's all-idle sighting included:
        // `DeepSleep::announce` re-reads it SeqCst before the sleep that matters).
        self.npidle.load(Ordering::Relaxed)
    }

    /// Submitter side, after the work is published: whether this caller should start
    /// a spinning M. A `true` reserves the spinning slot (nmspinning 0 -> 1); the caller
    /// must start an M or call `cancel_spinning`.
    ///
    /// The caller's publication must end with a SeqCst fence: with `stop_spinning`'s
    /// fence that is a Dekker pair. Either these loads see the spinning M's decrement
    /// (and we wake one), or that M's re-check, after its fence, sees the work
    /// published before ours.
    pub fn should_wake(&self) -> bool {
        if self.npidle.load(Ordering::SeqCst) == 0 || self.nmspinning.load(Ordering::SeqCst) != 0 {
            return false;
        }
        self.nmspinning
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Reserves the spinning slot if nobody spins (nmspinning 0 -> 1), for an M that
    /// sysmon starts with a retaken P. The caller must start an M or cancel.
    pub fn try_reserve(&self) -> bool {
        // SeqCst, though the spinning pair does not need it here (see the struct doc):
        // the reserved M leaves through `stop_spinning`, whose fence orders its re-check.
        self.nmspinning
            .compare_exchange(0, 1, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    }

    /// Go's `2*nmspinning < gomaxprocs - npidle` rule: may one more M spin?
    pub fn may_spin(&self, gomaxprocs: usize) -> bool {
        2 * self.nmspinning() < gomaxprocs.saturating_sub(self.npidle())
    }

    /// Whether some P is held by an M that is not spinning (running coroutines, and
    /// so likely to queue more work).
    pub fn others_busy(&self, gomaxprocs: usize) -> bool {
        gomaxprocs.saturating_sub(self.npidle()) > self.nmspinning()
    }

    /// An M starts spinning on its own initiative.
    pub fn start_spinning(&self) {
        // SeqCst, not needed by the pair (see the struct doc): an M counted here
        // re-checks for work after `stop_spinning`'s fence.
        self.nmspinning.fetch_add(1, Ordering::SeqCst);
    }

    /// An M stops spinning (found work, or gives up). Returns the count left. When
    /// giving up, the caller must re-check every source of work *after* this call.
    pub fn stop_spinning(&self) -> usize {
        // The M's store in the spinning pair; the fence below is what orders it before
        // the re-check (see the struct doc).
        let prev = self.nmspinning.fetch_sub(1, Ordering::SeqCst);
        if prev == 0 {
            super::fatal!("stop_spinning: nmspinning was already zero");
        }
        // SeqCst fence: the re-check half of the Dekker pair with `should_wake`.
        fence(Ordering::SeqCst);
        prev - 1
    }

    /// Undoes a reservation made by `should_wake` that found no P to start.
    pub fn cancel_spinning(&self) {
        self.stop_spinning();
    }

    /// A P went on the idle list (`sched` held).
    pub fn pidle_inc(&self) {
        // SeqCst, not needed by the spinning pair (see the struct doc): a spinning M
        // that idles its P re-checks after `stop_spinning`'s fence.
        self.npidle.fetch_add(1, Ordering::SeqCst);
    }

    /// A P came off the idle list (`sched` held).
    pub fn pidle_dec(&self) {
        // SeqCst: the M's store in the deep-sleep Dekker pair, before `should_poke`'s
        // SeqCst load of `asleep` (no fence: see `seqcst_pair_fence`).
        self.npidle.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether one M counts in [`Spinning`]'s `nmspinning`: the M's half of the spinning
/// protocol. The M's flag and the global count change together, here only (tokio's
/// `transition_worker_to_searching` / `transition_worker_from_searching`). Owned by the
/// M, used on its thread.
pub(crate) struct SpinState {
    spinning: Cell<bool>,
}

impl SpinState {
    /// A new M's state: `reserved` if its starter reserved a spinning slot for it
    /// (`Spinning::should_wake` or `try_reserve`), which then already counts it.
    pub(crate) fn new(reserved: bool) -> SpinState {
        SpinState {
            spinning: Cell::new(reserved),
        }
    }

    #[inline]
    pub(crate) fn is_spinning(&self) -> bool {
        self.spinning.get()
    }

    /// Starts spinning (and counting), unless the M already is.
    #[inline]
    pub(crate) fn start(&self, counts: &Spinning) {
        if !self.spinning.replace(true) {
            counts.start_spinning();
        }
    }

    /// The M was handed a P, with a spinning slot reserved for it or not.
    #[inline]
    pub(crate) fn adopt(&self, reserved: bool) {
        if self.spinning.replace(reserved) {
            super::fatal!("SpinState::adopt: a parked M was still spinning");
        }
    }

    /// Stops spinning, if the M is: returns the number of spinning Ms left, None if it
    /// was not spinning. An M that gives up must re-check every source of work after
    /// this (the spinning protocol's second rule).
    #[inline]
    pub(crate) fn stop(&self, counts: &Spinning) -> Option<usize> {
        self.spinning.replace(false).then(|| counts.stop_spinning())
    }
}

/// sysmon's deep sleep (see sysmon's module doc): while every P is idle, sysmon sleeps
/// with no timeout, and the first M to take a P again wakes it.
///
/// # The deep-sleep Dekker pair
///
/// sysmon stores `asleep = true`, then reads `npidle` (`announce`); an M decrements
/// `npidle` (taking an idle P), then reads `asleep` (`should_poke`). All four accesses
/// are SeqCst (see `seqcst_pair_fence`), so either sysmon sees the P taken and does
/// not sleep without a timeout, or the M sees the announcement and pokes it awake.
/// With Relaxed loads on both sides, as before issue 14, sysmon could sleep forever
/// while a P ran; `tests/loom_deep_sleep.rs` checks both.
///
/// Written by sysmon (`announce`, `end`) and by the M that pokes (`should_poke`'s
/// swap); read by Ms after every `acquirep`.
pub struct DeepSleep {
    asleep: AtomicBool,
}

impl DeepSleep {
    /// Not asleep.
    pub fn new() -> Self {
        DeepSleep {
            asleep: AtomicBool::new(false),
        }
    }

    /// sysmon, before a sleep without timeout: announces it, then returns whether
    /// every one of `procs` Ps is still idle (if not, it must not sleep unbounded).
    pub fn announce(&self, spinning: &Spinning, procs: usize) -> bool {
        // SeqCst store, then SeqCst load: sysmon's half of the pair.
        self.asleep.store(true, Ordering::SeqCst);
        seqcst_pair_fence();
        spinning.npidle.load(Ordering::SeqCst) >= procs
    }

    /// sysmon, awake again.
    pub fn end(&self) {
        // Relaxed: nothing is published; a poke that reads the stale `true` writes one
        // needless byte to sysmon's pipe.
        self.asleep.store(false, Ordering::Relaxed);
    }

    /// An M, after taking an idle P (`pidle_dec`): whether it must wake sysmon. True
    /// for at most one caller per sleep.
    pub fn should_poke(&self) -> bool {
        // The M's half: `pidle_dec`'s SeqCst RMW, then this SeqCst load.
        seqcst_pair_fence();
        // AcqRel swap: one poker per sleep; the pipe's write and read order the rest.
        self.asleep.load(Ordering::SeqCst) && self.asleep.swap(false, Ordering::AcqRel)
    }
}

impl Default for DeepSleep {
    fn default() -> Self {
        Self::new()
    }
}

/// What `Runtime::sched` protects.
#[derive(Default)]
pub(crate) struct SchedLocked {
    /// Idle Ps (a stack: the most recently idled P is reused first, its caches warm).
    pub(crate) idle_ps: Vec<&'static P>,
    /// Idle Ms, parked and waiting for `startm` to hand them a P.
    pub(crate) idle_ms: Vec<Arc<MShared>>,
}

/// Puts `p`, which nobody holds (`Idle`), on the idle list (Go: pidleput). `sched`
/// must be held.
pub(crate) fn pidleput_locked(s: &mut SchedLocked, spinning: &Spinning, p: &'static P) {
    if p.status() != PStatus::Idle {
        super::fatal!("pidleput: P {} is {:?}, not idle", p.id, p.status());
    }
    s.idle_ps.push(p);
    spinning.pidle_inc();
}

/// Takes an idle P (Go: pidleget), still `Idle`: the M it goes to makes it `Running`
/// in `acquirep`. `sched` must be held.
pub(crate) fn pidleget_locked(s: &mut SchedLocked, spinning: &Spinning) -> Option<&'static P> {
    let p = s.idle_ps.pop()?;
    spinning.pidle_dec();
    Some(p)
}
