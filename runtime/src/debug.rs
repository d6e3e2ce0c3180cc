//! Introspection: the coroutine dump, counts of the scheduler's state, a list of the
//! live coroutines, the stack guard in use.

pub use crate::sched::dump::StackTrace;
pub use crate::sched::stats::{CoroutineInfo, CoroutineState, Stats};
pub use crate::sched::traceback::Frame;
pub use crate::stack::{
    guard_batch as stack_guard_batch, guard_kind as stack_guard_kind, GuardBatch, GuardKind,
};

/// A dump of every live coroutine, like Go's goroutine profile (`debug=1`): coroutines
/// alike in state, wait reason, stack and spawn site are one entry, with their count,
/// their ids and the range of their wait times. Each entry shows the state — for a
/// parked coroutine its wait reason (chan receive, chan send, select, mutex, sema,
/// sleep, io read, io write, join, ...) and how long it has waited (on the runtime's
/// coarse clock: accurate to a few milliseconds), for a running one the M it runs on
/// — then the stack of a coroutine that is not running, innermost frame first, with
/// the runtime's own frames left out (`GORO_TRACEBACK=all` keeps them), and where it
/// was spawned. SIGQUIT and the deadlock report print the same (`GORO_DUMP=each`: one
/// entry per coroutine).
///
/// Walking a parked coroutine's stack resumes it for a moment on the calling thread
/// (docs/decisions/0003-coroutine-stacks.md); an M that wants to run it meanwhile waits.
/// 100 000 parked coroutines take well under a second.
///
/// ```
/// let (tx, rx) = goro::chan::channel::<()>(0);
/// let waiters: Vec<_> = (0..3).map(|_| {
///     let rx = rx.clone();
///     goro::go!(move || rx.recv())
/// }).collect();
/// // (a real program would not wait for its coroutines to park first)
/// while goro::debug::coroutines().iter().filter(|c| c.wait_reason.is_some()).count() < 3 {
///     std::thread::sleep(std::time::Duration::from_millis(1));
/// }
/// let dump = goro::debug::dump();
/// assert!(dump.contains("3 coroutines [chan receive"), "{dump}");
/// drop(tx);
/// waiters.into_iter().for_each(|w| assert!(w.join().unwrap().is_err()));
/// ```
pub fn dump() -> String {
    crate::sched::dump::dump(crate::sched::dump::Layout::Grouped)
}

/// The dump with one entry per coroutine (Go's `debug=2`), each as [`dump`] shows a
/// group: header, stack, spawn site.
pub fn dump_each() -> String {
    crate::sched::dump::dump(crate::sched::dump::Layout::Each)
}

/// The stack of the live coroutine `id` (its frames, innermost first, as [`dump`] shows
/// them), or None if no live coroutine has that id. A running coroutine's stack is not
/// walked: `StackTrace::unavailable` says it is running, and on which M.
///
/// ```
/// #[inline(never)]
/// fn wait_here(rx: goro::chan::Receiver<()>) {
///     let _ = rx.recv();
/// }
///
/// let (tx, rx) = goro::chan::channel::<()>(0);
/// let h = goro::go!(move || wait_here(rx));
/// let id = h.id();
/// let stack = loop {
///     let s = goro::debug::stack(id).unwrap();
///     if s.frames.iter().any(|f| f.function.ends_with("wait_here")) {
///         break s;
///     }
///     std::thread::sleep(std::time::Duration::from_millis(1)); // not parked yet
/// };
/// assert!(stack.spawned_at.unwrap().line() > 0);
/// println!("{stack}");
/// drop(tx);
/// h.join().unwrap();
/// ```
pub fn stack(id: u64) -> Option<StackTrace> {
    crate::sched::dump::stack(id)
}

/// Bytes of stack left below the caller on a coroutine (how much deeper it can call
/// before its guard page), None on a plain thread. For diagnostics and tests: a
/// coroutine's stack does not grow (see `Builder::stack_size`).
///
/// ```
/// assert_eq!(goro::debug::stack_headroom(), None);
/// let left = goro::go!(goro::debug::stack_headroom).join().unwrap().unwrap();
/// assert!(left > 200 * 1024 && left < 256 * 1024);
/// ```
#[inline(never)]
pub fn stack_headroom() -> Option<usize> {
    let g = crate::sched::m::current_g_ptr();
    if g.is_null() {
        return None;
    }
    let here = &g as *const *const crate::sched::g::G as usize;
    // SAFETY: the running coroutine's G, alive while it runs (we are on its stack).
    let guard_hi = unsafe { (*g).guard.guard_hi };
    Some(here.saturating_sub(guard_hi))
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
