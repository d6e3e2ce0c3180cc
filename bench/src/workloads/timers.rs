//! The `time` suite on goro: Go's `ParallelTimerLatency` and `StaggeredTickerLatency/D/N`
//! (work D, N tickers per P) of `sleep_test.go` (CL 232298; the `go` contender runs Go's
//! own). How late a timer's work runs after its deadline, in µs (mean and max as Go's
//! `avg-late-ns` and `max-late-ns`, p50, p99). They skip unless 2 <= Ps <= CPUs, as in
//! Go. A timer that fires early or a wrong number of times panics (a runtime bug).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use goro::sync::WaitGroup;
use goro::time::after_func;

use super::{Measurement, Outcome};
use crate::harness::{run_bounded, spin_until};

/// Bounds of one (sub-)benchmark and of each spin-wait in it; past one, a panic.
const BENCH_TIMEOUT: Duration = Duration::from_secs(120);
const SPIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Rounds of `ParallelTimerLatency`, ticks per ticker.
const ROUNDS: usize = 300;
const TICKS: usize = 100;

/// goro's run of a `time` suite workload, from a plain thread.
pub fn run(name: &str) -> Option<Outcome> {
    if !matches!(name, "ParallelTimerLatency" | "StaggeredTickerLatency") {
        return None;
    }
    let procs = goro::maxprocs();
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    if procs < 2 || cpus < procs {
        return Some(Err(format!(
            "needs >= 2 Ps and no more Ps than CPUs, as in Go ({procs} Ps, {cpus} CPUs)"
        )));
    }
    Some(Ok(match name {
        "ParallelTimerLatency" => {
            let l = run_bounded(BENCH_TIMEOUT, name, move || parallel_main(procs));
            Measurement::value(l.avg)
                .with("ParallelTimerLatency/max", l.max)
                .with("ParallelTimerLatency/p50", l.p50)
                .with("ParallelTimerLatency/p99", l.p99)
        }
        _ => {
            let mut m = Measurement::default();
            let subs = (1..=10)
                .map(|n| ("300us", 300, n))
                .chain([("2ms", 2000, 1)]);
            for (dur_name, us, per_p) in subs {
                let sub = format!("{name}/{dur_name}/{per_p}");
                let dur = Duration::from_micros(us);
                let what = sub.clone();
                let l = run_bounded(BENCH_TIMEOUT, &sub, move || {
                    staggered_main(&what, procs, procs * per_p, dur)
                });
                // The first (300us/1) is the row.
                m = match m.value {
                    None => Measurement::value(l.avg).with("StaggeredTickerLatency/max", l.max),
                    Some(_) => m.with(&sub, l.avg),
                };
            }
            m
        }
    }))
}

/// In µs; p50 and p99 by nearest rank.
struct Lateness {
    avg: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

/// Lateness in ns (negative: BEFORE the deadline), per timer.
struct Samples(Vec<Mutex<Vec<i64>>>);

impl Samples {
    fn new(timers: usize) -> Samples {
        Samples((0..timers).map(|_| Mutex::default()).collect())
    }

    fn record(&self, j: usize, expected: Instant) {
        let now = Instant::now();
        // `as`: a lateness is far below i64::MAX ns (292 years).
        let late = match now.checked_duration_since(expected) {
            Some(late) => late.as_nanos() as i64,
            None => -((expected - now).as_nanos() as i64),
        };
        let mut v = self.0[j].lock().unwrap_or_else(PoisonError::into_inner);
        v.push(late);
    }

    /// Takes the samples (their writers may still hold the `Arc`) and checks them.
    fn finish(&self, name: &str, each: usize) -> Lateness {
        let mut all = Vec::new();
        for (j, m) in self.0.iter().enumerate() {
            let v = std::mem::take(&mut *m.lock().unwrap_or_else(PoisonError::into_inner));
            assert_eq!(
                v.len(),
                each,
                "{name}: timer {j} fired a wrong number of times"
            );
            all.extend(v);
        }
        all.sort_unstable();
        // Not empty: every benchmark has at least one timer and one sample per timer.
        let n = all.len();
        assert!(
            all[0] >= 0,
            "{name}: wake-ups ran BEFORE their deadline (by up to {} ns): a runtime bug",
            -all[0]
        );
        let us = |ns: i64| ns as f64 / 1e3;
        let rank = |p: f64| us(super::quantile(&all, p));
        Lateness {
            avg: all.iter().map(|&ns| ns as f64).sum::<f64>() / n as f64 / 1e3,
            p50: rank(0.50),
            p99: rank(0.99),
            max: us(all[n - 1]),
        }
    }
}

/// Go's `doWork`: spins without yielding, keeping the P, as a CPU-bound goroutine does.
fn do_work(dur: Duration) {
    let start = Instant::now();
    while start.elapsed() < dur {}
}

/// Go's `warmupScheduler`: with `n` = Ps, every P has an M running when this returns.
fn warmup_scheduler(n: usize) {
    all_at_once(n, || do_work(Duration::from_millis(1)));
}

/// Runs `f` on `n` coroutines once all `n` run at once (with `n` = Ps: on every P), and
/// joins them. They spin without yielding: with fewer than `n` Ps free, a panic after 10 s.
pub fn all_at_once<R: Send + 'static>(n: usize, f: fn() -> R) -> Vec<R> {
    let started = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let started = started.clone();
            goro::go!(move || {
                // A count that publishes nothing: AcqRel / Acquire are more than enough.
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

/// Go's `BenchmarkParallelTimerLatency`: the lateness of 1 ms timers armed by a spinning
/// coroutine, so that the other Ps must run them; each round's timer functions spin until
/// all have fired. Unlike Go: `ROUNDS` rounds, not `b.N`; p50 and p99 as well.
fn parallel_main(procs: usize) -> Lateness {
    const DELAY: Duration = Duration::from_millis(1);
    let timers = procs - 1;
    // `fired` publishes nothing (samples have their own locks): Release/Acquire/AcqRel suffice.
    let shared = Arc::new((Samples::new(timers), AtomicUsize::new(0), WaitGroup::new()));
    let (samples, fired, wg) = &*shared;

    warmup_scheduler(procs);
    // Go: "Ensure sysmon is in deep sleep."
    do_work(Duration::from_millis(30));

    for round in 0..ROUNDS {
        wg.add(timers as i64);
        fired.store(0, Ordering::Release);
        for j in 0..timers {
            let expected = Instant::now() + DELAY;
            let s = shared.clone();
            // Dropping a goro `Timer` does not stop it.
            let _ = after_func(DELAY, move || {
                let (samples, fired, wg) = &*s;
                samples.record(j, expected);
                fired.fetch_add(1, Ordering::AcqRel);
                spin_until(
                    SPIN_TIMEOUT,
                    || format!("ParallelTimerLatency round {round}: timer {j} waits for all"),
                    || fired.load(Ordering::Acquire) >= timers,
                );
                wg.done();
            });
        }
        spin_until(
            SPIN_TIMEOUT,
            || {
                let n = fired.load(Ordering::Acquire);
                format!("ParallelTimerLatency round {round}: {n} of {timers} 1 ms timers fired")
            },
            || fired.load(Ordering::Acquire) >= timers,
        );
        wg.wait();
        // Go: let the other scheduler threads go idle before the next round.
        do_work(Duration::from_millis(1));
    }
    samples.finish("ParallelTimerLatency", ROUNDS)
}

/// A sub-benchmark of Go's `BenchmarkStaggeredTickerLatency`: `tickers` 3 ms tickers
/// (a capacity-1 channel fed by a periodic timer, as Go's) made `3 ms / procs` apart,
/// each read by a coroutine that spins `dur` per tick, for `TICKS` ticks (Go: `b.N`).
fn staggered_main(name: &str, procs: usize, tickers: usize, dur: Duration) -> Lateness {
    const PERIOD: Duration = Duration::from_millis(3);
    let samples = Arc::new(Samples::new(tickers));

    warmup_scheduler(procs);

    let stagger = PERIOD / u32::try_from(procs).expect("too many Ps");
    let readers: Vec<_> = (0..tickers)
        .map(|j| {
            do_work(stagger);
            let first = Instant::now() + PERIOD;
            let ticker = goro::time::Ticker::new(PERIOD);
            let s = samples.clone();
            goro::go!(move || {
                let mut expected = first;
                for _ in 0..TICKS {
                    ticker.recv();
                    s.record(j, expected);
                    expected += PERIOD;
                    do_work(dur);
                }
                ticker.stop();
            })
        })
        .collect();
    // Go waits on a WaitGroup; joining also surfaces a reader's panic.
    for h in readers {
        h.join().expect("ticker reader panicked");
    }
    samples.finish(name, TICKS)
}
