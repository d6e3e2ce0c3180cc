//! Scheduler micro-benchmarks, time per operation:
//!
//! - `CorosenseiSwitch/resume_suspend`: the floor, a bare context switch, in this binary.
//! - `Syscall`: `goro::blocking` around nothing or `getppid` (Go's `BenchmarkSyscall`:
//!   goro takes the P back with one CAS); `getppid` alone.
//!
//! Spawn+join, yield and the hand-off between two coroutines are `compare`'s
//! `spawn_join`, `yield` and `pingpong` rows; `ops` counts their instructions, and what
//! the `hooks` feature adds to calls that never wait (`bench/instructions.sh`).

use std::hint::black_box;
use std::time::Instant;

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::Criterion;
use goro_bench::harness::bench_on_coroutine;

fn floor(c: &mut Criterion) {
    let mut co: Coroutine<(), (), ()> = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
        y.suspend(());
    });
    let mut g = c.benchmark_group("CorosenseiSwitch");
    g.bench_function("resume_suspend", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                match co.resume(()) {
                    CoroutineResult::Yield(v) => black_box(v),
                    CoroutineResult::Return(()) => unreachable!("the floor never returns"),
                }
            }
            start.elapsed()
        })
    });
    g.finish();
}

fn getppid() -> libc::pid_t {
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() }
}

fn syscall(c: &mut Criterion) {
    let mut g = c.benchmark_group("Syscall");
    bench_on_coroutine(&mut g, "noop", |n| {
        (0..n).for_each(|_| goro::blocking(|| black_box(())))
    });
    bench_on_coroutine(&mut g, "getppid", |n| {
        (0..n).for_each(|_| _ = black_box(goro::blocking(getppid)))
    });
    bench_on_coroutine(&mut g, "getppid_plain", |n| {
        (0..n).for_each(|_| _ = black_box(getppid()))
    });
    g.finish();
}

goro_bench::bench_main!(floor, syscall);
