//! [`Once`]: Go's `sync.Once`: runs a function exactly once, however many coroutines
//! and threads call it at the same time; the others wait until it has returned.
//!
//! As in Go (and unlike std's `Once`), a panicking function counts as done: later
//! calls return at once, and the lock is not poisoned.

use std::fmt;
use std::sync::atomic::AtomicU32;

use crate::loom::Ordering;
use crate::mutex::RawMutex;

/// Runs a function once.
pub struct Once {
    /// 1 once the function has returned (or panicked). Written (Release) by the call
    /// that ran it, under `m`; read by every call (the fast path's only read).
    done: AtomicU32,
    m: RawMutex,
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
