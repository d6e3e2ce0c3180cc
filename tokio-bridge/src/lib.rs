//! goro-tokio: tokio's async ecosystem from goro's coroutines. Reached as `goro::tokio`
//! through goro-rt's `tokio` feature.
//!
//! [`block_on`] runs a future that needs tokio (reqwest, sqlx, tonic, tokio's own
//! sockets and timers) on the calling coroutine: the coroutine parks between polls and
//! its thread runs other coroutines, so ten thousand coroutines with a request each in
//! flight hold a handful of threads, not ten thousand. The future's I/O and timers are
//! driven by a tokio runtime ([`handle`]): one goro starts on first use (one worker by
//! default, `GORO_TOKIO_WORKERS`), or the program's own ([`set_handle`]).
//!
//! # Why a poll holds its thread
//!
//! tokio keeps its "current runtime" in a thread-local, entered around each poll
//! (`Handle::enter`). A coroutine that parked inside a poll (on a goro channel, lock,
//! sleep, a nested `block_on`, or with the `hooks` feature any std socket call) and
//! resumed on another thread would leave the first thread's context entered and find
//! none on the second, and another coroutine run meanwhile on the first thread would
//! see a runtime that is not its own. So each poll, and the future's drop, runs under
//! [`goro::lock_os_thread`](goro_runtime::lock_os_thread): a park inside it blocks the
//! thread (its processor goes to another thread meanwhile) and the coroutine resumes on
//! the same thread. Between polls the coroutine migrates freely.
//!
//! # The deadlock check
//!
//! The threads of the runtime goro starts sleep in `epoll_wait`, which would keep the
//! deadlock check from ever reporting. goro records them as they start, and the check
//! skips them while nothing is in flight on that runtime: no task alive
//! (`num_alive_tasks`) and no [`block_on`] running. Threads the runtime's blocking pool
//! starts later (a `spawn_blocking`) are not skipped: an idle one waits with a timeout
//! for work, and holds a report back until it exits (10 s idle). The threads of a
//! runtime the program supplies ([`set_handle`]), or runs beside goro, are not goro's:
//! they hold the report back for as long as they live (see the caveats).

use std::future::Future;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::task::{Context, Poll};

use tokio::runtime::{Handle, Runtime};

/// The runtime `block_on` uses: the program's (`set_handle`) or goro's own (`start`).
static HANDLE: OnceLock<Handle> = OnceLock::new();
/// goro's own runtime, once started: kept for the life of the process (a static is
/// never dropped), as its threads serve every later `block_on`.
static OURS: OnceLock<Runtime> = OnceLock::new();
/// The thread ids of goro's runtime's workers, for the deadlock check (see the crate
/// doc): each adds itself the first time it parks (only workers park; the blocking
/// pool's threads wait for work otherwise) and removes itself as it stops.
static WORKERS: Mutex<Vec<i32>> = Mutex::new(Vec::new());
/// `block_on` calls running now, on any coroutine or thread.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread is in `WORKERS`.
    static RECORDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// How many of our polls are running on this thread (nested `block_on`s): a tokio
    /// context found entered while it is non-zero is ours, not a tokio worker's.
    static POLLING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// The tokio runtime [`block_on`] drives its futures with: the one a program gave to
/// [`set_handle`] before first use, else goro's own, started now if it has not been: a
/// multi-thread runtime with I/O and timers enabled, one worker thread (named
/// `goro-tokio`) unless `GORO_TOKIO_WORKERS` or `goro::Config::tokio_workers` says
/// otherwise.
///
/// `goro::block_on(goro::tokio::handle().spawn(fut))` runs a `Send + 'static` future as
/// a task on that runtime instead of on the coroutine (see [`block_on`] for when to use
/// which).
pub fn handle() -> Handle {
    HANDLE.get_or_init(start).clone()
}

/// Makes `handle` the runtime [`block_on`] uses, before its first use: a program that
/// already runs a tokio runtime shares it with its coroutines. Once a runtime is in
/// use (this was called before, or [`handle`] or [`block_on`] ran), the handle is given
/// back in `Err` and nothing changes.
///
/// The runtime must be a multi-thread one with I/O and timers enabled (a
/// `current_thread` runtime drives its reactor only inside its own `block_on`, so
/// futures polled on coroutines would wait for ever), and must outlive its use. Its
/// threads are not goro's: see the deadlock note in the caveats.
pub fn set_handle(handle: Handle) -> Result<(), Handle> {
    HANDLE.set(handle)
}

/// Starts goro's own runtime (see [`handle`]).
fn start() -> Handle {
    let workers = goro_runtime::bridge_support::tokio_workers();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("goro-tokio")
        .on_thread_park(|| {
            if !RECORDED.with(|r| r.replace(true)) {
                lock_workers().push(goro_runtime::bridge_support::gettid());
            }
        })
        .on_thread_stop(|| {
            let tid = goro_runtime::bridge_support::gettid();
            lock_workers().retain(|&t| t != tid);
        })
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("goro::tokio: cannot start tokio's runtime: {e}"));
    goro_runtime::bridge_support::set_idle_helpers(idle_worker);
    let h = rt.handle().clone();
    if OURS.set(rt).is_err() {
        unreachable!("HANDLE's initialiser runs once");
    }
    h
}

fn lock_workers() -> std::sync::MutexGuard<'static, Vec<i32>> {
    WORKERS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The deadlock check's test (see the crate doc): `tid` is a worker of goro's runtime
/// and nothing is in flight on it.
fn idle_worker(tid: i32) -> bool {
    // SeqCst: read after the check saw every coroutine parked; a `block_on` that
    // started before that is counted by then (its increment precedes its park).
    if IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        return false;
    }
    let Some(rt) = OURS.get() else {
        return false;
    };
    rt.metrics().num_alive_tasks() == 0 && lock_workers().contains(&tid)
}

/// Runs `fut` to completion on the calling coroutine (or plain thread) and returns its
/// output, with tokio's reactor, timers and `Handle::current()` available to it: the
/// way to call an async library (reqwest, sqlx, tonic) from a coroutine.
///
/// The coroutine parks between polls, and its thread runs other coroutines meanwhile;
/// the future's I/O and timers are driven by the runtime of [`handle`]. Each poll runs
/// with the coroutine locked to its thread (see the crate doc), so the future may block
/// the coroutine inside a poll (a goro channel, lock or sleep, a nested `block_on`) and
/// stay sound. The future need not be `Send`. A panic in it resumes here, on the caller.
///
/// # This or `handle().spawn`
///
/// - `block_on(fut)`: the future runs on the coroutine, may borrow from it, and need
///   not be `Send`. The usual choice: a request, a query, a call.
/// - `goro::block_on(goro::tokio::handle().spawn(fut))`: the future runs as a task on
///   the tokio runtime's workers (it must be `Send + 'static`); the coroutine parks
///   until its `JoinHandle` is ready. For a future that polls a lot per result
///   (streaming a large body, a busy connection), which then runs under tokio's own
///   budget and leaves goro's processors alone.
///
/// # Panics
///
/// If called on a thread that runs a tokio runtime's tasks (inside an async task, or
/// tokio's own `block_on`), with tokio's message ("Cannot start a runtime from within a
/// runtime"): the caller is async, and should `.await` the future instead.
///
/// ```
/// use std::time::Duration;
///
/// let handles: Vec<_> = (0..100u64)
///     .map(|i| {
///         goro::go!(move || {
///             goro::tokio::block_on(async move {
///                 tokio::time::sleep(Duration::from_millis(10)).await; // tokio's timer
///                 i * 2
///             })
///         })
///     })
///     .collect();
/// let sum: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
/// assert_eq!(sum, 9900);
/// ```
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let handle = handle();
    if POLLING.with(|p| p.get()) == 0 && Handle::try_current().is_ok() {
        // A context we did not enter: a tokio runtime's thread (then tokio's own
        // `block_on` panics with its message), or a handle the program entered (then
        // it returns at once).
        handle.block_on(async {});
    }
    /// Counts the call in `IN_FLIGHT` while it runs, also while it unwinds.
    struct InFlight;
    impl Drop for InFlight {
        fn drop(&mut self) {
            // SeqCst: see `idle_worker`.
            IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
        }
    }
    // SeqCst: see `idle_worker`.
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let _in_flight = InFlight;
    goro_runtime::block_on(Entered {
        handle: &handle,
        fut: ManuallyDrop::new(fut),
    })
}

/// A future polled and dropped inside tokio's context, on a locked thread (see the
/// crate doc).
struct Entered<'a, F> {
    handle: &'a Handle,
    /// Dropped by `Entered`'s own drop, in the context.
    fut: ManuallyDrop<F>,
}

/// Runs `f` with this coroutine locked to its thread and tokio's context entered.
fn in_context<R>(handle: &Handle, f: impl FnOnce() -> R) -> R {
    goro_runtime::lock_os_thread(|| {
        let _context = handle.enter();
        POLLING.with(|p| p.set(p.get() + 1));
        /// Uncounts the poll, also when it unwinds.
        struct Polling;
        impl Drop for Polling {
            fn drop(&mut self) {
                POLLING.with(|p| p.set(p.get() - 1));
            }
        }
        let _polling = Polling;
        f()
    })
}

impl<F: Future> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // SAFETY: the inner future is never moved out of `self` (it is dropped in place
        // by `Entered`'s drop), so pinning `Entered` pins it.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above: `fut` stays where it is until dropped.
        let fut = unsafe { Pin::new_unchecked(&mut *this.fut) };
        in_context(this.handle, || fut.poll(cx))
    }
}

impl<F> Drop for Entered<'_, F> {
    fn drop(&mut self) {
        let fut = &mut self.fut;
        in_context(self.handle, || {
            // SAFETY: dropped once, here, in place (the pin contract), and never used
            // again: `Entered` is being dropped.
            unsafe { ManuallyDrop::drop(fut) }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_workers_are_recorded() {
        let _ = handle();
        let n = goro_runtime::bridge_support::tokio_workers();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while lock_workers().len() < n {
            assert!(std::time::Instant::now() < deadline, "workers never parked");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let tid = lock_workers()[0];
        assert!(idle_worker(tid), "an idle worker of an idle runtime");
        assert!(
            !idle_worker(goro_runtime::bridge_support::gettid()),
            "not a worker"
        );
        let task = handle().spawn(std::future::pending::<()>());
        assert!(!idle_worker(tid), "a task is alive");
        task.abort();
    }
}
