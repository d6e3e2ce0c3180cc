//! Ports of Go's timer benchmarks (`src/time/sleep_test.go`, names without `Benchmark`):
//!
//! - `AfterFunc/1000`: a chain of 1000 `after_func(0)`.
//! - `Stop`: create a 1 s timer and stop it.
//! - `Reset`: re-arm a pending 1 hour timer.
//! - `Sleep`: `sleep(1 ns)`.
//!
//! As in Go's `benchmark` helper, each runs among 1<<15 garbage timers per P, on
//! `maxprocs()` coroutines in parallel (`b.RunParallel`).

use std::hint::black_box;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Bencher, Criterion};
use goro::sync::WaitGroup;
use goro::time::{after_func, sleep, AfterFunc};
use goro_bench::harness::run_bounded;
use goro_bench::workloads::timers::all_at_once;

const HOUR: Duration = Duration::from_secs(3600);
/// Bound of one sample, and of building the garbage timers: past it, a panic.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Group, function (with one: 10 samples, an `AfterFunc` op takes ms), body of `n` ops.
type Bench = (&'static str, Option<&'static str>, fn(u64));

const BENCHES: [Bench; 4] = [
    ("AfterFunc", Some("1000"), after_func_1000),
    ("Stop", None, stop),
    ("Reset", None, reset),
    ("Sleep", None, sleep_1ns),
];

/// Go's garbage timers: 1<<15 one-hour timers on each P's heap. Unlike Go: made once per
/// benchmark, not per `b.N` run, by coroutines that all run at once (one per P).
fn garbage_timers() -> Vec<AfterFunc> {
    let procs = goro::maxprocs();
    let batches = run_bounded(SAMPLE_TIMEOUT, "creating garbage timers", move || {
        all_at_once(procs, || {
            (0..1 << 15)
                .map(|_| after_func(HOUR, || {}))
                .collect::<Vec<_>>()
        })
    });
    batches.into_iter().flatten().collect()
}

/// Go's `b.RunParallel` on `maxprocs()` coroutines, but `iters` split evenly up front.
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

/// Garbage timers are made only for a benchmark selected to run, stopped after it.
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

/// Go's `BenchmarkAfterFunc1000`: each timer function (a new coroutine, as in Go) arms the
/// next; a [`WaitGroup`] marks the end (Go: a channel).
fn after_func_1000(n: u64) {
    /// Links left to arm, and the end of the chain.
    type Chain = Arc<(AtomicU32, WaitGroup)>;
    fn link(chain: &Chain) {
        // Relaxed: one link runs at a time (each is scheduled by the previous one).
        if chain.0.fetch_sub(1, Ordering::Relaxed) > 0 {
            let next = chain.clone();
            after_func(Duration::ZERO, move || link(&next));
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

/// Go uses `NewTimer` (a channel timer, which goro's API lacks); `after_func` allocates.
fn stop(n: u64) {
    for _ in 0..n {
        let stopped = after_func(Duration::from_secs(1), || {}).stop();
        assert!(
            stopped,
            "Stop: a 1 s timer was not pending right after creation"
        );
    }
}

/// One timer per worker: `after_func`, where Go uses `NewTimer(Hour)`.
fn reset(n: u64) {
    let t = after_func(HOUR, || {});
    for _ in 0..n {
        black_box(t.reset(HOUR));
    }
    t.stop();
}

/// Go's current `BenchmarkSleep`: 1 ns, unlike zero, arms a timer and parks.
fn sleep_1ns(n: u64) {
    for _ in 0..n {
        sleep(Duration::from_nanos(1));
    }
}

goro_bench::bench_main!(timer_benches);
