//! Snapshots of the scheduler for `debug::stats` and `debug::coroutines`: the numbers
//! sysmon's schedtrace line prints and the coroutine dump's entries, as values.
//!
//! Both read counters and walk the registry of live coroutines (`allgs.rs`) without
//! stopping anything, so a snapshot taken while coroutines run is not one instant:
//! its fields can disagree by whatever changed during the walk. Both cost
//! O(coroutines).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::g::GStatus;
use crate::wait::WaitReason;

/// Counts of the scheduler's state (what `GORO_SCHEDTRACE` prints, and more), from
/// [`stats`](crate::debug::stats).
///
/// Fields may be added: build one only through `stats`.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Ps in use ([`maxprocs`](crate::maxprocs)). Trace: `gomaxprocs`.
    pub gomaxprocs: usize,
    /// Ps with no M. Trace: `idleprocs`.
    pub idle_procs: usize,
    /// The runtime's threads: its live Ms, plus sysmon. Trace: `threads`.
    pub threads: usize,
    /// Ms looking for work (the spinning protocol). Trace: `spinningthreads`.
    pub spinning_threads: usize,
    /// Ms parked in the idle-M list. Trace: `idlethreads`.
    pub idle_threads: usize,
    /// Coroutines in the global run queue. Trace: `runqueue`.
    pub global_runq: usize,
    /// For each P in use, the coroutines in its local run queue, its `runnext` slot
    /// included. Trace: each `[Pn: ... runq= next=]`.
    pub local_runqs: Vec<usize>,
    /// Live coroutines ([`num_goroutines`](crate::num_goroutines)). Trace: `coroutines`.
    pub coroutines: usize,
    /// Coroutines running on an M (the callers of `stats` among them).
    pub running: usize,
    /// Coroutines queued to run.
    pub runnable: usize,
    /// Coroutines parked (on a channel, a lock, a timer, a socket, ...).
    pub waiting: usize,
    /// Coroutines inside [`blocking`](crate::blocking). Trace: `blockingcalls`.
    pub blocking: usize,
    /// Timers in the Ps' heaps (sleeps, deadlines, `Timer`s and tickers).
    pub timers: usize,
    /// Callers (coroutines or threads) parked on a socket, waiting for the netpoller.
    pub io_waiters: usize,
    /// Times `goro::net`'s `accept` backed off for want of descriptors or memory
    /// (EMFILE, ENFILE, ENOBUFS, ENOMEM) since the program started. Each is also said
    /// on stderr, at most once a second.
    pub accept_backoffs: u64,
    /// Ms whose P sysmon took while they waited on a futex (a std or parking_lot lock,
    /// a condition variable), not back in goro yet.
    pub futex_waiters_without_p: usize,
    /// Times sysmon left a P with an M waiting on a futex that other waiters were
    /// getting through (a lock convoy), rather than start another thread for it. See
    /// "Locks of std's" in docs/caveats.md.
    pub convoy_deferrals: u64,
}

/// What a coroutine is doing, in a [`CoroutineInfo`].
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CoroutineState {
    /// Queued to run.
    Runnable,
    /// Running on an M.
    Running,
    /// Parked: see its wait reason.
    Waiting,
    /// Inside [`blocking`](crate::blocking).
    Blocking,
}

impl CoroutineState {
    /// The state's name as the coroutine dump prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            CoroutineState::Runnable => "runnable",
            CoroutineState::Running => "running",
            CoroutineState::Waiting => "waiting",
            CoroutineState::Blocking => "blocking call",
        }
    }
}

/// One live coroutine, from [`coroutines`](crate::debug::coroutines).
///
/// Fields may be added: build one only through `coroutines`.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoroutineInfo {
    /// Its id ([`current_id`](crate::current_id)).
    pub id: u64,
    /// Its [`Builder::name`](crate::Builder::name), if it has one.
    pub name: Option<String>,
    /// What it is doing.
    pub state: CoroutineState,
    /// Why it waits: `Some` for a `Waiting` coroutine (`WaitReason::None` if nobody
    /// named the reason) and for a `Blocking` one (`WaitReason::BlockingCall`); `None`
    /// otherwise.
    pub wait_reason: Option<WaitReason>,
    /// How long it has been `Waiting` or `Blocking`, on the runtime's coarse clock
    /// (sysmon's rounds: accurate to a few milliseconds); `None` otherwise.
    pub waiting_for: Option<Duration>,
    /// Where it was spawned: the `go!`, `spawn`, `Builder::spawn`, `Scope::spawn` or
    /// `JoinSet::spawn` call, or the goro call that spawned it on the program's behalf
    /// (`WaitGroup::go`, `ErrGroup::go`, `after_func`, `Context::after_func`,
    /// `signal::notify`, `Command::output`). `None` only for a coroutine the runtime
    /// makes for itself.
    pub spawned_at: Option<&'static std::panic::Location<'static>>,
}

/// One registry entry, copied out under the shard lock (no allocation but the push).
struct Raw {
    id: u64,
    name: Option<Arc<str>>,
    spawned_at: Option<&'static std::panic::Location<'static>>,
    status: GStatus,
    reason: WaitReason,
    since: i64,
}

/// See [`crate::debug::coroutines`].
pub(crate) fn coroutines() -> Vec<CoroutineInfo> {
    let rt = super::rt();
    let mut raw = Vec::with_capacity(super::num_goroutines() + 16);
    rt.allgs.for_each(|g| {
        raw.push(Raw {
            id: g.id,
            name: g.guard.name.clone(),
            spawned_at: g.spawned_at,
            status: g.status(),
            reason: g.wait_reason(),
            // Relaxed: an informational timestamp, written by the G as it parks (see
            // `G::wait_since`); a stale one only skews the duration.
            since: g.wait_since.load(Ordering::Relaxed),
        })
    });
    let now = crate::timers::nanotime();
    let mut out: Vec<CoroutineInfo> = raw
        .into_iter()
        .filter_map(|r| {
            let state = match r.status {
                GStatus::Runnable => CoroutineState::Runnable,
                GStatus::Running => CoroutineState::Running,
                GStatus::Waiting => CoroutineState::Waiting,
                GStatus::Syscall => CoroutineState::Blocking,
                // Returned, about to leave the registry.
                GStatus::Dead => return None,
            };
            let waits = matches!(state, CoroutineState::Waiting | CoroutineState::Blocking);
            Some(CoroutineInfo {
                id: r.id,
                name: r.name.map(|n| n.to_string()),
                state,
                wait_reason: waits.then_some(match state {
                    CoroutineState::Blocking => WaitReason::BlockingCall,
                    _ => r.reason,
                }),
                waiting_for: waits
                    .then(|| Duration::from_nanos(now.saturating_sub(r.since).max(0) as u64)),
                spawned_at: r.spawned_at,
            })
        })
        .collect();
    out.sort_by_key(|c| c.id);
    out
}

/// See [`crate::debug::stats`].
pub(crate) fn stats() -> Stats {
    let rt = super::rt();
    let procs = rt.procs();
    let (mut running, mut runnable, mut waiting, mut blocking) = (0, 0, 0, 0);
    rt.allgs.for_each(|g| match g.status() {
        GStatus::Running => running += 1,
        GStatus::Runnable => runnable += 1,
        GStatus::Waiting => waiting += 1,
        GStatus::Syscall => blocking += 1,
        GStatus::Dead => {}
    });
    // Acquire: pairs with the Release in `resize_locked`: Ps below it are created.
    let created = rt.nprocs_created.load(Ordering::Acquire);
    let local_runqs = (0..procs.min(created))
        .map(|id| {
            let p = rt.p(id);
            p.stealer.len() + !p.runnext.peek().is_null() as usize
        })
        .collect();
    let timers = (0..created).map(|id| rt.p(id).timers.len()).sum();
    let convoy = super::convoy::counts();
    Stats {
        gomaxprocs: procs,
        idle_procs: rt.spinning.npidle(),
        // Relaxed: a count for display (see the field); + 1 for sysmon, as the trace.
        threads: rt.nm_alive.load(Ordering::Relaxed) + 1,
        spinning_threads: rt.spinning.nmspinning(),
        idle_threads: rt.sched.lock().idle_ms.len(),
        global_runq: rt.injector.len(),
        local_runqs,
        coroutines: super::num_goroutines(),
        running,
        runnable,
        waiting,
        blocking,
        timers,
        io_waiters: rt.netpoll.waiters(),
        // Relaxed: a count for display (see the field).
        accept_backoffs: crate::net::socket::ACCEPT_BACKOFFS.load(Ordering::Relaxed),
        futex_waiters_without_p: convoy.0,
        convoy_deferrals: convoy.1,
    }
}
