//! P: a processor, the right to run coroutines, with its run queue and caches.
//!
//! # The retake handshake
//!
//! A P belongs to its M only while the M is inside goro. Before it resumes a coroutine
//! (`execute`) the M *leaves* goro: a Release store of the coroutine's id to its
//! `outside` word (0 while inside goro; the id is what the dump shows for an M that
//! lost its P, so one store serves both). Every goro call that needs the P *enters*
//! again through `M::p`: a plain store `outside = 0`, the M-side fence (`membarrier::m_side`: a compiler fence when the
//! expedited membarrier is registered, else a SeqCst fence), and one relaxed load of
//! the P's [`RetakeWord`]. The `HeldP` it returns leaves goro again when dropped, and
//! on the scheduler's stack the M is inside goro throughout.
//!
//! sysmon, seeing a running P whose holder is outside and stuck (its thread's CPU
//! clock stood still past `RETAKE_AFTER_NS` and the thread sleeps in the kernel, or
//! it has run on past the preempt request by the grace, `PREEMPT_GRACE_NS`),
//! *requests* the P (a CAS `epoch|NONE -> epoch|REQUESTED`), runs the barrier
//! (`membarrier::sysmon_side`: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, a full
//! barrier on every CPU that runs one of our threads), reads the holder's flag again
//! and, if it is still outside with no progress, *commits* (a CAS `REQUESTED ->
//! TAKEN`); otherwise it withdraws. The barrier makes it a Dekker pair: either sysmon's
//! load sees the holder's `outside = 0`, or the holder's load sees the request.
//! A holder that sees a request *denies* it with its own CAS `REQUESTED -> NONE`, so
//! each request is decided once, by whichever CAS lands first; the holder never
//! guesses. A holder that finds `TAKEN`, or a later epoch, has lost the P: it lets go
//! without touching it and carries on as a `blocking()` return that lost its P does
//! (the global queue, and its M takes an idle P or parks).
//!
//! The word carries an epoch, begun by each `acquirep` (`RetakeWord::acquire`), so a
//! request names one holder: the M that acquires a P records itself and its epoch in
//! `P::owner` under its lock, and sysmon reads the `outside` flag of the owner of the
//! epoch it requested, never of a later one. The Release of `leave_goro` and the
//! Acquire of sysmon's load of the flag publish the holder's last writes to the P's
//! local state to sysmon, which hands the P on through `handoffp` (whose mutex and idle
//! list order them before the next holder's). `tests/loom_retake.rs` checks the very
//! code with the barrier modelled as a SeqCst fence on each side: one owner, both
//! verdicts, an old holder staying lost, a new holder judged by its own flag, and the
//! pair without the M-side fence failing.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32};
use std::sync::Arc;

use crate::loom::{AtomicU64, AtomicU8, Ordering};

use crossbeam_deque::{Stealer, Worker};

use super::g::{GRef, GShells, G};
use super::m::MShared;
use super::runq::RunNext;
use crate::lockrank::{Mutex, Rank};
use crate::stack::pool::StackCache;
use crate::timers::PTimers;

/// What a P is doing (Go: the _P* statuses). Read by thieves for the runnext back-off
/// rule and by sysmon; changed only through [`P::transition`] and [`P::cas_status`].
///
/// The transitions, as Go's:
///
/// ```text
/// Dead --resize--> Idle --acquirep--> Running --releasep--> Idle
///                                     Running --retake by sysmon (its holder is
///                                               stuck outside goro)--> Idle
///                                     Running --blocking--> Syscall
///                  Syscall --CAS by the returning M--> Running
///                  Syscall --CAS by sysmon (retake)--> Idle
///                  Idle --resize / retire--> Dead
/// ```
///
/// An `Idle` P is held by nobody: it is on the idle list, or being handed to an M
/// (`startm`, `handoffp`), which makes it `Running` in `acquirep`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum PStatus {
    /// Held by no M: on the idle list, or on its way to an M.
    Idle = 0,
    /// Held by an M that runs coroutines or looks for work.
    Running = 1,
    /// Its M is in a blocking call; sysmon may take it (see "the syscall hand-off").
    Syscall = 2,
    /// New, or above `gomaxprocs`: not on the idle list, never handed out.
    Dead = 3,
}

impl PStatus {
    fn from_u8(v: u8) -> PStatus {
        match v {
            0 => PStatus::Idle,
            1 => PStatus::Running,
            2 => PStatus::Syscall,
            _ => PStatus::Dead,
        }
    }

    /// Whether the scheduler ever moves a P from `self` to `to` (the diagram above).
    fn may_become(self, to: PStatus) -> bool {
        use PStatus::*;
        matches!(
            (self, to),
            (Dead, Idle)
                | (Idle, Running)
                | (Idle, Dead)
                | (Running, Idle)
                | (Running, Syscall)
                | (Syscall, Running)
                | (Syscall, Idle)
        )
    }
}

/// A P's status word: the atomic under [`P::transition`] and the syscall hand-off's
/// CASes, a type of its own so that `tests/loom_syscall.rs` checks the very code.
pub struct StatusWord {
    word: AtomicU8,
}

impl StatusWord {
    /// A word holding `s`.
    pub fn new(s: PStatus) -> StatusWord {
        StatusWord {
            word: AtomicU8::new(s as u8),
        }
    }

    /// The status now.
    #[inline]
    pub fn load(&self) -> PStatus {
        // Relaxed: thieves use it as a hint for the back-off (a stale value costs at
        // most one needless back-off or one early steal), sysmon as a hint for which
        // CAS to try; owners read their own writes.
        PStatus::from_u8(self.word.load(Ordering::Relaxed))
    }

    /// Stores `to` (the owner, at a transition).
    #[inline]
    pub fn store(&self, to: PStatus, order: Ordering) {
        self.word.store(to as u8, order);
    }

    /// The syscall hand-off's CAS. AcqRel: the winner takes over the P's local state
    /// published by the Release store of `Running -> Syscall`.
    #[inline]
    pub fn cas(&self, from: PStatus, to: PStatus) -> bool {
        self.word
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }
}

/// The retake handshake's word on a P: `epoch << 2 | state` (see "the retake
/// handshake" in the module doc). A type of its own so that `tests/loom_retake.rs`
/// checks the very code.
///
/// Written by the P's holder (`acquire`, a denial in `enter`) and by sysmon (`request`,
/// `commit`, `withdraw`); every change but `acquire`'s is a CAS, so each request is
/// decided exactly once.
pub struct RetakeWord {
    word: AtomicU64,
}

const RETAKE_NONE: u64 = 0;
const RETAKE_REQUESTED: u64 = 1;
const RETAKE_TAKEN: u64 = 2;
const RETAKE_STATE: u64 = 0b11;

impl RetakeWord {
    /// Epoch 0, nothing requested.
    pub fn new() -> RetakeWord {
        RetakeWord {
            word: AtomicU64::new(0),
        }
    }

    /// The M that just acquired the P: a new epoch with nothing requested. Returns it;
    /// the M enters with it until it lets go of the P.
    pub fn acquire(&self) -> u64 {
        // Relaxed: the P came through the idle list's lock or a hand-off's mutex, so the
        // previous epoch's word is ours to read. A request sysmon makes meanwhile (for
        // the previous epoch: it saw the P running) is overwritten or fails its CAS;
        // either way its commit, which names that epoch, can never succeed.
        // The store is Release for an earlier holder whose P sysmon took, reading this
        // word when it enters goro: with sysmon's Release commit it makes every value
        // that holder can read after the commit carry what sysmon wrote before it (see
        // `M::lost_p`). Once per acquisition of a P, not per goro call.
        let e = (self.word.load(Ordering::Relaxed) >> 2) + 1;
        self.word.store(e << 2 | RETAKE_NONE, Ordering::Release);
        e
    }

    /// The current epoch (the holder's, if the P is held).
    #[inline]
    pub fn epoch(&self) -> u64 {
        // Relaxed: read by the holder, which wrote it, or to tell it from another.
        self.word.load(Ordering::Relaxed) >> 2
    }

    /// The word of `epoch` with nothing requested: what the holder expects to find
    /// when it enters goro (`enter`).
    #[inline]
    pub fn held_word(epoch: u64) -> u64 {
        epoch << 2 | RETAKE_NONE
    }

    /// The holder, entering goro with its `held_word` after its `outside = 0` store and
    /// the M-side fence: whether it still holds the P. A pending request is denied (the
    /// holder wins it with a CAS); a committed one, or a later epoch, means the P was
    /// taken.
    #[inline]
    pub fn enter(&self, held: u64) -> bool {
        // Relaxed: the Dekker pair's load is ordered after the store by the fence (or
        // the kernel's barrier); nothing else is published through this word.
        let w = self.word.load(Ordering::Relaxed);
        w == held || self.enter_slow(held >> 2, w)
    }

    #[cold]
    fn enter_slow(&self, epoch: u64, mut w: u64) -> bool {
        loop {
            if w >> 2 != epoch {
                return false;
            }
            match w & RETAKE_STATE {
                RETAKE_NONE => return true,
                RETAKE_TAKEN => return false,
                _ => {
                    // The denial races sysmon's commit: one CAS wins. Relaxed: the
                    // winner learns all it needs from winning.
                    match self.word.compare_exchange(
                        w,
                        epoch << 2 | RETAKE_NONE,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    ) {
                        Ok(_) => return true,
                        Err(now) => w = now,
                    }
                }
            }
        }
    }

    /// sysmon: asks for the P if nothing is asked yet. Returns the epoch asked for.
    pub fn request(&self) -> Option<u64> {
        // Relaxed: the request is the store half of the Dekker pair; the barrier after
        // it (`membarrier::sysmon_side`) orders it before sysmon's load.
        let w = self.word.load(Ordering::Relaxed);
        if w & RETAKE_STATE != RETAKE_NONE {
            return None;
        }
        self.word
            .compare_exchange(
                w,
                w | RETAKE_REQUESTED,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .ok()
            .map(|_| w >> 2)
    }

    /// sysmon, having seen the holder outside goro: takes the P, unless the holder
    /// denied the request first. True: the P is sysmon's now.
    pub fn commit(&self, epoch: u64) -> bool {
        // Release on success: the holder, learning of the commit at its next goro call
        // (a Relaxed read of this word, then an Acquire fence in `M::lost_p`), sees what
        // sysmon wrote before it (the convoy's mark, `convoy::mark`). What sysmon needs
        // of the holder's writes it got from the Acquire load of the holder's `outside`
        // flag, which pairs with the holder's Release store when it left goro.
        self.word
            .compare_exchange(
                epoch << 2 | RETAKE_REQUESTED,
                epoch << 2 | RETAKE_TAKEN,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// sysmon, having decided not to take the P: takes its request back (unless the
    /// holder denied it already).
    pub fn withdraw(&self, epoch: u64) {
        // Relaxed: as `commit`.
        let _ = self.word.compare_exchange(
            epoch << 2 | RETAKE_REQUESTED,
            epoch << 2 | RETAKE_NONE,
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }
}

impl Default for RetakeWord {
    fn default() -> Self {
        Self::new()
    }
}

/// The holder of a P leaves goro to run coroutine `g`'s user code: sysmon may take the
/// P from now on (see "the retake handshake"). Coroutine ids start at 1; `g == 0`
/// stays inside (a nested borrow's end restores it).
#[inline]
pub fn leave_goro(outside: &AtomicU64, g: u64) {
    // Release: publishes the holder's writes to the P's local state to a sysmon that
    // takes the P; pairs with the Acquire load in `try_retake`.
    outside.store(g, Ordering::Release);
}

/// The holder of a P enters goro with `held` (`RetakeWord::held_word` of the epoch
/// `RetakeWord::acquire` gave it): returns whether it still holds the P. False: sysmon
/// took it; the caller must not touch it and runs without a P until it gets another.
/// `expedited`: whether sysmon's side is the kernel's barrier (`membarrier::expedited`,
/// passed in so that the fast path reads it from the M rather than a static).
#[inline]
pub fn enter_goro(outside: &AtomicU64, word: &RetakeWord, held: u64, expedited: bool) -> bool {
    // Relaxed store, then the M-side fence, then the word's load: the holder's half of
    // the Dekker pair (sysmon's is `try_retake`).
    outside.store(0, Ordering::Relaxed);
    crate::membarrier::m_side(expedited);
    word.enter(held)
}

/// sysmon: tries to take a P whose holder seems stuck outside goro. `outside_of`
/// gives the `outside` flag of the holder of the requested epoch (None if that epoch
/// has no holder now); `unchanged` re-checks, after the barrier, that the holder made
/// no progress meanwhile. True: the P is sysmon's now (the holder learns it at its
/// next `enter_goro`).
pub fn try_retake<H: std::ops::Deref<Target = AtomicU64>>(
    word: &RetakeWord,
    outside_of: impl FnOnce(u64) -> Option<H>,
    unchanged: impl FnOnce() -> bool,
) -> bool {
    let Some(epoch) = word.request() else {
        return false;
    };
    let Some(outside) = outside_of(epoch) else {
        word.withdraw(epoch);
        return false;
    };
    // The barrier: either the holder's `outside = 0` store is visible below, or the
    // holder's load in `enter_goro` sees the request and resolves it with a CAS.
    crate::membarrier::sysmon_side();
    // Acquire: pairs with the Release of `leave_goro`, so a sysmon that takes the P
    // sees everything the holder wrote to it before it left goro.
    if outside.load(Ordering::Acquire) != 0 && unchanged() {
        return word.commit(epoch);
    }
    word.withdraw(epoch);
    false
}

/// A processor.
///
/// The shared part (`status`, `runnext`, `stealer`) is what other Ps touch; `local` is
/// the owner's, reachable only through a [`HeldP`].
pub(crate) struct P {
    pub(crate) id: usize,
    /// Written by whoever owns the P at the transition (its M, or the holder of
    /// `Runtime::sched` for an idle or dead P, or sysmon's CAS); read by thieves and
    /// sysmon.
    status: StatusWord,
    /// The G to run next (see "the runnext steal back-off").
    pub(crate) runnext: RunNext<G>,
    /// The stealing end of `local.runq`.
    pub(crate) stealer: Stealer<GRef>,
    /// This P's timers (shared: other Ps steal due timers, anyone adds).
    pub(crate) timers: PTimers,
    /// Blocking calls entered so far (wrapping). Written by the holder; read by sysmon
    /// to tell one long call from several short ones.
    pub(crate) syscall_tick: AtomicU32,
    /// Scheduling ticks, published by the holder for sysmon (`PLocal::tick` is the
    /// owner's copy). Relaxed: sysmon only compares successive values.
    pub(crate) tick_pub: AtomicU32,
    /// Set by sysmon when the coroutine on this P has run too long; cleared and acted
    /// on (a yield) at the coroutine's next preemption point, and cleared by `execute`
    /// at each new time slice. Relaxed everywhere: a hint that publishes nothing.
    pub(crate) preempt: AtomicBool,
    /// Coroutines spawned on this P minus coroutines that ended on it (may be
    /// negative). Written only by the holder (a load and a store, no RMW); summed by
    /// `num_goroutines`.
    pub(crate) gcount: AtomicI64,
    /// The retake handshake's word (see "the retake handshake").
    pub(crate) retake: RetakeWord,
    /// The M that holds the P (or held it last) and the retake epoch it holds it
    /// with: set with the epoch, under this lock, by `acquirep`; read by sysmon for the
    /// holder's `outside` flag and CPU clock (see "the retake handshake"). An epoch
    /// that is not the one sysmon requested means another holder: sysmon withdraws.
    pub(crate) owner: Mutex<Option<(u64, Arc<MShared>)>>,
    local: UnsafeCell<PLocal>,
}

// SAFETY: `local` is only ever accessed through a HeldP, and at most one M holds a P
// at a time (handed over under `Runtime::sched` or an M's hand-off mutex, or won by the
// syscall hand-off's CAS, each of which orders one holder's accesses before the
// next's). The other fields are thread-safe.
unsafe impl Sync for P {}
// SAFETY: as above; `PLocal` is made and used by whichever M holds the P.
unsafe impl Send for P {}

/// The owner-only state of a P.
pub(crate) struct PLocal {
    /// The local run queue (FIFO).
    pub(crate) runq: Worker<GRef>,
    /// Scheduling ticks: Gs started with a fresh time slice.
    pub(crate) tick: Cell<u32>,
    /// Set when a G honoured sysmon's request to end its slice: the next pick takes the
    /// global queue's head first, and whatever it picks starts a fresh slice, even from
    /// `runnext` ("time slices" in `sched`'s doc).
    pub(crate) slice_ended: Cell<bool>,
    /// Cached coroutine stacks.
    pub(crate) stacks: StackCache,
    /// Dead Gs for the next spawns.
    pub(crate) shells: GShells,
    /// Goroutine ids reserved for this P: `[goid_next, goid_end)`.
    pub(crate) goid_next: Cell<u64>,
    pub(crate) goid_end: Cell<u64>,
    /// xorshift state for random steal orders.
    pub(crate) rng: Cell<u64>,
}

impl P {
    pub(crate) fn new(id: usize) -> P {
        let runq = Worker::new_fifo();
        let stealer = runq.stealer();
        P {
            id,
            status: StatusWord::new(PStatus::Dead),
            runnext: RunNext::new(),
            stealer,
            timers: PTimers::new(),
            syscall_tick: AtomicU32::new(0),
            tick_pub: AtomicU32::new(0),
            preempt: AtomicBool::new(false),
            gcount: AtomicI64::new(0),
            retake: RetakeWord::new(),
            owner: Mutex::new(Rank::POwner, None),
            local: UnsafeCell::new(PLocal {
                runq,
                tick: Cell::new(0),
                slice_ended: Cell::new(false),
                stacks: StackCache::default(),
                shells: GShells::default(),
                goid_next: Cell::new(0),
                goid_end: Cell::new(0),
                rng: Cell::new(
                    0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407),
                ),
            }),
        }
    }

    #[inline]
    pub(crate) fn status(&self) -> PStatus {
        self.status.load()
    }

    /// Moves the P from `from` to `to` (Go: the status stores of acquirep, releasep,
    /// procresize). Only the P's owner at that moment calls it; debug builds check that
    /// the P was `from` and that the diagram has the transition, and abort naming both
    /// otherwise. `order` is Relaxed except where the transition publishes the P's
    /// local state (`Running -> Syscall`: Release, for sysmon's CAS).
    #[inline]
    pub(crate) fn transition(&self, from: PStatus, to: PStatus, order: Ordering) {
        if cfg!(debug_assertions) {
            let now = self.status();
            if now != from || !from.may_become(to) {
                super::fatal!(
                    "P::transition: P {} is {now:?}, asked to go {from:?} -> {to:?}",
                    self.id
                );
            }
        }
        self.status.store(to, order);
    }

    /// One of the two CASes of the syscall hand-off (`Syscall -> Running` by the
    /// returning M, `Syscall -> Idle` by sysmon), which decide exactly once who owns
    /// the P. AcqRel: the winner takes over the P's local state published by the
    /// Release store of `blocking`.
    pub(crate) fn cas_status(&self, from: PStatus, to: PStatus) -> bool {
        debug_assert!(from.may_become(to), "P::cas_status: {from:?} -> {to:?}");
        self.status.cas(from, to)
    }

    /// Holder only: adds `d` to this P's coroutine count.
    pub(crate) fn add_gcount(&self, d: i64) {
        // Relaxed load and store: only the holder writes, and readers only want a
        // recent value.
        self.gcount
            .store(self.gcount.load(Ordering::Relaxed) + d, Ordering::Relaxed);
    }
}

/// The right to touch the local state of the P the current M holds, borrowed from
/// that M ([`M::p`](super::m::M::p)): the only way to reach [`PLocal`].
///
/// Not `Copy`, not `Clone`, not `Send`. No `HeldP` may outlive its M's holding of the
/// P, nor be kept by a coroutine across a switch (it may resume on another M). Debug
/// builds check both, as `RefCell` would: the M counts live borrows, and `releasep`,
/// `enter_syscall` and every switch abort if one is alive. Release builds do not count:
/// the count cost 16 instructions per yield (a 12% slower `Gosched`), and the
/// runtime's scheduler code is the only user, exercised by the whole suite in debug.
pub(crate) struct HeldP<'m> {
    p: &'static P,
    /// The M's count of live borrows (debug builds).
    #[cfg(debug_assertions)]
    borrows: &'m Cell<u32>,
    /// Taken on a coroutine: the M's `outside` word and the value it had (the
    /// coroutine's id, or 0 in a nested borrow), to restore on drop.
    leave: Option<(&'m AtomicU64, u64)>,
    _m: PhantomData<(&'m (), *const ())>,
}

impl<'m> HeldP<'m> {
    /// # Safety
    ///
    /// The calling thread's M holds `p` (took it off the idle list, or won it back from
    /// a blocking call, and on a coroutine has just entered goro), `borrows` is that M's
    /// borrow count, and `leave` its `outside` word and running coroutine if it entered
    /// goro for this borrow.
    #[inline]
    pub(crate) unsafe fn new(
        p: &'static P,
        borrows: &'m Cell<u32>,
        leave: Option<(&'m AtomicU64, u64)>,
    ) -> HeldP<'m> {
        #[cfg(debug_assertions)]
        borrows.set(borrows.get() + 1);
        #[cfg(not(debug_assertions))]
        let _ = borrows;
        HeldP {
            p,
            #[cfg(debug_assertions)]
            borrows,
            leave,
            _m: PhantomData,
        }
    }

    /// Ends the borrow without leaving goro (the caller hands the P on inside goro:
    /// `enter_syscall`).
    #[inline]
    pub(crate) fn forget(mut self) {
        self.leave = None;
    }

    pub(crate) fn p(&self) -> &'static P {
        self.p
    }

    #[inline]
    pub(crate) fn local(&self) -> &PLocal {
        // SAFETY: a HeldP exists only on the thread of the M holding the P, and only
        // while it holds it (`HeldP::new`, and no HeldP outlives the holding: checked
        // in debug builds, see the struct doc); PLocal is only used through shared
        // references on that thread (its interior mutability is Cell and Worker,
        // neither of them Sync).
        unsafe { &*self.p.local.get() }
    }
}

impl Drop for HeldP<'_> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        self.borrows.set(self.borrows.get() - 1);
        if let Some((outside, g)) = self.leave {
            leave_goro(outside, g);
        }
    }
}

impl std::ops::Deref for HeldP<'_> {
    type Target = P;
    fn deref(&self) -> &P {
        self.p
    }
}

/// A xorshift64 step on the P's state.
pub(crate) fn fastrand(p: &HeldP<'_>) -> u64 {
    let rng = &p.local().rng;
    let mut x = rng.get();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng.set(x);
    x
}
