//! Timer micro-benchmarks: ports of Go's `time` package benchmarks
//! (`src/time/sleep_test.go`), to compare goro's timers with Go's.
//!
//! ```text
//! cargo bench -p goro-bench --bench time
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench time
//! ```
//!
//! Groups (named as Go names them, without the `Benchmark` prefix):
//!
//! - `AfterFunc/1000`: a chain of 1000 `Timer::after_func(0)` (Go: `BenchmarkAfterFunc1000`).
//! - `Stop`: create a 1 s timer and stop it (Go: `BenchmarkStop`).
//! - `Reset`: re-arm a pending 1 hour timer (Go: `BenchmarkReset`).
//! - `Sleep`: `sleep(1 ns)` on a coroutine (Go: `BenchmarkSleep`).
//!
//! All four use the semantics of Go's `benchmark` helper in `sleep_test.go`:
//!
//! - Before measuring, `maxprocs()` coroutines each create 1<<15 "garbage" timers
//!   (`after_func(1 hour, no-op)`), so every P's timer heap holds 32768 timers that the
//!   benchmark's own timers must be sifted through; they are stopped afterwards. Go
//!   makes them for every `b.N` run; here they are made once per benchmark (before
//!   criterion's warm-up) and stopped after its last sample, so that building 65536
//!   timers is not redone for each of criterion's ~30 calls. Unlike Go, the garbage
//!   coroutines wait for each other (spinning) before creating timers, which puts each
//!   batch on a distinct P for sure.
//! - The body runs on `maxprocs()` coroutines in parallel (Go's `b.RunParallel`), and
//!   the time per operation is the wall time of the whole parallel run divided by the
//!   number of operations (what Go reports as ns/op). Go's workers take iterations from
//!   a shared counter in batches; here the `iters` of a sample are split evenly up front.
//!   The run is driven from a coroutine (spawn the workers, join them), as Go's
//!   benchmark goroutine does; its wall time includes spawning and joining the workers.
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
/// Garbage timers per P (Go: `1<<15`).
const GARBAGE_PER_P: usize = 1 << 15;

/// The garbage timers of Go's `benchmark` helper; stopped when dropped.
struct Garbage(Vec<Vec<Timer>>);

impl Garbage {
    /// `maxprocs()` coroutines, one per P, each create a batch of `GARBAGE_PER_P`
    /// one-hour timers (on its own P's heap: a timer set on a coroutine goes on that
    /// coroutine's P).
    fn create() -> Garbage {
        let procs = goro::maxprocs();
        let batches = run_bounded(SAMPLE_TIMEOUT, "creating garbage timers", move || {
            // One batch per P, made on that P (one coroutine per P, all at once).
            all_at_once(procs, || {
                (0..GARBAGE_PER_P)
                    .map(|_| Timer::after_func(HOUR, || {}))
                    .collect::<Vec<_>>()
            })
        });
        Garbage(batches)
    }
}

impl Drop for Garbage {
    fn drop(&mut self) {
        let mut stopped = 0usize;
        for t in self.0.iter().flatten() {
            stopped += usize::from(t.stop());
        }
        // A one-hour timer that is no longer pending fired (or was lost): a runtime bug.
        let total: usize = self.0.iter().map(Vec::len).sum();
        assert_eq!(stopped, total, "garbage timers that were no longer pending");
    }
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

/// A benchmark with the garbage timers of Go's `benchmark` helper around it, made
/// lazily (only if the benchmark is selected to run) and stopped after its last sample.
///
/// `function: None` names the benchmark `group` alone (criterion's
/// `Criterion::bench_function`, with the config's sample size).
fn bench_with_garbage(
    c: &mut Criterion,
    group: &'static str,
    function: Option<(&'static str, usize)>,
    body: fn(u64),
) {
    let mut garbage: Option<Garbage> = None;
    let mut run = |b: &mut Bencher<'_>| {
        garbage.get_or_insert_with(Garbage::create);
        b.iter_custom(|iters| run_parallel(group, iters, body))
    };
    match function {
        None => {
            c.bench_function(group, run);
        }
        Some((name, sample_size)) => {
            let mut g = c.benchmark_group(group);
            g.sample_size(sample_size);
            g.bench_function(name, &mut run);
            g.finish();
        }
    }
    drop(garbage);
}

/// One chain of `AfterFunc/1000`: `left` more links to schedule, then `done`.
struct Chain {
    left: AtomicU32,
    done: WaitGroup,
}

/// A link of the chain (Go's `f`): schedules the next link with `after_func(0)`, or
/// signals the end of the chain once 1000 links have been scheduled.
fn chain_step(chain: &Arc<Chain>) {
    // Only one link runs at a time (each is scheduled by the previous one).
    if chain.left.fetch_sub(1, Ordering::Relaxed) > 0 {
        let next = chain.clone();
        Timer::after_func(Duration::ZERO, move || chain_step(&next));
    } else {
        chain.done.done();
    }
}

/// Ports Go's `BenchmarkAfterFunc1000`: each operation calls the link function once;
/// it arms `after_func(0, link)` 1000 times in a chain (each firing arms the next), and
/// the operation ends when the chain completes. Go signals the end on an unbuffered
/// channel; here a one-shot [`WaitGroup`] on the park API. Each goro firing runs its
/// function on a new coroutine (as Go's `AfterFunc` starts a goroutine).
fn after_func_1000_ops(n: u64) {
    for _ in 0..n {
        let chain = Arc::new(Chain {
            left: AtomicU32::new(1000),
            done: WaitGroup::new(),
        });
        chain.done.add(1);
        chain_step(&chain);
        chain.done.wait();
    }
}

/// Ports Go's `BenchmarkStop`: each operation creates a 1 s timer and stops it. Go uses
/// `NewTimer` (a channel timer); goro has no channel timers in its public API, so this
/// uses `Timer::after_func(1 s, no-op)`, which allocates the function as well.
fn stop_ops(n: u64) {
    for _ in 0..n {
        let stopped = Timer::after_func(Duration::from_secs(1), || {}).stop();
        assert!(
            stopped,
            "Stop: a 1 s timer was not pending right after creation"
        );
    }
}

/// Ports Go's `BenchmarkReset`: each worker arms one timer for 1 hour (an
/// `after_func(1 hour, no-op)`, where Go uses `NewTimer(Hour)`); each operation is
/// `t.reset(1 hour)`. The timer is stopped at the end of the worker's share.
fn reset_ops(n: u64) {
    let t = Timer::after_func(HOUR, || {});
    for _ in 0..n {
        black_box(t.reset(HOUR));
    }
    t.stop();
}

/// Ports Go's current `BenchmarkSleep` (each operation is `Sleep(Nanosecond)` inside
/// `RunParallel`; the 2020 version slept on 1000 fresh goroutines per operation).
/// goro's `sleep` returns at once only for zero: 1 ns arms a real runtime timer and
/// parks the coroutine until a scheduler runs it.
fn sleep_ops(n: u64) {
    for _ in 0..n {
        sleep(Duration::from_nanos(1));
    }
}

fn timer_benches(c: &mut Criterion) {
    // 10 samples: an AfterFunc operation is a 1000-timer chain (milliseconds).
    bench_with_garbage(c, "AfterFunc", Some(("1000", 10)), after_func_1000_ops);
    bench_with_garbage(c, "Stop", None, stop_ops);
    bench_with_garbage(c, "Reset", None, reset_ops);
    bench_with_garbage(c, "Sleep", None, sleep_ops);
}

goro_bench::bench_main!(timer_benches);
