//! [`Once`]: Go's `sync.Once`: runs a function exactly once, however many coroutines
//! and threads call it at the same time; the others wait until it has returned.
//!
//! As in Go (and unlike std's `Once`), a panicking function counts as done: later
//! calls return at once, and the lock is not poisoned.
//!
//! [`Gate`] is what [`Once::wait`] and `OnceLock::wait` wait on: a sema count that is
//! 0 until the value is ready, then flooded with units, so that every waiter's
//! acquire succeeds. It is the sema table's own protocol (the sema missed-wakeup
//! rule, `loom_sema`), with no new atomics of its own.

use std::fmt;
use std::sync::atomic::AtomicU32;

use goro_runtime::park::WaitReason;

use crate::loom::Ordering;
use crate::mutex::RawMutex;
use crate::sema;

/// Units an opened gate holds: each waiter that finds it closed takes one, so 2^31
/// waiters (8 TiB of parked coroutines) would be needed to drain it.
const GATE_OPEN: u32 = 1 << 31;

/// Waiters for a one-time event wait here until it is opened (see the module doc).
pub(crate) struct Gate(AtomicU32);

impl Gate {
    pub(crate) const fn new() -> Gate {
        Gate(AtomicU32::new(0))
    }

    /// Waits until `open` has been called. The caller checks its own "done" flag
    /// first; the acquire's SeqCst CAS pairs with `open`'s, so what was published
    /// before `open` is visible when this returns.
    pub(crate) fn wait(&self) {
        sema::acquire(&self.0, false, WaitReason::Sema);
    }

    /// Lets every present and future waiter through. Called once per event.
    pub(crate) fn open(&self) {
        if sema::release_many(&self.0, GATE_OPEN).is_err() {
            unreachable!("Gate::open: opened twice");
        }
    }

    /// Closes it again, for a cell emptied through `&mut` (nobody can be waiting).
    pub(crate) fn reset(&mut self) {
        *self.0.get_mut() = 0;
    }
}

/// Runs a function once.
pub struct Once {
    /// 1 once the function has returned (or panicked). Written (Release) by the call
    /// that ran it, under `m`; read by every call (the fast path's only read).
    done: AtomicU32,
    m: RawMutex,
    /// Opened when `done` is set, for `wait`.
    gate: Gate,
}

/// What [`Once::call_once_force`] tells its function (std's `OnceState`).
#[derive(Debug)]
pub struct OnceState {
    _private: (),
}

impl OnceState {
    /// Always false: goro's `Once` is never poisoned (a panicking function counts as
    /// done, Go's rule), so no call finds a poisoned `Once`. std's is true when an
    /// earlier call panicked.
    pub fn is_poisoned(&self) -> bool {
        false
    }
}

impl Default for Once {
    fn default() -> Self {
        Once::new()
    }
}

impl Once {
    /// A `Once` that has not run.
    pub const fn new() -> Once {
        Once {
            done: AtomicU32::new(0),
            m: RawMutex::new(),
            gate: Gate::new(),
        }
    }

    /// Runs `f` if no call has run it yet; otherwise waits until the call running it
    /// has finished. When this returns, `f` has run exactly once.
    pub fn call_once(&self, f: impl FnOnce()) {
        // Acquire: pairs with the Release store below, so `f`'s effects are visible.
        if self.done.load(Ordering::Acquire) == 0 {
            self.call_slow(f);
        }
    }

    #[cold]
    fn call_slow(&self, f: impl FnOnce()) {
        struct Finish<'a>(&'a Once);
        impl Drop for Finish<'_> {
            fn drop(&mut self) {
                // Release: publishes f's effects. On unwind too: a panic counts as done.
                self.0.done.store(1, Ordering::Release);
                self.0.m.unlock();
                self.0.gate.open();
            }
        }
        self.m.lock();
        // Relaxed: under `m`, under which `done` is written; the mutex orders it.
        if self.done.load(Ordering::Relaxed) != 0 {
            self.m.unlock();
            return;
        }
        let _finish = Finish(self);
        f();
    }

    /// std's `call_once_force`: as [`call_once`](Once::call_once), with the state
    /// passed to `f`. goro's `Once` is never poisoned, so this runs `f` exactly when
    /// `call_once` would, and [`OnceState::is_poisoned`] is false.
    pub fn call_once_force(&self, f: impl FnOnce(&OnceState)) {
        self.call_once(|| f(&OnceState { _private: () }))
    }

    /// Waits until the function has run (returned or panicked), without running it:
    /// a coroutine parks, a thread blocks, until some `call_once` finishes (std's
    /// `Once::wait`, which panics where std's `Once` is poisoned; goro's never is).
    ///
    /// ```
    /// use goro::sync::Once;
    /// use std::sync::Arc;
    ///
    /// let once = Arc::new(Once::new());
    /// let o = once.clone();
    /// let waiter = goro::go!(move || o.wait());
    /// once.call_once(|| {});
    /// waiter.join().unwrap();
    /// assert!(once.is_completed());
    /// ```
    pub fn wait(&self) {
        if !self.is_completed() {
            self.gate.wait();
        }
    }

    /// The same as [`wait`](Once::wait): std's `wait_force` ignores poisoning, which
    /// goro's `Once` does not have.
    pub fn wait_force(&self) {
        self.wait()
    }

    /// Whether the function has run (returned or panicked).
    pub fn is_completed(&self) -> bool {
        // Acquire: as in `call_once`, so a caller that sees it done sees `f`'s effects.
        self.done.load(Ordering::Acquire) != 0
    }
}

impl fmt::Debug for Once {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Once")
            .field("done", &self.is_completed())
            .finish()
    }
}
