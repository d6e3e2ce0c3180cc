//! [`Notify`]: tokio's `Notify` for coroutines and threads alike: a waiter waits
//! for a notification (a coroutine parks, a thread blocks); `notify_one` wakes one, or
//! stores a permit for the next waiter if nobody waits; `notify_waiters` wakes all
//! that wait now and stores nothing.

use std::collections::VecDeque;
use std::fmt;

use goro_runtime::park::{self, Unparker, WaitReason};

use crate::lock::SpinLock;

/// Wakes waiters without a lock to hold or a value to pass (tokio's `Notify`).
///
/// ```
/// use goro::sync::Notify;
/// use std::sync::Arc;
///
/// let ready = Arc::new(Notify::new());
/// let r = ready.clone();
/// let waiter = goro::go!(move || {
///     r.notified(); // parks until notify_one (or returns at once on a stored permit)
///     "woken"
/// });
/// ready.notify_one();
/// assert_eq!(waiter.join().unwrap(), "woken");
/// ```
pub struct Notify {
    lock: SpinLock,
    /// Guarded by `lock`.
    state: std::cell::UnsafeCell<State>,
}

struct State {
    /// A `notify_one` that found nobody waiting (at most one is kept).
    permit: bool,
    /// Waiters in arrival order.
    waiters: VecDeque<Unparker>,
}

// SAFETY: `state` is only touched under `lock`; unparkers are Send.
unsafe impl Send for Notify {}
// SAFETY: as above.
unsafe impl Sync for Notify {}
// As std's Condvar: the state is only changed under the lock, by code that cannot
// panic halfway.
impl std::panic::UnwindSafe for Notify {}
impl std::panic::RefUnwindSafe for Notify {}

impl Notify {
    /// A `Notify` with no waiter and no permit.
    pub const fn new() -> Notify {
        Notify {
            lock: SpinLock::new(),
            state: std::cell::UnsafeCell::new(State {
                permit: false,
                waiters: VecDeque::new(),
            }),
        }
    }

    /// Runs `f` on the state under the lock.
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        self.lock.lock();
        // SAFETY: under `lock`, so this borrow is the only one.
        let r = f(unsafe { &mut *self.state.get() });
        self.lock.unlock();
        r
    }

    /// Waits for a notification: takes the stored permit if there is one, else waits
    /// until a `notify_one` or `notify_waiters` made after this call began wakes it.
    pub fn notified(&self) {
        self.lock.lock();
        // SAFETY: under `lock`.
        let s = unsafe { &mut *self.state.get() };
        if std::mem::take(&mut s.permit) {
            self.lock.unlock();
            return;
        }
        s.waiters.push_back(park::prepare());
        // The lock is released once we are off our stack (a coroutine) or right
        // before we sleep (a thread): a notify that takes our unparker after that
        // wakes us, and one before it makes the park return at once.
        park::park_commit(WaitReason::Notify, || self.lock.unlock());
    }

    /// Wakes the longest-waiting waiter; if nobody waits, stores a permit that the
    /// next `notified` takes (one at most: notifies do not add up).
    pub fn notify_one(&self) {
        let woken = self.with(|s| {
            let w = s.waiters.pop_front();
            if w.is_none() {
                s.permit = true;
            }
            w
        });
        if let Some(u) = woken {
            u.unpark();
        }
    }

    /// Wakes every waiter waiting now; stores no permit.
    pub fn notify_waiters(&self) {
        let woken = self.with(|s| std::mem::take(&mut s.waiters));
        for u in woken {
            u.unpark();
        }
    }
}

impl Default for Notify {
    fn default() -> Self {
        Notify::new()
    }
}

impl fmt::Debug for Notify {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (permit, waiters) = self.with(|s| (s.permit, s.waiters.len()));
        f.debug_struct("Notify")
            .field("permit", &permit)
            .field("waiters", &waiters)
            .finish()
    }
}
