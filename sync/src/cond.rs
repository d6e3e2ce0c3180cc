//! [`Cond`]: a condition variable for goro's [`Mutex`](crate::Mutex), on Go's
//! ticket-based notify list (runtime/sema.go, notifyList).
//!
//! Each `wait` takes a ticket (`wait`, an atomic counter) *before* it unlocks the
//! mutex; `notify` holds the ticket of the next waiter to wake. `notify_one` wakes the
//! waiter holding ticket `notify` and advances it; `notify_all` advances it to `wait`
//! and wakes everyone queued. A waiter that finds its ticket already passed when it
//! comes to queue itself does not sleep. So a notification is never lost (a waiter
//! between its unlock and its sleep has a ticket already) and never doubled (each
//! ticket is notified once), and waiters are woken in the order they began waiting.
//!
//! A timed wait (`wait_timeout`) that its deadline wakes takes its node out of the
//! queue and files its ticket as cancelled, and a `notify_one` that reaches a cancelled
//! ticket goes on to the next one: the notification goes to a waiter that still waits.
//! (A cancelled ticket that is the next to notify is skipped at once, so the list only
//! holds tickets queued behind a waiter that still waits: one per timed-out wait
//! since then.)
//! A notifier takes a dequeued node's unparker before it releases the lock and never
//! touches the node after, so a timed-out waiter that finds its node gone (a notify
//! dequeued it as the deadline fired: it counts as notified) can return at once.

use std::cell::UnsafeCell;
use std::fmt;
use std::ptr;
use std::time::{Duration, Instant};

use goro_runtime::park::{self, Unparker, WaitReason};

use crate::lock::SpinLock;
use crate::loom::{AtomicU32, Ordering};
use crate::mutex::MutexGuard;

/// `a` comes before `b`, with wrap-around (tickets are 32-bit counters).
fn less(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// A waiter's node, on its own stack (intrusive, as in the sema table).
struct Node {
    ticket: u32,
    next: *mut Node,
    unparker: Option<Unparker>,
}

struct NotifyList {
    /// The next ticket to hand out. Taken (fetch_add) by waiters while they hold the
    /// mutex; read by notifiers. A notifier must see the tickets of the waits begun
    /// before its own critical section, and sees them through the mutex: the Acquire
    /// and AcqRel on this word are more than that needs (free on x86).
    wait: AtomicU32,
    /// The next ticket to notify. Written under `lock`; read without it by the fast
    /// paths, for which a stale (lower) value only means taking the lock.
    notify: AtomicU32,
    lock: SpinLock,
    /// Waiters that queued, in queueing order. Guarded by `lock`.
    head: UnsafeCell<*mut Node>,
    tail: UnsafeCell<*mut Node>,
    /// Tickets of timed waits that their deadline ended, not notified yet. Guarded by
    /// `lock`.
    cancelled: UnsafeCell<Vec<u32>>,
}

/// Whether a timed wait ended by its deadline (std's `WaitTimeoutResult`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    /// True if the wait ended because its time ran out, not by a notification.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

/// A condition variable (see the module doc).
pub struct Cond {
    list: NotifyList,
}

// SAFETY: the queue (raw pointers to nodes of parked waiters) is only touched under the
// spinlock; the counters are atomics.
unsafe impl Send for Cond {}
// SAFETY: as above.
unsafe impl Sync for Cond {}
// As std's Condvar: the notify list is consistent whenever a waiter or notifier can
// unwind (its nodes live on the waiters' stacks, under the spinlock).
impl std::panic::UnwindSafe for Cond {}
impl std::panic::RefUnwindSafe for Cond {}

impl Default for Cond {
    fn default() -> Self {
        Cond::new()
    }
}

impl Cond {
    /// A condition variable with no waiters.
    pub const fn new() -> Cond {
        Cond {
            list: NotifyList {
                wait: AtomicU32::new(0),
                notify: AtomicU32::new(0),
                lock: SpinLock::new(),
                head: UnsafeCell::new(ptr::null_mut()),
                tail: UnsafeCell::new(ptr::null_mut()),
                cancelled: UnsafeCell::new(Vec::new()),
            },
        }
    }

    /// Unlocks the guard's mutex, waits for a notification, then locks the mutex again.
    /// As with any condition variable, re-check the condition in a loop: another
    /// waiter may have run first.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait_until(guard, None).0
    }

    /// Waits while `condition` holds, as a loop of [`wait`](Cond::wait) would: returns
    /// with the mutex locked and `condition` false.
    ///
    /// ```
    /// use goro::sync::{Cond, Mutex};
    /// use std::sync::Arc;
    ///
    /// let pair = Arc::new((Mutex::new(0), Cond::new()));
    /// let p = pair.clone();
    /// goro::go!(move || {
    ///     *p.0.lock() = 3;
    ///     p.1.notify_all();
    /// });
    /// let (lock, cond) = &*pair;
    /// let n = cond.wait_while(lock.lock(), |n| *n == 0);
    /// assert_eq!(*n, 3);
    /// ```
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while condition(&mut *guard) {
            guard = self.wait(guard);
        }
        guard
    }

    /// Like [`wait`](Cond::wait), but for at most `dur`: the result says whether the
    /// time ran out. A notification that comes as the time runs out counts as the
    /// notification (it is not lost).
    ///
    /// ```
    /// use goro::sync::{Cond, Mutex};
    /// use std::time::Duration;
    ///
    /// let (lock, cond) = (Mutex::new(()), Cond::new());
    /// let (_guard, r) = cond.wait_timeout(lock.lock(), Duration::from_millis(5));
    /// assert!(r.timed_out());
    /// ```
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        // A deadline past what `Instant` can hold is no deadline.
        let deadline = Instant::now().checked_add(dur);
        self.wait_until(guard, deadline)
    }

    /// Waits while `condition` holds, for at most `dur` in all; the result says
    /// whether the time ran out with `condition` still true.
    pub fn wait_timeout_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        dur: Duration,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        let deadline = Instant::now().checked_add(dur);
        while condition(&mut *guard) {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return (guard, WaitTimeoutResult(true));
            }
            guard = self.wait_until(guard, deadline).0;
        }
        (guard, WaitTimeoutResult(false))
    }

    fn wait_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        // The ticket is taken while the mutex is still held (Go: notifyListAdd). AcqRel
        // is more than needed: the RMW makes tickets unique, the mutex orders them
        // before the notifies that must see them (see the field).
        let ticket = self.list.wait.fetch_add(1, Ordering::AcqRel);
        let mutex = guard.mutex();
        drop(guard);
        let timed_out = self.wait_ticket(ticket, deadline);
        (mutex.lock(), WaitTimeoutResult(timed_out))
    }

    /// Waits for `ticket` to be notified, or for `deadline`. True if the deadline
    /// ended the wait.
    fn wait_ticket(&self, ticket: u32, deadline: Option<Instant>) -> bool {
        let l = &self.list;
        l.lock.lock();
        // Acquire: pairs with the notifier's Release store of `notify` (also under the lock).
        if less(ticket, l.notify.load(Ordering::Acquire)) {
            // Notified between the unlock and now.
            l.lock.unlock();
            return false;
        }
        let mut node = Node {
            ticket,
            next: ptr::null_mut(),
            unparker: Some(park::prepare()),
        };
        let n: *mut Node = &mut node;
        // SAFETY: the list is guarded by the lock we hold; `node` stays in place on
        // this frame until it is dequeued: by a notify (which takes its unparker under
        // the lock and never touches it after) or by ourselves below.
        unsafe {
            let tail = *l.tail.get();
            if tail.is_null() {
                *l.head.get() = n;
            } else {
                (*tail).next = n;
            }
            *l.tail.get() = n;
        }
        let Some(deadline) = deadline else {
            park::park_commit(WaitReason::Cond, || l.lock.unlock());
            return false;
        };
        if !park::park_commit_timeout(WaitReason::Cond, deadline, || l.lock.unlock()) {
            return false; // a notify dequeued us and woke us
        }
        l.lock.lock();
        // SAFETY: under the lock. If our node is still queued, nobody notified it: take
        // it out and cancel its ticket. If not, a notify dequeued it (and holds our
        // unparker, now stale): that notification is ours.
        let queued = unsafe { unlink(l, n) };
        if queued {
            // SAFETY: under the lock.
            let cancelled = unsafe { &mut *l.cancelled.get() };
            // Relaxed: `notify` is only written under the lock, which we hold.
            let mut next = l.notify.load(Ordering::Relaxed);
            if ticket == next {
                // Ours is the next ticket to notify: skip it now, and any cancelled
                // ones after it, so the list holds only tickets behind a live waiter.
                next = next.wrapping_add(1);
                while let Some(i) = cancelled.iter().position(|&c| c == next) {
                    cancelled.swap_remove(i);
                    next = next.wrapping_add(1);
                }
                // Release: as the notifiers' stores of `notify` (the fast paths read it
                // without the lock; a stale value only takes the lock).
                l.notify.store(next, Ordering::Release);
            } else {
                cancelled.push(ticket);
            }
        }
        l.lock.unlock();
        queued
    }

    /// Wakes one waiter, the longest-waiting one, if any.
    pub fn notify_one(&self) {
        let l = &self.list;
        // Fast path: nobody has taken a ticket since the last notification. Acquire is
        // more than needed (see the fields); a stale `notify` only takes the lock.
        if l.wait.load(Ordering::Acquire) == l.notify.load(Ordering::Acquire) {
            return;
        }
        l.lock.lock();
        let mut woken = None;
        loop {
            // Relaxed: `notify` is only written under `l.lock`, which we hold.
            let t = l.notify.load(Ordering::Relaxed);
            if t == l.wait.load(Ordering::Acquire) {
                break;
            }
            l.notify.store(t.wrapping_add(1), Ordering::Release);
            // SAFETY: under the lock.
            let cancelled = unsafe { &mut *l.cancelled.get() };
            if let Some(i) = cancelled.iter().position(|&c| c == t) {
                // A timed wait that gave up: the notification goes to the next ticket.
                cancelled.swap_remove(i);
                continue;
            }
            // Find the node with ticket t; it may not have queued yet, in which case it
            // will see the ticket passed and not sleep.
            // SAFETY: under the lock; linked nodes belong to parked waiters. The
            // unparker is taken before the lock is released: after that the node's
            // waiter may return (a timed wait), and its node with it.
            unsafe {
                let mut cur = *l.head.get();
                while !cur.is_null() && (*cur).ticket != t {
                    cur = (*cur).next;
                }
                if !cur.is_null() {
                    unlink(l, cur);
                    woken = (*cur).unparker.take();
                }
            }
            break;
        }
        l.lock.unlock();
        if let Some(u) = woken {
            u.unpark();
        }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        let l = &self.list;
        // Fast path, as in `notify_one` (Acquire: more than needed there too).
        if l.wait.load(Ordering::Acquire) == l.notify.load(Ordering::Acquire) {
            return;
        }
        let mut woken = Vec::new();
        l.lock.lock();
        // SAFETY: under the lock; every node's unparker is taken before the lock is
        // released (see `notify_one`).
        unsafe {
            let mut cur = *l.head.get();
            *l.head.get() = ptr::null_mut();
            *l.tail.get() = ptr::null_mut();
            while !cur.is_null() {
                woken.extend((*cur).unparker.take());
                cur = (*cur).next;
            }
            (*l.cancelled.get()).clear();
        }
        // Release (and the load's Acquire): more than needed, as in `notify_one`; the
        // waiters read `notify` under the lock.
        l.notify
            .store(l.wait.load(Ordering::Acquire), Ordering::Release);
        l.lock.unlock();
        for u in woken {
            u.unpark();
        }
    }
}

/// Takes `n` out of `l`'s queue if it is there; returns whether it was.
///
/// # Safety
///
/// The caller holds `l.lock`.
unsafe fn unlink(l: &NotifyList, n: *mut Node) -> bool {
    // SAFETY: under the lock (the caller's contract); linked nodes are alive.
    unsafe {
        let mut prev: *mut Node = ptr::null_mut();
        let mut cur = *l.head.get();
        while !cur.is_null() {
            if cur == n {
                let next = (*cur).next;
                if prev.is_null() {
                    *l.head.get() = next;
                } else {
                    (*prev).next = next;
                }
                if *l.tail.get() == cur {
                    *l.tail.get() = prev;
                }
                return true;
            }
            prev = cur;
            cur = (*cur).next;
        }
        false
    }
}

impl fmt::Debug for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cond").finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tickets_compare_across_wrap() {
        assert!(super::less(1, 2));
        assert!(!super::less(2, 2));
        assert!(super::less(u32::MAX, 0));
        assert!(!super::less(0, u32::MAX));
    }
}
