//! [`block_on`]: runs a `Future` to completion on the calling coroutine or thread.
//!
//! # The block_on wake rule
//!
//! The future's [`Waker`] and the poll loop share one [`Signal`]: a flag `notified` and
//! the unparker of the loop's current park, both under one lock (rank `BlockOn`, a
//! leaf).
//!
//! - The loop clears `notified` *before* each poll, so a wake that arrives during the
//!   poll (or any time after the clear) is kept and causes exactly one more poll; wakes
//!   that arrived before the clear were for an earlier poll and are dropped, which is
//!   what keeps a future woken many times between two polls from being polled many
//!   times.
//! - After a `Pending` poll the loop `prepare`s a wait, then under the lock: if
//!   `notified` is set it does not park and polls again; otherwise it stores the
//!   unparker and parks.
//! - A wake sets `notified` and takes the stored unparker, if any, under the lock, and
//!   unparks it after the unlock (`Unparker::unpark` works from any coroutine or thread).
//!
//! The lock makes "check for a wake, then publish the unparker" one step, so a wake
//! either finds the unparker (and readies the parker) or is seen by the parker's check
//! (which then does not sleep): never lost. A park that starts after its unparker fired
//! returns at once (the park/ready handshake, `wait.rs`).

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::lockrank::{Mutex, Rank};
use crate::park::{self, Unparker, WaitReason};

/// What the waker and the poll loop share (see "the block_on wake rule").
struct Signal {
    state: Mutex<SignalState>,
}

struct SignalState {
    /// A wake arrived since the loop last cleared it.
    notified: bool,
    /// The loop's current park, if it has committed to parking.
    parked: Option<Unparker>,
}

impl Wake for Signal {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let u = {
            let mut s = self.state.lock();
            s.notified = true;
            s.parked.take()
        };
        if let Some(u) = u {
            u.unpark();
        }
    }
}

/// Runs `fut` to completion on the calling coroutine, parking it between polls (its M
/// runs other coroutines meanwhile), or on a plain thread, blocking the thread. Returns
/// the future's output.
///
/// The future is polled on the caller's stack, first at once; after a `Pending` it is
/// polled again only once its [`Waker`] has been woken — from any coroutine or thread,
/// before or after the caller parks. Wakes that arrive while it waits to be polled
/// again count once.
///
/// # Which futures work
///
/// Runtime-agnostic ones: `std::future::ready` and `poll_fn`, async blocks and `async
/// fn`s over goro's own (blocking) types, the `futures` crate's channels and
/// combinators, anything whose waker is woken by another coroutine or thread. goro
/// provides no reactor and no timer wheel for futures, so futures that need tokio's
/// (tokio's sockets, `tokio::time::sleep`, reqwest, sqlx, tonic) fail or never finish
/// here: they panic with "there is no reactor running" or wait forever. For those, use
/// `goro::tokio::block_on` (the facade's `tokio` feature), which polls them with tokio's
/// context entered and tokio's runtime driving their I/O, and still parks the
/// coroutine, not its thread, between polls. (The old recipe, a tokio `block_on` inside
/// [`blocking`](crate::blocking), holds one OS thread per call in flight: 3 117 threads
/// for 10 000 slow GETs, where `goro::tokio::block_on` held 18.)
///
/// Calls may nest: a future may spawn coroutines that themselves call `block_on`, and
/// may block (join a coroutine, receive on a goro channel) inside `poll`, which parks
/// the calling coroutine like any other goro call.
///
/// ```
/// use std::future::poll_fn;
/// use std::task::Poll;
///
/// // Ready at once.
/// assert_eq!(goro::block_on(std::future::ready(7)), 7);
///
/// // Woken by another coroutine.
/// let (tx, rx) = goro::chan::channel::<std::task::Waker>(1);
/// let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
/// let d = done.clone();
/// let waker = goro::go!(move || {
///     let w = rx.recv().unwrap();
///     d.store(true, std::sync::atomic::Ordering::SeqCst);
///     w.wake();
/// });
/// let h = goro::go!(move || {
///     let mut sent = false;
///     goro::block_on(poll_fn(|cx| {
///         if done.load(std::sync::atomic::Ordering::SeqCst) {
///             return Poll::Ready("woken");
///         }
///         if !sent {
///             tx.send(cx.waker().clone()).unwrap();
///             sent = true;
///         }
///         Poll::Pending
///     }))
/// });
/// assert_eq!(h.join().unwrap(), "woken");
/// waker.join().unwrap();
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let signal = Arc::new(Signal {
        state: Mutex::new(
            Rank::BlockOn,
            SignalState {
                notified: false,
                parked: None,
            },
        ),
    });
    let waker = Waker::from(signal.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        // Wakes before this point were for the previous poll (the wake rule).
        signal.state.lock().notified = false;
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        let u = park::prepare();
        let park_now = {
            let mut s = signal.state.lock();
            if s.notified {
                false
            } else {
                s.parked = Some(u);
                true
            }
        };
        if park_now {
            park::park(WaitReason::Future);
        } else {
            // Woken during the poll: poll again, but let a P that sysmon asked to yield
            // do so first (a future that always wakes itself must not hog its P).
            crate::preempt_point();
        }
    }
}
