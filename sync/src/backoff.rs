//! Randomised, bounded back-off for contended CAS loops and the sema roots' locks.
//!
//! When several cores see a lock free at the same moment and all retry in lock step,
//! they keep colliding on its cache line. FreeBSD's locking primitives (2016, see
//! shared/references/freebsd-randomized-lock-backoff.txt) instead wait a random number
//! of pause instructions, up to a bound that doubles with each failure: the retries
//! spread out and one of them wins. goro does the same, and after enough failures
//! yields the OS thread (the lock holder may have been descheduled).
//!
//! The back-off can be switched off ([`set_randomized`]) so that its effect is
//! measurable: the `Sema*`/`Mutex*` benchmarks run both ways.

use crate::loom::spin_hint;
use crate::rand::rand;
use std::sync::atomic::{AtomicBool, Ordering};

/// The first bound, in pause instructions.
const MIN_SPINS: u32 = 4;
/// The largest bound.
const MAX_SPINS: u32 = 1024;
/// Failed rounds after which each round also yields the OS thread.
const YIELD_AFTER: u32 = 10;

/// Whether the back-off is randomised. Written by `set_randomized` (benchmarks); read
/// by every back-off step (Relaxed everywhere: a setting that guards no data).
static RANDOMIZED: AtomicBool = AtomicBool::new(true);

/// Turns the randomised back-off on (the default) or off (retry after a single pause,
/// in lock step). For benchmarks.
pub fn set_randomized(on: bool) {
    // Relaxed: see `RANDOMIZED`.
    RANDOMIZED.store(on, Ordering::Relaxed);
}

/// Whether the randomised back-off is on.
pub fn randomized() -> bool {
    // Relaxed: see `RANDOMIZED`.
    RANDOMIZED.load(Ordering::Relaxed)
}

/// The state of one contended loop.
pub(crate) struct Backoff {
    bound: u32,
    rounds: u32,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff {
            bound: MIN_SPINS,
            rounds: 0,
        }
    }

    /// Waits before the next attempt.
    pub(crate) fn spin(&mut self) {
        self.rounds += 1;
        if cfg!(loom) {
            spin_hint();
            return;
        }
        // Relaxed: see `RANDOMIZED`.
        if RANDOMIZED.load(Ordering::Relaxed) {
            let n = rand() % self.bound + 1;
            for _ in 0..n {
                spin_hint();
            }
            self.bound = (self.bound * 2).min(MAX_SPINS);
        } else {
            spin_hint();
        }
        if self.rounds > YIELD_AFTER {
            std::thread::yield_now();
        }
    }
}
