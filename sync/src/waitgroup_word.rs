//! The word of a [`WaitGroup`](crate::WaitGroup): its counter and its waiters in one
//! 64-bit atomic, and the protocol on it, apart from the sleeping (which the sema
//! table does), so that `tests/loom_waitgroup.rs` checks the very code.

use crate::loom::{AtomicU64, Ordering};

/// The WaitGroup word (counter << 32 | waiters) and its protocol, without the sleeping:
/// `add` says how many waiters to release, `register` whether to sleep. A type of its
/// own so that `tests/loom_waitgroup.rs` checks the very code (with loom's threads
/// standing in for the sema's sleeping).
///
/// Written by `add` (any task) and `register` (waiters); the releasing `add` resets it
/// to zero before it releases anyone.
pub struct WaitGroupWord {
    pub(crate) state: AtomicU64,
}

impl Default for WaitGroupWord {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitGroupWord {
    /// A zero counter, no waiters.
    pub fn new() -> Self {
        WaitGroupWord {
            state: AtomicU64::new(0),
        }
    }

    /// Adds `d` to the counter. Returns how many waiters the caller must release (the
    /// counter reached zero with waiters registered), 0 otherwise.
    ///
    /// # Panics
    ///
    /// On a negative counter, or on reuse too early (see `WaitGroup::add`).
    pub fn add(&self, d: i32) -> u32 {
        // AcqRel: Release publishes the task's work to the waiters released below (or
        // to a later `register` that sees zero: its Acquire pairs with this); Acquire
        // orders earlier adds' work before ours, so a releasing add passes on all of it
        // through the sema.
        let state = self
            .state
            .fetch_add((d as i64 as u64) << 32, Ordering::AcqRel)
            .wrapping_add((d as i64 as u64) << 32);
        let v = (state >> 32) as i32;
        let w = state as u32;
        if v < 0 {
            panic!("negative WaitGroup counter");
        }
        if w != 0 && d > 0 && v == d {
            panic!("WaitGroup reused too early: add called while waiters of the previous round are being released");
        }
        if v > 0 || w == 0 {
            return 0;
        }
        // The counter is zero and there are waiters: the caller releases them. Nobody
        // may touch the state meanwhile (a concurrent add would be the misuse above).
        // Relaxed load: a misuse check of a word only this thread should be touching.
        if self.state.load(Ordering::Relaxed) != state {
            panic!("WaitGroup reused too early: add called while waiters of the previous round are being released");
        }
        // Release: a `register` that reads this zero (a wait that starts now) returns
        // at once and must see the tasks' work, and a plain store ends the release
        // sequence of the fetch_add above, so the store itself must publish it (loom
        // found this: with Relaxed such a waiter races the tasks' writes). The woken
        // waiters' checks (`after_wake`) are ordered after it by the sema.
        self.state.store(0, Ordering::Release);
        w
    }

    /// A waiter: returns false if the counter is zero (nothing to wait for), true if
    /// it registered and must sleep until released (then call `after_wake`).
    pub fn register(&self) -> bool {
        // Acquire (here and on the CAS): pairs with the Release of the add that took
        // the counter to zero, so a waiter that returns at once sees the tasks' work.
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if (state >> 32) as i32 == 0 {
                return false;
            }
            // Acquire on failure: as the load above. On success it is more than needed
            // (a sleeper is ordered after the tasks' work by the sema); free on x86.
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return true,
                Err(now) => state = now,
            }
        }
    }

    /// A released waiter's misuse check: a non-zero word is a later `add`.
    ///
    /// # Panics
    ///
    /// "WaitGroup reused too early" if the group started counting again before this
    /// waiter returned.
    pub fn after_wake(&self) {
        // The reset store happens-before this load through the sema (its release, our
        // acquire), so a non-zero state is a later `add`: the misuse. Acquire is more
        // than that needs, and free on x86.
        if self.state.load(Ordering::Acquire) != 0 {
            panic!("WaitGroup reused too early: add called before the previous wait returned");
        }
    }

    /// The counter now.
    pub fn count(&self) -> i64 {
        // Acquire: a caller that sees zero sees the work of the adds that led there.
        (self.state.load(Ordering::Acquire) >> 32) as i32 as i64
    }
}
