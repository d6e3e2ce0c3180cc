//! The contract between `compare`'s orchestrator and its contenders: the workloads,
//! their parameters and what each one measures, and the one line a worker prints.
//!
//! Every contender (goro, may, tokio, threads, Go) implements every workload with the
//! SAME parameters and measures the SAME quantity, as defined on [`Workload`]. A worker
//! is one process running one workload once on one contender:
//!
//! ```text
//! compare --worker CONTENDER WORKLOAD     (Rust contenders)
//! goro-compare-go WORKLOAD                (the Go program in bench/go/compare/)
//! ```
//!
//! and prints exactly one line on stdout, as JSON, last:
//!
//! ```text
//! {"value": 123.4}                         the figure, in the workload's unit
//! {"skip": "why this contender cannot run it"}
//! {"value": 123.4, "note": "..."}           with a footnote (see [`note`])
//! {"value": 123.4, "also": {"NAME": 5.6}}   with the figures of companion rows
//! ```
//!
//! Anything else (progress, diagnostics) goes to stderr. A worker exits 0 in both cases;
//! a non-zero exit or a missing line is a failure the table reports as such. Workers use
//! `GORO_MAXPROCS` (default 2) as their parallelism: goro's Ps, tokio's
//! `worker_threads`, may's workers, Go's `GOMAXPROCS` (threads have no such knob).
//! Each worker finishes in about 2 s or less on a 2-core machine.
//!
//! The echo workload is different: its worker is a server (`compare --serve CONTENDER`,
//! `goro-compare-go serve`) that binds 127.0.0.1:0, prints `LISTENING <addr>` on stdout,
//! serves until stdin is closed (or SIGTERM), then exits 0; the orchestrator measures it
//! with `echo_load` (the same client for everyone).

#![allow(dead_code)]

use std::time::Duration;

/// Everything `compare` measures. Parameters are fixed here so that every contender
/// runs the same thing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A chain of [`CHAIN_HOPS`] tasks linked by unbuffered (rendezvous) channels; each
    /// task receives from its left and sends value+1 to its right. Built once, then
    /// [`CHAIN_TOKENS`] tokens are passed through it one after another (the next one
    /// enters when the previous one has left the tail). Figure: ns per hop
    /// (elapsed over the tokens / (tokens * hops)), chain construction not timed.
    /// Contenders without rendezvous channels use capacity 1 and say so in `note`.
    Chain,
    /// As `Chain` with capacity-1 channels.
    ChainBuf,
    /// The concurrent prime sieve (Go's sieve.go): a generator task feeding 2, 3, 4, ...
    /// into a chain of filter tasks, one per prime found, over capacity-0 channels
    /// (capacity 1 where not available), until [`SIEVE_PRIMES`] primes are out (the
    /// last must be 48611). Figure: ms for the whole run, task creation included.
    Sieve,
    /// Two tasks bounce a token over two unbuffered channels, [`PINGPONG_ROUNDS`]
    /// round trips. Figure: ns per round trip.
    PingPong,
    /// Spawn [`SPAWN_TASKS`] tasks that each return their index, then join them all in
    /// order, summing the results (checked). Figure: ns per task (spawn + run + join).
    SpawnJoin,
    /// [`YIELD_TASKS_PER_WORKER`] tasks per worker thread each yield
    /// [`YIELD_COUNT`] times (goro::yield_now, tokio::task::yield_now, may's
    /// coroutine::yield_now, std::thread::yield_now, runtime.Gosched). Figure: ns per
    /// yield (elapsed / total yields).
    Yield,
    /// N tasks each lock the runtime's own mutex (goro::sync::Mutex,
    /// tokio::sync::Mutex, may::sync::Mutex, std::sync::Mutex, sync.Mutex),
    /// increment a shared counter and unlock, [`MUTEX_OPS`] / N times each; the final
    /// count is checked. Figure: ns per lock/unlock (elapsed / MUTEX_OPS).
    Mutex2,
    /// As `Mutex2` with 8 tasks.
    Mutex8,
    /// As `Mutex2` with 64 tasks.
    Mutex64,
    /// Sleep lateness under CPU load: 2 load tasks per worker each loop "spin 50 µs on
    /// the clock, then yield" (same yield as `Yield`) until told to stop, while one
    /// task does [`SLEEP_COUNT`] sleeps of 1 ms (goro::time::sleep, tokio::time::sleep,
    /// may::coroutine::sleep, std::thread::sleep, time.Sleep), each timed. Figure: mean
    /// lateness in µs (measured duration - 1 ms).
    SleepLateness,
    /// Spawn-and-park (issue 17): the driver task spawns `n` tasks (`n` one of
    /// [`SPAWN_PARK_N`]), each parked on its own channel receive (rendezvous where
    /// the contender has one, else a oneshot); once all are parked, it sends to each
    /// in spawn order and joins them all. One run gives three figures, three rows:
    /// [`ParkFigure::Spawn`] is the spawn loop's ns per task (the tasks start and
    /// park meanwhile on the other workers); [`ParkFigure::WakeExit`] ns per task from
    /// the first send to the last join; [`ParkFigure::Rss`] bytes of RSS per parked
    /// task (RSS with all parked - RSS before the first spawn; /proc/self/statm).
    /// Plain threads use 64 KiB stacks here, and skip if the OS refuses that many
    /// threads. The orchestrator runs the `Spawn` row; the other two are its
    /// companions, filled from the same run (`also` in the result line).
    SpawnPark { n: usize, figure: ParkFigure },
    /// An echo server measured by `echo_load` at [`ECHO_CONNS`] connections, 64-byte
    /// messages, [`ECHO_SECS`] s after [`ECHO_WARMUP_SECS`] s warm-up. Figure:
    /// requests/s (the only one where higher is better).
    Echo,
}

pub const CHAIN_HOPS: usize = 10_000;
pub const CHAIN_TOKENS: usize = 100;
pub const SIEVE_PRIMES: usize = 5_000;
pub const SIEVE_LAST_PRIME: u64 = 48_611;
pub const PINGPONG_ROUNDS: usize = 200_000;
pub const SPAWN_TASKS: usize = 100_000;
pub const YIELD_TASKS_PER_WORKER: usize = 2;
pub const YIELD_COUNT: usize = 200_000;
pub const MUTEX_OPS: usize = 400_000;
pub const SLEEP_COUNT: usize = 300;
pub const SPAWN_PARK_N: [usize; 3] = [10_000, 100_000, 1_000_000];
pub const ECHO_CONNS: usize = 50;
pub const ECHO_SECS: f64 = 2.0;
pub const ECHO_WARMUP_SECS: f64 = 0.5;

/// The three figures of one spawn-and-park run (see [`Workload::SpawnPark`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParkFigure {
    Spawn,
    WakeExit,
    Rss,
}

const fn park(n: usize, figure: ParkFigure) -> Workload {
    Workload::SpawnPark { n, figure }
}

impl Workload {
    pub const ALL: [Workload; 20] = [
        Workload::Chain,
        Workload::ChainBuf,
        Workload::Sieve,
        Workload::PingPong,
        Workload::SpawnJoin,
        Workload::Yield,
        Workload::Mutex2,
        Workload::Mutex8,
        Workload::Mutex64,
        Workload::SleepLateness,
        park(10_000, ParkFigure::Spawn),
        park(10_000, ParkFigure::WakeExit),
        park(10_000, ParkFigure::Rss),
        park(100_000, ParkFigure::Spawn),
        park(100_000, ParkFigure::WakeExit),
        park(100_000, ParkFigure::Rss),
        park(1_000_000, ParkFigure::Spawn),
        park(1_000_000, ParkFigure::WakeExit),
        park(1_000_000, ParkFigure::Rss),
        Workload::Echo,
    ];

    /// The name on the command line, in the table and in the JSON.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Chain => "chain",
            Workload::ChainBuf => "chainbuf",
            Workload::Sieve => "sieve",
            Workload::PingPong => "pingpong",
            Workload::SpawnJoin => "spawn_join",
            Workload::Yield => "yield",
            Workload::Mutex2 => "mutex2",
            Workload::Mutex8 => "mutex8",
            Workload::Mutex64 => "mutex64",
            Workload::SleepLateness => "sleep_lateness",
            Workload::SpawnPark { n, figure } => {
                use ParkFigure::*;
                match (n, figure) {
                    (10_000, Spawn) => "spawn_park_10k",
                    (10_000, WakeExit) => "spawn_park_10k_wake",
                    (10_000, Rss) => "spawn_park_10k_rss",
                    (100_000, Spawn) => "spawn_park_100k",
                    (100_000, WakeExit) => "spawn_park_100k_wake",
                    (100_000, Rss) => "spawn_park_100k_rss",
                    (1_000_000, Spawn) => "spawn_park_1m",
                    (1_000_000, WakeExit) => "spawn_park_1m_wake",
                    (1_000_000, Rss) => "spawn_park_1m_rss",
                    _ => "spawn_park_unlisted",
                }
            }
            Workload::Echo => "echo",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The unit of the figure.
    pub fn unit(self) -> &'static str {
        match self {
            Workload::Chain | Workload::ChainBuf => "ns/hop",
            Workload::Sieve => "ms",
            Workload::PingPong => "ns/round trip",
            Workload::SpawnJoin => "ns/task",
            Workload::Yield => "ns/yield",
            Workload::Mutex2 | Workload::Mutex8 | Workload::Mutex64 => "ns/op",
            Workload::SleepLateness => "µs late",
            Workload::SpawnPark { figure, .. } => match figure {
                ParkFigure::Spawn => "ns/spawn",
                ParkFigure::WakeExit => "ns/wake+exit",
                ParkFigure::Rss => "B/parked",
            },
            Workload::Echo => "req/s",
        }
    }

    /// Whether a bigger figure is better (only throughput).
    pub fn higher_is_better(self) -> bool {
        self == Workload::Echo
    }

    /// The workload whose run measures this one's figure: itself, except for the
    /// companions of a spawn-and-park run.
    pub fn primary(self) -> Workload {
        match self {
            Workload::SpawnPark { n, .. } => park(n, ParkFigure::Spawn),
            w => w,
        }
    }

    /// The figures a run of this (primary) workload gives besides its own.
    pub fn companions(self) -> Vec<Workload> {
        match self {
            Workload::SpawnPark {
                n,
                figure: ParkFigure::Spawn,
            } => vec![park(n, ParkFigure::WakeExit), park(n, ParkFigure::Rss)],
            _ => Vec::new(),
        }
    }

    /// Tasks in the mutex workloads.
    pub fn mutex_tasks(self) -> Option<usize> {
        match self {
            Workload::Mutex2 => Some(2),
            Workload::Mutex8 => Some(8),
            Workload::Mutex64 => Some(64),
            _ => None,
        }
    }
}

/// The contenders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    Goro,
    May,
    Tokio,
    Threads,
    Go,
}

impl Contender {
    pub const ALL: [Contender; 5] = [
        Contender::Goro,
        Contender::May,
        Contender::Tokio,
        Contender::Threads,
        Contender::Go,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Contender::Goro => "goro",
            Contender::May => "may",
            Contender::Tokio => "tokio",
            Contender::Threads => "threads",
            Contender::Go => "go",
        }
    }

    pub fn parse(s: &str) -> Option<Contender> {
        Contender::ALL.into_iter().find(|c| c.name() == s)
    }
}

/// What a Rust contender's worker returns: the figure, or why it cannot run.
pub type Outcome = Result<f64, String>;

/// The parallelism every contender uses: `GORO_MAXPROCS`, default 2.
pub fn procs() -> usize {
    std::env::var("GORO_MAXPROCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(2)
}

/// Resident set size of this process in bytes (/proc/self/statm).
pub fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

/// Busy-waits `d` on the clock (the load of `SleepLateness`).
pub fn spin(d: std::time::Duration) {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Where a contender's implementation of a workload differs from the contract's
/// letter (a stand-in for something it lacks): goes into the table's footnotes.
pub fn note(c: Contender, w: Workload) -> Option<&'static str> {
    use Workload::*;
    match (c, w) {
        (Contender::Tokio, Chain | ChainBuf | Sieve | PingPong) => {
            Some("no rendezvous channel: tokio::sync::mpsc::channel(1)")
        }
        (Contender::May, Chain | ChainBuf | PingPong) => {
            Some("no bounded channel: unbounded may::sync::mpsc (one token in flight)")
        }
        (Contender::May, Sieve) => {
            Some("no bounded channel: unbounded mpsc + a one-permit semaphore")
        }
        (Contender::Threads, Chain | PingPong | Sieve) => Some("std::sync::mpsc::sync_channel(0)"),
        _ => None,
    }
}

/// The three figures of a spawn-and-park run.
#[derive(Clone, Copy, Debug)]
pub struct Parked {
    pub spawn_ns: f64,
    pub wake_exit_ns: f64,
    pub rss_bytes: f64,
}

impl Parked {
    /// From the run's timings and RSS readings, for `n` tasks.
    pub fn new(n: usize, spawn: Duration, wake_exit: Duration, before: u64, after: u64) -> Parked {
        Parked {
            spawn_ns: spawn.as_nanos() as f64 / n as f64,
            wake_exit_ns: wake_exit.as_nanos() as f64 / n as f64,
            rss_bytes: after.saturating_sub(before) as f64 / n as f64,
        }
    }
}

/// Companion figures of the current worker run, by workload name (see
/// [`Workload::companions`]); printed as `also` in the result line.
static ALSO: std::sync::Mutex<Vec<(&'static str, f64)>> = std::sync::Mutex::new(Vec::new());

/// The outcome of spawn-and-park workload `w` (its `Spawn` row); the other two
/// figures go into the result line's `also`.
pub fn parked_outcome(n: usize, r: Result<Parked, String>) -> Outcome {
    let p = r?;
    let mut also = ALSO.lock().unwrap_or_else(|e| e.into_inner());
    also.push((park(n, ParkFigure::WakeExit).name(), p.wake_exit_ns));
    also.push((park(n, ParkFigure::Rss).name(), p.rss_bytes));
    Ok(p.spawn_ns)
}

/// The worker's result line: the figure (or why not), with the contender's note and
/// any companion figures.
pub fn print_outcome(o: &Outcome, note: Option<&str>) {
    let mut v = match o {
        Ok(v) if v.is_finite() => serde_json::json!({ "value": v }),
        Ok(v) => serde_json::json!({ "skip": format!("not a finite figure: {v}") }),
        Err(why) => serde_json::json!({ "skip": why }),
    };
    if let Some(n) = note {
        v["note"] = serde_json::json!(n);
    }
    let also = ALSO.lock().unwrap_or_else(|e| e.into_inner());
    if o.is_ok() && !also.is_empty() {
        v["also"] = also
            .iter()
            .map(|&(k, x)| (k.to_string(), serde_json::json!(x)))
            .collect();
    }
    println!("{v}");
}
