//! Ports of Go 1.19's runtime-semaphore (`Sema*`, `sync/runtime_sema_test.go`) and
//! `sync.Mutex` (`Mutex*`, `sync/mutex_test.go`) benchmarks, for `benches/sync.rs` and
//! `compare --suite sync` (Go's side: `bench/go/sync.go`).
//!
//! [`run`] is Go's `b.RunParallel`: the workers (coroutines for goro, threads for `std`
//! and `parking_lot`) take `iters` iterations from a shared budget in batches (Go's
//! `testing.PB`). Unlike Go: spawning is not timed (the clock starts at a start gate),
//! and every `Mutex*` critical section adds one to a counter, checked after the run (a
//! lost update panics; `bench/go/` counts too).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::park::WaitReason;
use goro_sync::{backoff, sema};

use super::tasks::{Blocking, Coroutines};
use crate::contenders::threads::Threads;

/// Bound of one timed run (spawning to the last join): past it, a panic (a hang).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound of the wait for every worker to reach the start gate.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Length of the local work loop of the `*Work*` benchmarks (Go's 100).
pub const WORK_ITERS: u32 = 100;

/// One of the benchmarks: Go's name without `Benchmark`, and how it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Bench {
    name: &'static str,
    kind: Kind,
    /// Whether it does the local work between its operations.
    work: bool,
    /// Workers per P (10: Go's `b.SetParallelism(10)`, the `*Slack` benchmarks).
    per_p: usize,
}

/// What a benchmark's workers do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Kind {
    /// Every worker releases then acquires its own (padded) semaphore: never waits.
    SemaUncontended,
    /// One shared semaphore, a release then an acquire per op; with `block`, a taker
    /// keeps `maxprocs() / 2` units, so that some acquires must wait (none with one P).
    Sema { block: bool },
    /// Every worker locks and unlocks its own (padded) mutex.
    MutexUncontended,
    /// One shared mutex, lock+unlock per op.
    Mutex,
    /// Not in Go's tree: the local work alone, per op (`bench/go/` has it too), to
    /// compare what the two compilers make of it.
    WorkOnly,
}

const fn bench(name: &'static str, kind: Kind, work: bool, per_p: usize) -> Bench {
    Bench {
        name,
        kind,
        work,
        per_p,
    }
}

impl Bench {
    /// Every benchmark, in report order.
    pub const ALL: [Bench; 11] = [
        bench("SemaUncontended", Kind::SemaUncontended, false, 1),
        bench("SemaSyntNonblock", Kind::Sema { block: false }, false, 1),
        bench("SemaSyntBlock", Kind::Sema { block: true }, false, 1),
        bench("SemaWorkNonblock", Kind::Sema { block: false }, true, 1),
        bench("SemaWorkBlock", Kind::Sema { block: true }, true, 1),
        bench("MutexUncontended", Kind::MutexUncontended, false, 1),
        bench("Mutex", Kind::Mutex, false, 1),
        bench("MutexSlack", Kind::Mutex, false, 10),
        bench("MutexWork", Kind::Mutex, true, 1),
        bench("MutexWorkSlack", Kind::Mutex, true, 10),
        bench("WorkOnly", Kind::WorkOnly, true, 1),
    ];

    /// Go's name without `Benchmark`: the criterion group's name.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// The benchmark named `name` (as [`name`](Self::name) spells it).
    pub fn from_name(name: &str) -> Option<Bench> {
        Bench::ALL.into_iter().find(|b| b.name == name)
    }

    /// Who runs it: the semaphores goro with and without its back-off, the mutexes
    /// everyone, `WorkOnly` goro alone.
    pub fn contenders(self) -> &'static [Impl] {
        match self.kind {
            Kind::SemaUncontended | Kind::Sema { .. } => &[Impl::Goro, Impl::GoroNoBackoff],
            Kind::MutexUncontended | Kind::Mutex => {
                &[Impl::Goro, Impl::GoroNoBackoff, Impl::Std, Impl::ParkingLot]
            }
            Kind::WorkOnly => &[Impl::Goro],
        }
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
/// [`WORK_ITERS`] times. `black_box` keeps LLVM from folding the loop, at a store and a
/// load per step that Go's code lacks (`WorkOnly` shows the net difference). Go 1.19
/// deletes the body of its own loop (the result is dead); `bench/go/` keeps the result.
#[inline]
pub fn local_work(mut acc: i64) -> i64 {
    for _ in 0..WORK_ITERS {
        acc = black_box(acc.wrapping_mul(2));
        acc /= 2;
    }
    acc
}

/// Runs `iters` iterations of `bench` with `contender` and returns the time they
/// took, all workers together (time per op = the result / `iters`); from a plain thread.
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
    let workers = goro::maxprocs() * bench.per_p;
    match contender {
        Impl::Goro | Impl::GoroNoBackoff => {
            let _restore = BackoffSetting(backoff::randomized());
            backoff::set_randomized(contender == Impl::Goro);
            crate::harness::run_bounded(RUN_TIMEOUT, bench.name(), move || {
                on_coroutines(bench, workers, iters)
            })
        }
        Impl::Std => mutex_bench::<Threads, std::sync::Mutex<u64>>(bench, workers, iters),
        Impl::ParkingLot => mutex_bench::<Threads, parking_lot::Mutex<u64>>(bench, workers, iters),
    }
}

/// Sets the back-off mode; restores the previous one when dropped (also on a panic).
struct BackoffSetting(bool);

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
        let first = g.next.fetch_add(g.grain, Ordering::Relaxed); // Relaxed: a ticket, no data
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
    /// Iterations a worker takes at a time: 1/100 of its share, at most 1,000 (Go sizes
    /// batches to ~100 µs from the previous run, at most 10,000).
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

    fn pb(&self) -> Pb<'_> {
        Pb {
            gate: self,
            left: 0,
        }
    }
}

/// What each worker of [`run_parallel`] runs.
pub type Body = Arc<dyn Fn(&mut Pb<'_>) + Send + Sync>;

/// Go's `b.RunParallel(body)`: runs `body` on `workers` tasks of `R` that wait at a
/// start gate, and returns the time from the gate's opening to the last one's join.
/// The waits poll with `R::yield_now` (workers may outnumber Ps or cores), bounded.
pub fn run_parallel<R: Blocking>(workers: usize, iters: u64, body: Body) -> Duration {
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
                // AcqRel / Acquire here, Acquire / Release at the coordinator's: a count
                // and a flag that publish no data (`next` is atomic itself), so any will do.
                gate.ready.fetch_add(1, Ordering::AcqRel);
                bounded("a worker", &|| gate.open.load(Ordering::Acquire));
                body(&mut gate.pb());
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
    let work = bench.work;
    match bench.kind {
        // Go's BenchmarkSemaUncontended, but each worker's semaphore is on the heap in a
        // 128-byte-aligned box (Go: 4 + 128 bytes from `new`).
        Kind::SemaUncontended => {
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
        // Go's benchmarkSema: the taker is spawned before the workers, as in Go, and
        // joined after the clock stopped; each worker releases once more at the end.
        Kind::Sema { block } => {
            let sem = Arc::new(AtomicU32::new(0));
            let keep = if block { goro::maxprocs() / 2 } else { 0 };
            let taker = (keep > 0).then(|| {
                let sem = sem.clone();
                goro::go!(move || {
                    for _ in 0..keep {
                        sema::acquire(&sem, false, WaitReason::Sema);
                    }
                })
            });
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
        Kind::WorkOnly => run(Arc::new(|pb| {
            let mut acc = 0i64;
            while pb.next_op() {
                acc = local_work(acc);
            }
            black_box(acc);
        })),
        Kind::MutexUncontended | Kind::Mutex => {
            mutex_bench::<Coroutines, goro::sync::Mutex<u64>>(bench, workers, iters)
        }
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
    let run = |body: Body| run_parallel::<R>(workers, iters, body);
    let work = bench.work;
    match bench.kind {
        // Go's BenchmarkMutexUncontended: each worker its own padded mutex (on its stack,
        // as Go's does not escape).
        Kind::MutexUncontended => {
            let total = Arc::new(AtomicU64::new(0));
            let total2 = total.clone();
            let t = run(Arc::new(move |pb| {
                let m = Padded(M::with_zero());
                while pb.next_op() {
                    m.0.increment();
                }
                total2.fetch_add(m.0.count(), Ordering::AcqRel);
            }));
            let total = total.load(Ordering::Acquire);
            assert_eq!(total, iters, "lost updates under the mutex");
            t
        }
        // Go's benchmarkMutex: one shared mutex; lock+unlock, then the work if any.
        Kind::Mutex => {
            let m = Arc::new(M::with_zero());
            let m2 = m.clone();
            let t = run(Arc::new(move |pb| {
                let mut acc = 0i64;
                while pb.next_op() {
                    m2.increment();
                    if work {
                        acc = local_work(acc);
                    }
                }
                black_box(acc);
            }));
            assert_eq!(m.count(), iters, "lost updates under the mutex");
            t
        }
        _ => unreachable!("{} is not a Mutex benchmark", bench.name),
    }
}

/// A `sync` suite port's run on `contender`, from a plain thread: ns per op, sized to
/// [`target`](super::target) per run; None if `contender` does not run `name`.
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
        let mut pbs = [(); 3].map(|()| gate.pb());
        let mut n = 0;
        // Rounds in which each worker asks for one iteration, until none gets one.
        while let got @ 1.. = pbs.iter_mut().map(|pb| usize::from(pb.next_op())).sum() {
            n += got;
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
