//! The G/M/P scheduler.
//!
//! # Glossary
//!
//! - **G**: a coroutine ("goroutine"): a corosensei coroutine on a pooled stack, with an
//!   id, an optional name and a park/ready handshake cell ([`g`]). A G is owned by
//!   exactly one place at a time: a run queue, a P's `runnext` slot, a waiter list (as
//!   an `Unparker`), or the M running it.
//! - **M**: an OS thread ([`m`]). An M runs Gs only while it holds a P. Its scheduler
//!   loop runs on the thread's own stack (Go's g0); going from one G to the next is a
//!   suspend back to that loop and a resume of the next G, because corosensei switches
//!   are asymmetric.
//! - **P**: a processor, the right to run coroutines ([`p`]). `GORO_MAXPROCS` of them.
//!   Each has a local FIFO run queue (a crossbeam-deque `Worker` whose `Stealer` is
//!   published), a `runnext` slot, a stack cache and a scheduling tick.
//!
//! # Finding work (`schedule`, `find_runnable`)
//!
//! In order: once every [`GLOBAL_CHECK_TICKS`] ticks, and right after sysmon ended a
//! slice, the global queue first (so it cannot starve; see "time slices"); `runnext`;
//! the local queue; the global queue; then, if few enough Ms
//! are spinning already, stealing: [`STEAL_ROUNDS`] rounds over the other Ps from a
//! random start, half a victim's queue at a time, and in the last round its `runnext`.
//! Idle and spinning Ms read the **work summary** first — one bit per P that may have
//! queued work, plus the global queue's emptiness — so an idle runtime costs nothing
//! and a busy one does not make its idle Ps probe every P's queue (the SHARED_RUNQ
//! lesson: idle cores polling a shared structure become the contention).
//!
//! # The runnext steal back-off
//!
//! A G readied by the running G goes to `runnext` and inherits the rest of the time
//! slice: this makes producer/consumer pairs run back to back on one P. A thief takes a
//! victim's `runnext` only after the victim's queue, and only when the victim P is
//! *running* does it first back off for [`RUNNEXT_BACKOFF_NS`] — the victim is likely
//! about to block and run that G itself. The back-off spins with a pause instruction and
//! re-checks the slot; it never sleeps, because Linux timer slack stretches a 3 µs
//! nanosleep past 50 µs (Go's `usleep(3)` there is why its hand-off to an idle P takes
//! ~70 µs). A victim that is idle, or whose M is in a blocking call, cannot run the G:
//! it is taken at once (Go commit 868c8b37).
//!
//! # Time slices
//!
//! A G that starts from the local or global queue starts a slice: the P's tick moves.
//! A G from `runnext` inherits the running slice, and the tick stays. sysmon watches
//! each P's tick and asks the running G to yield once one tick has lasted
//! `PREEMPT_AFTER_NS` (10 ms), so a slice ends on *time*, however many hand-offs a
//! ping-ponging pair makes within it, and whatever work each does (Go: `runqput(next)`
//! and `execute(inheritTime)`, ended by sysmon's `preemptone`). (Before, a count of 64
//! hand-offs ended a slice: a pair that hands off every microsecond lost its P after
//! 64 µs, one that hands off every millisecond kept it for 10 ms, 150-600x the CPU.)
//!
//! Where a G that stops running goes (Go: `goschedImpl`, `gopreempt_m`):
//!
//! - preempted (sysmon's request, seen at a preemption point): behind the global
//!   queue, and the P takes the global queue's head next, so whatever waits there
//!   (coroutines readied from plain threads, by the poller, by a retired P, returning
//!   from a blocking call without a P) runs when the slice it waited behind ends;
//! - yielded (`yield_now`): behind the global queue, as Go's `Gosched`, but for the
//!   fast path: with the global queue empty, at the local queue's tail, which is where
//!   the global queue would have it run too and costs no shared queue;
//! - in both cases with an empty global queue: the local tail (so a lone pair on a P
//!   with nothing else to do just starts another slice).
//!
//! goro departs from Go in one place: after a preemption the P looks at the global
//! queue *first*, where Go waits for its 61st tick. Ticks move once per slice while
//! pairs inherit, so Go's global queue can wait 61 slices behind a P whose local queue
//! never empties (three pairs taking turns); here it waits for the slices of the Gs
//! queued globally before it.
//!
//! # The spinning protocol
//!
//! An M with a P and no work *spins* (looks for work to steal) before it gives its P
//! back, but at most half of the busy Ps' worth of Ms spin at once. Two rules keep work
//! from being stranded while Ms sleep:
//!
//! 1. *Publish, then check.* Whoever queues work (spawn, ready, timers) first makes it
//!    visible, then runs [`wakep`]: if there is an idle P and no spinning M, it starts
//!    one (an idle M, or a new thread) with that P.
//! 2. *Leave spinning, then re-check.* A spinning M that found nothing puts its P on
//!    the idle list, drops the spinning count, and only then looks at every queue (the
//!    summary first) once more; if something is there it takes an idle P back and
//!    spins again.
//!
//! The two sides form a Dekker pair with a `SeqCst` fence on each side
//! ([`idle::Spinning`]): either the submitter sees no spinning M and wakes one, or the
//! M that stopped spinning sees the work. `tests/loom_spinning.rs` checks it. A
//! spinning M that finds work stops spinning and wakes another spinner if it was the
//! last one (`reset_spinning`), so a burst of work fans out over the idle Ps.
//!
//! # Parking an M
//!
//! An M without work gives its P back and parks on its own parker until `startm` hands
//! it a P. Ms are created on demand by `startm`; an M idle for `GORO_IDLE_M_EXIT_MS`
//! while more Ms exist than the Ps need leaves the pool (`M::stopm`): its scheduler
//! stack unwinds to `m_loop`, and its thread frees its `M` and its signal stack and
//! ends.
//!
//! # Lock order
//!
//! Every lock of the runtime has a rank, and the whole order is written down, with
//! what each lock may take under it, in `lockrank.rs`; debug builds check every
//! acquisition against it. For the scheduler: `Runtime::sched` (idle Ps and Ms) takes
//! only the global stack pool under it; run queues and `runnext` are lock-free.
//!
//! # G ownership and migration
//!
//! A G moves between Ms through run queues; the M that takes it is its sole owner until
//! the G yields, parks or ends. Moving a suspended coroutine to another thread is the
//! runtime's assertion, not something the compiler checks (corosensei's `Coroutine` is
//! deliberately not `Send`): see docs/decisions/0001-coroutines-migrate-between-threads.md
//! and, for what users must not hold across a blocking call, docs/caveats.md. The
//! runtime's own per-M state is re-read after every switch through `#[inline(never)]`
//! accessors ([`m::current_m`]) and never cached across one.

pub(crate) mod allgs;
pub(crate) mod census;
pub(crate) mod convoy;
pub(crate) mod dump;
pub(crate) mod g;
pub(crate) mod idle;
pub(crate) mod lockos;
pub(crate) mod m;
pub(crate) mod p;
pub(crate) mod panics;
pub(crate) mod park;
pub(crate) mod procfs;
pub(crate) mod runq;
pub(crate) mod scan;
pub(crate) mod schedule;
pub(crate) mod stats;
pub(crate) mod syscall;
pub(crate) mod sysmon;
pub(crate) mod timers;
pub(crate) mod traceback;

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use crossbeam_deque::Injector;

use crate::config::{Config, ConfigError};
use crate::lockrank::{Mutex, Rank};
use crate::netpoll::Netpoll;
use crate::stack::pool::StackPool;
use g::GRef;
use idle::{pidleput_locked, DeepSleep, SchedLocked, Spinning};
use p::{PStatus, P};
use runq::WorkSummary;

pub(crate) use park::park_current_g;
pub(crate) use schedule::{ready, spawn_g, wakep, yield_now};

pub use crate::config::MAX_PROCS;
/// Every this many scheduling ticks a P looks at the global queue before its own (Go:
/// `schedtick%61`; also right after a preemption, see "time slices").
pub(crate) const GLOBAL_CHECK_TICKS: u32 = 61;
/// Rounds of stealing over all Ps before a spinning M gives up.
pub(crate) const STEAL_ROUNDS: usize = 4;
/// How long a thief waits before taking the `runnext` G of a running P.
pub(crate) const RUNNEXT_BACKOFF_NS: u64 = 3_000;
/// How often a backing-off thief re-reads the victim's `runnext`.
pub(crate) const BACKOFF_CHECK_NS: u64 = 1_000;
/// Pause between two steal passes of a spinning M.
pub(crate) const SPIN_PASS_GAP_NS: u64 = 2_000;
/// How long a spinning M keeps looking for work while another P is busy before it
/// parks. Go's spinning Ms end up sleeping ~50 µs in their runnext back-off (a 3 µs
/// usleep stretched by timer slack), which keeps them spinning that long; goro spins
/// for the same span on purpose, with the back-off itself kept short.
pub(crate) const SPIN_BUDGET_NS: u64 = 50_000;
/// Goroutine ids a P takes from the global counter at once.
pub(crate) const GOID_BATCH: u64 = 16;
/// How far the Ms may fall behind a plain thread's spawns (coroutines waiting in the
/// global queue; a P's batch taken from there, at most 32, is not counted) before its
/// spawns make their coroutines themselves. Below it, the M
/// that first runs a coroutine makes it (the fault on its stack's top page); above
/// it, the spawner's bodies would pile up in the heap (a burst from `main` at 2 Ps ran
/// 40 000-55 000 ahead, +30-45 B of heap per parked coroutine), and the coroutines
/// would start ever later. Go's local run queue holds as many; 256-1 024 spawned
/// fastest here (docs/benchmarks.md).
pub(crate) const UNMADE_BACKLOG: usize = 256;

/// Prints a fatal scheduler error naming the function and aborts. A panic cannot
/// unwind across a stack switch, and a broken scheduler invariant is not recoverable.
macro_rules! fatal {
    ($($arg:tt)*) => {{
        $crate::sched::fatal_error(format_args!($($arg)*))
    }};
}
pub(crate) use fatal;

/// Set in the child of a `fork` of a process whose runtime had started: the runtime's
/// threads (its Ms, sysmon, the poller's M) stayed in the parent, so nothing would
/// ever run a coroutine here or wake a waiter (see [`not_in_forked_child`]).
static FORKED_CHILD: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Panics in a forked child (see [`FORKED_CHILD`]): the calls that would wait for a
/// runtime thread (a spawn, a plain thread's park) check it, so a child that uses goro
/// fails at once instead of hanging. Go's rule is the same: after `fork`, exec.
#[inline]
pub(crate) fn not_in_forked_child() {
    // Relaxed: set before anything else the child runs, by its only thread.
    if FORKED_CHILD.load(Ordering::Relaxed) {
        forked_child();
    }
}

#[cold]
#[inline(never)]
fn forked_child() -> ! {
    panic!(
        "goro: this process is a child of fork(): goro's runtime (its threads, poller and \
         sysmon) stayed in the parent, so a coroutine here would never run. A forked \
         child may only exec (std::process::Command does it for you)"
    )
}

/// What to add to a fatal error of the runtime's start for `e`: a hint when the
/// process is out of descriptors (or the system is), else nothing.
pub(crate) fn scarcity(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EMFILE | libc::ENFILE) => {
            " (the process is out of file descriptors before goro started: raise \
             `ulimit -n`, or start the runtime before taking them)"
        }
        _ => "",
    }
}

/// The message of a panic payload, for reports.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

#[cold]
pub(crate) fn fatal_error(args: std::fmt::Arguments<'_>) -> ! {
    eprintln!("goro: fatal error: {args}");
    std::process::abort()
}

/// The process-wide scheduler state.
pub(crate) struct Runtime {
    /// All Ps that were ever created: slots `[0, nprocs_created)` are initialised.
    /// Leaked, so that Ps are `'static` (the runtime lives as long as the process).
    pub(crate) allp: &'static [OnceLock<P>],
    /// How many slots of `allp` are initialised. Written under `sched`; read anywhere.
    pub(crate) nprocs_created: AtomicUsize,
    /// Ps in use: `[0, gomaxprocs)`. Written under `sched`; read anywhere (a stale
    /// value only delays a P's retirement by one schedule).
    pub(crate) gomaxprocs: AtomicUsize,
    /// The global run queue.
    pub(crate) injector: Injector<GRef>,
    /// Which Ps may have queued work (see "work summary").
    pub(crate) summary: WorkSummary,
    /// Spinning and idle counts (see "the spinning protocol").
    pub(crate) spinning: Spinning,
    /// sysmon's deep sleep flag (see "the deep-sleep Dekker pair").
    pub(crate) deep_sleep: DeepSleep,
    /// Idle Ps and idle Ms.
    pub(crate) sched: Mutex<SchedLocked>,
    /// Coroutine stacks.
    pub(crate) stacks: StackPool,
    /// Next unallocated goroutine id (batches of GOID_BATCH go to Ps). Taken with a
    /// fetch_add by spawners (Relaxed: only uniqueness matters); nobody else reads it.
    pub(crate) next_goid: AtomicU64,
    /// Ms created so far (also the next M's id). Taken with a fetch_add by `newm`
    /// (Relaxed: only uniqueness matters); nobody else reads it.
    pub(crate) nm: AtomicUsize,
    /// Coroutines spawned from plain threads (those spawned on a P are counted by the
    /// P, see `P::gcount`). Added to by `spawn_g`; read by `num_goroutines` (Relaxed
    /// both: a count for the trace and the deadlock check's progress mark).
    pub(crate) nextern_spawned: AtomicI64,
    /// The netpoller: where the last idle M sleeps until the earliest timer.
    pub(crate) netpoll: Netpoll<GRef>,
    /// Round-robin cursor for timers set from plain threads: bumped and read by
    /// `home_p` only (Relaxed).
    pub(crate) timer_rr: AtomicUsize,
    /// Every live coroutine (for the dump and deadlock detection).
    pub(crate) allgs: allgs::AllGs,
    /// Dead Gs the Ps' lists overflowed into (Go: sched.gFree; see `GShells`).
    pub(crate) g_free: g::GFree,
    /// A clock sysmon advances on every round: cheap to read where precision does not
    /// matter (how long a coroutine has been parked). Written by sysmon only; read by
    /// parking coroutines (Relaxed: a stale time only skews the dump's durations).
    pub(crate) coarse_now: AtomicI64,
    /// Ms whose threads are running (`nm` minus those that left the pool). Written by
    /// `newm` and by an M's thread as it ends. Relaxed everywhere: only the idle-M exit
    /// heuristic, the dump and the trace read it.
    pub(crate) nm_alive: AtomicUsize,
    /// The shared part of every M whose thread runs (for the dump: which coroutine
    /// runs without its P). Pushed by an M as it starts, removed as it ends.
    pub(crate) allm: Mutex<Vec<Arc<m::MShared>>>,
    /// `GORO_SCHEDTRACE`, `GORO_DEADLOCK`, `GORO_IDLE_M_EXIT_MS` (see config.rs).
    pub(crate) schedtrace_ms: Option<u64>,
    pub(crate) deadlock_check: bool,
    pub(crate) idle_m_exit: std::time::Duration,
    /// `GORO_MAX_THREADS`: the most Ms alive at once (see `newm`).
    pub(crate) max_threads: usize,
    /// `GORO_TOKIO_WORKERS` (see `bridge_support`).
    pub(crate) tokio_workers: usize,
    /// `GORO_DETACHED_PANIC` (see `panics::unjoined_panic`).
    pub(crate) detached_panic_exits: bool,
    /// `GORO_HOOKS`: whether the `hooks` feature parks coroutines (read by the hooks
    /// as a coroutine first reaches one).
    #[cfg(feature = "hooks")]
    pub(crate) hooks: bool,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// The runtime, initialised on first use from the environment.
#[inline]
pub(crate) fn rt() -> &'static Runtime {
    match RUNTIME.get() {
        Some(rt) => rt,
        None => init(),
    }
}

/// The runtime, from code that runs only on an M (the scheduler loop, a P's owner):
/// one load, without `rt`'s check for a first use, on the scheduler's hot paths.
#[inline]
pub(crate) fn rt_started() -> &'static Runtime {
    // Relaxed: `newm` stores the pointer before it spawns each M's thread, and the
    // spawn orders the store before everything the thread does.
    let rt = STARTED.load(Ordering::Relaxed);
    debug_assert!(!rt.is_null(), "rt_started off an M");
    // SAFETY: `newm` sets it, before any M exists, to the runtime in `RUNTIME`, which
    // lives forever; callers run on an M.
    unsafe { &*rt }
}

/// `RUNTIME`'s value, published by `newm` for `rt_started`.
static STARTED: std::sync::atomic::AtomicPtr<Runtime> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Publishes the runtime for `rt_started` (idempotent; `newm` calls it before it
/// spawns a thread).
pub(crate) fn publish_started(rt: &'static Runtime) {
    // Relaxed: the thread spawn that follows orders it (see `rt_started`).
    STARTED.store(rt as *const Runtime as *mut Runtime, Ordering::Relaxed);
}

#[cold]
fn init() -> &'static Runtime {
    init_once()
}

/// The implicit start: the environment's configuration, and a panic naming the
/// variable if it is bad (see config.rs).
fn init_once() -> &'static Runtime {
    RUNTIME.get_or_init(|| {
        let cfg = Config::from_env().unwrap_or_else(|e| panic!("{e}"));
        let usable = cfg.check().unwrap_or_else(|e| panic!("{e}"));
        build(cfg, usable)
    })
}

impl Config {
    /// Starts the runtime with this configuration. Fails with
    /// [`ConfigError::Invalid`] naming the first out-of-range setting, or with
    /// [`ConfigError::AlreadyStarted`] if the runtime is already running (any goro
    /// call starts it, from the environment, if `init` has not: see [`Config`]).
    pub fn init(self) -> Result<(), ConfigError> {
        let usable = self.check()?;
        let mut cfg = Some(self);
        RUNTIME.get_or_init(|| match cfg.take() {
            Some(c) => build(c, usable),
            None => fatal!("Config::init: the configuration was taken twice"),
        });
        match cfg {
            None => Ok(()),
            Some(_) => Err(ConfigError::AlreadyStarted),
        }
    }
}

/// Builds the runtime from a checked configuration (`usable`: its stack size, checked).
fn build(cfg: Config, usable: usize) -> Runtime {
    extern "C" fn in_child() {
        // Relaxed: the child has one thread, this one.
        FORKED_CHILD.store(true, Ordering::Relaxed);
    }
    // SAFETY: registers a handler that only stores to an atomic (async-signal-safe).
    unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    crate::stack::overflow::install();
    panics::install();
    crate::membarrier::init(cfg.membarrier);
    let rt = Runtime {
        allp: Box::leak((0..MAX_PROCS).map(|_| OnceLock::new()).collect()),
        nprocs_created: AtomicUsize::new(0),
        gomaxprocs: AtomicUsize::new(0),
        injector: Injector::new(),
        summary: WorkSummary::new(),
        spinning: Spinning::new(),
        deep_sleep: DeepSleep::new(),
        sched: Mutex::new(Rank::Sched, SchedLocked::default()),
        stacks: StackPool::new(usable),
        next_goid: AtomicU64::new(1),
        nm: AtomicUsize::new(0),
        nextern_spawned: AtomicI64::new(0),
        netpoll: Netpoll::new()
            .unwrap_or_else(|e| fatal!("init: cannot create the netpoller: {e}{}", scarcity(&e))),
        timer_rr: AtomicUsize::new(0),
        allgs: allgs::AllGs::new(),
        g_free: g::GFree::new(),
        coarse_now: AtomicI64::new(crate::timers::nanotime()),
        nm_alive: AtomicUsize::new(0),
        allm: Mutex::new(Rank::AllMs, Vec::new()),
        schedtrace_ms: cfg.schedtrace_ms().unwrap_or(None),
        deadlock_check: cfg.deadlock_check,
        idle_m_exit: std::time::Duration::from_millis(cfg.idle_m_exit_ms),
        tokio_workers: cfg.tokio_workers,
        detached_panic_exits: cfg.detached_panic_exits,
        max_threads: cfg.max_threads,
        #[cfg(feature = "hooks")]
        hooks: cfg.hooks,
    };
    rt.resize_locked(&mut rt.sched.lock(), cfg.maxprocs);
    rt
}

impl Runtime {
    /// The P with this id. Only for ids below `nprocs_created`.
    #[inline]
    pub(crate) fn p(&self, id: usize) -> &'static P {
        match self.allp[id].get() {
            Some(p) => p,
            None => fatal!("Runtime::p: P {id} was never created"),
        }
    }

    pub(crate) fn procs(&self) -> usize {
        // Relaxed: see the field (a stale value only delays a retirement by one schedule).
        self.gomaxprocs.load(Ordering::Relaxed)
    }

    /// Makes `[0, n)` the Ps in use (Go: procresize). `sched` must be held.
    ///
    /// New Ps are created; idle Ps at or above `n` are taken off the idle list and
    /// marked dead; dead Ps below `n` come back idle. A P above `n` that an M holds is
    /// retired by that M at its next scheduling point (`retire_p`).
    fn resize_locked(&self, s: &mut SchedLocked, n: usize) {
        // Relaxed: only written under `sched`, which we hold.
        let created = self.nprocs_created.load(Ordering::Relaxed);
        for id in created..n {
            let _ = self.allp[id].set(P::new(id));
        }
        if n > created {
            // Release: pairs with the Acquire loads of thieves that then index allp.
            self.nprocs_created.store(n, Ordering::Release);
        }
        self.gomaxprocs.store(n, Ordering::Relaxed);
        // Relaxed status changes: idle and dead Ps change hands under `sched`, held here.
        s.idle_ps.retain(|p| {
            if p.id >= n {
                p.transition(PStatus::Idle, PStatus::Dead, Ordering::Relaxed);
                self.spinning.pidle_dec();
                false
            } else {
                true
            }
        });
        for id in 0..n {
            let p = self.p(id);
            if p.status() == PStatus::Dead {
                // Relaxed: under `sched`, as above.
                p.transition(PStatus::Dead, PStatus::Idle, Ordering::Relaxed);
                pidleput_locked(s, &self.spinning, p);
            }
        }
    }
}

/// The number of Ps, `GORO_MAXPROCS` unless changed by [`set_maxprocs`].
pub fn maxprocs() -> usize {
    rt().procs()
}

/// Sets the number of Ps and returns the previous value (Go's `runtime.GOMAXPROCS`).
///
/// `n` is clamped to `1..=MAX_PROCS`... except that 0 changes nothing and only reports
/// the current value, as in Go. Ps above the new count are retired at their next
/// scheduling point: their queued coroutines move to the global queue.
pub fn set_maxprocs(n: usize) -> usize {
    let rt = rt();
    if n == 0 {
        return rt.procs();
    }
    let n = n.min(MAX_PROCS);
    let prev = {
        let mut s = rt.sched.lock();
        let prev = rt.procs();
        rt.resize_locked(&mut s, n);
        prev
    };
    if n > prev {
        // New idle Ps: let them help with whatever is queued.
        wakep();
    }
    prev
}

/// The id of the running coroutine, or `None` on a plain thread.
pub fn current_id() -> Option<u64> {
    let g = m::current_g_ptr();
    if g.is_null() {
        None
    } else {
        // SAFETY: the running G is alive while it runs (its M holds it).
        Some(unsafe { (*g).id })
    }
}

/// The name of the running coroutine (its [`Builder::name`](crate::Builder::name); None
/// if it has none), or on a plain thread the thread's name
/// (`std::thread::current().name()`, `Some("main")` on the main thread). Inside a
/// [`blocking`](crate::blocking) call it is still the coroutine's name. Allocates the
/// copy it returns.
///
/// ```
/// let h = goro::Builder::new()
///     .name("worker")
///     .spawn(goro::current_name)
///     .unwrap();
/// assert_eq!(h.join().unwrap().as_deref(), Some("worker"));
/// assert_eq!(goro::spawn(goro::current_name).join().unwrap(), None);
/// ```
pub fn current_name() -> Option<String> {
    let g = m::running_g_ptr();
    if g.is_null() {
        return std::thread::current().name().map(String::from);
    }
    // SAFETY: the G whose code runs on this thread is alive while it runs (its M holds
    // it); its name never changes.
    unsafe { (*g).guard.name.as_deref().map(String::from) }
}

/// The coroutine-local table (`local.rs`) of the coroutine whose code runs on this
/// thread, also inside a `blocking` call; null on a plain thread (or on an M's
/// scheduler stack). Valid, and this thread's, until the coroutine next switches.
pub(crate) fn current_locals() -> *const std::cell::RefCell<crate::local_table::LocalTable> {
    let g = m::running_g_ptr();
    if g.is_null() {
        return std::ptr::null();
    }
    // SAFETY: the G is alive while its code runs on this thread (its M holds it);
    // taking a field's address reads nothing.
    unsafe { std::ptr::addr_of!((*g).locals) }
}

/// `GORO_TOKIO_WORKERS` (see `bridge_support`).
pub(crate) fn tokio_workers() -> usize {
    rt().tokio_workers
}

/// Whether the calling thread is one of the runtime's Ms.
pub(crate) fn on_m() -> bool {
    m::current_m().is_some()
}

/// The spinning half of `sync_support::can_spin`: another P must be running (not all
/// idle or spinning) and the caller's own queue empty (a plain thread has none).
pub(crate) fn can_spin_now() -> bool {
    let rt = rt();
    if rt.procs() <= rt.spinning.npidle() + rt.spinning.nmspinning() + 1 {
        return false;
    }
    match m::current_m().and_then(|m| m.p()) {
        Some(p) => runq::runq_empty(&p),
        None => true,
    }
}

/// The running G as a new strong reference, or `None` on a plain thread.
pub(crate) fn current_g_arc() -> Option<GRef> {
    let g = m::current_g_ptr();
    if g.is_null() {
        return None;
    }
    // SAFETY: `g` came from `Arc::as_ptr` of the GRef its M holds while the G runs, so
    // the allocation is live and bumping its count makes a valid new Arc.
    unsafe {
        Arc::increment_strong_count(g);
        Some(Arc::from_raw(g))
    }
}

/// Live coroutines (spawned and not finished).
pub fn num_goroutines() -> usize {
    let rt = rt();
    // Acquire: pairs with the Release in `resize_locked`: Ps below `n` are created.
    let n = rt.nprocs_created.load(Ordering::Acquire);
    // Relaxed: counts, summed without a lock; the result is a snapshot anyway.
    let on_ps: i64 = (0..n)
        .map(|id| rt.p(id).gcount.load(Ordering::Relaxed))
        .sum();
    (rt.nextern_spawned.load(Ordering::Relaxed) + on_ps).max(0) as usize
}
