//! The spinlock that guards the waiter queues.

use crate::backoff::Backoff;
use crate::loom::{AtomicBool, Ordering};

/// A short-held lock: a spinlock with the randomised back-off. Guards the sema roots'
/// and the notify lists' queues; never held while parked (a parking waiter releases it
/// in its commit, after its switch).
pub(crate) struct SpinLock {
    /// Taken by `lock` (Acquire CAS) and released by the holder's `unlock` (Release).
    locked: AtomicBool,
}

impl SpinLock {
    /// Unlocked. `const` except under loom, whose atomics are not.
    #[cfg(not(loom))]
    pub(crate) const fn new() -> SpinLock {
        SpinLock {
            locked: AtomicBool::new(false),
        }
    }

    #[cfg(loom)]
    pub(crate) fn new() -> SpinLock {
        SpinLock {
            locked: AtomicBool::new(false),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) {
        // Acquire: pairs with the Release in unlock.
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
        self.lock_slow();
    }

    #[cold]
    fn lock_slow(&self) {
        let mut backoff = Backoff::new();
        loop {
            // Relaxed: only a hint to stop spinning; the CAS below is the Acquire.
            while self.locked.load(Ordering::Relaxed) {
                backoff.spin();
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: publishes the critical section to the next locker's Acquire CAS.
        self.locked.store(false, Ordering::Release);
    }
}
