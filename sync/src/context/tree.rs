//! The cancellation tree: [`Canceller`] nodes, their links, and the done protocol.
//!
//! # Shape
//!
//! Each cancellable context (`with_cancel`, `with_deadline`, `with_timeout`) is one
//! `Canceller`. It holds its parent (the nearest cancellable ancestor) by `Arc`, and the
//! parent holds its live children by `Arc` in a [`SlotList`]: a `Vec` in which each
//! child knows its index (`slot`), so linking is a push and unlinking a `swap_remove`
//! that tells the moved child its new index. Both are O(1), and the list holds only the
//! children alive now: a parent outliving a million short-lived children keeps a list
//! as long as the most that were alive at once (it shrinks when mostly empty).
//!
//! The tree is **lock-based**: each node has one `std::sync::Mutex` ([`Inner`]) over
//! its children, its `after_func` registrations, its done channel and its deadline
//! timer. A lock is held only for list operations and the channel close below, never
//! while parked or while running user code, and no code path holds two nodes' locks at
//! once (the cancel of a subtree takes each node's lock in turn), so there is no lock
//! order between nodes. The nestings are a node's lock over its done channel's lock
//! (the channel never calls back) and over the runtime's timer locks while a deadline
//! is armed (a timer's function runs with none of those held). The only atomics are the node's `state` word (the
//! done protocol below) and the `slot` indices, which are read and written under the
//! owning list's lock and are atomics only because the node is shared.
//!
//! # The cancel protocol
//!
//! `cancel(node, err)`: under the node's lock, if it is live, set `state` to
//! `CLOSING | err`, close the done channel (if one was made), set `state` to `err`, and
//! take its children, its `after_func` functions and its timer; unlock; unlink the node
//! from its parent; stop the timer; start each `after_func` on its own coroutine; then
//! do the same for every child, and theirs (a work list, not recursion: a chain of a
//! million nested contexts must not overflow a coroutine's stack). The children are
//! already out of their parent's list (their `slot` was cleared when the list was
//! taken), so they skip the unlink. A child made while its parent is being cancelled
//! either joins the list before it is taken (and is cancelled with it) or finds the
//! parent done under the parent's lock and is born done.
//!
//! # The done protocol
//!
//! Go promises both ways round: once `Done` is closed, `Err` is non-nil, and once
//! `Err` is non-nil, `Done` is closed (go.dev/issue/75533). The `state` word does it
//! without a lock on the fast path: `err()` returns `None` for 0 and the error for a
//! final state; for `CLOSING | err` (the close under way) it takes the node's lock,
//! which the canceller holds until the close is done, and then answers. So an `err()`
//! that says done comes after the close, and a receiver woken by the close (which
//! happened after `CLOSING` was stored) finds the error.

use std::mem;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use goro_runtime::time::RawTimer;

use super::Error;
use crate::chan::{Chan, Receiver};

/// `slot` of an entry that is in no list.
const NOT_LINKED: usize = usize::MAX;

/// `state`: live.
const LIVE: u8 = 0;
/// `state` bit: the done channel is being closed; the error bits are already set.
const CLOSING: u8 = 4;

fn encode(err: Error) -> u8 {
    match err {
        Error::Canceled => 1,
        Error::DeadlineExceeded => 2,
    }
}

fn decode(state: u8) -> Error {
    match state & !CLOSING {
        1 => Error::Canceled,
        2 => Error::DeadlineExceeded,
        s => unreachable!("context: state {s} is no error"),
    }
}

/// An entry of a [`SlotList`]: it knows its index there.
pub(super) trait Slotted {
    /// Its index in the list that holds it, or `NOT_LINKED`. Read and written only
    /// under the lock of the list's owner (Relaxed: that lock orders every access).
    fn slot(&self) -> &AtomicUsize;
}

/// A list with O(1) push and removal of any entry (see "shape").
pub(super) struct SlotList<T: Slotted> {
    items: Vec<Arc<T>>,
}

impl<T: Slotted> SlotList<T> {
    const fn new() -> SlotList<T> {
        SlotList { items: Vec::new() }
    }

    fn push(&mut self, item: Arc<T>) {
        // Relaxed: under the owner's lock (see `Slotted::slot`).
        item.slot().store(self.items.len(), Ordering::Relaxed);
        self.items.push(item);
    }

    /// Removes `item` if it is in the list; returns whether it was.
    fn remove(&mut self, item: &T) -> bool {
        // Relaxed: under the owner's lock.
        let i = item.slot().load(Ordering::Relaxed);
        if i == NOT_LINKED {
            return false;
        }
        debug_assert!(
            std::ptr::eq(&*self.items[i], item),
            "SlotList: a stale slot"
        );
        item.slot().store(NOT_LINKED, Ordering::Relaxed);
        self.items.swap_remove(i);
        if let Some(moved) = self.items.get(i) {
            moved.slot().store(i, Ordering::Relaxed);
        }
        // Give memory back after a burst: halve a list that is three quarters empty.
        let cap = self.items.capacity();
        if cap > 64 && self.items.len() <= cap / 4 {
            self.items.shrink_to(cap / 2);
        }
        true
    }

    /// Empties the list, every entry marked as in none.
    fn take_all(&mut self) -> Vec<Arc<T>> {
        let items = mem::take(&mut self.items);
        for item in &items {
            // Relaxed: under the owner's lock.
            item.slot().store(NOT_LINKED, Ordering::Relaxed);
        }
        items
    }

    fn len(&self) -> usize {
        self.items.len()
    }
}

/// A function registered by `Context::after_func`.
pub(super) struct AfterEntry {
    /// The function, until it is started or stopped: whoever takes it decides (so a
    /// racing `stop` and cancel agree on which of them won).
    f: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    /// See [`Slotted`]; under the owning node's lock.
    slot: AtomicUsize,
    /// The `after_func` call, to which the function's coroutine is attributed.
    at: &'static std::panic::Location<'static>,
}

impl Slotted for AfterEntry {
    fn slot(&self) -> &AtomicUsize {
        &self.slot
    }
}

impl AfterEntry {
    pub(super) fn new(
        f: Box<dyn FnOnce() + Send>,
        at: &'static std::panic::Location<'static>,
    ) -> Arc<AfterEntry> {
        Arc::new(AfterEntry {
            f: Mutex::new(Some(f)),
            slot: AtomicUsize::new(NOT_LINKED),
            at,
        })
    }

    /// Starts the function on its own coroutine, if nobody took it yet.
    fn start(&self) {
        if let Some(f) = self.take() {
            start(f, self.at);
        }
    }

    /// Takes the function out: `Some` for exactly one caller.
    pub(super) fn take(&self) -> Option<Box<dyn FnOnce() + Send>> {
        self.f.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

/// Starts `f` on its own coroutine (Go's `go f()` in `AfterFunc`). A spawn failure
/// (no memory for a stack) cannot be reported to anyone; it is printed.
fn start(f: Box<dyn FnOnce() + Send>, at: &'static std::panic::Location<'static>) {
    let spawned = goro_runtime::Builder::new()
        .name("context after_func")
        .spawned_at(at)
        .spawn(f);
    if let Err(e) = spawned {
        eprintln!("goro: Context::after_func: cannot start a coroutine: {e}");
    }
}

/// What a node's lock guards.
struct Inner {
    /// The done channel, made on the first `done()` (a context nobody selects on
    /// costs no channel).
    done: Option<Receiver<()>>,
    children: SlotList<Canceller>,
    after: SlotList<AfterEntry>,
    /// The deadline's runtime timer (`with_deadline` / `with_timeout` only).
    timer: Option<RawTimer>,
}

/// A cancellable context's node (see the module doc).
pub(super) struct Canceller {
    /// The nearest cancellable ancestor. `Option` only so that `drop` can take it.
    parent: Option<Arc<Canceller>>,
    /// The earliest of this node's deadline and its ancestors'.
    deadline: Option<Instant>,
    /// `LIVE`, `CLOSING | err` or `err` (see "the done protocol"). Written under
    /// `inner`'s lock by `cancel_one`; read by anyone (`err`, and `cancel`'s early
    /// exit).
    state: AtomicU8,
    inner: Mutex<Inner>,
    /// See [`Slotted`]; under the parent's lock.
    slot: AtomicUsize,
    /// The cause it was cancelled with, if one was given (its own `CancelCauseFunc`,
    /// its deadline's cause, or inherited from the ancestor whose cancel reached it).
    /// Set once, under `inner`'s lock by `cancel_one`, before the state's Release store;
    /// read after `err` saw the final state (Acquire), so a cause set is seen.
    cause: OnceLock<Cause>,
    /// The cause a deadline cancel gives (`with_deadline_cause`). Immutable.
    deadline_cause: Option<Cause>,
}

// A cause is a `dyn Error`, which need not be `RefUnwindSafe`; the node stays so (as
// a `Context`, and what holds one, such as `ErrGroup`, are): the cause is written
// once, whole, under the lock (a `OnceLock`), and only read after, so a panic cannot
// leave it half-changed for a `catch_unwind` to observe.
impl std::panic::RefUnwindSafe for Canceller {}
impl std::panic::UnwindSafe for Canceller {}

/// A cancellation cause (Go 1.20's `context.Cause`).
pub(super) type Cause = Arc<dyn std::error::Error + Send + Sync>;

impl Slotted for Canceller {
    fn slot(&self) -> &AtomicUsize {
        &self.slot
    }
}

/// What `cancel_one` took from a node, to finish with no lock held.
struct Taken {
    children: Vec<Arc<Canceller>>,
    after: Vec<Arc<AfterEntry>>,
    timer: Option<RawTimer>,
}

impl Canceller {
    /// A new node under `parent` (`None`: under the background), with `deadline` the
    /// earliest of its own and its ancestors'. Linked to the parent, or born done if
    /// the parent is. With `timer_at`, a timer cancels it with `DeadlineExceeded`
    /// then (at once if that has passed).
    pub(super) fn new(
        parent: Option<&Arc<Canceller>>,
        deadline: Option<Instant>,
        timer_at: Option<Instant>,
        deadline_cause: Option<Cause>,
    ) -> Arc<Canceller> {
        let node = Arc::new_cyclic(|me: &Weak<Canceller>| {
            let me = me.clone();
            Canceller {
                parent: parent.cloned(),
                deadline,
                state: AtomicU8::new(LIVE),
                inner: Mutex::new(Inner {
                    done: None,
                    children: SlotList::new(),
                    after: SlotList::new(),
                    timer: timer_at.map(|_| {
                        // Weak: a pending timer does not keep a dropped context alive
                        // (and a cancelled one has stopped it).
                        RawTimer::new(move || {
                            if let Some(node) = me.upgrade() {
                                let cause = node.deadline_cause.clone();
                                node.cancel(Error::DeadlineExceeded, cause);
                            }
                        })
                    }),
                }),
                slot: AtomicUsize::new(NOT_LINKED),
                cause: OnceLock::new(),
                deadline_cause,
            }
        });
        if let Some(p) = parent {
            let mut pi = p.lock();
            // Under the parent's lock its state is LIVE or final (see "the cancel
            // protocol"). Relaxed: the lock orders it.
            match p.state.load(Ordering::Relaxed) {
                LIVE => pi.children.push(node.clone()),
                done => {
                    drop(pi);
                    node.cancel(decode(done), p.cause()); // born done
                }
            }
        }
        if let Some(at) = timer_at {
            if at <= Instant::now() {
                node.cancel(Error::DeadlineExceeded, node.deadline_cause.clone());
            } else if let Some(t) = &node.lock().timer {
                // Armed under the lock, so that a cancel (which takes the timer under
                // it) cannot miss a timer armed after it looked.
                t.reset_at(at, None);
            }
        }
        node
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // No user code runs under the lock, so a poisoned one has consistent data.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// The error once the node is done (see "the done protocol").
    pub(super) fn err(&self) -> Option<Error> {
        // Acquire: pairs with the Release stores in `cancel_one`; seeing the final
        // state means seeing the close before it.
        match self.state.load(Ordering::Acquire) {
            LIVE => None,
            s if s & CLOSING != 0 => {
                // The canceller holds the lock until the close is done.
                drop(self.lock());
                Some(decode(s))
            }
            s => Some(decode(s)),
        }
    }

    /// The cause given with the cancel, if any; read only once `err` is `Some`.
    pub(super) fn cause(&self) -> Option<Cause> {
        self.cause.get().cloned()
    }

    /// The done channel (made now if this is the first call; closed at once if the
    /// node is done already).
    pub(super) fn done(&self) -> Receiver<()> {
        let mut inner = self.lock();
        let rx = inner.done.get_or_insert_with(|| {
            let rx = Receiver {
                chan: Arc::new(Chan::new(0, 0, None)),
            };
            // Relaxed: under the lock, where the state is LIVE or final.
            if self.state.load(Ordering::Relaxed) != LIVE {
                rx.chan.close();
            }
            rx
        });
        rx.clone()
    }

    /// Registers `entry` to be started when the node is done; if it is done already,
    /// starts it now.
    pub(super) fn add_after(&self, entry: &Arc<AfterEntry>) {
        {
            let mut inner = self.lock();
            // Relaxed: under the lock.
            if self.state.load(Ordering::Relaxed) == LIVE {
                inner.after.push(entry.clone());
                return;
            }
        }
        entry.start();
    }

    /// Unregisters `entry` (a `stop`), so that a long-lived context does not keep what
    /// was stopped.
    pub(super) fn remove_after(&self, entry: &AfterEntry) {
        self.lock().after.remove(entry);
    }

    /// Cancels this node and its subtree with `err` (see "the cancel protocol"). A
    /// node that is done already is left as it is.
    /// `cause`, if given, is the subtree's cause (Go: a child's cancel by its parent
    /// passes the parent's cause on).
    pub(super) fn cancel(self: &Arc<Self>, err: Error, cause: Option<Cause>) {
        // Relaxed: a hint; `cancel_one` decides under the lock.
        if self.state.load(Ordering::Relaxed) != LIVE {
            return;
        }
        let Some(taken) = self.cancel_one(err, &cause) else {
            return;
        };
        if let Some(p) = &self.parent {
            p.lock().children.remove(self);
        }
        let mut work = taken.finish();
        while let Some(child) = work.pop() {
            if let Some(t) = child.cancel_one(err, &cause) {
                let more = t.finish();
                if work.is_empty() {
                    work = more;
                } else {
                    work.extend(more);
                }
            }
        }
    }

    /// This node's part of a cancel, under its lock; `None` if it was done already.
    fn cancel_one(&self, err: Error, cause: &Option<Cause>) -> Option<Taken> {
        let mut inner = self.lock();
        // Relaxed: under the lock.
        if self.state.load(Ordering::Relaxed) != LIVE {
            return None;
        }
        if let Some(c) = cause {
            // First and only set: the state is LIVE under the lock.
            let _ = self.cause.set(c.clone());
        }
        let code = encode(err);
        // Release (both): pair with `err`'s Acquire; the first publishes the error
        // before the close wakes anyone, the second the finished close.
        self.state.store(CLOSING | code, Ordering::Release);
        if let Some(rx) = &inner.done {
            rx.chan.close();
        }
        self.state.store(code, Ordering::Release);
        Some(Taken {
            children: inner.children.take_all(),
            after: inner.after.take_all(),
            timer: inner.timer.take(),
        })
    }

    /// Children now, for the tests of the unlinking rule.
    pub(super) fn children_len(&self) -> usize {
        self.lock().children.len()
    }

    /// `after_func` registrations now, for the same tests.
    pub(super) fn after_len(&self) -> usize {
        self.lock().after.len()
    }
}

impl Taken {
    /// The rest of a node's cancel, with no lock held: stops its timer, starts its
    /// `after_func`s, and hands back its children to cancel.
    fn finish(self) -> Vec<Arc<Canceller>> {
        if let Some(t) = self.timer {
            t.stop();
        }
        for entry in self.after {
            entry.start();
        }
        self.children
    }
}

impl Drop for Canceller {
    fn drop(&mut self) {
        super::drop_chain(self.parent.take(), |node| node.parent.take());
    }
}
