//! Timer micro-benchmarks: ports of Go's `time` package benchmarks
//! (`src/time/sleep_test.go`), to compare goro's timers with Go's.
//!
//! ```text
//! cargo bench -p goro-bench --bench time
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench time
//! ```
//!
//! Groups (Go's names without `Benchmark`): `AfterFunc/1000`, a chain of 1000
//! `Timer::after_func(0)`; `Stop`, create a 1 s timer and stop it; `Reset`, re-arm a
//! pending 1 hour timer; `Sleep`, `sleep(1 ns)` on a coroutine.
//!
//! All four follow Go's `benchmark` helper in `sleep_test.go`:
//!
//! - First one coroutine per P creates 1<<15 "garbage" timers (`after_func(1 hour)`)
//!   that the benchmark's own timers are sifted through; they are stopped afterwards.
//!   Go makes them for every `b.N` run; here once per benchmark (not for each of
//!   criterion's ~30 calls), and the coroutines wait for each other (spinning), so
//!   that each batch is on a distinct P for sure.
//! - The body runs on `maxprocs()` coroutines in parallel (`b.RunParallel`), spawned
//!   and joined from a coroutine; time per operation = the wall time of the whole run
//!   / the operations. Go's workers take iterations in batches from a shared counter;
//!   here a sample's `iters` are split evenly up front.
//!
//! Every sample is bounded (60 s): a hang panics instead of stalling the bench.

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Bencher, Criterion};
use goro::sync::WaitGroup;
use goro::time::{sleep, Timer};
use goro_bench::harness::run_bounded;
use goro_bench::workloads::timers::all_at_once;

const HOUR: Duration = Duration::from_secs(3600);
/// Bound of one sample (or of building the garbage timers).
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(60);

/// A benchmark: group, function, body for `n` operations. No function: named by its
/// group alone, with the config's sample size; a function: 10 samples whatever the
/// command line (an `AfterFunc` operation is a 1000-timer chain, milliseconds).
type Bench = (&'static str, Option<&'static str>, fn(u64));

const BENCHES: [Bench; 4] = [
    ("AfterFunc", Some("1000"), after_func_1000),
    ("Stop", None, stop),
    ("Reset", None, reset),
    ("Sleep", None, sleep_1ns),
];

/// The garbage timers of Go's `benchmark` helper: one coroutine per P each puts 1<<15
/// one-hour timers on its P's heap (a timer set on a coroutine goes on that
/// coroutine's P).
fn garbage_timers() -> Vec<Timer> {
    let procs = goro::maxprocs();
    let batches = run_bounded(SAMPLE_TIMEOUT, "creating garbage timers", move || {
        all_at_once(procs, || {
            (0..1 << 15)
                .map(|_| Timer::after_func(HOUR, || {}))
                .collect::<Vec<_>>()
        })
    });
    batches.into_iter().flatten().collect()
}

/// Go's `b.RunParallel`: runs `body(n)` on `maxprocs()` coroutines in parallel, the
/// `iters` split evenly between them, and returns the wall time of the whole run.
fn run_parallel(what: &str, iters: u64, body: fn(u64)) -> Duration {
    run_bounded(SAMPLE_TIMEOUT, what, move || {
        let procs = goro::maxprocs() as u64;
        let start = Instant::now();
        let handles: Vec<_> = (0..procs)
            .map(|i| {
                let n = iters / procs + u64::from(i < iters % procs);
                goro::go!(move || body(n))
            })
            .collect();
        for h in handles {
            h.join().expect("benchmark worker panicked");
        }
        start.elapsed()
    })
}

/// Each benchmark with its garbage timers, made only if it is selected to run and
/// stopped after its last sample.
fn timer_benches(c: &mut Criterion) {
    for (group, function, body) in BENCHES {
        let mut garbage = None;
        let run = |b: &mut Bencher<'_>| {
            garbage.get_or_insert_with(garbage_timers);
            b.iter_custom(|iters| run_parallel(group, iters, body))
        };
        match function {
            None => {
                c.bench_function(group, run);
            }
            Some(name) => {
                c.benchmark_group(group)
                    .sample_size(10)
                    .bench_function(name, run);
            }
        }
        let garbage = garbage.unwrap_or_default();
        // A one-hour timer that is no longer pending fired (or was lost): a runtime bug.
        let stopped = garbage.iter().filter(|t| t.stop()).count();
        assert_eq!(
            stopped,
            garbage.len(),
            "garbage timers that were no longer pending"
        );
    }
}

/// `BenchmarkAfterFunc1000`: each operation calls the link function once; it arms
/// `after_func(0, link)` 1000 times in a chain (each firing, on a new coroutine as Go's
/// `AfterFunc` starts a goroutine, arms the next), and the operation ends when the chain
/// completes (Go: on an unbuffered channel; here a one-shot [`WaitGroup`]).
fn after_func_1000(n: u64) {
    /// Links left to schedule, and the end of the chain.
    type Chain = Arc<(AtomicU32, WaitGroup)>;
    fn link(chain: &Chain) {
        // Relaxed: one link runs at a time (each is scheduled by the previous one).
        if chain.0.fetch_sub(1, Ordering::Relaxed) > 0 {
            let next = chain.clone();
            Timer::after_func(Duration::ZERO, move || link(&next));
        } else {
            chain.1.done();
        }
    }
    for _ in 0..n {
        let chain = Arc::new((AtomicU32::new(1000), WaitGroup::new()));
        chain.1.add(1);
        link(&chain);
        chain.1.wait();
    }
}

/// `BenchmarkStop`: create a 1 s timer and stop it. Go uses `NewTimer` (a channel
/// timer, which goro's public API lacks); `after_func(1 s, no-op)` also allocates its
/// function.
fn stop(n: u64) {
    for _ in 0..n {
        let stopped = Timer::after_func(Duration::from_secs(1), || {}).stop();
        assert!(
            stopped,
            "Stop: a 1 s timer was not pending right after creation"
        );
    }
}

/// `BenchmarkReset`: each worker arms one 1 hour timer (`after_func`, where Go uses
/// `NewTimer(Hour)`), each operation is `reset(1 hour)`; stopped at the end.
fn reset(n: u64) {
    let t = Timer::after_func(HOUR, || {});
    for _ in 0..n {
        black_box(t.reset(HOUR));
    }
    t.stop();
}

/// Go's current `BenchmarkSleep`: each operation is `sleep(1 ns)`, which (unlike zero)
/// arms a real runtime timer and parks the coroutine until a scheduler runs it.
fn sleep_1ns(n: u64) {
    for _ in 0..n {
        sleep(Duration::from_nanos(1));
    }
}

goro_bench::bench_main!(timer_benches);
