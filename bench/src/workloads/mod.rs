//! The workloads: every contender's contract with the harness (`bench/go/` is Go's side).
//! Each [`Workload`] is a row of a table (name, unit, suite, P counts) with the companion
//! rows its run also fills, implemented in the submodules ([`tasks`] for every contender
//! whose tasks block, the rest goro's) for `compare`, the criterion benches and examples.
//! A worker (`compare worker CONTENDER WORKLOAD`, or `goro-bench-go WORKLOAD`) runs one
//! once at the parallelism in `GORO_MAXPROCS` and `GOMAXPROCS` and prints one
//! [`Measurement`] as its last stdout line.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod blocking;
pub mod cancel;
pub mod chan;
pub mod dump;
pub mod echo;
pub mod fairness;
// Go's powser lives with the root example that prints it (one source for both).
#[path = "../../../examples/powser/series.rs"]
pub mod powser;
pub mod sync;
pub mod tasks;
pub mod timers;

/// The groups of rows that `compare --suite` selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// Channels: chain, sieve, powser, ping-pong, wake-ups.
    Chan,
    /// Semaphores and mutexes: Go's Sema*/Mutex* ports and the mutex comparison;
    /// contexts.
    Sync,
    /// Timers: sleep lateness, Go's timer latency benchmarks, timer stop and reset.
    Time,
    /// Tasks: spawn+join, yield, spawn-and-park (memory per parked task: RSS and page
    /// tables; page faults), fairness at one P, the coroutine dump.
    Proc,
    /// Echo servers at 1, 50 and 500 connections.
    Echo,
    /// Blocking calls: a ticker beside blockers, sysmon's cost.
    Blocking,
    /// Async Rust from coroutines: 10 000 concurrent slow GETs with reqwest through
    /// `goro::tokio::block_on`, the old `goro::blocking` recipe and pure tokio, and
    /// with Go's net/http (the `ecosystem/` crate's binaries: see [`SLOW_GETS_BINS`]).
    Async,
}

/// One row of a table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub name: &'static str,
    pub unit: &'static str,
    /// Bigger is better (only the echo servers' throughput).
    pub higher_is_better: bool,
}

/// A workload: its own row, and the companion rows the same run fills.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Workload {
    /// Its own row (the name the command line and the workers use).
    pub row: Row,
    pub suite: Suite,
    /// The P counts (GORO_MAXPROCS, GOMAXPROCS) it runs at, one row each.
    pub procs: &'static [usize],
    /// The rows the same run fills besides its own ([`Measurement::also`]).
    pub also: &'static [Row],
}

impl Workload {
    pub fn name(&self) -> &'static str {
        self.row.name
    }

    /// The workload named `name`, or the one whose companion it is.
    pub fn find(name: &str) -> Option<&'static Workload> {
        ALL.iter()
            .find(|w| w.name() == name || w.also.iter().any(|r| r.name == name))
    }

    /// Its own row, then the companions.
    pub fn rows(&self) -> impl Iterator<Item = Row> + '_ {
        std::iter::once(self.row).chain(self.also.iter().copied())
    }
}

const fn row(name: &'static str, unit: &'static str) -> Row {
    Row {
        name,
        unit,
        higher_is_better: false,
    }
}

const fn higher(name: &'static str, unit: &'static str) -> Row {
    Row {
        name,
        unit,
        higher_is_better: true,
    }
}

const P1: &[usize] = &[1];
const P2: &[usize] = &[2];
const P12: &[usize] = &[1, 2];

use Suite::*;

/// `ALL` and `README_ROWS` from one line per workload,
/// `[+] Suite Procs row|higher("name", "unit") [ALSO];` (`+`: a README row; no companions
/// by default), or one line for a row per delay, `Suite Procs row("a" [D ...] "b", "unit");`.
macro_rules! workloads {
    (@ [$($w:tt)*] [$($r:tt)*]) => {
        /// Every workload, in table order.
        pub static ALL: &[Workload] = &[$($w)*];
        /// The rows of the full comparison (`compare --readme`): the README's table and
        /// the section of docs/benchmarks.md it comes from.
        pub const README_ROWS: &[&str] = &[$($r)*];
    };
    (@also) => { &[] };
    (@also $also:expr) => { $also };
    (@ $ws:tt [$($r:tt)*] + $s:ident $p:ident $k:ident($n:literal, $u:expr) $($rest:tt)*) => {
        workloads!(@ $ws [$($r)* $n,] $s $p $k($n, $u) $($rest)*);
    };
    (@ $ws:tt $rs:tt $s:ident $p:ident $k:ident($a:literal [$($d:literal)*] $b:literal, $u:expr);
     $($rest:tt)*) => {
        workloads!(@ $ws $rs $($s $p $k(concat!($a, $d, $b), $u);)* $($rest)*);
    };
    (@ [$($w:tt)*] $rs:tt $s:ident $p:ident $k:ident($n:expr, $u:expr) $($also:expr)?;
     $($rest:tt)*) => {
        workloads!(@ [$($w)* Workload {
            row: $k($n, $u),
            suite: $s,
            procs: $p,
            also: workloads!(@also $($also)?),
        },] $rs $($rest)*);
    };
    (@ $($bad:tt)*) => { compile_error!("workloads!: a row of none of the forms above"); };
    ($($rows:tt)+) => { workloads!(@ [] [] $($rows)+); };
}

workloads! {
    // Channels: the comparison's, then Go's benchmarks.
    + Chan P2 row("chain", "ns/hop");
    + Chan P2 row("chainbuf", "ns/hop");
    + Chan P2 row("sieve", "ms");
    + Chan P2 row("pingpong", "ns/round trip");
    Chan P12 row("Powser", "ns/get");
    Chan P2 row("WakeupParallelSpinning/" [0 1 2 5 10 20 50 100] "us", "ns/op");
    Chan P2 row("WakeupParallelSyscall/" [0 1 2 5 10 20 50 100] "us", "ns/op");
    Chan P2 row("WakeupLatency", "µs p50") WAKEUP;
    // Sync: the comparison's mutex, then Go's Sema*/Mutex* ports.
    + Sync P2 row("mutex2", "ns/op");
    + Sync P2 row("mutex8", "ns/op");
    + Sync P2 row("mutex64", "ns/op");
    Sync P12 row("SemaUncontended", "ns/op");
    Sync P12 row("SemaSyntNonblock", "ns/op");
    Sync P12 row("SemaSyntBlock", "ns/op");
    Sync P12 row("SemaWorkNonblock", "ns/op");
    Sync P12 row("SemaWorkBlock", "ns/op");
    Sync P12 row("MutexUncontended", "ns/op");
    Sync P12 row("Mutex", "ns/op");
    Sync P12 row("MutexSlack", "ns/op");
    Sync P12 row("MutexWork", "ns/op");
    Sync P12 row("MutexWorkSlack", "ns/op");
    Sync P12 row("WorkOnly", "ns/op");
    // Cancellation: goro::context against Go's context (cancel.rs).
    Sync P12 row("ContextWithCancel", "ns/op");
    Sync P12 row("ContextCommonParent", "ns/op");
    Sync P12 row("ContextCancelTree1000", "ns/tree");
    // Timers.
    + Time P2 row("sleep_lateness", "µs late");
    Time P2 row("ParallelTimerLatency", "µs avg") PARALLEL;
    Time P2 row("StaggeredTickerLatency", "µs avg") STAGGERED;
    Time P12 row("TimerStop", "ns/op");
    Time P12 row("TimerReset", "ns/op");
    // Tasks.
    + Proc P2 row("spawn_join", "ns/task");
    + Proc P2 row("yield", "ns/yield");
    + Proc P2 row("spawn_park_10k", "ns/spawn") PARK_10K;
    + Proc P2 row("spawn_park_100k", "ns/spawn") PARK_100K;
    + Proc P2 row("spawn_park_1m", "ns/spawn") PARK_1M;
    Proc P2 row("dump_100k", "ms") &[row("dump_100k/lines", "lines")];
    Proc P1 row("fairness", "hog/light")
        &[row("fairness/wake_p50", "ms"), row("fairness/wake_max", "ms")];
    // Echo servers.
    Echo P2 higher("echo/1", "req/s") ECHO_1;
    + Echo P2 higher("echo/50", "req/s") ECHO_50;
    Echo P2 higher("echo/500", "req/s") ECHO_500;
    // Blocking calls.
    Blocking P12 row("ticker/none", "µs late p50") TICKER_NONE;
    Blocking P12 row("ticker/sleep", "µs late p50") TICKER_SLEEP;
    Blocking P12 row("ticker/cpu", "µs late p50") TICKER_CPU;
    Blocking P2 row("sysmon/busy", "wake-ups/s") &[row("sysmon/busy/cpu", "% of a core")];
    Blocking P2 row("sysmon/idle", "wake-ups/s") &[row("sysmon/idle/cpu", "% of a core")];
    // Async Rust from coroutines (the harness runs ecosystem/'s slow_gets and slow_server).
    Async P2 higher("slow_gets", "req/s") SLOW_GETS;
}

/// Companion-row tables, one per `NAME prefix`, each row named prefix + suffix.
macro_rules! companions {
    ($($name:ident $prefix:literal),+: $rows:tt) => {
        $(companions!(@one $name $prefix $rows);)+
    };
    (@one $name:ident $prefix:literal [$($suffix:literal $unit:literal),*]) => {
        const $name: &[Row] = &[$(row(concat!($prefix, $suffix), $unit)),*];
    };
}

companions!(WAKEUP "WakeupLatency/": ["p90" "µs", "p99" "µs", "max" "µs", "missed" "sends",
            "on_sender_thread" "samples"]);
companions!(PARALLEL "ParallelTimerLatency/": ["max" "µs", "p50" "µs", "p99" "µs"]);
companions!(STAGGERED "StaggeredTickerLatency/": ["max" "µs", "300us/2" "µs avg",
            "300us/3" "µs avg", "300us/4" "µs avg", "300us/5" "µs avg", "300us/6" "µs avg",
            "300us/7" "µs avg", "300us/8" "µs avg", "300us/9" "µs avg", "300us/10" "µs avg",
            "2ms/1" "µs avg"]);
companions!(PARK_10K "spawn_park_10k_", PARK_100K "spawn_park_100k_", PARK_1M "spawn_park_1m_":
            ["wake" "ns/wake+exit", "rss" "B/parked (RSS + page tables)",
             "pte" "B/parked (page tables)", "faults" "faults/task"]);
companions!(ECHO_1 "echo/1/", ECHO_50 "echo/50/", ECHO_500 "echo/500/": ["p99" "µs",
            "fairness" "busiest/mean", "user" "µs/rt", "sys" "µs/rt", "machine" "µs/rt"]);
companions!(SLOW_GETS "slow_gets/": ["wall" "ms", "threads" "threads at peak",
            "rss" "MiB peak RSS", "cpu" "ms CPU (client)"]);
companions!(TICKER_NONE "ticker/none/", TICKER_SLEEP "ticker/sleep/", TICKER_CPU "ticker/cpu/":
            ["p99" "µs", "max" "µs"]);

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
/// Samples of `WakeupLatency`.
pub const LATENCY_SAMPLES: usize = 1000;
/// Echo messages, bytes.
pub const ECHO_SIZE: usize = 64;
/// Where the `slow_gets` rows' programs are built, under the repository:
/// `cargo build --release --manifest-path ecosystem/Cargo.toml` (its own workspace, so
/// that this crate never builds reqwest and hyper).
pub const SLOW_GETS_BINS: &str = "ecosystem/target/release";

/// Tasks in a mutex workload (`mutex2`: 2).
pub fn mutex_tasks(name: &str) -> Option<usize> {
    name.strip_prefix("mutex")?.parse().ok()
}

/// Tasks in a spawn-and-park workload (`spawn_park_10k`: 10 000).
pub fn park_tasks(name: &str) -> Option<usize> {
    match name.strip_prefix("spawn_park_")? {
        "10k" => Some(10_000),
        "100k" => Some(100_000),
        "1m" => Some(1_000_000),
        _ => None,
    }
}

/// The figure a worker prints (the last line on its stdout, as JSON): a value in the
/// workload's unit with its companions' figures, or why the contender cannot run it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The figure, in the workload's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Why the contender cannot run the workload (then there is no value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<String>,
    /// Where the contender's implementation departs from the contract's letter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The companion rows' figures, by row name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub also: BTreeMap<String, f64>,
}

impl Measurement {
    pub fn value(v: f64) -> Measurement {
        Measurement {
            value: Some(v),
            ..Measurement::default()
        }
    }

    pub fn skip(why: impl Into<String>) -> Measurement {
        Measurement {
            skip: Some(why.into()),
            ..Measurement::default()
        }
    }

    /// Adds a companion figure.
    pub fn with(mut self, row: &str, v: f64) -> Measurement {
        self.also.insert(row.to_string(), v);
        self
    }
}

/// What a contender's implementation gives: the figure, or why it cannot run it.
pub type Outcome = Result<Measurement, String>;

/// `Ok` if `got` is `want`, else an error that says `what` is `got`, not `want`.
pub fn expect_eq(what: impl std::fmt::Display, got: u64, want: u64) -> Result<(), String> {
    (got == want)
        .then_some(())
        .ok_or_else(|| format!("{what} is {got}, expected {want}"))
}

/// The `p`-quantile of `sorted` by nearest rank (`p` = 1: the maximum).
///
/// # Panics
///
/// If `sorted` is empty.
pub fn quantile<T: Copy>(sorted: &[T], p: f64) -> T {
    let n = sorted.len();
    assert!(n > 0, "a quantile of no samples");
    sorted[((p * n as f64).ceil() as usize).clamp(1, n) - 1]
}

/// `elapsed` in ns divided by `n`.
pub fn per(elapsed: Duration, n: usize) -> f64 {
    elapsed.as_nanos() as f64 / n as f64
}

/// Busy-waits `d` on the clock (the load of `sleep_lateness`, Go's `spinFor`).
pub fn spin(d: Duration) {
    let end = std::time::Instant::now() + d;
    while std::time::Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Sizes N so that `run(N)` takes about `target` (probing from N = 1; the probes warm
/// up), then times one run of N: the time per iteration in ns (Go's b.N, roughly).
pub fn sized(target: Duration, mut run: impl FnMut(u64) -> Duration) -> f64 {
    let floor = target / 10;
    let mut n = 1u64;
    loop {
        let d = run(n);
        if d >= floor {
            let n = ((n as f64) * target.as_secs_f64() / d.as_secs_f64())
                .ceil()
                .max(1.0) as u64;
            return run(n).as_nanos() as f64 / n as f64;
        }
        let grow = if d.is_zero() {
            100.0
        } else {
            (floor.as_secs_f64() * 1.5 / d.as_secs_f64()).clamp(2.0, 100.0)
        };
        n = ((n as f64) * grow) as u64;
    }
}

/// The time one sized run aims at: `GORO_BENCH_TARGET_MS` (the harness's
/// `--target-ms`), default 200 ms.
pub fn target() -> Duration {
    Duration::from_millis(env_number("GORO_BENCH_TARGET_MS").unwrap_or(200))
}

/// A positive whole number from the environment.
pub fn env_number(var: &str) -> Option<u64> {
    std::env::var(var).ok()?.parse().ok().filter(|&n| n > 0)
}

/// The parallelism every contender uses: `GORO_MAXPROCS`, default 2.
pub fn procs() -> usize {
    env_number("GORO_MAXPROCS").map_or(2, |n| n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        let mut names: Vec<&str> = ALL.iter().flat_map(|w| w.rows()).map(|r| r.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "a row name repeats");
        for name in names {
            assert!(Workload::find(name).is_some());
        }
    }

    #[test]
    fn measurement_lines_round_trip() {
        let m = Measurement::value(1.5).with("x", 2.0);
        let line = serde_json::to_string(&m).unwrap();
        assert_eq!(line, r#"{"value":1.5,"also":{"x":2.0}}"#);
        assert_eq!(serde_json::from_str::<Measurement>(&line).unwrap(), m);
        let go: Measurement = serde_json::from_str(r#"{"also":{"a":1},"value":3}"#).unwrap();
        assert_eq!(go.also["a"], 1.0);
    }
}
