//! [`Mutex`]: Go's `sync.Mutex` algorithm, for coroutines and threads alike.
//!
//! # The state word
//!
//! `state` holds `LOCKED`, `WOKEN` (a waiter has been woken or is spinning: unlock need
//! not wake another), `STARVING`, and above them the number of waiters. Waiters sleep
//! on `sema` in the sema table.
//!
//! # Normal and starvation modes (Go's design)
//!
//! In normal mode waiters queue FIFO, but a woken waiter competes with newcomers, which
//! are already running and often win; a woken waiter that loses is requeued at the
//! front (LIFO). A newcomer may spin a few times first when that can pay off
//! (`sync_support::can_spin`: another P is running the holder, and nothing else waits
//! on this P). This mode is fast: a lock can be taken over and over by running code.
//!
//! A waiter that has waited more than [`STARVATION_THRESHOLD_NS`] (1 ms) switches the
//! mutex to starvation mode: unlock then hands the mutex straight to the waiter at the
//! head of the queue (a `handoff` sema release), newcomers do not spin and do not try to
//! take it, they queue at the tail. Starvation mode ends when the waiter that got the
//! mutex is the last one, or waited less than 1 ms. This bounds the tail latency of
//! waiters while keeping normal mode's throughput.
//!
//! No poisoning: a panic while holding the guard just unlocks the mutex (as
//! parking_lot's).

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};

use goro_runtime::park::WaitReason;
use goro_runtime::sync_support::{can_spin, do_spin, nanotime};

use crate::loom::{AtomicU32, Ordering};
use crate::sema;

const LOCKED: i32 = 1;
const WOKEN: i32 = 2;
const STARVING: i32 = 4;
const WAITER_SHIFT: u32 = 3;

/// How long a waiter waits before it switches the mutex to starvation mode.
pub const STARVATION_THRESHOLD_NS: i64 = 1_000_000;

/// The lock itself, without data: what `Mutex`, `RwLock` and `Cond` share.
pub(crate) struct RawMutex {
    /// The state word (see the module doc): changed by lockers (the Acquire CAS that
    /// takes the lock), unlockers (the Release fetch_sub that drops it) and waiters;
    /// read by all of them to feed their CASes.
    state: std::sync::atomic::AtomicI32,
    /// The count waiters sleep on in the sema table: released by unlock, acquired by
    /// the waiters of `lock_slow`.
    sema: AtomicU32,
}

impl RawMutex {
    pub(crate) const fn new() -> RawMutex {
        RawMutex {
            state: std::sync::atomic::AtomicI32::new(0),
            sema: AtomicU32::new(0),
        }
    }

    #[inline]
    pub(crate) fn lock(&self) {
        goro_runtime::preempt_point();
        // Fast path: grab an unlocked mutex. Acquire: pairs with unlock's Release.
        if self
            .state
            .compare_exchange(0, LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_slow();
        }
    }

    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        // Relaxed: only the CAS's expected value; the CAS is the Acquire.
        let old = self.state.load(Ordering::Relaxed);
        if old & (LOCKED | STARVING) != 0 {
            return false;
        }
        // In starvation mode the mutex belongs to the queue, hence the check above.
        // Acquire on success: pairs with unlock's Release.
        self.state
            .compare_exchange(old, old | LOCKED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn lock_slow(&self) {
        let mut wait_start: i64 = 0;
        let mut starving = false;
        let mut awoke = false;
        let mut iter = 0;
        // Relaxed loads of `state` here and below feed CASes that carry the ordering: the
        // locking CAS is Acquire; a stale value only makes a CAS fail and retry.
        let mut old = self.state.load(Ordering::Relaxed);
        loop {
            // Spin only in normal mode, while locked, and while it can pay off.
            if old & (LOCKED | STARVING) == LOCKED && can_spin(iter) {
                // Set WOKEN so that unlock does not wake another waiter meanwhile.
                // Relaxed CAS: WOKEN only steers unlock; it publishes nothing, and we take
                // the lock with the Acquire CAS below.
                if !awoke
                    && old & WOKEN == 0
                    && old >> WAITER_SHIFT != 0
                    && self
                        .state
                        .compare_exchange(old, old | WOKEN, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    awoke = true;
                }
                do_spin();
                iter += 1;
                // Relaxed: feeds a CAS (see above).
                old = self.state.load(Ordering::Relaxed);
                continue;
            }
            let mut new = old;
            // Do not try to take a starving mutex: it is handed to the queue.
            if old & STARVING == 0 {
                new |= LOCKED;
            }
            if old & (LOCKED | STARVING) != 0 {
                new += 1 << WAITER_SHIFT;
            }
            // Switch to starvation mode, if the mutex is still locked (an unlocked
            // one is not worth it: unlock expects waiters in starvation mode).
            if starving && old & LOCKED != 0 {
                new |= STARVING;
            }
            if awoke {
                if new & WOKEN == 0 {
                    panic!("goro Mutex: inconsistent state (woken flag lost)");
                }
                new &= !WOKEN;
            }
            // Acquire: if this takes the lock, pairs with unlock's Release.
            match self
                .state
                .compare_exchange(old, new, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => {
                    if old & (LOCKED | STARVING) == 0 {
                        return; // locked it
                    }
                    // A waiter that already waited goes to the front of the queue.
                    let lifo = wait_start != 0;
                    if wait_start == 0 {
                        wait_start = nanotime();
                    }
                    sema::acquire(&self.sema, lifo, WaitReason::Mutex);
                    starving = starving || nanotime() - wait_start > STARVATION_THRESHOLD_NS;
                    // Relaxed: the sema (and the park/ready handshake under it) ordered the
                    // waking unlock's fetch_sub, and its STARVING bit, before this load.
                    old = self.state.load(Ordering::Relaxed);
                    if old & STARVING != 0 {
                        // Handed off to us: the mutex is ours, but the state still
                        // says unlocked, with us as a waiter. Fix it up.
                        if old & (LOCKED | WOKEN) != 0 || old >> WAITER_SHIFT == 0 {
                            panic!("goro Mutex: inconsistent state in starvation mode");
                        }
                        let mut delta = LOCKED - (1 << WAITER_SHIFT);
                        if !starving || old >> WAITER_SHIFT == 1 {
                            // Leave starvation mode: we waited briefly, or we are
                            // the last waiter.
                            delta -= STARVING;
                        }
                        // Acquire: the hand-off's sema release published the
                        // previous holder's writes; this orders ours after them too.
                        self.state.fetch_add(delta, Ordering::Acquire);
                        return;
                    }
                    awoke = true;
                    iter = 0;
                }
                Err(now) => old = now,
            }
        }
    }

    #[inline]
    pub(crate) fn unlock(&self) {
        // Release: publishes the critical section to the next holder.
        let new = self.state.fetch_sub(LOCKED, Ordering::Release) - LOCKED;
        if new != 0 {
            self.unlock_slow(new);
        }
    }

    #[cold]
    fn unlock_slow(&self, new: i32) {
        if (new + LOCKED) & LOCKED == 0 {
            panic!("goro Mutex: unlock of an unlocked mutex");
        }
        if new & STARVING != 0 {
            // Hand the mutex to the first waiter; it fixes the state up itself.
            sema::release(&self.sema, true);
            return;
        }
        let mut old = new;
        loop {
            // Nobody to wake, or someone already took the lock, was woken, or the
            // mutex went starving: done.
            if old >> WAITER_SHIFT == 0 || old & (LOCKED | WOKEN | STARVING) != 0 {
                return;
            }
            let new = (old - (1 << WAITER_SHIFT)) | WOKEN;
            // Release is more than this needs (unlock's fetch_sub published the critical
            // section, and this RMW continues its release sequence); free on x86.
            match self
                .state
                .compare_exchange(old, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => {
                    sema::release(&self.sema, false);
                    return;
                }
                Err(now) => old = now,
            }
        }
    }
}

/// A mutual exclusion lock for coroutines and threads, on Go's algorithm (see the
/// module doc). A coroutine that waits parks; a thread that waits blocks.
pub struct Mutex<T: ?Sized> {
    raw: RawMutex,
    data: UnsafeCell<T>,
}

// SAFETY: the lock gives one holder at a time access to `data`; T crosses threads.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above (as std's Mutex).
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}
// As std's Mutex, whatever T, so `&Mutex` crosses `catch_unwind` without
// `AssertUnwindSafe`. goro's mutex is not poisoned by a panic (Go's rule, see the
// module doc): a value a panicking holder left half-updated is what the next holder
// sees.
impl<T: ?Sized> std::panic::UnwindSafe for Mutex<T> {}
impl<T: ?Sized> std::panic::RefUnwindSafe for Mutex<T> {}

impl<T> Mutex<T> {
    /// An unlocked mutex holding `value`.
    pub const fn new(value: T) -> Mutex<T> {
        Mutex {
            raw: RawMutex::new(),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the mutex and returns its value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Locks the mutex, waiting (parking a coroutine, blocking a thread) until it is
    /// free.
    #[inline]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.raw.lock();
        MutexGuard { mutex: self }
    }

    /// Locks the mutex if it is free now.
    #[inline]
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        self.raw.try_lock().then(|| MutexGuard { mutex: self })
    }

    /// The value, through a unique borrow (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_lock() {
            Some(g) => f.debug_struct("Mutex").field("data", &&*g).finish(),
            None => f.debug_struct("Mutex").field("data", &"<locked>").finish(),
        }
    }
}

/// Access to a locked [`Mutex`]'s value; unlocks when dropped.
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    mutex: &'a Mutex<T>,
}

// SAFETY: a guard is a shared borrow of the mutex's data; sharing it across threads is
// sharing &T (T: Sync). It may also be sent (goro's mutex does not care which thread
// unlocks it), which is what lets a coroutine holding it migrate between Ms.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    pub(crate) fn mutex(&self) -> &'a Mutex<T> {
        self.mutex
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while the mutex is locked by its holder.
        unsafe { &*self.mutex.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed uniquely.
        unsafe { &mut *self.mutex.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.raw.unlock();
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
