//! Ports of Go's runtime-semaphore benchmarks (`Sema*`, Go 1.19
//! `sync/runtime_sema_test.go`) and `sync.Mutex` benchmarks (`Mutex*`,
//! `sync/mutex_test.go`): the workloads that `benches/sync.rs` (criterion) and
//! the `sync` suite of `compare` (next to Go, `bench/go/sync.go`) both time.
//!
//! [`run`] is Go's `b.RunParallel`: `maxprocs()` workers (ten times as many for the
//! `*Slack` benchmarks, Go's `b.SetParallelism(10)`) share `iters` iterations, which
//! they take from a common budget in batches (Go's `testing.PB`). Coroutines for
//! goro, plain threads for the `std` and `parking_lot` peers. The clock starts when
//! every worker is running and waiting at a start gate, and stops when the last one
//! is joined, so spawning is not timed (Go times it; it is small next to its runs).
//!
//! Every `Mutex*` critical section adds one to a counter in the mutex, and every run
//! checks the total afterwards: a lost update (two holders at once) panics. Go's
//! benchmarks have empty critical sections; `bench/go/` does the same counting.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::park::WaitReason;
use goro_sync::{backoff, sema};

use super::tasks::{Blocking, Coroutines};
use crate::contenders::threads::Threads;

/// Bound of one timed run (spawning to the last join); a run that takes longer
/// panics (hang, lost wake-up).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound of the wait for every worker to reach the start gate.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Length of the local work loop of the `*Work*` benchmarks (Go's 100).
pub const WORK_ITERS: u32 = 100;

/// `Bench` from one table: each benchmark, whether it does the local work between
/// its operations, whether a taker keeps units of the semaphore (so that acquires
/// must wait), its workers per P, and who runs it.
macro_rules! benches {
    ($($(#[$doc:meta])* $b:ident $work:literal $block:literal $per_p:literal $who:ident,)*) => {
        /// The benchmarks, named as Go's without `Benchmark`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Bench {
            $($(#[$doc])* $b,)*
        }

        impl Bench {
            /// Every benchmark, in report order.
            pub const ALL: [Bench; [$(stringify!($b)),*].len()] = [$(Bench::$b),*];

            /// Go's name without `Benchmark`: the criterion group's name.
            pub fn name(self) -> &'static str {
                match self {
                    $(Bench::$b => stringify!($b),)*
                }
            }

            fn work(self) -> bool {
                match self { $(Bench::$b => $work,)* }
            }

            fn block(self) -> bool {
                match self { $(Bench::$b => $block,)* }
            }

            fn parallelism(self) -> usize {
                match self { $(Bench::$b => $per_p,)* }
            }

            /// Who runs it.
            pub fn contenders(self) -> &'static [Impl] {
                match self { $(Bench::$b => $who,)* }
            }
        }
    };
}

/// goro with and without its back-off; everyone; goro alone.
const GORO: &[Impl] = &[Impl::Goro, Impl::GoroNoBackoff];
const ALL: &[Impl] = &[Impl::Goro, Impl::GoroNoBackoff, Impl::Std, Impl::ParkingLot];
const ONLY: &[Impl] = &[Impl::Goro];

benches! {
    // name, local work, a taker, workers per P, who runs it
    /// Every worker releases then acquires its own (padded) semaphore: never waits.
    SemaUncontended false false 1 GORO,
    /// One shared semaphore; each op a release then an acquire. No work.
    SemaSyntNonblock false false 1 GORO,
    /// As `SemaSyntNonblock`, plus a taker that keeps `maxprocs() / 2` units, so
    /// that some acquires must wait (none with one P).
    SemaSyntBlock false true 1 GORO,
    SemaWorkNonblock true false 1 GORO,
    SemaWorkBlock true true 1 GORO,
    /// Every worker locks and unlocks its own (padded) mutex.
    MutexUncontended false false 1 ALL,
    /// One shared mutex, lock+unlock per op.
    Mutex false false 1 ALL,
    MutexSlack false false 10 ALL,
    MutexWork true false 1 ALL,
    MutexWorkSlack true false 10 ALL,
    /// Not in Go's tree: the local work alone, per op (`bench/go/` has it too), to
    /// compare what the two compilers make of it.
    WorkOnly true false 1 ONLY,
}

impl Bench {
    /// The benchmark named `name` (as [`name`](Self::name) spells it).
    pub fn from_name(name: &str) -> Option<Bench> {
        Bench::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// What runs a benchmark (the criterion function's name, the contender's in `compare`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Impl {
    /// goro (`goro_sync::sema`, `goro::sync::Mutex`) on coroutines.
    Goro,
    /// The same with `backoff::set_randomized(false)` for the run.
    GoroNoBackoff,
    /// `std::sync::Mutex` on plain threads.
    Std,
    /// `parking_lot::Mutex` on plain threads.
    ParkingLot,
}

impl Impl {
    /// The criterion function's name.
    pub fn name(self) -> &'static str {
        match self {
            Impl::Goro => "goro",
            Impl::GoroNoBackoff => "goro_no_backoff",
            Impl::Std => "std",
            Impl::ParkingLot => "parking_lot",
        }
    }
}

/// The local work of the `*Work*` benchmarks: Go's loop of `foo *= 2; foo /= 2`,
/// [`WORK_ITERS`] times. `black_box` on every step keeps LLVM from folding the
/// loop (without it, the loop becomes one sign extension); it adds a store and a
/// load per step, which Go's code does not have, while Go's signed division by 2
/// is a longer sequence than LLVM's: `WorkOnly` shows the net difference. (In Go's
/// own benchmarks the result is dead and Go 1.19 deletes the loop's body, leaving
/// an empty 100-step loop; `bench/go/` keeps the result so that both do the work.)
#[inline]
pub fn local_work(mut acc: i64) -> i64 {
    for _ in 0..WORK_ITERS {
        acc = black_box(acc.wrapping_mul(2));
        acc /= 2;
    }
    acc
}

/// Runs `iters` iterations of `bench` with `contender` and returns the time they
/// took, all workers together (time per op = the result / `iters`).
///
/// Call it from a plain thread.
///
/// # Panics
///
/// If `contender` does not run `bench`, if a run exceeds [`RUN_TIMEOUT`], if a
/// worker panicked, or if a correctness check failed (a lost mutex update, a
/// semaphore count off at the end).
pub fn run(bench: Bench, contender: Impl, iters: u64) -> Duration {
    assert!(
        bench.contenders().contains(&contender),
        "{} does not run {}",
        contender.name(),
        bench.name()
    );
    if iters == 0 {
        return Duration::ZERO;
    }
    let workers = goro::maxprocs() * bench.parallelism();
    match contender {
        Impl::Goro | Impl::GoroNoBackoff => {
            let _setting = BackoffSetting::set(contender == Impl::Goro);
            crate::harness::run_bounded(RUN_TIMEOUT, bench.name(), move || {
                on_coroutines(bench, workers, iters)
            })
        }
        Impl::Std => mutex_bench::<Threads, std::sync::Mutex<u64>>(bench, workers, iters),
        Impl::ParkingLot => mutex_bench::<Threads, parking_lot::Mutex<u64>>(bench, workers, iters),
    }
}

/// Sets the back-off mode and restores the previous one when dropped (also on a
/// panic).
struct BackoffSetting(bool);

impl BackoffSetting {
    fn set(randomized: bool) -> BackoffSetting {
        let old = backoff::randomized();
        backoff::set_randomized(randomized);
        BackoffSetting(old)
    }
}

impl Drop for BackoffSetting {
    fn drop(&mut self) {
        backoff::set_randomized(self.0);
    }
}

/// Go's `testing.PB`: a worker's view of the shared iteration budget.
pub struct Pb<'a> {
    gate: &'a Gate,
    left: u64,
}

impl Pb<'_> {
    /// Whether the worker should run one more iteration (Go's `pb.Next`).
    #[inline]
    pub fn next_op(&mut self) -> bool {
        if self.left > 0 {
            self.left -= 1;
            return true;
        }
        let g = self.gate;
        let first = g.next.fetch_add(g.grain, Ordering::Relaxed);
        if first >= g.total {
            return false;
        }
        self.left = g.grain.min(g.total - first) - 1;
        true
    }
}

/// The shared state of one parallel run: the iteration budget and the start gate.
struct Gate {
    total: u64,
    /// Iterations a worker takes at a time. Go sizes batches to ~100 µs from the
    /// previous run (at most 10,000); with no previous run, this is 1/100 of each
    /// worker's share, at most 1,000 (tens of µs for the fastest ops here).
    grain: u64,
    next: AtomicU64,
    ready: AtomicUsize,
    open: AtomicBool,
}

impl Gate {
    fn new(workers: usize, iters: u64) -> Gate {
        Gate {
            total: iters,
            grain: (iters / (100 * workers as u64)).clamp(1, 1000),
            next: AtomicU64::new(0),
            ready: AtomicUsize::new(0),
            open: AtomicBool::new(false),
        }
    }
}

type Body = Arc<dyn Fn(&mut Pb<'_>) + Send + Sync>;

/// Go's `b.RunParallel(body)`: runs `body` on `workers` tasks of `R` that wait at a
/// start gate, and returns the time from the gate's opening to the last one's join.
/// The waits poll with `R::yield_now` (workers may outnumber Ps or cores), bounded.
fn run_parallel<R: Blocking>(workers: usize, iters: u64, body: Body) -> Duration {
    let gate = Arc::new(Gate::new(workers, iters));
    let bounded = |what: &str, cond: &dyn Fn() -> bool| {
        let t0 = Instant::now();
        while !cond() {
            R::yield_now();
            assert!(
                t0.elapsed() < START_TIMEOUT,
                "{what} not at the start gate in {START_TIMEOUT:?}"
            );
        }
    };
    let handles: Result<Vec<_>, String> = (0..workers)
        .map(|_| {
            let (gate, body) = (gate.clone(), body.clone());
            R::spawn(move || {
                // AcqRel / Acquire here, Acquire / Release at the coordinator's end:
                // a count and a flag that publish no data (the budget, `next`, is the
                // only thing the workers share, and it is atomic itself), so any
                // ordering would do; these keep the hand-off readable as one.
                gate.ready.fetch_add(1, Ordering::AcqRel);
                bounded("a worker", &|| gate.open.load(Ordering::Acquire));
                body(&mut Pb {
                    gate: &gate,
                    left: 0,
                });
            })
        })
        .collect();
    let handles = handles.unwrap_or_else(|e| panic!("{e}"));
    bounded("not all workers", &|| {
        gate.ready.load(Ordering::Acquire) == workers
    });
    let start = Instant::now();
    gate.open.store(true, Ordering::Release);
    for h in handles {
        R::join(h).unwrap_or_else(|e| panic!("{e}"));
    }
    start.elapsed()
}

/// A value on its own cache lines (Go pads with 128 bytes).
#[repr(align(128))]
struct Padded<T>(T);

/// The coordinator of a goro run (a coroutine).
fn on_coroutines(bench: Bench, workers: usize, iters: u64) -> Duration {
    let run = |body: Body| run_parallel::<Coroutines>(workers, iters, body);
    match bench {
        // Go's BenchmarkSemaUncontended. Same, but each worker's semaphore lives
        // on the heap in a 128-byte-aligned box (Go: 4 + 128 bytes from `new`).
        Bench::SemaUncontended => {
            let left = Arc::new(AtomicU64::new(0));
            let left2 = left.clone();
            let t = run(Arc::new(move |pb| {
                let sem = Box::new(Padded(AtomicU32::new(0)));
                while pb.next_op() {
                    sema::release(&sem.0, false);
                    sema::acquire(&sem.0, false, WaitReason::Sema);
                }
                left2.fetch_add(u64::from(sem.0.load(Ordering::Acquire)), Ordering::AcqRel);
            }));
            assert_eq!(left.load(Ordering::Acquire), 0, "units left over");
            t
        }
        // Go's benchmarkSema (SemaSynt*/SemaWork*): a release, the work if any, an
        // acquire; with `block`, the taker coroutine keeps maxprocs()/2 units (it
        // is spawned before the workers, as in Go, and joined after the clock
        // stopped). Each worker releases once more at the end.
        Bench::SemaSyntNonblock
        | Bench::SemaSyntBlock
        | Bench::SemaWorkNonblock
        | Bench::SemaWorkBlock => {
            let sem = Arc::new(AtomicU32::new(0));
            let keep = if bench.block() {
                goro::maxprocs() / 2
            } else {
                0
            };
            let taker = (keep > 0).then(|| {
                let sem = sem.clone();
                goro::go!(move || {
                    for _ in 0..keep {
                        sema::acquire(&sem, false, WaitReason::Sema);
                    }
                })
            });
            let work = bench.work();
            let sem2 = sem.clone();
            let t = run(Arc::new(move |pb| {
                let mut acc = 0i64;
                while pb.next_op() {
                    sema::release(&sem2, false);
                    if work {
                        acc = local_work(acc);
                    }
                    sema::acquire(&sem2, false, WaitReason::Sema);
                }
                black_box(acc);
                sema::release(&sem2, false);
            }));
            if let Some(h) = taker {
                if let Err(p) = h.join() {
                    std::panic::resume_unwind(p);
                }
            }
            let left = sem.load(Ordering::Acquire) as usize;
            assert_eq!(left, workers - keep, "semaphore count off at the end");
            t
        }
        // Not in Go's tree: the work alone.
        Bench::WorkOnly => run(Arc::new(|pb| {
            let mut acc = 0i64;
            while pb.next_op() {
                acc = local_work(acc);
            }
            black_box(acc);
        })),
        _ => mutex_bench::<Coroutines, goro::sync::Mutex<u64>>(bench, workers, iters),
    }
}

/// A mutex around the counter its holders increment.
pub trait CountingMutex: Send + Sync + 'static {
    fn with_zero() -> Self;
    /// Locks, adds one, unlocks.
    fn increment(&self);
    fn count(&self) -> u64;
}

/// `CountingMutex` for a mutex type `$m<u64>` whose guard is `$lock` away.
macro_rules! counting_mutex {
    ($m:ty, |$x:ident| $lock:expr) => {
        impl CountingMutex for $m {
            fn with_zero() -> Self {
                <$m>::new(0)
            }
            #[inline]
            fn increment(&self) {
                let $x = self;
                *$lock += 1;
            }
            fn count(&self) -> u64 {
                let $x = self;
                *$lock
            }
        }
    };
}

counting_mutex!(goro::sync::Mutex<u64>, |m| m.lock());
counting_mutex!(std::sync::Mutex<u64>, |m| m.lock().expect("poisoned"));
counting_mutex!(parking_lot::Mutex<u64>, |m| m.lock());
counting_mutex!(may::sync::Mutex<u64>, |m| m.lock().expect("poisoned"));

/// The `Mutex*` benchmarks with mutex type `M` on workers of `R`.
fn mutex_bench<R: Blocking, M: CountingMutex>(
    bench: Bench,
    workers: usize,
    iters: u64,
) -> Duration {
    match bench {
        // Go's BenchmarkMutexUncontended: each worker its own padded mutex (on its
        // stack, as Go's does not escape), plus the counting.
        Bench::MutexUncontended => {
            let total = Arc::new(AtomicU64::new(0));
            let total2 = total.clone();
            let t = run_parallel::<R>(
                workers,
                iters,
                Arc::new(move |pb| {
                    let m = Padded(M::with_zero());
                    while pb.next_op() {
                        m.0.increment();
                    }
                    total2.fetch_add(m.0.count(), Ordering::AcqRel);
                }),
            );
            let total = total.load(Ordering::Acquire);
            assert_eq!(total, iters, "lost updates under the mutex");
            t
        }
        // Go's benchmarkMutex (Mutex, MutexSlack, MutexWork, MutexWorkSlack): one
        // shared mutex; lock+unlock, then the work if any. Slack: ten workers per
        // P, all of them in the loop, as Go's SetParallelism(10).
        Bench::Mutex | Bench::MutexSlack | Bench::MutexWork | Bench::MutexWorkSlack => {
            let m = Arc::new(M::with_zero());
            let m2 = m.clone();
            let work = bench.work();
            let t = run_parallel::<R>(
                workers,
                iters,
                Arc::new(move |pb| {
                    let mut acc = 0i64;
                    while pb.next_op() {
                        m2.increment();
                        if work {
                            acc = local_work(acc);
                        }
                    }
                    black_box(acc);
                }),
            );
            assert_eq!(m.count(), iters, "lost updates under the mutex");
            t
        }
        _ => unreachable!("{} is not a Mutex benchmark", bench.name()),
    }
}

/// The run of a `sync` suite port (`contender` picks goro with or without the
/// back-off, or std's and parking_lot's mutexes on threads), from a plain thread: ns
/// per op, sized to [`target`](super::target) per run; None if `contender` does not
/// run `name`.
pub fn measure(name: &str, contender: Impl) -> Option<super::Outcome> {
    let bench = Bench::from_name(name).filter(|b| b.contenders().contains(&contender))?;
    let ns = super::sized(super::target(), |n| run(bench, contender, n));
    Some(Ok(super::Measurement::value(ns)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every benchmark with every contender, briefly: its checks (counts, no lost
    /// update) hold, and nothing hangs.
    #[test]
    fn every_workload_runs_and_checks() {
        for bench in Bench::ALL {
            for &c in bench.contenders() {
                for iters in [1, 7, 3000] {
                    run(bench, c, iters);
                }
            }
        }
    }

    #[test]
    fn budget_hands_out_exactly_iters() {
        let gate = Gate::new(3, 1234);
        let mut pbs: Vec<Pb<'_>> = (0..3)
            .map(|_| Pb {
                gate: &gate,
                left: 0,
            })
            .collect();
        let mut n = 0u64;
        let mut live = true;
        while live {
            live = false;
            for pb in &mut pbs {
                if pb.next_op() {
                    n += 1;
                    live = true;
                }
            }
        }
        assert_eq!(n, 1234);
    }

    #[test]
    fn names_round_trip() {
        for b in Bench::ALL {
            assert_eq!(Bench::from_name(b.name()), Some(b));
        }
    }
}
