//! Queues of blocked channel operations ("sudogs", as Go calls them).
//!
//! A [`Sudog`] lives on the stack of the coroutine or thread that blocks, and is linked
//! into a channel's `sendq` or `recvq` while it waits; the channel's lock guards the
//! links. Whoever completes the operation — a counterpart, or `close` — unlinks it,
//! moves the value, sets `done`, and takes its unparker, all under the lock, and wakes
//! it after unlocking: so nothing touches a sudog after the lock is released, and its
//! owner may return (and its stack frame die) as soon as it sees it unlinked.
//!
//! A `select!` links one sudog per arm, all pointing at one [`SelectState`] on the
//! selecting frame. A counterpart that dequeues such a sudog must first win the
//! select's `winner` word by CAS; if another arm already won, the sudog is stale and
//! is skipped (Go: selectDone). The selecting side unlinks its losing sudogs itself.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};

use goro_runtime::park::Unparker;

/// What a completed operation's waiter finds in its sudog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Still waiting.
    Waiting,
    /// A counterpart completed the operation (value moved in or out).
    Done,
    /// The channel was closed.
    Closed,
}

/// The shared part of one `select!`'s sudogs. Public only because the `select!` arm
/// trait mentions it; not an API.
#[doc(hidden)]
pub struct SelectState {
    /// 0 while undecided; else the index of the winning arm plus one. Claimed once
    /// (`claim`) by a counterpart under its channel's lock; read by the selector under
    /// all of its channels' locks after it wakes.
    pub(crate) winner: AtomicUsize,
    /// The selecting waiter's unparker (taken by the winner).
    pub(crate) unparker: std::cell::UnsafeCell<Option<Unparker>>,
}

impl SelectState {
    pub(crate) fn new() -> SelectState {
        SelectState {
            winner: AtomicUsize::new(0),
            unparker: std::cell::UnsafeCell::new(None),
        }
    }

    /// Tries to make arm `index` the winner.
    pub(crate) fn claim(&self, index: usize) -> bool {
        // AcqRel: the winner's transfer is ordered after the claim, and the selecting
        // side reads the claim (Acquire) before it reads the transferred value.
        self.winner
            .compare_exchange(0, index + 1, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

/// One blocked operation on a channel of `T`.
pub(crate) struct Sudog<T> {
    /// Send: the value to send (taken by the receiver). Receive: where the sender
    /// puts the value.
    pub(crate) value: Option<T>,
    pub(crate) outcome: Outcome,
    /// A plain operation's unparker; `None` for a select arm (see `select`).
    pub(crate) unparker: Option<Unparker>,
    /// Null for a plain operation.
    pub(crate) select: *const SelectState,
    /// This sudog's arm in its select.
    pub(crate) arm: usize,
    prev: *mut Sudog<T>,
    next: *mut Sudog<T>,
    linked: bool,
}

impl<T> Sudog<T> {
    pub(crate) fn new(value: Option<T>) -> Sudog<T> {
        Sudog {
            value,
            outcome: Outcome::Waiting,
            unparker: None,
            select: ptr::null(),
            arm: 0,
            prev: ptr::null_mut(),
            next: ptr::null_mut(),
            linked: false,
        }
    }

    pub(crate) fn is_linked(&self) -> bool {
        self.linked
    }

    /// Takes the unparker to wake this sudog's waiter with, once it has been completed:
    /// the sudog's own, or its select's.
    ///
    /// # Safety
    ///
    /// Channel lock held; for a select arm, the caller won the claim.
    pub(crate) unsafe fn take_unparker(&mut self) -> Option<Unparker> {
        if self.select.is_null() {
            self.unparker.take()
        } else {
            // SAFETY: the select state outlives its linked sudogs, and only the
            // claim's winner takes its unparker.
            unsafe { (*(*self.select).unparker.get()).take() }
        }
    }
}

/// A FIFO queue of sudogs, intrusive and doubly linked (a select removes its losing
/// arms from the middle).
pub(crate) struct WaitQueue<T> {
    head: *mut Sudog<T>,
    tail: *mut Sudog<T>,
}

impl<T> WaitQueue<T> {
    pub(crate) fn new() -> Self {
        WaitQueue {
            head: ptr::null_mut(),
            tail: ptr::null_mut(),
        }
    }

    /// Whether no sudog waits here (a read of the head; the caller holds the channel
    /// lock for the answer to hold).
    pub(crate) fn is_empty(&self) -> bool {
        self.head.is_null()
    }

    /// Links `s` at the tail.
    ///
    /// # Safety
    ///
    /// Channel lock held; `s` unlinked and in place until unlinked again.
    pub(crate) unsafe fn push(&mut self, s: *mut Sudog<T>) {
        // SAFETY: caller's contract; linked nodes are valid while linked.
        unsafe {
            (*s).prev = self.tail;
            (*s).next = ptr::null_mut();
            (*s).linked = true;
            if self.tail.is_null() {
                self.head = s;
            } else {
                (*self.tail).next = s;
            }
            self.tail = s;
        }
    }

    /// Unlinks `s`, which must be linked in this queue.
    ///
    /// # Safety
    ///
    /// Channel lock held; `s` linked here.
    pub(crate) unsafe fn remove(&mut self, s: *mut Sudog<T>) {
        // SAFETY: caller's contract.
        unsafe {
            let (p, n) = ((*s).prev, (*s).next);
            if p.is_null() {
                self.head = n;
            } else {
                (*p).next = n;
            }
            if n.is_null() {
                self.tail = p;
            } else {
                (*n).prev = p;
            }
            (*s).prev = ptr::null_mut();
            (*s).next = ptr::null_mut();
            (*s).linked = false;
        }
    }

    /// Unlinks and returns the first sudog that can still complete: a plain one, or a
    /// select arm whose select this call wins. Stale select arms are unlinked and
    /// skipped. Null if none.
    ///
    /// # Safety
    ///
    /// Channel lock held.
    pub(crate) unsafe fn dequeue(&mut self) -> *mut Sudog<T> {
        loop {
            let s = self.head;
            if s.is_null() {
                return s;
            }
            // SAFETY: `s` is linked (caller holds the lock); its select state, if any,
            // outlives it.
            unsafe {
                self.remove(s);
                if (*s).select.is_null() || (*(*s).select).claim((*s).arm) {
                    return s;
                }
            }
        }
    }

    /// Whether a waiter is linked that a counterpart could complete now: a plain one,
    /// or a select arm whose select is still undecided. Claims nothing.
    ///
    /// # Safety
    ///
    /// Channel lock held.
    pub(crate) unsafe fn has_waiter(&self) -> bool {
        let mut s = self.head;
        while !s.is_null() {
            // SAFETY: linked nodes are valid while linked, and the lock (caller's
            // contract) keeps them linked; a select state outlives its linked sudogs.
            unsafe {
                // Relaxed: the answer is a snapshot that nothing is read through; a
                // select arm on another channel may be claimed under that channel's
                // lock at any moment, whatever the ordering.
                if (*s).select.is_null() || (*(*s).select).winner.load(Ordering::Relaxed) == 0 {
                    return true;
                }
                s = (*s).next;
            }
        }
        false
    }

    /// Marks waiters closed, up to `out.len()` of them, and puts their unparkers in
    /// `out` (to wake after unlocking); returns how many it dequeued (fewer than
    /// `out.len()`: the queue is empty now). Fills a caller's array, so that a close
    /// allocates nothing (Go's `closechan` links its sudogs into a list for the same
    /// reason: a program out of memory must still be able to close a channel).
    ///
    /// # Safety
    ///
    /// Channel lock held.
    pub(crate) unsafe fn close_into(&mut self, out: &mut [Option<Unparker>]) -> usize {
        for (n, slot) in out.iter_mut().enumerate() {
            // SAFETY: as in dequeue.
            let s = unsafe { self.dequeue() };
            if s.is_null() {
                return n;
            }
            // SAFETY: dequeued (and for a select arm, claimed) by us under the lock.
            unsafe {
                (*s).outcome = Outcome::Closed;
                *slot = (*s).take_unparker();
            }
        }
        out.len()
    }
}
