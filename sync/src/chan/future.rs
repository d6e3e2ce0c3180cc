//! Async sends and receives: [`Sender::send_async`] and [`Receiver::recv_async`], for
//! async code (a tokio task, any executor) that talks to coroutines over a channel.
//!
//! # The async waiter
//!
//! An async operation waits as a blocking one does, with its sudog in the channel's
//! queue, except that the sudog lives in the future (which is pinned while it waits)
//! and its unparker wakes the task ([`Unparker::from_waker`]). So senders, receivers,
//! `select!` and `close` complete it exactly as they complete a coroutine's, under the
//! channel's lock, and the channel's own paths pay nothing for it. A poll looks at the
//! sudog under the lock: still linked, it is still waiting (and takes the newer waker
//! if the task changed); unlinked, its outcome says what happened.
//!
//! # Calling off
//!
//! Dropping a waiting future unlinks its sudog under the lock, so nothing completes it
//! afterwards. A send called off takes its value with it: it was never sent. A receive
//! can be called off after a sender moved a value into its sudog but before the task
//! polled it; that value was sent and must not be lost, so the drop gives it back to
//! the channel (`give_back_locked`): to the next waiting receiver, else to the head of
//! the buffer, ahead of anything sent after it (for that moment the buffer may hold
//! one value more than its capacity, or one at all on a rendezvous channel; a receive
//! takes it first, and senders keep waiting for room meanwhile).

use std::cell::UnsafeCell;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::task::{Context, Poll};

use goro_runtime::park::Unparker;

use super::waitq::{Outcome, Sudog};
use super::{
    hand_off_locked, try_recv_locked, try_send_locked, Chan, Receiver, RecvError, SendError,
    Sender, State, TryRecv, TrySend,
};

/// The future of [`Sender::send_async`].
#[must_use = "futures do nothing unless polled"]
pub struct SendFuture<'a, T> {
    chan: &'a Chan<T>,
    /// The value before the first poll; then in the sudog while it waits.
    value: Option<T>,
    waiter: Waiter<T>,
}

/// The future of [`Receiver::recv_async`].
#[must_use = "futures do nothing unless polled"]
pub struct RecvFuture<'a, T> {
    chan: &'a Chan<T>,
    waiter: Waiter<T>,
}

/// A future's sudog and whether it is queued (see "the async waiter").
struct Waiter<T> {
    /// Touched only under the channel's lock while `queued` (a counterpart may complete
    /// it then); the future's own otherwise.
    sudog: UnsafeCell<Sudog<T>>,
    /// The sudog was linked into a queue and its outcome not yet taken.
    queued: bool,
    /// Linked sudogs must not move: the future is `!Unpin`.
    _pinned: PhantomPinned,
}

// SAFETY: the sudog's raw links are touched only under the channel's lock (while it is
// queued) or by the future's owner; values of T move between threads, hence T: Send.
unsafe impl<T: Send> Send for Waiter<T> {}
// SAFETY: no `&self` method reads the sudog: every access goes through `poll` or `drop`
// (`&mut`), under the channel's lock while it is shared.
unsafe impl<T: Send> Sync for Waiter<T> {}

impl<T> Waiter<T> {
    fn new() -> Waiter<T> {
        Waiter {
            sudog: UnsafeCell::new(Sudog::new(None)),
            queued: false,
            _pinned: PhantomPinned,
        }
    }

    /// Links the sudog into the queue `queue` picks, holding `value` (a send's), with
    /// the task's waker.
    ///
    /// # Safety
    ///
    /// The channel's lock is held, the sudog is not queued, and the future is pinned
    /// (it stays in place until `finish` or `cancel` unlinks it).
    unsafe fn enqueue(
        &mut self,
        st: &mut State<T>,
        value: Option<T>,
        cx: &Context<'_>,
        queue: fn(&mut State<T>) -> &mut super::waitq::WaitQueue<T>,
    ) {
        let s = self.sudog.get_mut();
        *s = Sudog::new(value);
        s.unparker = Some(Unparker::from_waker(cx.waker().clone()));
        // SAFETY: caller's contract: lock held, sudog unlinked and pinned.
        unsafe { queue(st).push(s) };
        self.queued = true;
    }

    /// A queued waiter's poll: `None` while it still waits (with the task's current
    /// waker in place), else the outcome, and the sudog's value, now ours.
    ///
    /// # Safety
    ///
    /// The channel's lock is held and the sudog is queued.
    unsafe fn finish(&mut self, cx: &Context<'_>) -> Option<(Outcome, Option<T>)> {
        let s = self.sudog.get_mut();
        if s.is_linked() {
            if !s.unparker.as_ref().is_some_and(|u| u.will_wake(cx.waker())) {
                s.unparker = Some(Unparker::from_waker(cx.waker().clone()));
            }
            return None;
        }
        // Completed by a counterpart or `close`, which took the unparker.
        self.queued = false;
        Some((s.outcome, s.value.take()))
    }
}

impl<T> Sender<T> {
    /// Sends `value` from async code: the future waits (without blocking the
    /// executor's thread) while the channel is full, as [`send`](Sender::send) does,
    /// and resolves to `Err` with the value if the channel is closed. Any executor
    /// (tokio's, `futures`', [`goro::block_on`](goro_runtime::block_on)) can poll it;
    /// it is `Send` when `T` is.
    ///
    /// Cancel-safe: dropping the future before it resolves takes the value back out
    /// of the channel's queue, unsent; once it has resolved `Ok`, the value was
    /// delivered (or buffered).
    ///
    /// ```
    /// use goro::chan::channel;
    ///
    /// let (tx, rx) = channel::<u32>(0);
    /// let h = goro::go!(move || rx.recv().unwrap());
    /// goro::block_on(async { tx.send_async(5).await.unwrap() });
    /// assert_eq!(h.join().unwrap(), 5);
    /// ```
    pub fn send_async(&self, value: T) -> SendFuture<'_, T> {
        SendFuture {
            chan: &self.chan,
            value: Some(value),
            waiter: Waiter::new(),
        }
    }
}

impl<T> Receiver<T> {
    /// Receives from async code: the future waits (without blocking the executor's
    /// thread) until a value is there, and resolves to `Err(RecvError)` once the
    /// channel is closed and drained, as [`recv`](Receiver::recv) does. Any executor
    /// can poll it; it is `Send` when `T` is.
    ///
    /// Cancel-safe: dropping the future before it resolves loses no value (one a
    /// sender handed to it meanwhile goes back to the channel, ahead of later ones).
    ///
    /// ```
    /// use goro::chan::channel;
    /// use std::time::Duration;
    ///
    /// let (tx, rx) = channel::<&str>(0);
    /// goro::go!(move || {
    ///     goro::time::sleep(Duration::from_millis(5));
    ///     tx.send("hello").unwrap();
    /// });
    /// assert_eq!(goro::block_on(rx.recv_async()), Ok("hello"));
    /// assert!(goro::block_on(rx.recv_async()).is_err()); // the sender is gone
    /// ```
    pub fn recv_async(&self) -> RecvFuture<'_, T> {
        RecvFuture {
            chan: &self.chan,
            waiter: Waiter::new(),
        }
    }
}

impl<T> Future for SendFuture<'_, T> {
    type Output = Result<(), SendError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: nothing is moved out of the pinned future: `value` is an Option we
        // take from, and the waiter stays in place.
        let this = unsafe { self.get_unchecked_mut() };
        this.chan.with_state(|st, wake| {
            if this.waiter.queued {
                // SAFETY: lock held; queued.
                match unsafe { this.waiter.finish(cx) } {
                    None => Poll::Pending,
                    Some((Outcome::Done, _)) => Poll::Ready(Ok(())),
                    Some((_, v)) => Poll::Ready(Err(SendError(v.expect("an unsent value")))),
                }
            } else {
                let v = this
                    .value
                    .take()
                    .expect("SendFuture polled after it resolved");
                match try_send_locked(st, v, wake) {
                    TrySend::Sent => Poll::Ready(Ok(())),
                    TrySend::Closed(v) => Poll::Ready(Err(SendError(v))),
                    TrySend::Full(v) => {
                        // SAFETY: lock held; not queued; `this` is pinned.
                        unsafe { this.waiter.enqueue(st, Some(v), cx, |st| &mut st.sendq) };
                        Poll::Pending
                    }
                }
            }
        })
    }
}

impl<T> Future for RecvFuture<'_, T> {
    type Output = Result<T, RecvError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: nothing is moved out of the pinned future.
        let this = unsafe { self.get_unchecked_mut() };
        if !this.waiter.queued {
            this.chan.deliver_due();
        }
        this.chan.with_state(|st, wake| {
            if this.waiter.queued {
                // SAFETY: lock held; queued.
                match unsafe { this.waiter.finish(cx) } {
                    None => Poll::Pending,
                    Some((Outcome::Done, v)) => {
                        Poll::Ready(Ok(v.expect("a completed receive holds a value")))
                    }
                    Some(_) => Poll::Ready(Err(RecvError)),
                }
            } else {
                match try_recv_locked(st, wake) {
                    TryRecv::Got(v) => Poll::Ready(Ok(v)),
                    TryRecv::Closed => Poll::Ready(Err(RecvError)),
                    TryRecv::Empty => {
                        // SAFETY: lock held; not queued; `this` is pinned.
                        unsafe { this.waiter.enqueue(st, None, cx, |st| &mut st.recvq) };
                        Poll::Pending
                    }
                }
            }
        })
    }
}

impl<T> Drop for SendFuture<'_, T> {
    fn drop(&mut self) {
        if !self.waiter.queued {
            return;
        }
        let l = self.chan.locked();
        let s = self.waiter.sudog.get_mut();
        if s.is_linked() {
            // SAFETY: lock held; linked in `sendq`, where `enqueue` put it.
            unsafe { l.state().sendq.remove(s) };
        }
        // Unlinked by a counterpart (delivered) or `close` (the value is still in the
        // sudog, dropped with the future after the unlock).
        drop(l);
    }
}

impl<T> Drop for RecvFuture<'_, T> {
    fn drop(&mut self) {
        if !self.waiter.queued {
            return;
        }
        let waiter = &mut self.waiter;
        self.chan.with_state(|st, wake| {
            let s = waiter.sudog.get_mut();
            if s.is_linked() {
                // SAFETY: lock held; linked in `recvq`, where `enqueue` put it.
                unsafe { st.recvq.remove(s) };
            } else if let (Outcome::Done, Some(v)) = (s.outcome, s.value.take()) {
                // Sent to us, never taken: back to the channel ("calling off").
                give_back_locked(st, v, wake);
            }
        });
    }
}

/// Gives `v`, which a sender handed to a receive that was then called off, back to the
/// channel (see "calling off"): to the next waiting receiver, else to the head of the
/// buffer, ahead of what was sent after it. Lock held. A closed channel keeps it
/// buffered too: receivers drain a closed channel before they see it closed (its last
/// `Receiver` cannot have gone: the future borrows one).
fn give_back_locked<T>(st: &mut State<T>, v: T, wake: &mut Option<Unparker>) {
    if let Err(v) = hand_off_locked(st, v, wake) {
        st.buf.push_front(v);
    }
}
