//! [`Semaphore`]: a counting semaphore on the sema table.

use std::fmt;

use goro_runtime::park::WaitReason;

use crate::loom::{AtomicU32, Ordering};
use crate::sema;

/// A counting semaphore: `acquire` takes a permit, waiting (parking a coroutine,
/// blocking a thread) until one is available; `release` gives permits back.
pub struct Semaphore {
    /// The sema count: taken by `acquire` (the sema table's Acquire CAS), given back
    /// by `release` (its SeqCst CAS); read as a snapshot by `available_permits`.
    permits: AtomicU32,
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` does not fit in 32 bits.
    pub fn new(permits: usize) -> Semaphore {
        let p = u32::try_from(permits).unwrap_or_else(|_| {
            panic!(
                "Semaphore::new: {permits} permits is more than the {} a semaphore can count",
                u32::MAX
            )
        });
        Semaphore {
            permits: AtomicU32::new(p),
        }
    }

    /// Takes a permit, waiting until one is available. Waiters are served FIFO.
    pub fn acquire(&self) {
        goro_runtime::preempt_point();
        sema::acquire(&self.permits, false, WaitReason::Sema);
    }

    /// Takes a permit if one is available now.
    pub fn try_acquire(&self) -> bool {
        sema::can_acquire(&self.permits)
    }

    /// Gives back `n` permits, waking up to `n` waiters.
    ///
    /// # Panics
    ///
    /// If the count would overflow 32 bits (more permits released than can be
    /// counted). The check and the update are one atomic step, so concurrent releases
    /// cannot overflow it together; a release that panics changes nothing.
    pub fn release(&self, n: usize) {
        let now = match u32::try_from(n) {
            Ok(k) => match sema::release_many(&self.permits, k) {
                Ok(()) => return,
                Err(now) => now,
            },
            // Relaxed: the number for the message only.
            Err(_) => self.permits.load(Ordering::Relaxed),
        };
        panic!(
            "Semaphore::release: {n} more permits would overflow the count \
             ({now} available, at most {} can be counted)",
            u32::MAX
        );
    }

    /// Permits available now.
    pub fn available_permits(&self) -> usize {
        // Relaxed: a snapshot that publishes and takes nothing.
        self.permits.load(Ordering::Relaxed) as usize
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.available_permits())
            .finish()
    }
}
