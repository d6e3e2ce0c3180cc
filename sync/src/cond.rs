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

use std::cell::UnsafeCell;
use std::fmt;
use std::ptr;

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

impl Default for Cond {
    fn default() -> Self {
        Cond::new()
    }
}

impl Cond {
    /// A condition variable with no waiters.
    pub fn new() -> Cond {
        Cond {
            list: NotifyList {
                wait: AtomicU32::new(0),
                notify: AtomicU32::new(0),
                lock: SpinLock::new(),
                head: UnsafeCell::new(ptr::null_mut()),
                tail: UnsafeCell::new(ptr::null_mut()),
            },
        }
    }

    /// Unlocks the guard's mutex, waits for a notification, then locks the mutex again.
    /// As with any condition variable, re-check the condition in a loop: another
    /// waiter may have run first.
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        // The ticket is taken while the mutex is still held (Go: notifyListAdd). AcqRel
        // is more than needed: the RMW makes tickets unique, the mutex orders them
        // before the notifies that must see them (see the field).
        let ticket = self.list.wait.fetch_add(1, Ordering::AcqRel);
        let mutex = guard.mutex();
        drop(guard);
        self.wait_ticket(ticket);
        mutex.lock()
    }

    fn wait_ticket(&self, ticket: u32) {
        let l = &self.list;
        l.lock.lock();
        // Acquire: pairs with the notifier's Release store of `notify` (also under the lock).
        if less(ticket, l.notify.load(Ordering::Acquire)) {
            // Notified between the unlock and now.
            l.lock.unlock();
            return;
        }
        let mut node = Node {
            ticket,
            next: ptr::null_mut(),
            unparker: Some(park::prepare()),
        };
        let n: *mut Node = &mut node;
        // SAFETY: the list is guarded by the lock we hold; `node` stays in place on
        // this frame until the notify that dequeues it has unparked us.
        unsafe {
            let tail = *l.tail.get();
            if tail.is_null() {
                *l.head.get() = n;
            } else {
                (*tail).next = n;
            }
            *l.tail.get() = n;
        }
        park::park_commit(WaitReason::Cond, || l.lock.unlock());
        // Only the notify that dequeued our node holds our unparker.
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
        // Relaxed: `notify` is only written under `l.lock`, which we hold.
        let t = l.notify.load(Ordering::Relaxed);
        if t == l.wait.load(Ordering::Acquire) {
            l.lock.unlock();
            return;
        }
        l.notify.store(t.wrapping_add(1), Ordering::Release);
        // Find the node with ticket t; it may not have queued yet, in which case it
        // will see the ticket passed and not sleep.
        let mut found: *mut Node = ptr::null_mut();
        // SAFETY: under the lock; linked nodes belong to parked waiters.
        unsafe {
            let mut prev: *mut Node = ptr::null_mut();
            let mut cur = *l.head.get();
            while !cur.is_null() {
                if (*cur).ticket == t {
                    let next = (*cur).next;
                    if prev.is_null() {
                        *l.head.get() = next;
                    } else {
                        (*prev).next = next;
                    }
                    if *l.tail.get() == cur {
                        *l.tail.get() = prev;
                    }
                    found = cur;
                    break;
                }
                prev = cur;
                cur = (*cur).next;
            }
        }
        l.lock.unlock();
        if !found.is_null() {
            // SAFETY: dequeued by us: its waiter stays parked until this unpark.
            if let Some(u) = unsafe { (*found).unparker.take() } {
                u.unpark();
            }
        }
    }

    /// Wakes every waiter.
    pub fn notify_all(&self) {
        let l = &self.list;
        // Fast path, as in `notify_one` (Acquire: more than needed there too).
        if l.wait.load(Ordering::Acquire) == l.notify.load(Ordering::Acquire) {
            return;
        }
        l.lock.lock();
        // SAFETY: under the lock.
        let mut cur = unsafe {
            let h = *l.head.get();
            *l.head.get() = ptr::null_mut();
            *l.tail.get() = ptr::null_mut();
            h
        };
        // Release (and the load's Acquire): more than needed, as in `notify_one`; the
        // waiters read `notify` under the lock.
        l.notify
            .store(l.wait.load(Ordering::Acquire), Ordering::Release);
        l.lock.unlock();
        while !cur.is_null() {
            // SAFETY: we took the whole list: each node's waiter is parked until we
            // unpark it; read `next` before that.
            let (next, u) = unsafe { ((*cur).next, (*cur).unparker.take()) };
            if let Some(u) = u {
                u.unpark();
            }
            cur = next;
        }
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
