//! The runtime's lock order, written down and checked (Go: lockrank.go).
//!
//! Every lock of the runtime has a [`Rank`]; a thread may take a lock only while every
//! lock it holds has a lower rank. Debug builds check each acquisition against the
//! locks the calling thread holds (a few bytes of thread-local state, no allocation,
//! no destructor) and abort naming both locks; release builds only lock.
//!
//! # The order, outermost first
//!
//! | rank | lock | taken under it |
//! |---|---|---|
//! | `TimeSerial` | `time.rs` `Serial::state` (an `after_func` turn) | nothing |
//! | `PollEvents` | `netpoll.rs` the event buffer, held across a wait | `PollSlot`, `PollTable` |
//! | `PollSlot` | `net/poll.rs` a descriptor direction's `Slot::state` | `TimerLoc` (a timed wait arms its deadline), `Sched` (`wakep`) |
//! | `TimerLoc` | `timers.rs` `TimerInner::loc` | `TimerHeap` |
//! | `TimerHeap` | `timers.rs` a P's `PTimers::heap` | nothing |
//! | `Sched` | `sched/mod.rs` `Runtime::sched` (idle Ps and Ms) | `StackPool`, `GFree` (retiring a P) |
//! | `StackPool` | `stack/pool.rs` the global stack pool | nothing |
//! | `StackArena` | `stack/mod.rs` `arena::ARENA` (the region slabs are carved from) | nothing |
//! | `PollTable` | `netpoll.rs` the registration table | nothing |
//! | `MHandoff` | `sched/m.rs` `MShared::next` | nothing |
//! | `AllGs` | `sched/allgs.rs` a registry shard (a spin lock) | nothing |
//! | `GFree` | `sched/g.rs` `GFree::shells` (dead Gs between the Ps' lists) | nothing |
//! | `POwner` | `sched/p.rs` `P::owner` (who holds the P, for sysmon) | nothing |
//! | `AllMs` | `sched/mod.rs` `Runtime::allm` (the live Ms, for the dump) | nothing |
//! | `Scope` | `scope.rs` `ScopeData::state` (a scope's count and waiter) | nothing |
//! | `JoinSet` | `join_set.rs` `SetShared::state` (a set's completion queue) | nothing |
//! | `BlockOn` | `block_on.rs` `Signal::state` (a `block_on`'s wake flag and unparker) | nothing |
//!
//! Not ranked, on purpose: `time.rs` `Serial::f`, held while a user's `after_func`
//! runs (user code can take any lock and switch threads under it; only its turn's
//! holder ever takes it, so it is never contended). Outside this crate, goro-sync's
//! channel and sema locks are leaves with respect to these, except that a timed wait
//! under one arms its deadline (`TimerLoc`, `TimerHeap`) and a wake-up under one may
//! `wakep` (`Sched`).
//!
//! A lock held by a coroutine when it parks is released by its park's commit action,
//! on the same thread, before the coroutine can resume anywhere else; no ranked lock
//! is held across any other switch.

use std::ops::{Deref, DerefMut};

/// A lock's place in the order (see the module doc). Lower ranks are taken first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Rank {
    TimeSerial = 1,
    PollEvents,
    PollSlot,
    TimerLoc,
    TimerHeap,
    Sched,
    StackPool,
    StackArena,
    PollTable,
    MHandoff,
    AllGs,
    GFree,
    POwner,
    AllMs,
    Scope,
    JoinSet,
    BlockOn,
}

/// The most ranked locks one thread holds at once (the order has seventeen ranks).
#[cfg(debug_assertions)]
const MAX_HELD: usize = 17;

#[cfg(debug_assertions)]
thread_local! {
    /// The ranks this thread holds, in acquisition order. Const-initialised and
    /// without a destructor: a plain TLS access.
    static HELD: std::cell::Cell<([u8; MAX_HELD], u8)> =
        const { std::cell::Cell::new(([0; MAX_HELD], 0)) };
}

/// Records that the calling thread takes a lock of `rank`; aborts if it holds one of
/// the same or a higher rank.
#[inline]
pub(crate) fn acquire(rank: Rank) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        let (mut held, n) = h.get();
        if let Some(&top) = held[..n as usize].iter().max() {
            if top >= rank as u8 {
                eprintln!(
                    "goro: fatal error: lock order: {rank:?} taken while holding rank {top} \
                     (see runtime/src/lockrank.rs)"
                );
                std::process::abort();
            }
        }
        if n as usize == MAX_HELD {
            eprintln!("goro: fatal error: lock order: more than {MAX_HELD} locks held");
            std::process::abort();
        }
        held[n as usize] = rank as u8;
        h.set((held, n + 1));
    });
    #[cfg(not(debug_assertions))]
    let _ = rank;
}

/// Records that the calling thread released a lock of `rank` (in any order).
#[inline]
pub(crate) fn release(rank: Rank) {
    #[cfg(debug_assertions)]
    HELD.with(|h| {
        let (mut held, n) = h.get();
        let n = n as usize;
        match held[..n].iter().rposition(|&r| r == rank as u8) {
            Some(i) => {
                held.copy_within(i + 1..n, i);
                h.set((held, (n - 1) as u8));
            }
            None => {
                eprintln!("goro: fatal error: lock order: {rank:?} released but not held");
                std::process::abort();
            }
        }
    });
    #[cfg(not(debug_assertions))]
    let _ = rank;
}

/// A `std::sync::Mutex` with a rank. Poisoning is ignored: the runtime's critical
/// sections leave their data consistent, and a panic under one is fatal anyway.
pub(crate) struct Mutex<T> {
    rank: Rank,
    inner: std::sync::Mutex<T>,
}

impl<T> Mutex<T> {
    pub(crate) const fn new(rank: Rank, value: T) -> Mutex<T> {
        Mutex {
            rank,
            inner: std::sync::Mutex::new(value),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        acquire(self.rank);
        MutexGuard {
            rank: self.rank,
            inner: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }

    /// Takes the lock if it is free. Never waits, so it cannot deadlock, but what is
    /// taken under it is still checked against it.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let inner = match self.inner.try_lock() {
            Ok(g) => g,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return None,
        };
        acquire(self.rank);
        Some(MutexGuard {
            rank: self.rank,
            inner,
        })
    }
}

/// The guard of a ranked [`Mutex`].
pub(crate) struct MutexGuard<'a, T> {
    rank: Rank,
    inner: std::sync::MutexGuard<'a, T>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        release(self.rank);
    }
}

#[cfg(all(test, debug_assertions))]
mod tests {
    use super::*;

    #[test]
    fn in_order_and_out_of_order_release() {
        let a = Mutex::new(Rank::PollSlot, 1);
        let b = Mutex::new(Rank::Sched, 2);
        let c = Mutex::new(Rank::StackPool, 3);
        let ga = a.lock();
        let gb = b.lock();
        let gc = c.lock();
        drop(gb); // out of order
        drop(ga);
        assert_eq!(*gc, 3);
        drop(gc);
        // Everything released: any rank may be taken again.
        drop(b.lock());
        drop(a.lock());
    }

    /// Taking a lower rank under a higher one aborts: checked in a child process.
    #[test]
    fn inversion_aborts() {
        if std::env::var_os("GORO_LOCKRANK_CHILD").is_some() {
            let hi = Mutex::new(Rank::Sched, ());
            let lo = Mutex::new(Rank::PollSlot, ());
            let _h = hi.lock();
            let _l = lo.lock();
            unreachable!("the inversion was not caught");
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .env("GORO_LOCKRANK_CHILD", "1")
            .args([
                "--exact",
                "lockrank::tests::inversion_aborts",
                "--nocapture",
            ])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{err}");
        assert!(
            err.contains("lock order: PollSlot taken while holding rank"),
            "{err}"
        );
    }
}
