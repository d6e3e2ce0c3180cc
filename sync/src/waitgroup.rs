//! [`WaitGroup`]: Go's `sync.WaitGroup`: wait for a collection of coroutines (or
//! threads) to finish.
//!
//! The counter and the number of waiters share one 64-bit word (counter in the high
//! half, waiters in the low half), so that `add` can see, in one atomic step, both that
//! the counter reached zero and how many waiters to release. The misuse checks are
//! Go's: a negative counter, and a group reused (`add` with a positive delta) while the
//! waiters of its previous round are still being released.

use std::fmt;
use std::sync::Arc;

use goro_runtime::park::WaitReason;

use crate::loom::AtomicU32;
use crate::sema;
use crate::waitgroup_word::WaitGroupWord;

struct Inner {
    word: WaitGroupWord,
    /// The count waiters sleep on: released by the `add` that reaches zero, once per
    /// registered waiter; acquired by `wait`.
    sema: AtomicU32,
}

/// Waits for a collection of tasks to finish. `Clone` shares the group (like passing a
/// `*sync.WaitGroup` in Go).
#[derive(Clone)]
pub struct WaitGroup {
    inner: Arc<Inner>,
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl WaitGroup {
    /// A group with a zero counter.
    pub fn new() -> WaitGroup {
        WaitGroup {
            inner: Arc::new(Inner {
                word: WaitGroupWord::new(),
                sema: AtomicU32::new(0),
            }),
        }
    }

    /// Adds `delta` (which may be negative) to the counter; at zero, releases every
    /// waiter.
    ///
    /// # Panics
    ///
    /// If the counter goes negative ("negative WaitGroup counter"), or on reuse too
    /// early: a positive `add` while the previous round's waiters are being released.
    pub fn add(&self, delta: i64) {
        let d = i32::try_from(delta)
            .unwrap_or_else(|_| panic!("WaitGroup::add: delta {delta} does not fit in 32 bits"));
        for _ in 0..self.inner.word.add(d) {
            sema::release(&self.inner.sema, false);
        }
    }

    /// Subtracts one from the counter.
    pub fn done(&self) {
        self.add(-1);
    }

    /// Adds one to the counter and runs `f` on a new coroutine, which counts it down
    /// when `f` returns or panics (Go 1.25's `WaitGroup.Go`: the `wg.Add(1); go func()
    /// { defer wg.Done(); ... }()` idiom in one call). A panic in `f` ends the program,
    /// as Go's `wg.Go` does: nobody holds the task's handle to join it (see
    /// `JoinHandle`). With `GORO_DETACHED_PANIC=ignore` it is reported, the task counts
    /// down all the same, and `wait` returns once the others are done too.
    ///
    /// ```
    /// use goro::sync::WaitGroup;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::sync::Arc;
    ///
    /// let wg = WaitGroup::new();
    /// let sum = Arc::new(AtomicU32::new(0));
    /// for i in 1..=4 {
    ///     let sum = sum.clone();
    ///     wg.go(move || {
    ///         sum.fetch_add(i, Ordering::Relaxed);
    ///     });
    /// }
    /// wg.wait();
    /// assert_eq!(sum.load(Ordering::Relaxed), 10);
    /// ```
    ///
    /// # Panics
    ///
    /// If no coroutine can be started (no memory for its stack), after taking the
    /// count back, so that `wait` does not wait for a task that never ran.
    #[track_caller]
    pub fn go(&self, f: impl FnOnce() + Send + 'static) {
        self.add(1);
        /// Counts the task down however it ends (Go's `defer wg.Done()`).
        struct Done(WaitGroup);
        impl Drop for Done {
            fn drop(&mut self) {
                self.0.done();
            }
        }
        let done = Done(self.clone());
        let started = goro_runtime::Builder::new().spawn(move || {
            let _done = done;
            f();
        });
        // On failure the closure, and with it `done`, was dropped: the count is back.
        if let Err(e) = started {
            panic!("WaitGroup::go: failed to spawn coroutine: {e}");
        }
    }

    /// Waits until the counter is zero.
    ///
    /// # Panics
    ///
    /// If the group was reused (a positive `add`) before this wait had returned.
    pub fn wait(&self) {
        goro_runtime::preempt_point();
        if self.inner.word.register() {
            sema::acquire(&self.inner.sema, false, WaitReason::WaitGroup);
            self.inner.word.after_wake();
        }
    }

    /// The counter now (for tests and diagnostics).
    pub fn count(&self) -> i64 {
        self.inner.word.count()
    }

    #[cfg(test)]
    fn set_state(&self, counter: i32, waiters: u32) {
        self.inner.word.state.store(
            ((counter as u32 as u64) << 32) | waiters as u64,
            std::sync::atomic::Ordering::SeqCst,
        );
    }
}

impl fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WaitGroup")
            .field("count", &self.count())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering;

    #[test]
    #[should_panic(expected = "negative WaitGroup counter")]
    fn negative_counter_panics() {
        WaitGroup::new().done();
    }

    /// The reuse check of `add`, driven into the window where the counter is zero and
    /// waiters are registered (which a racing add can hit between another add's
    /// decrement and its release of the waiters).
    #[test]
    #[should_panic(expected = "WaitGroup reused too early")]
    fn add_while_releasing_panics() {
        let wg = WaitGroup::new();
        wg.set_state(0, 2);
        wg.add(1);
    }

    /// The reuse check of `wait`: woken, it finds the group already counting again.
    #[test]
    #[should_panic(expected = "WaitGroup reused too early")]
    fn wait_sees_reuse_panics() {
        let wg = WaitGroup::new();
        wg.add(1);
        let w2 = wg.clone();
        let waiter = std::thread::spawn(move || w2.wait());
        // Wait until the waiter has registered.
        while wg.inner.word.state.load(Ordering::SeqCst) as u32 == 0 {
            std::thread::yield_now();
        }
        // Release it by hand while the counter says a new round started.
        wg.set_state(1, 0);
        sema::release(&wg.inner.sema, false);
        let r = waiter.join();
        if let Err(p) = r {
            std::panic::resume_unwind(p);
        }
    }
}
