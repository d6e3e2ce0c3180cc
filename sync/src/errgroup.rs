//! [`ErrGroup`]: golang.org/x/sync/errgroup's `Group`: coroutines working on parts of
//! one task, the first error of which is the task's, and which cancels the others
//! through a shared [`Context`].

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::context::{CancelFunc, Context};
use crate::semaphore::{OwnedSemaphorePermit, Semaphore};
use crate::waitgroup::WaitGroup;

/// A group of coroutines working on one task (golang.org/x/sync's `errgroup.Group`):
/// [`go`](Self::go) starts one, [`wait`](Self::wait) waits for all of them and returns
/// the first error. Made by [`with_context`](Self::with_context), the group also
/// cancels a [`Context`] at the first error and when `wait` returns, so the others can
/// stop early. [`set_limit`](Self::set_limit) bounds how many run at once.
///
/// `Clone` shares the group (a task can start more tasks in it, as Go code passes
/// `g`). Works from coroutines and plain threads alike.
///
/// ```
/// use goro::context;
/// use goro::sync::ErrGroup;
/// use std::time::Duration;
///
/// let (g, ctx) = ErrGroup::<String>::with_context(&context::background());
/// for i in 0..4 {
///     let ctx = ctx.clone();
///     g.go(move || {
///         if i == 2 {
///             return Err(format!("part {i} failed"));
///         }
///         // The others give up when the group's context is cancelled.
///         goro::select! {
///             recv(ctx.done()) -> _ => Ok(()),
///             default(Duration::from_secs(10)) => panic!("never cancelled"),
///         }
///     });
/// }
/// assert_eq!(g.wait(), Err("part 2 failed".to_string()));
/// assert!(ctx.err().is_some());
/// ```
///
/// # Panics in tasks
///
/// Go's errgroup lets a panicking goroutine crash the program. A goro coroutine's
/// panic unwinds that coroutine only, so the group catches it instead: the panic hook
/// reports it as usual, the task counts as finished, the group's context is cancelled
/// (as for an error), and `wait`, once every task has finished, **re-raises the first
/// panic** (`std::panic::resume_unwind`), in preference to any error, as
/// `std::thread::scope` does. A panic is a bug; it is not turned into an `Err`.
pub struct ErrGroup<E> {
    inner: Arc<Group<E>>,
}

struct Group<E> {
    tasks: WaitGroup,
    /// The first error and the first panic since the last `wait`.
    failed: Mutex<Failed<E>>,
    /// The group's context's (`with_context` only); dropped with the group, which
    /// cancels it.
    cancel: Option<CancelFunc>,
    /// How many tasks may run at once (see `set_limit`).
    limit: Mutex<Limit>,
}

struct Failed<E> {
    error: Option<E>,
    panic: Option<Box<dyn Any + Send>>,
}

#[derive(Clone)]
enum Limit {
    None,
    /// `set_limit(0)`: no task may start.
    Zero,
    Some(Arc<Semaphore>),
}

impl<E> Clone for ErrGroup<E> {
    fn clone(&self) -> Self {
        ErrGroup {
            inner: self.inner.clone(),
        }
    }
}

impl<E> Default for ErrGroup<E> {
    fn default() -> Self {
        ErrGroup::new()
    }
}

impl<E> ErrGroup<E> {
    /// A group with no context and no limit (Go's zero `errgroup.Group`).
    pub fn new() -> ErrGroup<E> {
        ErrGroup::build(None)
    }

    /// A group and a child of `ctx` that the group cancels at its first error (or
    /// panic), when [`wait`](Self::wait) returns, and when the last handle to the
    /// group is dropped (Go's `errgroup.WithContext`).
    pub fn with_context(ctx: &Context) -> (ErrGroup<E>, Context) {
        let (ctx, cancel) = ctx.with_cancel();
        (ErrGroup::build(Some(cancel)), ctx)
    }

    fn build(cancel: Option<CancelFunc>) -> ErrGroup<E> {
        ErrGroup {
            inner: Arc::new(Group {
                tasks: WaitGroup::new(),
                failed: Mutex::new(Failed {
                    error: None,
                    panic: None,
                }),
                cancel,
                limit: Mutex::new(Limit::None),
            }),
        }
    }

    /// Lets at most `n` tasks run at once: [`go`](Self::go) then waits for a free
    /// place, and [`try_go`](Self::try_go) refuses when there is none (Go's
    /// `SetLimit`). A limit above `u32::MAX` (`usize::MAX`, say) removes the limit.
    ///
    /// `set_limit(0)` means no task may start: `try_go` always returns false, and `go`
    /// panics rather than wait forever (Go's `Go` would block for good).
    ///
    /// # Panics
    ///
    /// If tasks of the group are running (as Go's does): the limit can change only
    /// between rounds.
    pub fn set_limit(&self, n: usize) {
        let active = self.inner.tasks.count();
        assert!(
            active == 0,
            "ErrGroup::set_limit: modify limit while {active} tasks in the group are still active"
        );
        *lock(&self.inner.limit) = match u32::try_from(n) {
            Ok(0) => Limit::Zero,
            Ok(n) => Limit::Some(Arc::new(Semaphore::new(n as usize))),
            Err(_) => Limit::None,
        };
    }

    /// Waits until every task started so far has finished, cancels the group's
    /// context, and returns the first error a task returned since the last `wait`
    /// (Go's `Wait`). The error is handed over once (`E` need not be `Clone`): a later
    /// `wait` returns `Ok(())` unless a task fails again.
    ///
    /// # Panics
    ///
    /// Re-raises the first panic of a task since the last `wait`, after every task has
    /// finished (see "Panics in tasks").
    pub fn wait(&self) -> Result<(), E> {
        self.inner.tasks.wait();
        if let Some(c) = &self.inner.cancel {
            c.cancel();
        }
        let Failed { error, panic } = std::mem::replace(
            &mut *lock(&self.inner.failed),
            Failed {
                error: None,
                panic: None,
            },
        );
        if let Some(p) = panic {
            std::panic::resume_unwind(p);
        }
        error.map_or(Ok(()), Err)
    }
}

impl<E: Send + 'static> ErrGroup<E> {
    /// Runs `f` on a new coroutine in the group (Go's `Go`). With a limit, first waits
    /// until fewer than the limit run. The first error returned (or panic) is kept for
    /// `wait` and cancels the group's context; later ones are dropped.
    ///
    /// # Panics
    ///
    /// If the limit is 0 (`set_limit(0)`): no task could ever start, and waiting would
    /// hang. Also if no coroutine can be started (no memory for a stack).
    #[track_caller]
    pub fn go(&self, f: impl FnOnce() -> Result<(), E> + Send + 'static) {
        let permit = match self.limit() {
            Limit::None => None,
            Limit::Zero => panic!(
                "ErrGroup::go: the limit is 0 (set_limit(0)), so no task can ever start; \
                 use try_go, or set a limit of at least 1"
            ),
            Limit::Some(sem) => Some(sem.acquire_owned()),
        };
        self.start(f, permit);
    }

    /// Runs `f` on a new coroutine in the group if that needs no waiting: true if it
    /// started, false if the group is at its limit (Go's `TryGo`).
    #[track_caller]
    pub fn try_go(&self, f: impl FnOnce() -> Result<(), E> + Send + 'static) -> bool {
        let permit = match self.limit() {
            Limit::None => None,
            Limit::Zero => return false,
            Limit::Some(sem) => match sem.try_acquire_owned() {
                Some(p) => Some(p),
                None => return false,
            },
        };
        self.start(f, permit);
        true
    }

    fn limit(&self) -> Limit {
        lock(&self.inner.limit).clone()
    }

    /// Starts a task holding `permit` (released as it finishes, before it counts down).
    #[track_caller]
    fn start(
        &self,
        f: impl FnOnce() -> Result<(), E> + Send + 'static,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let group = self.inner.clone();
        self.inner.tasks.go(move || {
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
            drop(permit);
            match outcome {
                Ok(Ok(())) => {}
                Ok(Err(e)) => group.fail(e, |failed| &mut failed.error),
                Err(payload) => group.fail(payload, |failed| &mut failed.panic),
            }
        });
    }
}

impl<E> Group<E> {
    /// Records a failure if it is the first of its kind (`slot` picks the kind), and
    /// cancels the context. A later one is dropped after the lock is released: its
    /// destructor is user code.
    fn fail<T>(&self, failure: T, slot: impl FnOnce(&mut Failed<E>) -> &mut Option<T>) {
        let rejected = {
            let mut failed = lock(&self.failed);
            let slot = slot(&mut failed);
            match slot {
                None => {
                    *slot = Some(failure);
                    None
                }
                Some(_) => Some(failure),
            }
        };
        drop(rejected);
        if let Some(c) = &self.cancel {
            c.cancel();
        }
    }
}

/// A std lock whose holders run no user code (a panic cannot leave it inconsistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl<E> fmt::Debug for ErrGroup<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ErrGroup")
            .field("running", &self.inner.tasks.count())
            .field("with_context", &self.inner.cancel.is_some())
            .finish()
    }
}
