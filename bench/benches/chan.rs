//! Go's scheduler benchmarks built on channels, on goro (`cargo bench -p goro-bench
//! --bench chan`, with `GORO_MAXPROCS=1` or 2). Groups are Go's names without
//! `Benchmark`; the time is per the unit in the function's name:
//!
//! - `Chain/per_hop`, `ChainBuf/per_hop`: tokens through 10 000 coroutines joined by
//!   unbuffered or capacity-1 channels (golang.org/s/go15gomaxprocs), one at a time,
//!   each checked at the tail. The chain is built once, untimed.
//! - `PingPong/round_trip`: the same with one link, which echoes (Go's closest are
//!   `BenchmarkPingPongHog` and `BenchmarkChanSync`; `bench/go/` has this program).
//! - `Sieve/5000_primes`: Go's `test/chan/sieve1.go` up to the 5 000th prime, checked;
//!   the tear-down is not timed.
//! - `Powser/per_get`: Go's `test/chan/powser1.go` (plus tan x), per coefficient
//!   fetched, checked; each run tears its coroutines down, untimed.
//! - `WakeupParallelSpinning/<N>us`, `WakeupParallelSyscall/<N>us`: Go's
//!   `runtime/proc_test.go` benchmarks, per iteration; skipped at 1 P, as in Go.
//!
//! The workloads are `goro_bench::workloads::{tasks, chan, powser}`, which `compare
//! --suite chan` runs next to Go's. Every timed run is on a coroutine, bounded.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};
use goro_bench::harness::run_bounded;
use goro_bench::workloads::chan::{self, Wait, DELAYS_US};
use goro_bench::workloads::tasks::{now, sieve, Chain, Coroutines};
use goro_bench::workloads::{powser, CHAIN_HOPS};

/// Bound of one sample's timed run.
const TIMEOUT: Duration = Duration::from_secs(120);

fn ok<T>(group: &str, r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("{group}: {e}"))
}

/// `group/function`: tokens through a chain of `hops` links of capacity `cap`, built
/// once before the first sample and joined after the last; the time per hop.
fn chain(c: &mut Criterion, group: &'static str, function: &str, hops: usize, cap: usize) {
    let build = move || now(Chain::<Coroutines>::new(hops, cap));
    let mut fixture = Some(ok(group, run_bounded(TIMEOUT, group, build)));
    c.benchmark_group(group).bench_function(function, |b| {
        b.iter_custom(|iters| {
            let mut chain = fixture
                .take()
                .expect("the chain is back after every sample");
            let (chain, t) = run_bounded(TIMEOUT, group, move || {
                let start = Instant::now();
                let passed = now(chain.pass(iters));
                (chain, passed.map(|()| start.elapsed()))
            });
            fixture = Some(chain);
            ok(group, t) / hops as u32
        })
    });
    let chain = fixture.take().expect("the chain is back");
    ok(
        group,
        run_bounded(TIMEOUT, group, move || now(chain.shutdown())),
    );
}

fn chain_benches(c: &mut Criterion) {
    chain(c, "Chain", "per_hop", CHAIN_HOPS, 0);
    chain(c, "ChainBuf", "per_hop", CHAIN_HOPS, 1);
    chain(c, "PingPong", "round_trip", 1, 0);
}

fn sieve_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("Sieve");
    g.sampling_mode(SamplingMode::Flat);
    g.bench_function("5000_primes", |b| {
        b.iter_custom(|iters| {
            let run = || {
                ok(
                    "Sieve",
                    run_bounded(TIMEOUT, "Sieve", || now(sieve::<Coroutines>())),
                )
            };
            (0..iters).map(|_| run()).sum()
        })
    });
    g.finish();
}

/// `iters` runs, the time per coefficient fetched times `iters` (criterion divides).
fn powser_bench(c: &mut Criterion) {
    c.benchmark_group("Powser").bench_function("per_get", |b| {
        b.iter_custom(|iters| {
            let (mut total, mut gets) = (Duration::ZERO, 0u64);
            for _ in 0..iters {
                let run = ok("Powser", run_bounded(TIMEOUT, "Powser", powser::run));
                total += run.elapsed;
                gets += run.gets;
            }
            total.mul_f64(iters as f64 / gets as f64)
        })
    });
}

/// Sub-benchmarks are named `0us`, `1us`, ... (Go: `0s`, `1µs`, ...).
fn wakeup_benches(c: &mut Criterion) {
    if goro::maxprocs() == 1 {
        eprintln!("WakeupParallelSpinning, WakeupParallelSyscall: skipping: GORO_MAXPROCS=1");
        return;
    }
    for wait in Wait::ALL {
        let mut g = c.benchmark_group(wait.name());
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

goro_bench::bench_main!(chain_benches, sieve_bench, powser_bench, wakeup_benches);
