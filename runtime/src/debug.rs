//! Introspection: the coroutine dump, counts of the scheduler's state, a list of the
//! live coroutines, the stack guard in use.

pub use crate::sched::stats::{CoroutineInfo, CoroutineState, Stats};
pub use crate::stack::{guard_kind as stack_guard_kind, GuardKind};

/// A dump of every live coroutine, like Go's goroutine dump (SIGQUIT, or a deadlock
/// report): its id, name, state — for a parked coroutine its wait reason (chan receive,
/// chan send, select, mutex, sema, sleep, io read, io write, join, ...) — and how long it
/// has been waiting, measured on the runtime's coarse clock (sysmon's rounds: accurate
/// to a few milliseconds). Stacks are not walked.
pub fn dump() -> String {
    crate::sched::dump::dump()
}

/// Counts of the scheduler's state: what the `GORO_SCHEDTRACE` line prints (Ps, threads,
/// run queues, coroutines), the coroutines by state, pending timers and socket waiters.
///
/// A snapshot taken without stopping anything: while coroutines run, its fields can
/// disagree by what changed while it was taken. It walks every live coroutine (O(number
/// of coroutines), under the registry's short per-shard locks), so it is for
/// monitoring and tests, not for a hot path. Starts the runtime if it has not started.
///
/// ```
/// let s = goro::debug::stats();
/// assert_eq!(s.gomaxprocs, goro::maxprocs());
/// assert_eq!(s.local_runqs.len(), s.gomaxprocs);
/// ```
pub fn stats() -> Stats {
    crate::sched::stats::stats()
}

/// Every live coroutine, by id: its name, state, wait reason and how long it has
/// waited — the coroutine dump's entries as values.
///
/// Walks every live coroutine (O(number of coroutines), copying each entry out under
/// the registry's short per-shard locks) without stopping them: a coroutine can change
/// state, start or end while the list is made. Starts the runtime if it has not started.
///
/// ```
/// use goro::debug::CoroutineState;
/// use goro::park::WaitReason;
///
/// let (tx, rx) = goro::chan::channel::<()>(0);
/// let h = goro::Builder::new().name("waiter").spawn(move || rx.recv()).unwrap();
/// let id = h.id();
/// // Wait (bounded) until it is parked on the channel.
/// let mut found = None;
/// for _ in 0..10_000 {
///     found = goro::debug::coroutines().into_iter().find(|c| c.id == id);
///     if found.as_ref().is_some_and(|c| c.state == CoroutineState::Waiting) {
///         break;
///     }
///     std::thread::sleep(std::time::Duration::from_millis(1));
/// }
/// let c = found.unwrap();
/// assert_eq!(c.name.as_deref(), Some("waiter"));
/// assert_eq!(c.wait_reason, Some(WaitReason::ChanReceive));
/// drop(tx);
/// assert!(h.join().unwrap().is_err());
/// ```
pub fn coroutines() -> Vec<CoroutineInfo> {
    crate::sched::stats::coroutines()
}
