//! Cancellation and stoppable timers (issue 30): `goro::context` against Go's
//! `context`, and `goro::chan::Timer`'s stop and reset against Go's `time.Timer`.
//! Go's side is `bench/go/cancel.go`; both run under Go's `b.RunParallel` shape
//! ([`run_parallel`]) or a plain `b.N` loop, sized to [`target`](super::target).
//!
//! - `ContextWithCancel`: `WithCancel(Background())` and its cancel, per op, on every
//!   P (RunParallel).
//! - `ContextCommonParent`: Go 1.19's `BenchmarkCommonParentCancel`: the same under one
//!   shared cancellable parent (so linking to and unlinking from it), with a value
//!   lookup and Go's two busy loops around the cancel.
//! - `ContextCancelTree1000`: a parent, 1 000 children made under it, then the
//!   parent's cancel, which reaches them all; one goroutine, ns per tree. Both keep
//!   the children's cancel funcs in a reused vector until the parent's cancel (in
//!   goro, dropping one would cancel its child alone) and drop them uncalled after
//!   it, inside the timing.
//! - `TimerStop`, `TimerReset`: Go's `BenchmarkStop` and `BenchmarkReset`
//!   (sleep_test.go, in their per-op form of Go 1.23: `NewTimer(1s).Stop()` and
//!   `t.Reset(Hour)` per op), with Go's 32 768 pending `AfterFunc(Hour)` timers per P
//!   in the heaps. Go 1.19 (the Go installed) has the asynchronous timer channels of
//!   before Go 1.23: its `Stop` and `Reset` do not drain the channel; goro's do (Go
//!   1.23's semantics), under the timer's lock.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::context::{background, CancelFunc};
use goro::sync::WaitGroup;

use super::sync::{run_parallel, Body};
use super::tasks::Coroutines;
use super::{Measurement, Outcome};

/// Bound of one timed run; past it, a panic (a hang).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Children per tree in `ContextCancelTree1000`.
pub const TREE_CHILDREN: usize = 1000;
/// Go's pending garbage timers per P in the time benchmarks.
const GARBAGE_PER_P: usize = 1 << 15;

/// The workloads of this module, by row name.
pub const NAMES: [&str; 5] = [
    "ContextWithCancel",
    "ContextCommonParent",
    "ContextCancelTree1000",
    "TimerStop",
    "TimerReset",
];

/// goro's run of `name`, from a plain thread: ns per op, sized to the target; `None`
/// if `name` is not one of this module's.
pub fn run(name: &str) -> Option<Outcome> {
    if !NAMES.contains(&name) {
        return None;
    }
    let name = name.to_string();
    let ns = super::sized(super::target(), move |n| {
        let name = name.clone();
        crate::harness::run_bounded(RUN_TIMEOUT, &name.clone(), move || timed(&name, n))
    });
    Some(Ok(Measurement::value(ns)))
}

/// `iters` ops of `name`, on a coroutine: their time.
pub fn timed(name: &str, iters: u64) -> Duration {
    if iters == 0 {
        return Duration::ZERO;
    }
    let workers = goro::maxprocs();
    let parallel = |body: Body| run_parallel::<Coroutines>(workers, iters, body);
    match name {
        "ContextWithCancel" => parallel(Arc::new(|pb| {
            let bg = background();
            while pb.next_op() {
                let (ctx, cancel) = bg.with_cancel();
                cancel.cancel();
                black_box(ctx);
            }
        })),
        "ContextCommonParent" => {
            /// Go's root value (keyed by type here).
            struct Key(&'static str);
            let root = background().with_value(Key("value"));
            let (shared, _cancel) = root.with_cancel();
            parallel(Arc::new(move |pb| {
                let mut x = 0i64;
                while pb.next_op() {
                    let (ctx, cancel) = shared.with_cancel();
                    assert_eq!(ctx.value::<Key>().map(|k| k.0), Some("value"));
                    x = busy(x);
                    cancel.cancel();
                    x = busy(x);
                }
                black_box(x);
            }))
        }
        "ContextCancelTree1000" => {
            let mut cancels: Vec<CancelFunc> = Vec::with_capacity(TREE_CHILDREN);
            let t0 = Instant::now();
            for _ in 0..iters {
                let (parent, cancel) = background().with_cancel();
                for _ in 0..TREE_CHILDREN {
                    let (_child, c) = parent.with_cancel();
                    cancels.push(c);
                }
                cancel.cancel();
                cancels.clear();
            }
            t0.elapsed()
        }
        "TimerStop" => with_garbage_timers(workers, || {
            parallel(Arc::new(|pb| {
                while pb.next_op() {
                    black_box(goro::chan::Timer::new(Duration::from_secs(1)).stop());
                }
            }))
        }),
        "TimerReset" => with_garbage_timers(workers, || {
            parallel(Arc::new(|pb| {
                let t = goro::chan::Timer::new(HOUR);
                while pb.next_op() {
                    black_box(t.reset(HOUR));
                }
                t.stop();
            }))
        }),
        _ => unreachable!("{name} is not a cancel workload"),
    }
}

const HOUR: Duration = Duration::from_secs(3600);

/// Go's `x /= x + 1` loop of BenchmarkCommonParentCancel, 100 times.
#[inline]
fn busy(mut x: i64) -> i64 {
    for _ in 0..100 {
        x /= black_box(x + 1);
    }
    x
}

/// Go's sleep_test.go `benchmark` setup: [`GARBAGE_PER_P`] pending `AfterFunc(Hour)`
/// timers made on each of `workers` coroutines (so on every P's heap), kept for the
/// run of `f`, then stopped.
fn with_garbage_timers(workers: usize, f: impl FnOnce() -> Duration) -> Duration {
    let wg = WaitGroup::new();
    let garbage = Arc::new(goro::sync::Mutex::new(Vec::new()));
    for _ in 0..workers {
        let garbage = garbage.clone();
        wg.go(move || {
            let mine: Vec<_> = (0..GARBAGE_PER_P)
                .map(|_| goro::time::after_func(HOUR, || {}))
                .collect();
            garbage.lock().push(mine);
        });
    }
    wg.wait();
    let t = f();
    for timers in garbage.lock().iter() {
        for timer in timers {
            timer.stop();
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload runs a few ops without hanging (its own checks hold).
    #[test]
    fn every_workload_runs() {
        for name in NAMES {
            for iters in [1, 7, 300] {
                let name = name.to_string();
                crate::harness::run_bounded(RUN_TIMEOUT, "cancel test", move || {
                    timed(&name, iters)
                });
            }
        }
    }
}
