//! Cancellation, deadlines and request-scoped values (Go's `context` package).
//!
//! A [`Context`] says when work should stop: [`done`](Context::done) is a channel that
//! is closed when the context is cancelled or its deadline passes (receive on it in a
//! `select!`), [`err`](Context::err) says why, [`deadline`](Context::deadline) when.
//! [`background`] is the root, never done. Derive from it, or from any context:
//!
//! - [`with_cancel`](Context::with_cancel): a child and the [`CancelFunc`] that
//!   cancels it;
//! - [`with_timeout`](Context::with_timeout), [`with_deadline`](Context::with_deadline):
//!   the same, also cancelled (with [`Error::DeadlineExceeded`]) when the time comes;
//! - [`with_value`](Context::with_value): a value for the code below, keyed by its
//!   type; [`without_cancel`](Context::without_cancel): the values without the
//!   cancellation.
//!
//! Cancelling a context cancels all its descendants, synchronously: when `cancel`
//! returns, every `done` channel below is closed. A child of a done context is born
//! done. [`after_func`](Context::after_func) runs a function on its own coroutine when
//! a context is done (Go 1.21's `context.AfterFunc`): the way to unblock a call that
//! knows nothing of contexts, such as a socket read (close the socket), and
//! [`connect_context`] is a connect that gives up
//! when the context does (Go's `DialContext`).
//!
//! ```
//! use goro::context::{self, Error};
//! use std::time::Duration;
//!
//! let (ctx, cancel) = context::background().with_cancel();
//! let (short, _cancel_short) = ctx.with_timeout(Duration::from_millis(5));
//! let worker = goro::go!(move || {
//!     goro::select! {
//!         recv(short.done()) -> _ => short.err(),
//!         default(Duration::from_secs(5)) => None,
//!     }
//! });
//! assert_eq!(worker.join().unwrap(), Some(Error::DeadlineExceeded));
//! assert_eq!(ctx.err(), None); // a child's deadline does not reach its parent
//! cancel.cancel();
//! assert_eq!(ctx.err(), Some(Error::Canceled));
//! ```
//!
//! # Dropping a `CancelFunc` cancels
//!
//! Go's `cancel` must be called on every path (`defer cancel()`), or the child stays
//! in its parent, with its timer, until the parent ends; `go vet` flags a lost one. In
//! goro the [`CancelFunc`] is that `defer`: dropping it cancels the context. So
//! `let (ctx, _cancel) = parent.with_timeout(d);` is the whole of Go's idiom, and a
//! context lives as long as the scope (or coroutine, or struct) that holds its
//! `CancelFunc`; move the `CancelFunc` along with the work to make it live longer.
//! The trap goes the other way: `let (ctx, _) = ...` drops the `CancelFunc` at once,
//! and `ctx` is born cancelled. That is loud, not silent (the first `err()` is
//! `Canceled`, every `done()` is ready, a `connect_context` fails at once), and
//! `CancelFunc` is `#[must_use]`, so a discarded pair warns.
//!
//! # Costs
//!
//! Creating a child and cancelling it are O(1): no coroutine, no thread, one
//! allocation, and a lock of the parent to link and unlink; the done channel is made
//! on the first `done()`; a deadline is a runtime timer, stopped at the cancel. A
//! cancelled child leaves its parent at once, so a long-lived parent with a million
//! short-lived children stays flat in memory. The tree is lock-based (one mutex per
//! cancellable context, never two held at once); the module `tree.rs` says how.

mod tree;

use std::any::{Any, TypeId};
use std::fmt;
use std::io;
use std::net::ToSocketAddrs;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use goro_runtime::net::TcpStream;

use crate::chan::{never, Receiver};
use tree::{AfterEntry, Canceller, Cause};

/// Why a context is done (Go's `context.Canceled` and `context.DeadlineExceeded`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// Its `CancelFunc` (or an ancestor's) was called or dropped.
    Canceled,
    /// Its deadline (or an ancestor's) passed.
    DeadlineExceeded,
}

impl Error {
    /// Whether this is a timeout: true for `DeadlineExceeded` (Go's `Timeout()`
    /// method, which `net.Error` users check).
    pub fn is_timeout(&self) -> bool {
        *self == Error::DeadlineExceeded
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Canceled => "context canceled",
            Error::DeadlineExceeded => "context deadline exceeded",
        })
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    /// `DeadlineExceeded` as `ErrorKind::TimedOut`, `Canceled` as `ErrorKind::Other`
    /// (std has no kind for it; `Interrupted` would make `read_exact` and `write_all`
    /// retry), with the context error inside (`get_ref()` and `downcast`).
    fn from(e: Error) -> io::Error {
        let kind = match e {
            Error::Canceled => io::ErrorKind::Other,
            Error::DeadlineExceeded => io::ErrorKind::TimedOut,
        };
        io::Error::new(kind, e)
    }
}

/// The root context: never cancelled, no deadline, no values (Go's
/// `context.Background`, and its `TODO`). Free: it allocates nothing.
pub fn background() -> Context {
    Context {
        canceller: None,
        values: None,
    }
}

/// A cancellation signal, a deadline and values, passed down a call tree (Go's
/// `context.Context`). Cheap to clone (two reference counts); every clone is the same
/// context. See the [module docs](self).
#[derive(Clone)]
pub struct Context {
    /// The nearest cancellable context, this one or an ancestor (`None`: the
    /// background's: never done).
    canceller: Option<Arc<Canceller>>,
    /// The innermost value (`with_value`), whose parents are the outer ones.
    values: Option<Arc<ValueNode>>,
}

/// A value of `with_value`, in a chain towards the root.
struct ValueNode {
    /// `Option` only so that `drop` can take it.
    parent: Option<Arc<ValueNode>>,
    value: Box<dyn Any + Send + Sync>,
}

impl Drop for ValueNode {
    fn drop(&mut self) {
        drop_chain(self.parent.take(), |node| node.parent.take());
    }
}

/// Drops the chain of parents that a node being dropped held, one node at a time,
/// stopping at one that someone else still holds (`parent` takes a node's own): a
/// chain of a million nested contexts would otherwise drop recursively and overflow a
/// coroutine's stack.
fn drop_chain<T>(mut next: Option<Arc<T>>, parent: fn(&mut T) -> Option<Arc<T>>) {
    while let Some(node) = next {
        next = Arc::into_inner(node).and_then(|mut alone| parent(&mut alone));
    }
}

impl Default for Context {
    /// [`background`].
    fn default() -> Context {
        background()
    }
}

impl Context {
    /// A child that is done when `cancel` is called (or the [`CancelFunc`] dropped),
    /// or when this context is done, whichever comes first (Go's `WithCancel`).
    ///
    /// ```
    /// use goro::context::{background, Error};
    ///
    /// let (parent, cancel_parent) = background().with_cancel();
    /// let (child, _cancel_child) = parent.with_cancel();
    /// cancel_parent.cancel();
    /// assert_eq!(child.err(), Some(Error::Canceled)); // synchronously
    /// assert!(child.done().try_recv().is_err()); // closed, so ready
    /// ```
    #[must_use = "dropping the CancelFunc cancels the context at once"]
    pub fn with_cancel(&self) -> (Context, CancelFunc) {
        self.child(None, None)
    }

    /// Like [`with_cancel`](Self::with_cancel), with a [`CancelCauseFunc`] that cancels
    /// with a cause (Go 1.20's `WithCancelCause`): `err()` says `Canceled`, and
    /// [`cause`](Self::cause) gives the cause, here and in every descendant the cancel
    /// reaches.
    ///
    /// ```
    /// use goro::context::{background, Error};
    ///
    /// let (ctx, cancel) = background().with_cancel_cause();
    /// let (child, _c) = ctx.with_cancel();
    /// cancel.cancel("the client went away");
    /// assert_eq!(child.err(), Some(Error::Canceled));
    /// assert_eq!(child.cause().unwrap().to_string(), "the client went away");
    /// ```
    #[must_use = "dropping the CancelCauseFunc cancels the context at once"]
    pub fn with_cancel_cause(&self) -> (Context, CancelCauseFunc) {
        let (ctx, cancel) = self.child(None, None);
        (ctx, CancelCauseFunc { cancel })
    }

    /// Why the context is done, as an error (Go's `context.Cause`): the cause given to
    /// a [`CancelCauseFunc`] or a `*_cause` deadline, its own or the ancestor's whose
    /// cancel reached it; without one, [`err`](Self::err) as an error. `None` while the
    /// context is not done.
    pub fn cause(&self) -> Option<Arc<dyn std::error::Error + Send + Sync>> {
        let node = self.canceller.as_ref()?;
        let err = node.err()?;
        Some(node.cause().unwrap_or_else(|| Arc::new(err)))
    }

    /// A child that is also done, with [`Error::DeadlineExceeded`], at `deadline` (Go's
    /// `WithDeadline`). A deadline that has passed makes it born done; one later than
    /// this context's makes it [`with_cancel`](Self::with_cancel)'s (the earlier one
    /// rules). Any `Instant` is fine: a far one is kept as it is and never fires in
    /// practice (the runtime clock pins it, never wraps it).
    #[must_use = "dropping the CancelFunc cancels the context at once"]
    pub fn with_deadline(&self, deadline: Instant) -> (Context, CancelFunc) {
        self.deadline_child(deadline, None)
    }

    /// [`with_deadline`](Self::with_deadline) whose deadline, when it passes, gives
    /// `cause` as the [`cause`](Self::cause) (Go 1.21's `WithDeadlineCause`); the
    /// `CancelFunc` cancels with no cause, as Go's.
    #[must_use = "dropping the CancelFunc cancels the context at once"]
    pub fn with_deadline_cause(
        &self,
        deadline: Instant,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> (Context, CancelFunc) {
        self.deadline_child(deadline, Some(Arc::from(cause.into())))
    }

    /// [`with_timeout`](Self::with_timeout) with a deadline cause (Go 1.21's
    /// `WithTimeoutCause`; see [`with_deadline_cause`](Self::with_deadline_cause)).
    ///
    /// ```
    /// use goro::context::{background, Error};
    /// use std::time::Duration;
    ///
    /// let (ctx, _cancel) = background().with_timeout_cause(Duration::ZERO, "too slow");
    /// assert_eq!(ctx.err(), Some(Error::DeadlineExceeded));
    /// assert_eq!(ctx.cause().unwrap().to_string(), "too slow");
    /// ```
    #[must_use = "dropping the CancelFunc cancels the context at once"]
    pub fn with_timeout_cause(
        &self,
        timeout: Duration,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> (Context, CancelFunc) {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.with_deadline_cause(deadline, cause),
            None => self.child(None, None),
        }
    }

    /// A child with its own deadline, unless this context's comes first.
    fn deadline_child(&self, deadline: Instant, cause: Option<Cause>) -> (Context, CancelFunc) {
        if self.deadline().is_some_and(|d| d <= deadline) {
            return self.child(None, None);
        }
        self.child(Some(deadline), cause)
    }

    /// [`with_deadline`](Self::with_deadline) of now + `timeout` (Go's `WithTimeout`).
    /// `Duration::ZERO` is born done; a timeout too large to add to now (up to
    /// `Duration::MAX`) is no deadline of its own: the child is `with_cancel`'s.
    #[must_use = "dropping the CancelFunc cancels the context at once"]
    pub fn with_timeout(&self, timeout: Duration) -> (Context, CancelFunc) {
        match Instant::now().checked_add(timeout) {
            Some(deadline) => self.with_deadline(deadline),
            None => self.child(None, None),
        }
    }

    /// A child cancellable node with its own deadline `own` (armed as a timer), whose
    /// passing gives `cause`.
    fn child(&self, own: Option<Instant>, cause: Option<Cause>) -> (Context, CancelFunc) {
        let deadline = match (own, self.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let node = Canceller::new(self.canceller.as_ref(), deadline, own, cause);
        let ctx = Context {
            canceller: Some(node.clone()),
            values: self.values.clone(),
        };
        (ctx, CancelFunc { node, also: None })
    }

    /// A channel that is closed once the context is done (cancelled, or its deadline
    /// passed): `recv(ctx.done()) -> _ => ...` in a `select!`, or `recv()` to wait.
    /// For [`background`] (and [`without_cancel`](Self::without_cancel)) it is never
    /// ready. Each call returns a handle to the same channel; the first call makes it.
    pub fn done(&self) -> Receiver<()> {
        match &self.canceller {
            Some(node) => node.done(),
            None => never(),
        }
    }

    /// Why the context is done, or `None` while it is not. Once it says done it
    /// always will, and `done()` is closed by then (and the other way round).
    pub fn err(&self) -> Option<Error> {
        self.canceller.as_ref().and_then(|n| n.err())
    }

    /// When the context will be done by itself: the earliest of its own deadline and
    /// its ancestors', or `None` if neither has one.
    pub fn deadline(&self) -> Option<Instant> {
        self.canceller.as_ref().and_then(|n| n.deadline())
    }

    /// Runs `f` once, on its own coroutine, when the context is done: at once if it is
    /// done already (Go 1.21's `context.AfterFunc`). [`AfterFunc::stop`] unregisters
    /// it. `f` never runs for a context that is never done ([`background`]). Dropping
    /// the returned handle does not unregister `f`.
    ///
    /// The idiom for a blocking call that takes no context: close what it waits on.
    ///
    /// ```
    /// use goro::context::background;
    /// use goro::net::{TcpListener, TcpStream};
    /// use std::io::{ErrorKind, Read};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    /// let stream = Arc::new(TcpStream::connect(listener.local_addr().unwrap()).unwrap());
    /// let (ctx, _cancel) = background().with_timeout(Duration::from_millis(10));
    /// let s = stream.clone();
    /// let stop = ctx.after_func(move || s.close()); // wakes the read below
    /// let err = (&*stream).read(&mut [0u8; 16]).unwrap_err(); // nobody writes
    /// assert_eq!(err.kind(), ErrorKind::NotConnected);
    /// assert!(ctx.err().is_some());
    /// assert!(!stop.stop()); // it ran
    /// ```
    #[track_caller]
    pub fn after_func(&self, f: impl FnOnce() + Send + 'static) -> AfterFunc {
        let entry = AfterEntry::new(Box::new(f), std::panic::Location::caller());
        if let Some(node) = &self.canceller {
            node.add_after(&entry);
        }
        AfterFunc {
            entry,
            node: self.canceller.as_ref().map(Arc::downgrade),
        }
    }

    /// Cancels this context (made by `with_cancel`: its own canceller) because `what`
    /// arrived, with the cause "`what` signal received" (Go 1.26's `NotifyContext`),
    /// for `signal::notify_context`'s watcher, which holds the context and not its
    /// `CancelFunc`.
    pub(crate) fn cancel_for_signal(&self, what: &dyn fmt::Display) {
        if let Some(node) = &self.canceller {
            let cause: Cause = Arc::new(SignalReceived(format!("{what} signal received")));
            node.cancel(Error::Canceled, Some(cause));
        }
    }

    /// A child carrying `value`, found by [`value::<T>()`](Self::value) on it and its
    /// descendants (Go's `WithValue`, keyed by the value's type instead of a key
    /// value: give each value a type of its own, a newtype if need be). An inner
    /// value of a type hides an outer one of the same type. Cancellation and
    /// deadline are this context's.
    ///
    /// ```
    /// use goro::context::background;
    ///
    /// #[derive(Debug, PartialEq)]
    /// struct RequestId(u64);
    /// #[derive(Debug, PartialEq)]
    /// struct User(&'static str);
    ///
    /// let ctx = background().with_value(RequestId(7)).with_value(User("ana"));
    /// assert_eq!(ctx.value::<RequestId>(), Some(&RequestId(7)));
    /// assert_eq!(ctx.value::<User>(), Some(&User("ana")));
    /// assert_eq!(ctx.value::<String>(), None);
    /// let inner = ctx.with_value(RequestId(8));
    /// assert_eq!(inner.value::<RequestId>(), Some(&RequestId(8)));
    /// ```
    #[must_use = "with_value returns a new context; the receiver is unchanged"]
    pub fn with_value<T: Any + Send + Sync>(&self, value: T) -> Context {
        Context {
            canceller: self.canceller.clone(),
            values: Some(Arc::new(ValueNode {
                parent: self.values.clone(),
                value: Box::new(value),
            })),
        }
    }

    /// The innermost value of type `T` given by [`with_value`](Self::with_value) to
    /// this context or an ancestor, if any.
    pub fn value<T: Any>(&self) -> Option<&T> {
        let want = TypeId::of::<T>();
        let mut node = self.values.as_deref();
        while let Some(n) = node {
            if (*n.value).type_id() == want {
                return n.value.downcast_ref();
            }
            node = n.parent.as_deref();
        }
        None
    }

    /// A context with this one's values but never done, with no deadline (Go 1.21's
    /// `WithoutCancel`): for work that must finish even when the request that started
    /// it is cancelled (a log flush, a cleanup).
    #[must_use = "without_cancel returns a new context; the receiver is unchanged"]
    pub fn without_cancel(&self) -> Context {
        Context {
            canceller: None,
            values: self.values.clone(),
        }
    }

    /// Cancellable children linked to this context now (0 for the background): what
    /// the unlinking rule keeps small. For tests.
    #[doc(hidden)]
    pub fn __children(&self) -> usize {
        self.canceller.as_ref().map_or(0, |n| n.children_len())
    }

    /// `after_func` registrations pending on this context now. For tests.
    #[doc(hidden)]
    pub fn __after_funcs(&self) -> usize {
        self.canceller.as_ref().map_or(0, |n| n.after_len())
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut values = 0;
        let mut node = self.values.as_deref();
        while let Some(n) = node {
            values += 1;
            node = n.parent.as_deref();
        }
        f.debug_struct("Context")
            .field("cancellable", &self.canceller.is_some())
            .field("err", &self.err())
            .field("deadline", &self.deadline())
            .field("values", &values)
            .finish()
    }
}

/// Cancels the context that came with it (Go's `context.CancelFunc`). `cancel` may be
/// called any number of times, from any coroutine or thread; the first cancels.
/// **Dropping it cancels too** (see "Dropping a `CancelFunc` cancels" in the
/// [module docs](self)): keep it for as long as the context should live. To cancel
/// from several places, share it in an `Arc`.
#[must_use = "dropping a CancelFunc cancels its context: bind it (`let (ctx, _cancel) = ...`) for as long as the context should live"]
pub struct CancelFunc {
    node: Arc<Canceller>,
    /// Run after each `cancel` (idempotent): `signal::notify_context`'s unsubscription,
    /// which Go's `stop` does at once, not on a coroutine later.
    also: Option<Box<dyn Fn() + Send + Sync + UnwindSafe + RefUnwindSafe>>,
}

impl CancelFunc {
    /// This `CancelFunc`, made to run `also` after each cancel (and its drop).
    pub(crate) fn with_also(
        mut self,
        also: impl Fn() + Send + Sync + UnwindSafe + RefUnwindSafe + 'static,
    ) -> CancelFunc {
        self.also = Some(Box::new(also));
        self
    }

    /// Cancels the context and its descendants with [`Error::Canceled`], unless it is
    /// done already; when this returns, all their `done` channels are closed. Their
    /// `after_func`s are started, each on its own coroutine (not waited for).
    pub fn cancel(&self) {
        self.node.cancel(Error::Canceled, None);
        if let Some(also) = &self.also {
            also();
        }
    }
}

impl Drop for CancelFunc {
    fn drop(&mut self) {
        self.cancel();
    }
}

impl fmt::Debug for CancelFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelFunc")
            .field("err", &self.node.err())
            .finish()
    }
}

/// The cause of a `signal::notify_context` context ended by a signal:
/// "interrupt signal received", as Go prints it.
#[derive(Debug)]
struct SignalReceived(String);

impl fmt::Display for SignalReceived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SignalReceived {}

/// Cancels the context that came with it, with a cause (Go 1.20's
/// `context.CancelCauseFunc`; see [`Context::with_cancel_cause`]). As a
/// [`CancelFunc`], dropping it cancels too (with no cause: `cause()` is then
/// `Canceled`).
#[must_use = "dropping a CancelCauseFunc cancels its context"]
pub struct CancelCauseFunc {
    cancel: CancelFunc,
}

impl CancelCauseFunc {
    /// Cancels the context and its descendants with [`Error::Canceled`] and `cause`
    /// (what [`Context::cause`] gives), unless it is done already: then nothing
    /// changes, the first cause stays.
    pub fn cancel(&self, cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) {
        self.cancel
            .node
            .cancel(Error::Canceled, Some(Arc::from(cause.into())));
    }
}

impl fmt::Debug for CancelCauseFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelCauseFunc")
            .field("err", &self.cancel.node.err())
            .finish()
    }
}

/// A function registered by [`Context::after_func`]. Dropping this handle leaves it
/// registered.
pub struct AfterFunc {
    entry: Arc<AfterEntry>,
    /// The context it waits for (weak: a handle kept around does not keep a finished
    /// context alive); `None` for a context that is never done.
    node: Option<Weak<Canceller>>,
}

impl AfterFunc {
    /// Unregisters the function. Returns true if this call stopped it from running;
    /// false if it had been started already (the context was done) or stopped before.
    /// Does not wait for a started function to finish.
    pub fn stop(&self) -> bool {
        let stopped = self.entry.take().is_some();
        if stopped {
            if let Some(node) = self.node.as_ref().and_then(Weak::upgrade) {
                node.remove_after(&self.entry);
            }
        }
        stopped
    }
}

impl fmt::Debug for AfterFunc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfterFunc").finish_non_exhaustive()
    }
}

/// Connects to `addr` as [`TcpStream::connect`] does (`TCP_NODELAY` on, each resolved
/// address in turn), giving up when `ctx` is done (Go's `Dialer.DialContext`): at its
/// deadline, or at once when it is cancelled, even while the connect waits. The error
/// is then the context's, as an `io::Error` (`TimedOut` for a deadline, `Other` for a
/// cancel, the [`Error`] inside). A context done before the call fails it at once.
/// Name resolution, where `addr` needs any, does not watch the context.
///
/// ```
/// use goro::context::{self, Error};
/// use goro::net::{connect_context, TcpListener};
///
/// let l = TcpListener::bind("127.0.0.1:0").unwrap();
/// let (ctx, cancel) = context::background().with_cancel();
/// let stream = connect_context(&ctx, l.local_addr().unwrap()).unwrap();
/// assert!(stream.nodelay().unwrap());
/// cancel.cancel();
/// let err = connect_context(&ctx, l.local_addr().unwrap()).unwrap_err();
/// assert_eq!(err.get_ref().and_then(|e| e.downcast_ref()), Some(&Error::Canceled));
/// ```
pub fn connect_context(ctx: &Context, addr: impl ToSocketAddrs) -> io::Result<TcpStream> {
    if let Some(e) = ctx.err() {
        return Err(e.into());
    }
    let connected = TcpStream::connect_watched(addr, ctx.deadline(), |abort| {
        /// Unregisters the abort once the connect's wait is over.
        struct Watch(AfterFunc);
        impl Drop for Watch {
            fn drop(&mut self) {
                self.0.stop();
            }
        }
        Watch(ctx.after_func(move || abort.abort()))
    });
    // Done while connecting (or racing its end): the context's error wins, and a
    // stream that may have been aborted after all is dropped (Go does the same).
    // A connect that timed out at the context's deadline reports it as the context's
    // error even if the context's own timer has not fired yet.
    match (ctx.err(), connected) {
        (Some(e), _) => Err(e.into()),
        (None, Err(e))
            if e.kind() == io::ErrorKind::TimedOut
                && ctx.deadline().is_some_and(|d| d <= Instant::now()) =>
        {
            Err(Error::DeadlineExceeded.into())
        }
        (None, connected) => connected,
    }
}
