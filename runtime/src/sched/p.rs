//! P: a processor, the right to run coroutines, with its run queue and caches.

use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU8, Ordering};

use crossbeam_deque::{Stealer, Worker};

use super::g::{GRef, G};
use super::runq::RunNext;
use crate::stack::pool::StackCache;
use crate::timers::PTimers;

/// What a P is doing. Read by thieves for the runnext back-off rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum PStatus {
    /// On the idle list; no M holds it.
    Idle = 0,
    /// Held by an M that runs coroutines or looks for work.
    Running = 1,
    /// Its M is in a blocking call; sysmon may take it (see "the syscall hand-off").
    Syscall = 2,
    /// New, or above `gomaxprocs`: not on the idle list, never handed out.
    Dead = 3,
}

/// A processor.
///
/// The shared part (`status`, `runnext`, `stealer`) is what other Ps touch; `local` is
/// the owner's, reachable only through a [`HeldP`].
pub(crate) struct P {
    pub(crate) id: usize,
    /// A `PStatus`. Written by the M that acquires or releases the P; read by thieves.
    status: AtomicU8,
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
    /// owner's copy).
    pub(crate) tick_pub: AtomicU32,
    /// Set by sysmon when the coroutine on this P has run too long; cleared and acted
    /// on (a yield) at the coroutine's next preemption point.
    pub(crate) preempt: AtomicBool,
    /// Coroutines spawned on this P minus coroutines that ended on it (may be
    /// negative). Written only by the holder (a load and a store, no RMW); summed by
    /// `num_goroutines`.
    pub(crate) gcount: AtomicI64,
    local: UnsafeCell<PLocal>,
}

// SAFETY: `local` is only ever accessed through a HeldP, and at most one M holds a P
// at a time (handed over under `Runtime::sched`, whose lock orders one holder's
// accesses before the next's). The other fields are thread-safe.
unsafe impl Sync for P {}
// SAFETY: as above; `PLocal` is made and used by whichever M holds the P.
unsafe impl Send for P {}

/// The owner-only state of a P.
pub(crate) struct PLocal {
    /// The local run queue (FIFO).
    pub(crate) runq: Worker<GRef>,
    /// Scheduling ticks: Gs started with a fresh time slice.
    pub(crate) tick: Cell<u32>,
    /// Consecutive Gs that inherited the time slice through `runnext`.
    pub(crate) streak: Cell<u32>,
    /// Cached coroutine stacks.
    pub(crate) stacks: StackCache,
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
            status: AtomicU8::new(PStatus::Dead as u8),
            runnext: RunNext::new(),
            stealer,
            timers: PTimers::new(),
            syscall_tick: AtomicU32::new(0),
            tick_pub: AtomicU32::new(0),
            preempt: AtomicBool::new(false),
            gcount: AtomicI64::new(0),
            local: UnsafeCell::new(PLocal {
                runq,
                tick: Cell::new(0),
                streak: Cell::new(0),
                stacks: StackCache::default(),
                goid_next: Cell::new(0),
                goid_end: Cell::new(0),
                rng: Cell::new(
                    0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1).wrapping_mul(0xA24B_AED4_963E_E407),
                ),
            }),
        }
    }

    pub(crate) fn status(&self) -> PStatus {
        // Relaxed: thieves use it as a hint for the back-off; a stale value costs at
        // most one needless back-off or one early steal.
        match self.status.load(Ordering::Relaxed) {
            0 => PStatus::Idle,
            1 => PStatus::Running,
            2 => PStatus::Syscall,
            _ => PStatus::Dead,
        }
    }

    /// Stores the status with an explicit ordering (the syscall hand-off).
    pub(crate) fn store_status(&self, s: PStatus, o: Ordering) {
        self.status.store(s as u8, o);
    }

    /// One of the two CASes of the syscall hand-off. AcqRel: the winner takes over the
    /// P's local state published by the Release store of `blocking`.
    pub(crate) fn cas_status(&self, from: PStatus, to: PStatus) -> bool {
        self.status
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Holder only: adds `d` to this P's coroutine count.
    pub(crate) fn add_gcount(&self, d: i64) {
        // Relaxed load and store: only the holder writes, and readers only want a
        // recent value.
        self.gcount
            .store(self.gcount.load(Ordering::Relaxed) + d, Ordering::Relaxed);
    }

    pub(crate) fn set_status(&self, s: PStatus) {
        self.status.store(s as u8, Ordering::Relaxed);
    }
}

/// Proof that the current M holds a P: the only way to reach its local state.
///
/// Made by `acquirep`, dropped by `releasep`. It is `Copy` so the M and the G running
/// on it can both use it, but not `Send`: it never leaves the M's thread, and a G must
/// not keep one across a switch (it may resume on another M).
#[derive(Clone, Copy)]
pub(crate) struct HeldP {
    p: &'static P,
    _not_send: PhantomData<*const ()>,
}

impl HeldP {
    /// # Safety
    ///
    /// The calling M must have taken `p` off the idle list (or created it) and be its
    /// only holder until it releases it.
    pub(crate) unsafe fn new(p: &'static P) -> HeldP {
        HeldP {
            p,
            _not_send: PhantomData,
        }
    }

    pub(crate) fn p(self) -> &'static P {
        self.p
    }

    pub(crate) fn local(&self) -> &PLocal {
        // SAFETY: a HeldP exists only on the thread of the M holding the P (see
        // `HeldP::new`), and PLocal is only used through shared references on that
        // thread (its interior mutability is Cell/RefCell/Worker).
        unsafe { &*self.p.local.get() }
    }
}

impl std::ops::Deref for HeldP {
    type Target = P;
    fn deref(&self) -> &P {
        self.p
    }
}

/// A xorshift64 step on the P's state.
pub(crate) fn fastrand(p: HeldP) -> u64 {
    let rng = &p.local().rng;
    let mut x = rng.get();
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    rng.set(x);
    x
}
