//! Scheduler micro-benchmarks: spawning, yielding and blocking calls, next to the floor
//! (a bare corosensei context switch) measured in the same binary.
//!
//! ```text
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench proc
//! ```
//!
//! Time per operation of (Go's names):
//!
//! - `SpawnJoin`: `go!(..).join()`, `from_coroutine` (the join parks; the child runs
//!   first, from `runnext`; Go's closest, `runtime.BenchmarkCreateGoroutines`, does not
//!   join) or `from_thread` (the join blocks the bench thread; the wake-up goes through
//!   the global run queue).
//! - `Gosched`: `yield_now`, `alone` on one coroutine (Go's figure: a plain loop of
//!   `runtime.Gosched`) or `pair`: two coroutines yield `iters` times each, from the
//!   first start to the last end / `2 * iters` (at two Ps, a throughput).
//! - `CorosenseiSwitch/resume_suspend`: the floor, on the bench thread.
//! - `Syscall`: `goro::blocking` around nothing (`noop`) and around `getppid` (Go's
//!   `BenchmarkSyscall`: the P is taken back with one CAS); `getppid_plain` without it.
//!
//! Measured elsewhere: the hand-off between two coroutines by `compare`'s `pingpong`
//! and `ops pingpong`; what the `hooks` feature adds to calls that never wait by
//! `bench/instructions.sh` with the `ops` modes `udp_thread`, `udp_coroutine`,
//! `goro_udp` and `pipe_thread`, built with and without `--features hooks`.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::Criterion;
use goro_bench::harness::bench_on_coroutine;

/// Where a benchmark's body runs.
enum Run {
    /// On a fresh coroutine per sample, timed around the call ([`bench_on_coroutine`]).
    OnCoroutine(fn(u64)),
    /// On the bench thread; returns the time its `iters` operations took.
    OnThread(fn(u64) -> Duration),
}

use Run::{OnCoroutine, OnThread};

/// Every benchmark, (group, function, body), a group's functions next to each other.
const BENCHES: &[(&str, &str, Run)] = &[
    ("SpawnJoin", "from_coroutine", OnCoroutine(spawn_join)),
    ("SpawnJoin", "from_thread", OnThread(spawn_join_thread)),
    ("Gosched", "alone", OnCoroutine(yield_alone)),
    ("Gosched", "pair", OnThread(yield_pair)),
    ("CorosenseiSwitch", "resume_suspend", OnThread(floor)),
    ("Syscall", "noop", OnCoroutine(blocking_noop)),
    ("Syscall", "getppid", OnCoroutine(blocking_getppid)),
    ("Syscall", "getppid_plain", OnCoroutine(getppid_plain)),
];

fn spawn_join(n: u64) {
    for i in 0..n {
        let h = goro::go!(move || black_box(i));
        black_box(h.join().expect("spawned coroutine panicked"));
    }
}

fn spawn_join_thread(n: u64) -> Duration {
    let start = Instant::now();
    spawn_join(n);
    start.elapsed()
}

fn yield_alone(n: u64) {
    (0..n).for_each(|_| goro::yield_now());
}

fn yield_pair(iters: u64) -> Duration {
    // Both coroutines check in, then yield (uncounted) until the other has too, so that
    // neither times the other's spawn.
    let ready = Arc::new(AtomicUsize::new(0));
    let run = |ready: Arc<AtomicUsize>| {
        move || {
            ready.fetch_add(1, Ordering::AcqRel);
            while ready.load(Ordering::Acquire) < 2 {
                goro::yield_now();
            }
            let start = Instant::now();
            (0..iters).for_each(|_| goro::yield_now());
            (start, Instant::now())
        }
    };
    let a = goro::go!(run(ready.clone()));
    let b = goro::go!(run(ready));
    let (a_start, a_end) = a.join().expect("yielding coroutine panicked");
    let (b_start, b_end) = b.join().expect("yielding coroutine panicked");
    // criterion divides by iters; each of the two made iters yields.
    (a_end.max(b_end) - a_start.min(b_start)) / 2
}

fn floor(iters: u64) -> Duration {
    let mut co: Coroutine<(), (), ()> = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    let start = Instant::now();
    for _ in 0..iters {
        match co.resume(()) {
            CoroutineResult::Yield(v) => black_box(v),
            CoroutineResult::Return(()) => unreachable!("the floor coroutine never returns"),
        }
    }
    start.elapsed()
}

fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() }
}

fn blocking_noop(n: u64) {
    (0..n).for_each(|_| goro::blocking(|| black_box(())));
}

fn blocking_getppid(n: u64) {
    (0..n).for_each(|_| _ = black_box(goro::blocking(getppid)));
}

fn getppid_plain(n: u64) {
    (0..n).for_each(|_| _ = black_box(getppid()));
}

fn proc_benches(c: &mut Criterion) {
    for group in BENCHES.chunk_by(|a, b| a.0 == b.0) {
        let mut g = c.benchmark_group(group[0].0);
        for (_, name, run) in group {
            match *run {
                OnCoroutine(f) => bench_on_coroutine(&mut g, name, f),
                OnThread(f) => {
                    g.bench_function(*name, |b| b.iter_custom(f));
                }
            }
        }
        g.finish();
    }
}

goro_bench::bench_main!(proc_benches);
