//! Timer lateness: how long after its deadline a timer's work actually runs.
//!
//! ```text
//! cargo run --release -p goro-bench --bin timer_latency [-- --quick]
//! GORO_MAXPROCS=2 cargo run --release -p goro-bench --bin timer_latency
//! ```
//!
//! criterion can only report time per iteration, so this is a plain binary that prints
//! one line per benchmark: the mean and maximum lateness (the two metrics Go's
//! benchmarks report, `avg-late-ns` and `max-late-ns`), then the median and 99th
//! percentile, in nanoseconds, over all samples.
//!
//! - `SleepLatency/100us`, `SleepLatency/1ms`: one coroutine on an otherwise idle
//!   runtime sleeps `d` repeatedly; lateness = elapsed - `d`. `SleepLatency/thread/..`:
//!   the same with `std::thread::sleep` on a plain thread, the reference. (No Go
//!   benchmark; it measures the idle path: the netpoller's timed wait.)
//! - `ParallelTimerLatency`: Go's `BenchmarkParallelTimerLatency` (CL 232298).
//! - `StaggeredTickerLatency/work-dur=D/tickers-per-P=N`: Go's
//!   `BenchmarkStaggeredTickerLatency` (CL 232298).
//!
//! Each line ends with the hypervisor's steal time while it ran (`/proc/stat`): on a
//! VM with an overcommitted host the guest stops for milliseconds at a time, which
//! shows up as lateness no scheduler can avoid (the `thread` reference lines pay it
//! too).
//!
//! The last two need at least 2 Ps and no more Ps than CPUs, as in Go; otherwise they
//! print a skip line. `--quick` runs fewer rounds (for a smoke test).
//!
//! Every benchmark runs in a coroutine watched from the main thread with a bound (a
//! hang panics with the benchmark's name), and every spin-wait panics after 10 s. A
//! timer that fires before its deadline, or a timer or ticker that fires a wrong number
//! of times, is reported as a runtime bug and makes the exit status non-zero.

use std::env;
use std::fmt::Write as _;
use std::fs;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goro::time::Timer;
use goro_bench::{
    do_work, run_bounded, spin_until, steal_time, warmup_scheduler, Lateness, WaitGroup,
};

/// Bound of one benchmark (one sub-benchmark for the staggered tickers).
const BENCH_TIMEOUT: Duration = Duration::from_secs(120);
/// Bound of every spin-wait inside a benchmark.
const SPIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Width of the name column.
const NAME_WIDTH: usize = 56;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().collect();
    let mut quick = false;
    for a in &args[1..] {
        match a.as_str() {
            "--quick" => quick = true,
            _ => {
                eprintln!("usage: timer_latency [--quick]  (got {a:?})");
                return ExitCode::FAILURE;
            }
        }
    }

    let procs = goro::maxprocs();
    let cpus = thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "goro timer_latency: {procs} Ps (GORO_MAXPROCS={}), {cpus} CPUs",
        env::var("GORO_MAXPROCS").unwrap_or_else(|_| "unset".into())
    );
    println!("command: {}", args.join(" "));
    if let Ok(load) = fs::read_to_string("/proc/loadavg") {
        println!("load average at start: {}", load.trim());
    }

    let steal = steal_time().ok();
    let mut problems = Vec::new();
    sleep_latency(quick, &mut problems);
    parallel_timer_latency(quick, procs, cpus, &mut problems);
    staggered_ticker_latency(quick, procs, cpus, &mut problems);

    if let Ok(load) = fs::read_to_string("/proc/loadavg") {
        println!("load average at end: {}", load.trim());
    }
    let total_steal = steal_since(steal);
    if let Some(st) = total_steal.strip_prefix(", ") {
        println!("hypervisor {st} in total (CPU time taken from this VM, all CPUs)");
    }
    if problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        for p in &problems {
            println!("RUNTIME MISBEHAVED: {p}");
        }
        ExitCode::FAILURE
    }
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

    /// All samples, and a problem report if a timer has not exactly `expected_each`
    /// samples or any ran early.
    fn finish(self, name: &str, expected_each: usize, problems: &mut Vec<String>) -> Vec<u64> {
        let early = self.early.into_inner();
        if early > 0 {
            problems.push(format!(
                "{name}: {early} wake-ups ran BEFORE their deadline (by up to {} ns)",
                self.max_early_ns.into_inner()
            ));
        }
        let mut all = Vec::new();
        for (j, m) in self.per_timer.into_iter().enumerate() {
            let v = m.into_inner().unwrap_or_else(|e| e.into_inner());
            if v.len() != expected_each {
                problems.push(format!(
                    "{name}: timer {j} fired {} times, expected {expected_each}",
                    v.len()
                ));
            }
            all.extend(v);
        }
        all
    }
}

/// The hypervisor's steal since `start` (a [`steal_time`] reading), as ", steal N ms"
/// (empty if `/proc/stat` cannot be read): on a VM the stalls it counts dominate the
/// maxima, so every line says how much there was while it ran.
fn steal_since(start: Option<Duration>) -> String {
    match (start, steal_time().ok()) {
        (Some(a), Some(b)) => format!(", steal {} ms", b.saturating_sub(a).as_millis()),
        _ => String::new(),
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Prints one result line: Go's two metrics first, then the percentiles.
fn print_line(name: &str, samples: &mut [u64], extra: &str) {
    match Lateness::of(samples) {
        Some(l) => println!(
            "{name:<NAME_WIDTH$}  avg-late-ns {:>9.0}  max-late-ns {:>9}  p50-late-ns {:>9}  \
             p99-late-ns {:>9}  ({extra})",
            l.avg, l.max, l.p50, l.p99
        ),
        None => println!("{name:<NAME_WIDTH$}  no samples  ({extra})"),
    }
}

/// Go's `Duration.String` for the whole microseconds and milliseconds used here
/// (`300µs`, `2ms`), as Go's sub-benchmark names print them.
fn go_duration(d: Duration) -> String {
    let (ms, us) = (d.as_millis(), d.as_micros());
    if ms > 0 && Duration::from_millis(ms as u64) == d {
        format!("{ms}ms")
    } else if ms == 0 && Duration::from_micros(us as u64) == d {
        format!("{us}µs")
    } else {
        format!("{d:?}")
    }
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

/// `SleepLatency`: no Go counterpart (Go's `BenchmarkSleep` measures throughput, not
/// lateness). One coroutine on an otherwise idle runtime sleeps `d` repeatedly: each
/// wake-up is a timer run by an M asleep in the netpoller until the deadline. The
/// `thread` lines are the floor: `std::thread::sleep` on the main thread.
fn sleep_latency(quick: bool, problems: &mut Vec<String>) {
    let reps = if quick { 100 } else { 500 };
    let cases = [
        ("100us", Duration::from_micros(100)),
        ("1ms", Duration::from_millis(1)),
    ];
    for (label, d) in cases {
        let name = format!("SleepLatency/{label}");
        let steal = steal_time().ok();
        let s = run_bounded(BENCH_TIMEOUT, &name, move || {
            measure_sleeps(d, reps, goro::time::sleep)
        });
        let mut all = s.finish(&name, reps, problems);
        let extra = format!("{reps} sleeps on a coroutine{}", steal_since(steal));
        print_line(&name, &mut all, &extra);
    }
    for (label, d) in cases {
        let name = format!("SleepLatency/thread/{label}");
        let steal = steal_time().ok();
        let s = measure_sleeps(d, reps, thread::sleep);
        let mut all = s.finish(&name, reps, problems);
        let extra = format!("{reps} std::thread::sleep calls{}", steal_since(steal));
        print_line(&name, &mut all, &extra);
    }
}

/// Go's skip rule for the two CL 232298 benchmarks.
fn skip_reason(procs: usize, cpus: usize) -> Option<String> {
    (procs < 2 || cpus < procs).then(|| {
        format!("skipped: needs >= 2 Ps and no more Ps than CPUs ({procs} Ps, {cpus} CPUs)")
    })
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
fn parallel_timer_latency(quick: bool, procs: usize, cpus: usize, problems: &mut Vec<String>) {
    let name = "ParallelTimerLatency";
    if let Some(why) = skip_reason(procs, cpus) {
        println!("{name:<NAME_WIDTH$}  {why}");
        return;
    }
    let rounds = if quick { 50 } else { 300 };
    let timer_count = procs - 1;
    let steal = steal_time().ok();
    let s = run_bounded(BENCH_TIMEOUT, name, move || {
        parallel_main(procs, timer_count, rounds)
    });
    let mut all = s.finish(name, rounds, problems);
    print_line(
        name,
        &mut all,
        &format!(
            "{rounds} rounds x {timer_count} timers, {procs} Ps{}",
            steal_since(steal)
        ),
    );
}

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
    // Go: "Ensure sysmon is in deep sleep." goro has no sysmon; kept for fidelity.
    do_work(Duration::from_millis(30));

    for round in 0..rounds {
        shared.wg.add(timer_count);
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
fn staggered_ticker_latency(quick: bool, procs: usize, cpus: usize, problems: &mut Vec<String>) {
    const DELAY: Duration = Duration::from_millis(3);
    let name = "StaggeredTickerLatency";
    if let Some(why) = skip_reason(procs, cpus) {
        println!("{name:<NAME_WIDTH$}  {why}");
        return;
    }
    let ticks = if quick { 20 } else { 100 };
    for dur in [Duration::from_micros(300), Duration::from_millis(2)] {
        let max_per_p = (DELAY.as_nanos() / dur.as_nanos()) as usize;
        for per_p in 1..=max_per_p {
            let sub = format!("{name}/work-dur={}/tickers-per-P={per_p}", go_duration(dur));
            let ticker_count = procs * per_p;
            let steal = steal_time().ok();
            let s = run_bounded(BENCH_TIMEOUT, &sub, move || {
                staggered_main(procs, ticker_count, dur, ticks, DELAY)
            });
            let mut all = s.finish(&sub, ticks, problems);
            let mut extra = String::new();
            let _ = write!(
                extra,
                "{ticks} ticks x {ticker_count} tickers, {procs} Ps{}",
                steal_since(steal)
            );
            print_line(&sub, &mut all, &extra);
        }
    }
}

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

    shared.wg.add(ticker_count);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_duration_names() {
        assert_eq!(go_duration(Duration::from_micros(300)), "300µs");
        assert_eq!(go_duration(Duration::from_millis(2)), "2ms");
        assert_eq!(go_duration(Duration::from_millis(3)), "3ms");
    }
}
