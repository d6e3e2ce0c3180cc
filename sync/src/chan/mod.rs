//! Channels (Go: runtime/chan.go): MPMC, buffered, rendezvous or [`unbounded`], for
//! coroutines and threads alike, with [`select!`](crate::select) over any mix of them.
//!
//! Beyond Go's operations: deadlines ([`Sender::send_deadline`],
//! [`Receiver::recv_deadline`]) besides timeouts, [`Sender::is_full`],
//! `same_channel` on both ends, and the timer channel [`at`] beside [`after`]. A
//! buffer's memory follows what it holds (see `buffer.rs`): nothing is reserved up
//! front, and a large buffer is freed once drained.
//!
//! # Invariants (under the channel's lock)
//!
//! - `sendq` non-empty implies the buffer is full (for a rendezvous channel: no receiver
//!   is waiting), and `recvq` non-empty implies the buffer is empty (no sender waits).
//!   An unbounded channel's buffer is never full, so its `sendq` is always empty.
//! - `closed` only goes from false to true; once set, no waiter joins the queues, and
//!   those in them are the closer's to wake (in batches, the first in the section that
//!   sets it): a receive takes nothing from `sendq`.
//!
//! # Direct hand-off
//!
//! A send that finds a receiver waiting moves the value straight into the receiver's
//! sudog and readies it — from a coroutine, into that coroutine's P's `runnext`, so the
//! receiver runs next on the same P. A receive that finds a sender waiting on a full
//! buffered channel takes the buffer's head and moves the sender's value in at the
//! tail, keeping FIFO order; on a rendezvous channel it takes the sender's value
//! directly. Values move under the lock; wake-ups happen after unlocking (see
//! `waitq.rs`).
//!
//! # Closing
//!
//! `close` (or dropping the last `Sender`, or the last `Receiver`) closes the channel
//! and wakes every waiter: receivers drain what is buffered, then get `RecvError`;
//! senders get their value back in `SendError`. Closing twice is not an error. When
//! the last `Receiver` goes, nobody can receive what is buffered: it is dropped then,
//! not when the last `Sender` goes. The timer channels ([`after`], [`at`], [`tick`],
//! [`never()`]) have no `Sender` and never close.
//!
//! # Timer channels
//!
//! A timer channel carries a `TimerHook` that every receive (plain, non-blocking or
//! in a `select!`) runs before it looks at the channel: if the timer is due, its value
//! is delivered right there instead of waiting for the runtime timer to fire (Go
//! 1.23's synchronous timer channels). So `after(Duration::ZERO)` is ready at once.

mod buffer;
mod errors;
mod future;
mod gochan;
pub(crate) mod select;
mod timer;
pub(crate) mod waitq;

use std::cell::UnsafeCell;
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro_runtime::park::{self, Unparker, WaitReason};

pub use errors::{
    RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};
pub use future::{RecvFuture, SendFuture};
pub use gochan::{Chan as GoChan, ChanIter};
pub use timer::{after, at, never, never_sender, tick, Ticker, Timer};

use crate::lock::SpinLock;
use buffer::{Buffer, UNBOUNDED};
use waitq::{Outcome, Sudog, WaitQueue};

/// What the lock guards.
pub(crate) struct State<T> {
    buf: Buffer<T>,
    closed: bool,
    sendq: WaitQueue<T>,
    recvq: WaitQueue<T>,
}

pub(crate) struct Chan<T> {
    lock: SpinLock,
    state: UnsafeCell<State<T>>,
    /// The buffer's capacity ([`UNBOUNDED`]: none), kept here too so that `capacity()`
    /// reads it without the lock. Never changes.
    cap: usize,
    /// Live `Sender`s and `Receiver`s; the last of either closes the channel. Written
    /// and read only by the handles' clone and drop.
    senders: AtomicUsize,
    receivers: AtomicUsize,
    /// A timer channel's timer (see "timer channels").
    timer: Option<Arc<dyn TimerHook>>,
}

/// What a timer channel's timer does for its receivers (see "timer channels").
pub(crate) trait TimerHook: Send + Sync {
    /// Sends the timer's value now if it is due. Called with no channel lock held.
    fn deliver_due(&self);
}

// SAFETY: the state is only touched under `lock`; values of T move between threads,
// hence T: Send.
unsafe impl<T: Send> Send for Chan<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for Chan<T> {}

/// A locked channel: access to its state.
pub(crate) struct Locked<'a, T> {
    chan: &'a Chan<T>,
}

impl<T> Chan<T> {
    /// A channel with one `Receiver` and `senders` `Sender`s (0 for a timer channel).
    pub(crate) fn new(cap: usize, senders: usize, timer: Option<Arc<dyn TimerHook>>) -> Chan<T> {
        Chan {
            lock: SpinLock::new(),
            state: UnsafeCell::new(State {
                buf: Buffer::new(cap),
                closed: false,
                sendq: WaitQueue::new(),
                recvq: WaitQueue::new(),
            }),
            cap,
            senders: AtomicUsize::new(senders),
            receivers: AtomicUsize::new(1),
            timer,
        }
    }

    /// The capacity for `Debug`: the number, or "unbounded".
    fn debug_capacity(&self) -> &dyn fmt::Debug {
        if self.cap == UNBOUNDED {
            &"unbounded"
        } else {
            &self.cap
        }
    }

    /// Before a receive looks at the channel: a due timer delivers its value.
    #[inline]
    fn deliver_due(&self) {
        if let Some(t) = &self.timer {
            t.deliver_due();
        }
    }

    /// Sends `v` if that can be done without waiting (Go: chansend with block=false).
    pub(crate) fn try_send(&self, v: T) -> TrySend<T> {
        let mut wake = None;
        let r = {
            let l = self.locked();
            try_send_locked(l.state(), v, &mut wake)
        };
        if let Some(u) = wake {
            u.unpark();
        }
        r
    }

    /// Receives if that can be done without waiting (Go: chanrecv with block=false).
    /// A due timer value is not delivered first: `Receiver::try_recv` does that.
    pub(crate) fn try_recv(&self) -> TryRecv<T> {
        let mut wake = None;
        let r = {
            let l = self.locked();
            try_recv_locked(l.state(), &mut wake)
        };
        if let Some(u) = wake {
            u.unpark();
        }
        r
    }

    /// Runs `f` on the state under the lock; then, unlocked, wakes the waiter `f` left
    /// in its second argument (the channel's rule: values move under the lock, wake-ups
    /// happen after it).
    pub(crate) fn with_state<R>(
        &self,
        f: impl FnOnce(&mut State<T>, &mut Option<Unparker>) -> R,
    ) -> R {
        let mut wake = None;
        let r = {
            let l = self.locked();
            f(l.state(), &mut wake)
        };
        if let Some(u) = wake {
            u.unpark();
        }
        r
    }

    fn locked(&self) -> Locked<'_, T> {
        self.lock.lock();
        Locked { chan: self }
    }

    /// The lock, for `select!` (which locks several channels in address order).
    pub(crate) fn raw_lock(&self) {
        self.lock.lock();
    }

    pub(crate) fn raw_unlock(&self) {
        self.lock.unlock();
    }

    /// # Safety
    ///
    /// The caller holds `lock` (through `raw_lock`).
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn state_locked(&self) -> &mut State<T> {
        // SAFETY: the lock is held (caller's contract) and no other reference to the
        // state is alive across calls.
        unsafe { &mut *self.state.get() }
    }

    /// Sends `v`, waiting until `deadline` (`None`: forever).
    pub(crate) fn send_until(
        &self,
        v: T,
        deadline: Option<Instant>,
    ) -> Result<(), SendTimeoutError<T>> {
        goro_runtime::preempt_point();
        let chan = self;
        let mut wake = None;
        let l = chan.locked();
        let v = match try_send_locked(l.state(), v, &mut wake) {
            TrySend::Sent => {
                drop(l);
                if let Some(u) = wake {
                    u.unpark();
                }
                return Ok(());
            }
            TrySend::Closed(v) => return Err(SendTimeoutError::Closed(v)),
            TrySend::Full(v) => v,
        };
        if deadline.is_some_and(|d| d <= Instant::now()) {
            return Err(SendTimeoutError::Timeout(v)); // no waiting left: do not park
        }
        // Block: link a sudog holding the value, sleep, unlock after the switch.
        let mut sg = Sudog::new(Some(v));
        sg.unparker = Some(park::prepare());
        let s: *mut Sudog<T> = &mut sg;
        // SAFETY: lock held; `sg` stays in place on this frame until it is unlinked
        // (by a receiver, close, or ourselves below).
        unsafe { l.state().sendq.push(s) };
        std::mem::forget(l); // unlocked by the commit below
        park_blocked(chan, WaitReason::ChanSend, deadline);
        // SAFETY: either the park was woken by whoever unlinked us (which only happens
        // with the lock held, before the wake), or finish_timed re-took the lock.
        let outcome = unsafe { finish_timed(chan, s, deadline.is_some(), |st| &mut st.sendq) };
        match outcome {
            Outcome::Done => Ok(()),
            Outcome::Closed => Err(SendTimeoutError::Closed(
                sg.value.take().expect("value kept"),
            )),
            Outcome::Waiting => Err(SendTimeoutError::Timeout(
                sg.value.take().expect("value kept"),
            )),
        }
    }

    /// Receives, waiting until `deadline` (`None`: forever).
    pub(crate) fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        goro_runtime::preempt_point();
        let chan = self;
        chan.deliver_due();
        let mut wake = None;
        let l = chan.locked();
        match try_recv_locked(l.state(), &mut wake) {
            TryRecv::Got(v) => {
                drop(l);
                if let Some(u) = wake {
                    u.unpark();
                }
                return Ok(v);
            }
            TryRecv::Closed => return Err(RecvTimeoutError::Closed),
            TryRecv::Empty => {}
        }
        if deadline.is_some_and(|d| d <= Instant::now()) {
            return Err(RecvTimeoutError::Timeout); // no waiting left: do not park
        }
        let mut sg = Sudog::<T>::new(None);
        sg.unparker = Some(park::prepare());
        let s: *mut Sudog<T> = &mut sg;
        // SAFETY: as in send_until.
        unsafe { l.state().recvq.push(s) };
        std::mem::forget(l); // unlocked by the commit
        park_blocked(chan, WaitReason::ChanReceive, deadline);
        // SAFETY: as in send_until.
        let outcome = unsafe { finish_timed(chan, s, deadline.is_some(), |st| &mut st.recvq) };
        match outcome {
            Outcome::Done => Ok(sg.value.take().expect("a completed receive holds a value")),
            Outcome::Closed => Err(RecvTimeoutError::Closed),
            Outcome::Waiting => Err(RecvTimeoutError::Timeout),
        }
    }

    /// Closes the channel; false if it was closed already.
    pub(crate) fn close(&self) -> bool {
        self.close_and_take(false).0
    }

    /// Closes the channel (unless it is closed already) and, with `take_buffered`,
    /// takes what is buffered (the last receiver is gone: nobody can receive it), in
    /// one locked section, which also takes the first batch of waiters to wake. The
    /// caller drops the values, after the unlock. Returns whether this call closed it.
    fn close_and_take(&self, take_buffered: bool) -> (bool, VecDeque<T>) {
        let mut taken = VecDeque::new();
        let l = self.locked();
        let st = l.state();
        let was_open = !st.closed;
        st.closed = true;
        if take_buffered {
            taken = st.buf.take_all();
        }
        // Most closes find no waiter (the last handle of a channel whose peers are
        // gone): they write no more of this stack than their own frame.
        if was_open && !(st.recvq.is_empty() && st.sendq.is_empty()) {
            self.wake_all_waiters(l);
        }
        (was_open, taken)
    }

    /// Wakes every waiter of a channel just marked closed under `first`, a batch at a
    /// time from an array on this stack: a close allocates nothing (see `close_into`).
    /// The first batch leaves in the closing section; no waiter joins the queues after
    /// it, and receivers leave the senders still queued to this (`try_recv_locked`).
    /// Out of line: the array is 768 bytes of stack to write, a cache miss a line on
    /// the stack of a coroutine that wakes after long (a close with no waiter used to
    /// write it too: a fifth of the Ms' time when a million parked coroutines each
    /// dropped their receiver, docs/benchmarks.md).
    #[cold]
    #[inline(never)]
    fn wake_all_waiters(&self, first: Locked<'_, T>) {
        const BATCH: usize = 32;
        let mut held = Some(first);
        loop {
            let mut wake: [Option<Unparker>; BATCH] = Default::default();
            let n = {
                let l = held.take().unwrap_or_else(|| self.locked());
                let st = l.state();
                // SAFETY: the lock is held.
                unsafe {
                    let n = st.recvq.close_into(&mut wake);
                    n + st.sendq.close_into(&mut wake[n..])
                }
            };
            for u in wake.iter_mut().take(n).filter_map(Option::take) {
                u.unpark();
            }
            if n < BATCH {
                return;
            }
        }
    }
}

impl<T> Locked<'_, T> {
    #[allow(clippy::mut_from_ref)]
    fn state(&self) -> &mut State<T> {
        // SAFETY: we hold the lock; callers never keep two of these borrows alive.
        unsafe { self.chan.state_locked() }
    }
}

impl<T> Drop for Locked<'_, T> {
    fn drop(&mut self) {
        self.chan.lock.unlock();
    }
}

/// The result of a send attempt that does not block.
pub(crate) enum TrySend<T> {
    Sent,
    Full(T),
    Closed(T),
}

/// The result of a receive attempt that does not block.
pub(crate) enum TryRecv<T> {
    Got(T),
    Empty,
    Closed,
}

/// Sends `v` without blocking (Go: chansend's non-blocking part). Lock held.
fn try_send_locked<T>(st: &mut State<T>, v: T, wake: &mut Option<Unparker>) -> TrySend<T> {
    if st.closed {
        return TrySend::Closed(v);
    }
    let v = match hand_off_locked(st, v, wake) {
        Ok(()) => return TrySend::Sent,
        Err(v) => v,
    };
    if st.buf.has_room() {
        st.buf.push_back(v);
        return TrySend::Sent;
    }
    TrySend::Full(v)
}

/// Moves `v` into the first waiting receiver's sudog and takes its unparker (the
/// direct hand-off); gives `v` back if no receiver waits. Lock held.
#[inline(always)]
pub(crate) fn hand_off_locked<T>(
    st: &mut State<T>,
    v: T,
    wake: &mut Option<Unparker>,
) -> Result<(), T> {
    // SAFETY: the lock is held; a dequeued sudog is ours to complete.
    unsafe {
        let r = st.recvq.dequeue();
        if r.is_null() {
            return Err(v);
        }
        (*r).value = Some(v);
        (*r).outcome = Outcome::Done;
        *wake = (*r).take_unparker();
    }
    Ok(())
}

/// Receives without blocking (Go: chanrecv's non-blocking part). Lock held.
fn try_recv_locked<T>(st: &mut State<T>, wake: &mut Option<Unparker>) -> TryRecv<T> {
    // SAFETY: the lock is held; a dequeued sudog is ours to complete.
    unsafe {
        // A sender still queued on a closed channel is the closer's to wake, with its
        // value (more than one batch of waiters leaves the lock between batches): it
        // must not complete now.
        let s = if st.closed {
            std::ptr::null_mut()
        } else {
            st.sendq.dequeue()
        };
        if !s.is_null() {
            let sent = (*s).value.take().expect("a waiting sender has a value");
            (*s).outcome = Outcome::Done;
            *wake = (*s).take_unparker();
            // A sender waits only on a full buffer: take the head, queue its value (an
            // empty buffer is a rendezvous channel's: the sender's value is the one).
            return TryRecv::Got(st.buf.cycle(sent));
        }
    }
    match st.buf.pop_front() {
        Some(v) => TryRecv::Got(v),
        None if st.closed => TryRecv::Closed,
        None => TryRecv::Empty,
    }
}

/// Creates a channel of capacity `cap`; `cap == 0` is a rendezvous channel (a send
/// completes only when a receiver takes the value), and `cap == usize::MAX` is the
/// [`unbounded`] channel.
///
/// The buffer is allocated as values arrive, never `cap` slots up front, so a large
/// `cap` costs nothing until it is used; a large buffer is freed again once drained.
///
/// ```
/// use goro::chan::channel;
///
/// let (tx, rx) = channel::<u32>(1 << 40); // allocates nothing yet
/// tx.send(1).unwrap();
/// assert_eq!((rx.recv(), rx.capacity()), (Ok(1), 1 << 40));
/// ```
pub fn channel<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan::new(cap, 1, None));
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// Creates a channel without a capacity limit (std's `mpsc::channel`, crossbeam's
/// `unbounded`): a send never waits, a receive waits as usual. The same as
/// `channel(usize::MAX)`, and `capacity()` says `usize::MAX`.
///
/// The buffer grows as values arrive and is freed once a receive drains it, so what
/// it holds, not what it once held, is what it costs. Nothing stops a sender that
/// outruns its receivers from filling the memory: reach for a bounded channel where
/// senders should slow down.
///
/// ```
/// use goro::chan::unbounded;
///
/// let (tx, rx) = unbounded();
/// for i in 0..10_000 {
///     tx.send(i).unwrap(); // nobody is receiving yet: never waits
/// }
/// drop(tx);
/// assert_eq!(rx.iter().sum::<i32>(), (0..10_000).sum());
/// assert_eq!(rx.capacity(), usize::MAX);
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    channel(UNBOUNDED)
}

/// The sending side of a channel. `Clone` adds a sender; dropping the last one closes
/// the channel.
pub struct Sender<T> {
    pub(crate) chan: Arc<Chan<T>>,
}

/// The receiving side of a channel. `Clone` adds a receiver; dropping the last one
/// closes the channel (senders then get their values back in `SendError`).
pub struct Receiver<T> {
    pub(crate) chan: Arc<Chan<T>>,
}

// As std's mpsc ends: a channel's state changes only under its lock, by code that
// cannot panic halfway (a value's own destructor runs outside it), so a panic never
// leaves a channel broken.
impl<T> std::panic::UnwindSafe for Sender<T> {}
impl<T> std::panic::RefUnwindSafe for Sender<T> {}
impl<T> std::panic::UnwindSafe for Receiver<T> {}
impl<T> std::panic::RefUnwindSafe for Receiver<T> {}

// Channel ends compare and hash by the channel (Go's channels are comparable: two
// values are equal if they were made by the same `make`), as `same_channel` does.
impl<T> PartialEq for Sender<T> {
    fn eq(&self, other: &Sender<T>) -> bool {
        self.same_channel(other)
    }
}
impl<T> Eq for Sender<T> {}
impl<T> std::hash::Hash for Sender<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.chan).hash(state)
    }
}
impl<T> PartialEq for Receiver<T> {
    fn eq(&self, other: &Receiver<T>) -> bool {
        self.same_channel(other)
    }
}
impl<T> Eq for Receiver<T> {}
impl<T> std::hash::Hash for Receiver<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.chan).hash(state)
    }
}

impl<T> Sender<T> {
    /// Sends `v`, waiting while the channel is full (or, for a rendezvous channel, until
    /// a receiver takes it). Returns the value back if the channel is closed.
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        self.send_until(v, None).map_err(|e| match e {
            SendTimeoutError::Closed(v) | SendTimeoutError::Timeout(v) => SendError(v),
        })
    }

    /// Sends `v` if that can be done without waiting.
    ///
    /// A preemption point, as `select!` with `default` is: a coroutine that spins on
    /// `try_send` yields once it has run too long, so the coroutine it waits for gets
    /// to run even with one P.
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        goro_runtime::preempt_point();
        match self.chan.try_send(v) {
            TrySend::Sent => Ok(()),
            TrySend::Full(v) => Err(TrySendError::Full(v)),
            TrySend::Closed(v) => Err(TrySendError::Closed(v)),
        }
    }

    /// Sends `v`, waiting at most `timeout`. A timeout too large to add to now waits
    /// forever.
    pub fn send_timeout(&self, v: T, timeout: Duration) -> Result<(), SendTimeoutError<T>> {
        self.send_until(v, Instant::now().checked_add(timeout))
    }

    /// Sends `v`, waiting until `deadline` at the latest; gives the value back in
    /// `Timeout` if the channel is still full then, in `Closed` if it is closed.
    ///
    /// A deadline that has passed still sends if that needs no waiting (as
    /// [`try_send`](Sender::try_send), with `SendTimeoutError` for the error).
    ///
    /// ```
    /// use goro::chan::{channel, SendTimeoutError};
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = channel::<u8>(1);
    /// tx.send_deadline(1, Instant::now()).unwrap(); // room: no waiting needed
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(tx.send_deadline(2, soon), Err(SendTimeoutError::Timeout(2)));
    /// assert!(Instant::now() >= soon);
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    pub fn send_deadline(&self, v: T, deadline: Instant) -> Result<(), SendTimeoutError<T>> {
        self.send_until(v, Some(deadline))
    }

    /// Sends `v`, waiting until `deadline` (`None`: forever).
    fn send_until(&self, v: T, deadline: Option<Instant>) -> Result<(), SendTimeoutError<T>> {
        self.chan.send_until(v, deadline)
    }

    /// Closes the channel: receivers drain what is buffered and then get `RecvError`;
    /// blocked and later senders get their value back. Closing twice is not an error.
    pub fn close(&self) {
        self.chan.close();
    }

    /// Whether the channel is closed.
    pub fn is_closed(&self) -> bool {
        self.chan.locked().state().closed
    }

    /// Values buffered now.
    pub fn len(&self) -> usize {
        self.chan.locked().state().buf.len()
    }

    /// Whether nothing is buffered now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel's capacity: 0 for a rendezvous channel, `usize::MAX` for an
    /// [`unbounded`] one.
    pub fn capacity(&self) -> usize {
        self.chan.cap
    }

    /// Whether a send now would wait: the channel is open, its buffer is full (for a
    /// rendezvous channel: empty, as always), and no receiver is waiting to take the
    /// value. Never true for an [`unbounded`] channel; false for a closed one, where a
    /// send fails at once.
    ///
    /// A snapshot: other senders and receivers may change the answer before the
    /// caller acts on it. `try_send` is the race-free way to send only if that needs
    /// no waiting.
    ///
    /// ```
    /// use goro::chan::{channel, unbounded};
    ///
    /// let (tx, rx) = channel::<u8>(1);
    /// assert!(!tx.is_full());
    /// tx.send(1).unwrap();
    /// assert!(tx.is_full());
    /// rx.recv().unwrap();
    /// assert!(!tx.is_full());
    ///
    /// let (tx, _rx) = channel::<u8>(0);
    /// assert!(tx.is_full(), "rendezvous, and nobody is receiving");
    ///
    /// let (tx, _rx) = unbounded::<u8>();
    /// assert!(!tx.is_full());
    /// ```
    pub fn is_full(&self) -> bool {
        let l = self.chan.locked();
        let st = l.state();
        // SAFETY: the lock is held.
        !st.closed && !st.buf.has_room() && !unsafe { st.recvq.has_waiter() }
    }

    /// Whether `self` and `other` send on the same channel (crossbeam's
    /// `same_channel`).
    ///
    /// ```
    /// use goro::chan::channel;
    ///
    /// let (a, _ra) = channel::<u8>(1);
    /// let (b, _rb) = channel::<u8>(1);
    /// assert!(a.same_channel(&a.clone()));
    /// assert!(!a.same_channel(&b));
    /// ```
    pub fn same_channel(&self, other: &Sender<T>) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }

    /// The channel's identity, to match a `Sender` with a `Receiver` (`goro::signal`'s
    /// `stop`).
    pub(crate) fn chan_id(&self) -> usize {
        Arc::as_ptr(&self.chan) as *const () as usize
    }

    /// For `select!`: lets `send(tx, v)` take a `Sender` or a reference to one.
    #[doc(hidden)]
    pub fn __as_sender(&self) -> select::SendEnd<'_, T, select::StdKind> {
        select::SendEnd {
            chan: &self.chan,
            kind: std::marker::PhantomData,
        }
    }
}

/// Parks a waiter whose sudog is linked and whose channel lock is held; the lock is
/// released after the switch.
fn park_blocked<T>(chan: &Chan<T>, reason: WaitReason, deadline: Option<Instant>) {
    match deadline {
        None => park::park_commit(reason, || chan.raw_unlock()),
        Some(d) => {
            park::park_commit_timeout(reason, d, || chan.raw_unlock());
        }
    }
}

/// After a (possibly timed) park: the sudog's outcome. A timed waiter re-takes the lock:
/// if its sudog is still linked it timed out and unlinks itself (`Waiting`); if not, a
/// counterpart or close completed it, which counts even if the deadline fired too.
///
/// # Safety
///
/// `s` is the caller's sudog, linked in the queue `queue` picks, and the caller has
/// parked.
unsafe fn finish_timed<T>(
    chan: &Chan<T>,
    s: *mut Sudog<T>,
    timed: bool,
    queue: impl FnOnce(&mut State<T>) -> &mut WaitQueue<T>,
) -> Outcome {
    if !timed {
        // Only the completer had our unparker, and it completed us under the lock
        // before waking us: no lock needed.
        // SAFETY: unlinked and completed; the park handshake orders its writes.
        return unsafe { (*s).outcome };
    }
    let l = chan.locked();
    // SAFETY: lock held; `s` is ours.
    unsafe {
        if (*s).is_linked() {
            queue(l.state()).remove(s);
        }
        (*s).outcome
    }
}

impl<T> Receiver<T> {
    /// Receives a value, waiting until one is sent. Returns `Err` once the channel is
    /// closed and drained.
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(|_| RecvError)
    }

    /// Receives a value if one is available now.
    ///
    /// A preemption point, as `try_send` is.
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        goro_runtime::preempt_point();
        self.chan.deliver_due();
        match self.chan.try_recv() {
            TryRecv::Got(v) => Ok(v),
            TryRecv::Empty => Err(TryRecvError::Empty),
            TryRecv::Closed => Err(TryRecvError::Closed),
        }
    }

    /// Receives a value, waiting at most `timeout`. A timeout too large to add to now
    /// waits forever.
    pub fn recv_timeout(&self, timeout: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Instant::now().checked_add(timeout))
    }

    /// Receives a value, waiting until `deadline` at the latest: `Timeout` if nothing
    /// arrived by then, `Closed` once the channel is closed and drained.
    ///
    /// A deadline that has passed still receives a value that is there (as
    /// [`try_recv`](Receiver::try_recv), with `RecvTimeoutError` for the error).
    ///
    /// ```
    /// use goro::chan::{channel, RecvTimeoutError};
    /// use std::time::{Duration, Instant};
    ///
    /// let (tx, rx) = channel::<u8>(1);
    /// let h = goro::spawn(move || {
    ///     goro::time::sleep(Duration::from_millis(1));
    ///     tx.send(7).unwrap();
    ///     tx // keep the channel open
    /// });
    /// let far = Instant::now() + Duration::from_secs(60);
    /// assert_eq!(rx.recv_deadline(far), Ok(7)); // woken well before the deadline
    /// let soon = Instant::now() + Duration::from_millis(5);
    /// assert_eq!(rx.recv_deadline(soon), Err(RecvTimeoutError::Timeout));
    /// drop(h.join().unwrap());
    /// assert_eq!(rx.recv_deadline(far), Err(RecvTimeoutError::Closed));
    /// ```
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    /// Receives, waiting until `deadline` (`None`: forever).
    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        self.chan.recv_until(deadline)
    }

    /// An iterator over received values, ending when the channel is closed and drained.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// An iterator over the values available now, without waiting.
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Values buffered now.
    pub fn len(&self) -> usize {
        self.chan.locked().state().buf.len()
    }

    /// Whether nothing is buffered now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel's capacity: 0 for a rendezvous channel (and [`never()`]), 1 for a timer
    /// channel, `usize::MAX` for an [`unbounded`] one.
    pub fn capacity(&self) -> usize {
        self.chan.cap
    }

    /// Whether `self` and `other` receive from the same channel (crossbeam's
    /// `same_channel`).
    ///
    /// ```
    /// use goro::chan::{after, channel};
    /// use std::time::Duration;
    ///
    /// let (_tx, rx) = channel::<u8>(0);
    /// assert!(rx.same_channel(&rx.clone()));
    /// assert!(!rx.same_channel(&channel::<u8>(0).1));
    /// let t = after(Duration::from_secs(1));
    /// assert!(t.same_channel(&t.clone()));
    /// ```
    pub fn same_channel(&self, other: &Receiver<T>) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }

    /// The channel's identity (see `Sender::chan_id`).
    pub(crate) fn chan_id(&self) -> usize {
        Arc::as_ptr(&self.chan) as *const () as usize
    }

    /// Whether the channel is closed (values may still be buffered).
    pub fn is_closed(&self) -> bool {
        self.chan.locked().state().closed
    }

    /// For `select!`: lets `recv(rx)` take a `Receiver` or a reference to one.
    #[doc(hidden)]
    pub fn __as_receiver(&self) -> select::RecvEnd<'_, T, select::StdKind> {
        select::RecvEnd {
            chan: &self.chan,
            kind: std::marker::PhantomData,
        }
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        // Relaxed: a new handle is made from a live one, so the count cannot be at zero
        // (as `Arc::clone`); the drops' AcqRel orders the close.
        self.chan.senders.fetch_add(1, Ordering::Relaxed);
        Sender {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        // Relaxed: as for `Sender::clone`.
        self.chan.receivers.fetch_add(1, Ordering::Relaxed);
        Receiver {
            chan: self.chan.clone(),
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        // AcqRel: the last sender's close must see every other sender's sends.
        if self.chan.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.chan.close();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        // AcqRel: as for `Sender`'s drop.
        if self.chan.receivers.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The values are dropped here, after the unlock: a value's destructor may
            // use channels, this one included.
            drop(self.chan.close_and_take(true).1);
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sender")
            .field("capacity", self.chan.debug_capacity())
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Receiver")
            .field("capacity", self.chan.debug_capacity())
            .finish_non_exhaustive()
    }
}

/// A blocking iterator over a [`Receiver`]'s values.
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

/// A non-blocking iterator over a [`Receiver`]'s values.
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv().ok()
    }
}

/// An owning blocking iterator over a [`Receiver`]'s values.
pub struct IntoIter<T> {
    rx: Receiver<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> IntoIterator for Receiver<T> {
    type Item = T;
    type IntoIter = IntoIter<T>;
    fn into_iter(self) -> IntoIter<T> {
        IntoIter { rx: self }
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

#[doc(hidden)]
pub use select::__private;
