//! Timer lateness: how long after its deadline a timer's work actually runs, the
//! goro side of the `time` suite.
//!
//! criterion can only report time per iteration, so these report the mean and the
//! maximum lateness (the two metrics of Go's benchmarks, `avg-late-ns` and
//! `max-late-ns`) and the median and 99th percentile, in µs.
//!
//! - `SleepLatency/100us`, `SleepLatency/1ms`: one coroutine on an otherwise idle
//!   runtime sleeps `d` repeatedly; lateness = elapsed - `d`; the `thread` companions
//!   are the same with `std::thread::sleep` on a plain thread, the reference. (No Go
//!   benchmark; it measures the idle path: the netpoller's timed wait.)
//! - `ParallelTimerLatency`: Go's `BenchmarkParallelTimerLatency` (CL 232298).
//! - `StaggeredTickerLatency/D/N` (work-dur D, N tickers per P): Go's
//!   `BenchmarkStaggeredTickerLatency` (CL 232298). Go's side of these two is Go's own
//!   `time` package benchmark (see `contenders/go.rs`).
//!
//! The last two need at least 2 Ps and no more Ps than CPUs, as in Go; otherwise they
//! skip. A timer that fires before its deadline, or a wrong number of times, panics
//! (a runtime bug).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goro::sync::WaitGroup;
use goro::time::Timer;

use super::Measurement;
use crate::harness::{run_bounded, spin_until};

/// Bound of one benchmark (one sub-benchmark for the staggered tickers).
const BENCH_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound of every spin-wait inside a benchmark.
const SPIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Sleeps per `SleepLatency` run, rounds of `ParallelTimerLatency`, ticks per ticker.
const SLEEPS: usize = 500;
const ROUNDS: usize = 300;
const TICKS: usize = 100;

/// goro's run of a `time` suite workload (from a plain thread), or None if it is not
/// one.
pub fn run(name: &str) -> Option<super::Outcome> {
    let procs = goro::maxprocs();
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    let needs_2 = || {
        (procs < 2 || cpus < procs).then(|| {
            format!("needs >= 2 Ps and no more Ps than CPUs, as in Go ({procs} Ps, {cpus} CPUs)")
        })
    };
    Some(Ok(match name {
        "SleepLatency/100us" | "SleepLatency/1ms" => {
            let d = if name.ends_with("1ms") {
                Duration::from_millis(1)
            } else {
                Duration::from_micros(100)
            };
            let on_goro = run_bounded(BENCH_TIMEOUT, name, move || {
                measure_sleeps(d, SLEEPS, goro::time::sleep)
            })
            .finish(name, SLEEPS);
            let on_thread = measure_sleeps(d, SLEEPS, thread::sleep).finish(name, SLEEPS);
            Measurement::value(on_goro.p50)
                .with(&format!("{name}/p99"), on_goro.p99)
                .with(&format!("{name}/thread/p50"), on_thread.p50)
                .with(&format!("{name}/thread/p99"), on_thread.p99)
        }
        "ParallelTimerLatency" => {
            if let Some(why) = needs_2() {
                return Some(Err(why));
            }
            let l = run_bounded(BENCH_TIMEOUT, name, move || {
                parallel_main(procs, procs - 1, ROUNDS)
            })
            .finish(name, ROUNDS);
            Measurement::value(l.avg)
                .with("ParallelTimerLatency/max", l.max)
                .with("ParallelTimerLatency/p50", l.p50)
                .with("ParallelTimerLatency/p99", l.p99)
        }
        "StaggeredTickerLatency" => {
            if let Some(why) = needs_2() {
                return Some(Err(why));
            }
            let mut m = Measurement::default();
            let subs = (1..=10).map(|n| (300, n)).chain([(2000, 1)]);
            for (us, per_p) in subs {
                let dur = Duration::from_micros(us);
                let sub = format!(
                    "{name}/{}/{per_p}",
                    if us == 2000 { "2ms" } else { "300us" }
                );
                let l = run_bounded(BENCH_TIMEOUT, &sub.clone(), move || {
                    staggered_main(procs, procs * per_p, dur, TICKS, Duration::from_millis(3))
                })
                .finish(&sub, TICKS);
                if m.value.is_none() {
                    m = Measurement::value(l.avg).with("StaggeredTickerLatency/max", l.max);
                } else {
                    m = m.with(&sub, l.avg);
                }
            }
            m
        }
        _ => return None,
    }))
}

/// Summary of a set of lateness samples, in µs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lateness {
    pub avg: f64,
    /// Median and 99th percentile (nearest rank).
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Lateness {
    /// Summarises `samples` (ns; sorted in place); all zero if there are none.
    pub fn of(samples: &mut [u64]) -> Lateness {
        samples.sort_unstable();
        let n = samples.len();
        if n == 0 {
            return Lateness {
                avg: 0.0,
                p50: 0.0,
                p99: 0.0,
                max: 0.0,
            };
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let rank = |p: f64| us(samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1]);
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Lateness {
            avg: sum as f64 / n as f64 / 1e3,
            p50: rank(0.50),
            p99: rank(0.99),
            max: us(samples[n - 1]),
        }
    }
}

/// Spins on the CPU for `dur` without yielding (Go's `doWork` in `sleep_test.go`): the
/// calling coroutine keeps its P the whole time, as a CPU-bound goroutine does.
pub fn do_work(dur: Duration) {
    let start = Instant::now();
    while start.elapsed() < dur {}
}

/// Go's `warmupScheduler` (`sleep_test.go`): `n` coroutines each spin until all `n`
/// have started, then spin 1 ms more, so that every P has an M running when the
/// measurement starts.
pub fn warmup_scheduler(n: usize) {
    all_at_once(n, || do_work(Duration::from_millis(1)));
}

/// Runs `f` on `n` coroutines that each wait (spinning, bounded) until all `n` run at
/// once, and joins them: with `n` = the number of Ps, once on every P. No coroutine
/// yields while spinning: with fewer than `n` Ps free this panics after 10 s.
pub fn all_at_once<R: Send + 'static>(n: usize, f: fn() -> R) -> Vec<R> {
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let started = started.clone();
            goro::go!(move || {
                // A count only (no data is published through it); AcqRel and Acquire
                // are more than enough for "all have started".
                started.fetch_add(1, Ordering::AcqRel);
                spin_until(
                    SPIN_TIMEOUT,
                    || format!("not all {n} coroutines ran at once"),
                    || started.load(Ordering::Acquire) >= n,
                );
                f()
            })
        })
        .collect();
    let join = |h: goro::JoinHandle<R>| h.join().expect("a coroutine panicked");
    handles.into_iter().map(join).collect()
}

/// Lateness samples of one benchmark, per timer (or per ticker, or one series).
struct Samples {
    per_timer: Vec<Mutex<Vec<u64>>>,
    /// Samples where the work ran BEFORE its deadline (recorded as 0 late, as Go
    /// clamps them; counted here because each one is a runtime bug).
    early: AtomicUsize,
    max_early_ns: AtomicU64,
}

impl Samples {
    fn new(timers: usize, per_timer: usize) -> Samples {
        Samples {
            per_timer: (0..timers)
                .map(|_| Mutex::new(Vec::with_capacity(per_timer)))
                .collect(),
            early: AtomicUsize::new(0),
            max_early_ns: AtomicU64::new(0),
        }
    }

    /// Records timer `j`'s work running at `now` for a deadline of `expected`.
    fn record(&self, j: usize, now: Instant, expected: Instant) {
        let late = match now.checked_duration_since(expected) {
            Some(late) => nanos(late),
            None => {
                // Relaxed: counters read once the timers are done (after a join or a
                // WaitGroup wait, which order them).
                self.early.fetch_add(1, Ordering::Relaxed);
                self.max_early_ns
                    .fetch_max(nanos(expected - now), Ordering::Relaxed);
                0
            }
        };
        self.per_timer[j]
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(late);
    }

    /// Moves the samples out into a new `Samples` (for a caller that cannot unwrap the
    /// `Arc` it shares with timer functions or coroutines that may not have been
    /// dropped yet).
    fn take(&self) -> Samples {
        Samples {
            per_timer: self
                .per_timer
                .iter()
                .map(|m| {
                    Mutex::new(std::mem::take(
                        &mut *m.lock().unwrap_or_else(|e| e.into_inner()),
                    ))
                })
                .collect(),
            early: AtomicUsize::new(self.early.load(Ordering::Relaxed)),
            max_early_ns: AtomicU64::new(self.max_early_ns.load(Ordering::Relaxed)),
        }
    }

    /// The summary of all samples; panics (a runtime bug) if a timer has not exactly
    /// `expected_each` samples or any ran early.
    fn finish(self, name: &str, expected_each: usize) -> Lateness {
        let early = self.early.into_inner();
        assert_eq!(
            early,
            0,
            "{name}: wake-ups ran BEFORE their deadline (by up to {} ns): a runtime bug",
            self.max_early_ns.into_inner()
        );
        let mut all = Vec::new();
        for (j, m) in self.per_timer.into_iter().enumerate() {
            let v = m.into_inner().unwrap_or_else(|e| e.into_inner());
            assert_eq!(
                v.len(),
                expected_each,
                "{name}: timer {j} fired a wrong number of times"
            );
            all.extend(v);
        }
        Lateness::of(&mut all)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Sleeps `d` `reps` times with `sleep`; the lateness of each.
fn measure_sleeps(d: Duration, reps: usize, sleep: fn(Duration)) -> Samples {
    let s = Samples::new(1, reps);
    for _ in 0..reps {
        let start = Instant::now();
        sleep(d);
        s.record(0, Instant::now(), start + d);
    }
    s
}

/// Ports Go's `BenchmarkParallelTimerLatency` (CL 232298): timer latency when the
/// coroutine that creates the timers is busy (spinning) and the timers must be run by
/// the other Ps.
///
/// As in Go: warm up the scheduler, spin 30 ms, then each round arms `procs - 1`
/// one-shot 1 ms timers from the measuring coroutine (spawned once, like Go's benchmark
/// goroutine), each of whose functions records its lateness, counts itself and spins
/// until all have fired; the measuring coroutine spins until they all have, waits for
/// them (a [`WaitGroup`], Go's `sync.WaitGroup`) and spins 1 ms before the next round.
/// Differences: a fixed number of rounds instead of `b.N`; the function runs on a new
/// coroutine per firing (goro's `after_func`, like Go's `AfterFunc`); p50 / p99 are
/// reported as well.
/// The measuring coroutine of `ParallelTimerLatency`.
fn parallel_main(procs: usize, timer_count: usize, rounds: usize) -> Samples {
    const DELAY: Duration = Duration::from_millis(1);
    struct Shared {
        samples: Samples,
        count: AtomicUsize,
        wg: WaitGroup,
    }
    let shared = Arc::new(Shared {
        samples: Samples::new(timer_count, rounds),
        count: AtomicUsize::new(0),
        wg: WaitGroup::new(),
    });

    warmup_scheduler(procs);
    // Go: "Ensure sysmon is in deep sleep."
    do_work(Duration::from_millis(30));

    for round in 0..rounds {
        shared.wg.add(timer_count as i64);
        shared.count.store(0, Ordering::Release);
        for j in 0..timer_count {
            let expected = Instant::now() + DELAY;
            let s = shared.clone();
            // Dropping a goro `Timer` does not stop it.
            let _ = Timer::after_func(DELAY, move || {
                s.samples.record(j, Instant::now(), expected);
                s.count.fetch_add(1, Ordering::AcqRel);
                spin_until(
                    SPIN_TIMEOUT,
                    || {
                        format!(
                            "ParallelTimerLatency round {round}: timer {j} waits for the others"
                        )
                    },
                    || s.count.load(Ordering::Acquire) >= timer_count,
                );
                s.wg.done();
            });
        }
        spin_until(
            SPIN_TIMEOUT,
            || {
                format!(
                    "ParallelTimerLatency round {round}: {} of {timer_count} 1 ms timers fired",
                    shared.count.load(Ordering::Acquire)
                )
            },
            || shared.count.load(Ordering::Acquire) >= timer_count,
        );
        shared.wg.wait();
        // Go: let the other scheduler threads go idle before the next round.
        do_work(Duration::from_millis(1));
    }
    // The last round's timer coroutines may still be returning: take, not unwrap.
    shared.samples.take()
}

/// Ports Go's `BenchmarkStaggeredTickerLatency` (CL 232298): ticker latency with
/// staggered wake-up times and CPU-bound work of `work-dur` after each tick.
///
/// As in Go: for each work duration and each tickers-per-P from 1 to
/// `int(3 ms / work-dur)`, warm up the scheduler, then create `procs * tickers-per-P`
/// 3 ms tickers, spinning `3 ms / procs` before each (the stagger), each read by its own
/// coroutine that records its lateness against its expected wake-up, advances that by
/// 3 ms and spins `work-dur`, for a fixed number of ticks (Go: `b.N`); then wait for all
/// readers. The ticker is goro's `time::Ticker` (a capacity-1 channel fed by a periodic
/// runtime timer, as Go's). Each sub-benchmark runs in a fresh coroutine, as Go's
/// `b.Run` does.
/// One sub-benchmark of `StaggeredTickerLatency`; its samples.
fn staggered_main(
    procs: usize,
    ticker_count: usize,
    dur: Duration,
    ticks: usize,
    delay: Duration,
) -> Samples {
    struct Shared {
        samples: Samples,
        wg: WaitGroup,
    }
    let shared = Arc::new(Shared {
        samples: Samples::new(ticker_count, ticks),
        wg: WaitGroup::new(),
    });

    warmup_scheduler(procs);

    shared.wg.add(ticker_count as i64);
    let stagger = delay / u32::try_from(procs).expect("too many Ps");
    let readers: Vec<_> = (0..ticker_count)
        .map(|j| {
            do_work(stagger);
            let first = Instant::now() + delay;
            let ticker = goro::time::Ticker::new(delay);
            let s = shared.clone();
            goro::go!(move || {
                let mut expected = first;
                for _ in 0..ticks {
                    ticker.recv();
                    s.samples.record(j, Instant::now(), expected);
                    expected += delay;
                    do_work(dur);
                }
                ticker.stop();
                s.wg.done();
            })
        })
        .collect();
    shared.wg.wait();
    // The readers are done (or about to return): join them to surface a panic.
    for h in readers {
        h.join().expect("ticker reader panicked");
    }
    shared.samples.take()
}
