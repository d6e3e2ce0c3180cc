//! Scheduler micro-benchmarks, time per operation:
//!
//! - `SpawnJoin`: `go!(..).join()` from a coroutine or from the bench thread.
//! - `Gosched`: `yield_now` on one coroutine, or on two.
//! - `CorosenseiSwitch/resume_suspend`: the floor, a bare context switch, in this binary.
//! - `Syscall`: `goro::blocking` around nothing or `getppid`; `getppid` alone.
//!
//! Measured elsewhere: the hand-off between two coroutines (`compare`'s `pingpong`, `ops
//! pingpong`); what the `hooks` feature adds to calls that never wait
//! (`bench/instructions.sh`).

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::Criterion;
use goro_bench::harness::bench_on_coroutine;

enum Run {
    /// On a fresh coroutine per sample, timed around the call ([`bench_on_coroutine`]).
    OnCoroutine(fn(u64)),
    /// On the bench thread; returns the time its `iters` operations took.
    OnThread(fn(u64) -> Duration),
}

use Run::{OnCoroutine, OnThread};

/// (group, function, body), a group's functions next to each other.
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

/// On a coroutine the join parks and the child runs first, from `runnext`. Go's closest,
/// `runtime.BenchmarkCreateGoroutines`, does not join.
fn spawn_join(n: u64) {
    for i in 0..n {
        let h = goro::go!(move || black_box(i));
        black_box(h.join().expect("spawned coroutine panicked"));
    }
}

/// The join blocks the bench thread; the wake-up goes through the global run queue.
fn spawn_join_thread(n: u64) -> Duration {
    let start = Instant::now();
    spawn_join(n);
    start.elapsed()
}

/// Go's figure: a plain loop of `runtime.Gosched`.
fn yield_alone(n: u64) {
    (0..n).for_each(|_| goro::yield_now());
}

/// Two coroutines yield `iters` times each: from the first start to the last end, / 2 (at
/// two Ps, a throughput).
fn yield_pair(iters: u64) -> Duration {
    // Each checks in and yields (untimed) until the other has, so neither times a spawn.
    // AcqRel / Acquire: a count that publishes nothing.
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

/// Go's `BenchmarkSyscall` (goro takes the P back with one CAS).
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
