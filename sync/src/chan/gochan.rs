//! [`Chan`]: Go's `chan T`, one handle for both directions, closed only by `close`.
//!
//! It is the same channel underneath as [`channel`](super::channel)'s ends (the same
//! buffer, queues, direct hand-off and `select!`), with Go's rules on top instead of
//! Rust's close-on-drop: a `Chan` counts as neither a sender nor a receiver, so no
//! drop ever closes it, and what it holds is dropped with its last handle.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use super::select::{GoKind, RecvEnd, SendEnd};
use super::{Chan as Raw, SendTimeoutError};

/// Go's `chan T`: a channel with one `Clone` handle for both directions, closed only
/// by [`close`](Chan::close), never by a drop.
///
/// - `send` blocks until the value is taken (capacity 0) or buffered, and panics
///   "send on closed channel" on a closed one, as Go's `ch <- v`;
/// - `recv` gives `Some(v)`, or `None` once the channel is closed and drained (Go's
///   `v, ok := <-ch` with `ok == false`);
/// - `close` panics "close of closed channel" the second time;
/// - `iter()` (and `for v in &ch`) ends at the close (Go's `for v := range ch`);
/// - in `select!`, `recv(ch) -> v` binds an `Option<T>` and `send(ch, v)` binds `()`
///   (and panics if chosen on a closed channel, as Go's select does).
///
/// A coroutine that waits on a `Chan` that nobody else will send on or close waits
/// for ever; if nothing else can wake anyone, the deadlock check reports it, as Go's
/// runtime does. Where Rust's rule suits better (a producer's end that closes the
/// channel when it is dropped, or gone), use [`channel`](super::channel)'s `Sender`
/// and `Receiver` (see the guide's porting table).
///
/// ```
/// use goro::chan::Chan;
///
/// let jobs = Chan::<u32>::new(3);
/// let done = Chan::<()>::new(0);
/// let (j, d) = (jobs.clone(), done.clone());
/// goro::go!(move || {
///     for job in &j {
///         println!("received job {job}");
///     }
///     d.send(()); // the worker returns: nothing is closed by it
/// });
/// for job in 1..=3 {
///     jobs.send(job);
/// }
/// jobs.close();
/// done.recv();
/// assert_eq!(jobs.recv(), None); // closed and drained
/// ```
pub struct Chan<T> {
    chan: Arc<Raw<T>>,
}

impl<T> Chan<T> {
    /// A channel with room for `cap` values (0: unbuffered, a send waits for a
    /// receiver; Go's `make(chan T, cap)`). The buffer is allocated as values arrive.
    pub fn new(cap: usize) -> Chan<T> {
        // No Sender and no Receiver: the counts never reach zero, so no drop closes it.
        Chan {
            chan: Arc::new(Raw::new(cap, 0, None)),
        }
    }

    /// Sends `value`, waiting while the channel is full (or, unbuffered, until a
    /// receiver takes it).
    ///
    /// # Panics
    ///
    /// "send on closed channel", if the channel is closed (also if it is closed while
    /// this send waits), as in Go.
    #[track_caller]
    pub fn send(&self, value: T) {
        match self.chan.send_until(value, None) {
            Ok(()) => {}
            Err(SendTimeoutError::Closed(_) | SendTimeoutError::Timeout(_)) => {
                panic!("send on closed channel")
            }
        }
    }

    /// Receives a value, waiting until one is there: `Some(value)`, or `None` once the
    /// channel is closed and everything sent before the close has been received (Go's
    /// `v, ok := <-ch`).
    pub fn recv(&self) -> Option<T> {
        // Without a deadline the only error is `Closed`.
        self.chan.recv_until(None).ok()
    }

    /// Closes the channel: waiting and later receivers drain what is buffered and
    /// then get `None`; waiting and later senders panic.
    ///
    /// # Panics
    ///
    /// "close of closed channel", if it is closed already, as in Go.
    #[track_caller]
    pub fn close(&self) {
        if !self.chan.close() {
            panic!("close of closed channel");
        }
    }

    /// Values buffered now (Go's `len(ch)`).
    pub fn len(&self) -> usize {
        self.chan.locked().state().buf.len()
    }

    /// Whether nothing is buffered now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The channel's capacity (Go's `cap(ch)`).
    pub fn cap(&self) -> usize {
        self.chan.cap
    }

    /// An iterator over received values, ending once the channel is closed and
    /// drained (Go's `for v := range ch`).
    pub fn iter(&self) -> ChanIter<'_, T> {
        ChanIter { ch: self }
    }

    /// For `select!`: `recv(ch)` on a `Chan` binds an `Option<T>`.
    #[doc(hidden)]
    pub fn __as_receiver(&self) -> RecvEnd<'_, T, GoKind> {
        RecvEnd {
            chan: &self.chan,
            kind: PhantomData,
        }
    }

    /// For `select!`: `send(ch, v)` on a `Chan` binds `()`, and panics if chosen on a
    /// closed channel.
    #[doc(hidden)]
    pub fn __as_sender(&self) -> SendEnd<'_, T, GoKind> {
        SendEnd {
            chan: &self.chan,
            kind: PhantomData,
        }
    }
}

// As `Sender` and `Receiver` are (see there): a panic cannot leave the channel's
// state half-changed for a `catch_unwind` to observe; every change is made under its
// lock by code that does not panic.
impl<T> std::panic::UnwindSafe for Chan<T> {}
impl<T> std::panic::RefUnwindSafe for Chan<T> {}

impl<T> Clone for Chan<T> {
    /// Another handle to the same channel (Go copies the channel reference).
    fn clone(&self) -> Self {
        Chan {
            chan: self.chan.clone(),
        }
    }
}

impl<T> PartialEq for Chan<T> {
    /// Whether both handles are the same channel (Go's `==` on channels).
    fn eq(&self, other: &Chan<T>) -> bool {
        Arc::ptr_eq(&self.chan, &other.chan)
    }
}

impl<T> Eq for Chan<T> {}

impl<T> std::hash::Hash for Chan<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.chan).hash(state)
    }
}

impl<T> fmt::Debug for Chan<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Chan")
            .field("len", &self.len())
            .field("cap", &self.chan.debug_capacity())
            .finish_non_exhaustive()
    }
}

/// The iterator of [`Chan::iter`] and `for v in &ch`.
#[derive(Debug)]
pub struct ChanIter<'a, T> {
    ch: &'a Chan<T>,
}

impl<T> Iterator for ChanIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.ch.recv()
    }
}

impl<'a, T> IntoIterator for &'a Chan<T> {
    type Item = T;
    type IntoIter = ChanIter<'a, T>;
    fn into_iter(self) -> ChanIter<'a, T> {
        self.iter()
    }
}
