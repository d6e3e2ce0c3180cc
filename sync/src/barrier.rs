//! [`Barrier`]: std's barrier, for coroutines and threads alike: `n` callers of
//! `wait` wait for one another (a coroutine parks, a thread blocks), then all go on,
//! and the barrier is ready for the next round.

use std::fmt;

use crate::cond::Cond;
use crate::mutex::Mutex;

/// Lets `n` coroutines or threads wait for one another (std's `Barrier`).
///
/// ```
/// use goro::sync::Barrier;
/// use std::sync::Arc;
///
/// let barrier = Arc::new(Barrier::new(3));
/// let hs: Vec<_> = (0..3)
///     .map(|_| {
///         let b = barrier.clone();
///         goro::go!(move || b.wait().is_leader())
///     })
///     .collect();
/// let leaders = hs.into_iter().map(|h| h.join().unwrap());
/// assert_eq!(leaders.filter(|&l| l).count(), 1);
/// ```
pub struct Barrier {
    n: usize,
    state: Mutex<Round>,
    cond: Cond,
}

/// How many have arrived in the current round, and which round it is.
struct Round {
    arrived: usize,
    generation: u64,
}

/// What [`Barrier::wait`] returns: whether this caller was the round's leader.
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// True for exactly one caller per round (the last to arrive).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl fmt::Debug for BarrierWaitResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BarrierWaitResult")
            .field("is_leader", &self.0)
            .finish()
    }
}

impl Barrier {
    /// A barrier for `n` callers (0 counts as 1, as in std: `wait` never waits).
    pub const fn new(n: usize) -> Barrier {
        Barrier {
            n,
            state: Mutex::new(Round {
                arrived: 0,
                generation: 0,
            }),
            cond: Cond::new(),
        }
    }

    /// Waits until `n` callers have called `wait` in this round, then returns in all
    /// of them; one of them (the last to arrive) is the leader.
    pub fn wait(&self) -> BarrierWaitResult {
        let mut s = self.state.lock();
        s.arrived += 1;
        if s.arrived >= self.n {
            s.arrived = 0;
            s.generation = s.generation.wrapping_add(1);
            drop(s);
            self.cond.notify_all();
            return BarrierWaitResult(true);
        }
        let round = s.generation;
        while s.generation == round {
            s = self.cond.wait(s);
        }
        BarrierWaitResult(false)
    }
}

impl fmt::Debug for Barrier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Barrier")
            .field("n", &self.n)
            .finish_non_exhaustive()
    }
}
