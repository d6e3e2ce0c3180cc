//! goro-sync: synchronisation for goro coroutines and threads alike.
//!
//! Everything here blocks through `goro_runtime::park` only, never through scheduler
//! internals, which is why it works from coroutines and plain threads in any mix: a
//! coroutine that waits parks and lets its M run others; a thread that waits blocks.
//!
//! - [`sema`]: the semaphore table every lock here waits in (Go's runtime/sema.go):
//!   251 roots, a wait-free release when nobody waits, hand-off for starving mutexes,
//!   timed waits.
//! - [`Mutex`] (Go's algorithm: spinning when it pays, starvation mode after 1 ms),
//!   [`RwLock`] (writer-preferring), [`WaitGroup`], [`Once`], [`Cond`] (ticket-based
//!   notify list), [`Semaphore`] (with multi-permit, timed, RAII and owned acquires).
//! - std's shapes, for code that ports by changing imports: [`OnceLock`] and
//!   [`LazyLock`] (a second caller parks while the first initialises), [`Barrier`],
//!   and tokio's [`Notify`].
//! - [`chan`]: channels (bounded, rendezvous and unbounded), [`select!`], the timer
//!   channels `after`, `at`, `tick`, `Timer` and `Ticker`, and Go's nil channels
//!   `never` and `never_sender`.
//! - [`context`]: Go's `context` (cancellation, deadlines, values, `after_func`, a
//!   connect that honours one) and [`ErrGroup`] (golang.org/x/sync's errgroup) on it.
//! - [`signal`]: Unix signals delivered on channels (Go's `signal.Notify`).
//! - [`backoff`]: the randomised back-off of contended CAS loops and queue locks.

// The back-off switch and the runtime semaphore are for goro-bench's Sema*/Mutex*
// ports (another crate, so not `pub(crate)`). Hidden: no stability promise; users have
// `Semaphore` and the locks.
#[doc(hidden)]
pub mod backoff;
#[cfg(not(loom))]
pub mod chan;
mod lock;
mod loom;
mod rand;
#[doc(hidden)]
pub mod sema;

#[cfg(not(loom))]
mod barrier;
#[cfg(not(loom))]
mod cond;
#[cfg(not(loom))]
pub mod context;
#[cfg(not(loom))]
mod errgroup;
#[cfg(not(loom))]
mod mutex;
#[cfg(not(loom))]
mod notify;
#[cfg(not(loom))]
mod once;
#[cfg(not(loom))]
mod oncelock;
#[cfg(not(loom))]
mod rwlock;
#[cfg(not(loom))]
mod semaphore;
#[cfg(not(loom))]
pub mod signal;
#[cfg(not(loom))]
mod waitgroup;
mod waitgroup_word;

#[cfg(not(loom))]
pub use barrier::{Barrier, BarrierWaitResult};
#[cfg(not(loom))]
pub use cond::{Cond, WaitTimeoutResult};
#[cfg(not(loom))]
pub use errgroup::ErrGroup;
#[cfg(not(loom))]
pub use mutex::{Mutex, MutexGuard, STARVATION_THRESHOLD_NS};
#[cfg(not(loom))]
pub use notify::Notify;
#[cfg(not(loom))]
pub use once::{Once, OnceState};
#[cfg(not(loom))]
pub use oncelock::{LazyLock, OnceLock};
#[cfg(not(loom))]
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard, MAX_READERS};
#[cfg(not(loom))]
pub use semaphore::{OwnedSemaphorePermit, Semaphore, SemaphorePermit};
#[cfg(not(loom))]
pub use waitgroup::WaitGroup;

/// The protocol words, for the loom models in `tests/loom_*.rs`. Only built with
/// `RUSTFLAGS="--cfg loom"`; not an API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::waitgroup_word::WaitGroupWord;
}
