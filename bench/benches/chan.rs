//! Channel benchmarks: Go's scheduler benchmarks built on channels, ported to goro.
//!
//! ```text
//! cargo bench -p goro-bench --bench chan
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench chan
//! ```
//!
//! Groups, named after Go's benchmarks without `Benchmark`; the time criterion prints
//! is per the unit in the function's name:
//!
//! - `Chain/per_hop`, `ChainBuf/per_hop`: a token through a chain of 10 000 coroutines
//!   (unbuffered links, capacity-1 links).
//! - `Sieve/5000_primes`: the concurrent prime sieve up to the 5 000th prime.
//! - `Powser/per_get`: power series over channels, per coefficient fetched.
//! - `PingPong/round_trip`: one round trip over two unbuffered channels.
//! - `WakeupParallelSpinning/<N>us`, `WakeupParallelSyscall/<N>us`: Go's
//!   `runtime/proc_test.go` benchmarks, per iteration (skipped at 1 P, as in Go).
//!
//! The workloads are `goro_bench::workloads::{tasks, chan, powser}`; `compare --suite chan`
//! prints them next to Go's (`bench/go/`). Each timed loop runs on a coroutine (the
//! driver), bounded by a timeout that panics.

use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, Criterion, SamplingMode};
use goro_bench::harness::run_bounded;
use goro_bench::workloads::chan::{self, Wait, DELAYS_US};
use goro_bench::workloads::tasks::{now, sieve, Chain, Coroutines};
use goro_bench::workloads::{powser, CHAIN_HOPS};

/// Bound of one sample's timed run.
const TIMEOUT: Duration = Duration::from_secs(120);

/// A benchmark `group/function` of `op(&fixture, iters)` on a coroutine, bounded, the
/// time divided by `per_op`; the fixture is built once (untimed) and shut down after
/// the last sample.
fn on_fixture<F: Send + 'static>(
    c: &mut Criterion,
    (group, function): (&'static str, &str),
    build: impl FnOnce() -> Result<F, String> + Send + 'static,
    op: fn(&mut F, u64) -> Result<(), String>,
    per_op: impl Fn(&F) -> f64,
    shutdown: fn(F) -> Result<(), String>,
) {
    fn ok<T>(group: &str, r: Result<T, String>) -> T {
        r.unwrap_or_else(|e| panic!("{group}: {e}"))
    }
    let mut fixture = Some(ok(group, run_bounded(TIMEOUT, group, build)));
    let mut g = c.benchmark_group(group);
    g.bench_function(function, |b| {
        b.iter_custom(|iters| {
            let f = fixture
                .take()
                .expect("the fixture is back after every sample");
            let (f, d) = run_bounded(TIMEOUT, group, move || {
                let mut f = f;
                let start = Instant::now();
                let r = op(&mut f, iters);
                (f, r.map(|()| start.elapsed()))
            });
            let d = ok(group, d).div_f64(per_op(&f));
            fixture = Some(f);
            d
        })
    });
    g.finish();
    let f = fixture.take().expect("the fixture is back");
    ok(group, run_bounded(TIMEOUT, group, move || shutdown(f)));
}

/// `Chain` and `ChainBuf`: the chain benchmarks of Go's GOMAXPROCS 1.5 design
/// (golang.org/s/go15gomaxprocs; the Go 1.10 change 868c8b37 cites them). One op is
/// one token from head to tail; the time reported is per hop (op / 10 000).
///
/// Differences: the chain is built once per group (outside the timing, every link
/// started) and the driver sends one token at a time and checks its value at the tail
/// (head + 10 000).
fn chain_benches(c: &mut Criterion) {
    for (name, cap) in [("Chain", 0), ("ChainBuf", 1)] {
        on_fixture(
            c,
            (name, "per_hop"),
            move || now(Chain::<Coroutines>::new(CHAIN_HOPS, cap)),
            |ch, n| now(ch.pass(n)),
            |ch| ch.hops() as f64,
            |ch| now(ch.shutdown()),
        );
    }
}

/// `iters` runs of `run` (on coroutines, bounded), each giving its time and its count
/// of units: the time per unit, times `iters` (criterion divides by `iters`).
fn per_unit(iters: u64, run: fn() -> (Duration, u64)) -> Duration {
    let (mut total, mut units) = (Duration::ZERO, 0u64);
    for _ in 0..iters {
        let (t, n) = run_bounded(TIMEOUT, "a run", run);
        total += t;
        units += n;
    }
    total.mul_f64(iters as f64 / units as f64)
}

/// `Sieve`: the concurrent prime sieve (Go's `test/chan/sieve1.go`, the `Sieve` of the
/// GOMAXPROCS 1.5 benchmarks), here up to the 5 000th prime (checked: 48611, and every
/// one before it). One op is a whole sieve.
///
/// Differences: Go's program prints primes forever; this one stops at 5 000 primes,
/// and the tear-down (the pipeline closes from its end back to the generator, every
/// coroutine joined) is not timed.
fn sieve_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("Sieve");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function("5000_primes", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| run_bounded(TIMEOUT, "Sieve", || now(sieve::<Coroutines>())))
                .map(|t| t.unwrap_or_else(|e| panic!("{e}")))
                .sum()
        })
    });
    g.finish();
}

/// `Powser`: McIlroy's power series over channels (Go's `test/chan/powser1.go`, the
/// `Powser` of the GOMAXPROCS 1.5 benchmarks). One op computes the series of Go's test
/// (sums, products, derivative, integral, exp, atan by substitution) plus tan x via
/// `Recip`, and checks ten exact coefficients of each; the time is reported per
/// coefficient fetched from a stream (`get`, in all coroutines).
///
/// Differences: every op has its own context and tears it down untimed (closing its
/// channels ends its coroutines; Go's program leaves them blocked); tan x is added.
fn powser_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("Powser");
    g.bench_function("per_get", |b| {
        b.iter_custom(|iters| {
            per_unit(iters, || {
                let run = powser::run().unwrap_or_else(|e| panic!("{e}"));
                (run.elapsed, run.gets)
            })
        })
    });
    g.finish();
}

/// `PingPong`: two coroutines passing a value back and forth over two unbuffered
/// channels; time per round trip. Go's runtime has no benchmark of exactly this:
/// `BenchmarkPingPongHog` (proc_test.go) is the same ping-pong with a CPU hog next to
/// it at GOMAXPROCS=1, `BenchmarkChanSync` (chan_test.go) alternates two goroutines on
/// ONE unbuffered channel, per transfer. `bench/go/` has this program.
fn ping_pong_bench(c: &mut Criterion) {
    on_fixture(
        c,
        ("PingPong", "round_trip"),
        || now(Chain::<Coroutines>::new(1, 0)),
        |pp, n| now(pp.pass(n)),
        |_| 1.0,
        |pp| now(pp.shutdown()),
    );
}

/// `WakeupParallelSpinning` and `WakeupParallelSyscall`: Go's
/// `benchmarkWakeupParallel` (runtime/proc_test.go, Go 1.10 change 868c8b37): two
/// coroutines alternate as sender and receiver on an unbuffered channel, each waiting
/// `delay` (the sender `delay` + 5 µs) before every operation, by spinning on the
/// clock or in a nanosleep system call. Time per iteration (each coroutine sends once
/// and receives once). Skipped at 1 P, as Go skips it at GOMAXPROCS=1.
///
/// Differences: sub-benchmarks are named `0us`, `1us`, ... (Go: `0s`, `1µs`, ...).
/// `Syscall` runs `std::thread::sleep` inside `goro::blocking` (Go: `syscall.Nanosleep`,
/// whose P sysmon may retake after ~20 µs, as goro's does), and sleeps 1 ns for a
/// delay of 0 (std makes no system call for 0; Linux treats 0 ns and 1 ns alike).
fn wakeup_benches(c: &mut Criterion) {
    if goro::maxprocs() == 1 {
        eprintln!("WakeupParallelSpinning, WakeupParallelSyscall: skipping: GORO_MAXPROCS=1");
        return;
    }
    for wait in Wait::ALL {
        let mut g: BenchmarkGroup<'_, _> = c.benchmark_group(wait.name());
        for us in DELAYS_US {
            let delay = Duration::from_micros(us);
            g.bench_function(chan::delay_name(us), |b| {
                b.iter_custom(|iters| {
                    run_bounded(TIMEOUT, wait.name(), move || {
                        chan::wakeup_parallel(wait, delay, iters)
                    })
                })
            });
        }
        g.finish();
    }
}

goro_bench::bench_main!(
    chain_benches,
    sieve_bench,
    powser_bench,
    ping_pong_bench,
    wakeup_benches
);
