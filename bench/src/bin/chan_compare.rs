//! goro's channel workloads next to Go's, measured in ONE run, in one table.
//!
//! ```text
//! cargo run --release -p goro-bench --bin chan_compare [-- --rounds N] [--target-ms N]
//! ```
//!
//! Workloads (the criterion versions are `benches/chan.rs`, the Go ones
//! `bench/go/chan_bench_test.go`):
//!
//! - `Chain`, `ChainBuf` (ns per hop): a token through a chain of 10 000 coroutines
//!   (`examples/chain.rs`).
//! - `Sieve` (ns per channel transfer): the concurrent prime sieve up to the 5 000th
//!   prime (`examples/sieve.rs`).
//! - `Powser` (ns per stream get): power series over channels (`examples/powser.rs`).
//! - `PingPong` (ns per round trip over two unbuffered channels).
//! - `WakeupParallelSpinning/Nus`, `WakeupParallelSyscall/Nus` (ns per op; 2 Ps only):
//!   Go's `runtime/proc_test.go` benchmarks ([`workloads::wakeup_parallel`]).
//! - `WakeupLatency p50`, `p90`, `p99`, `max` (µs; 2 Ps only): how long a coroutine parked on an
//!   unbuffered channel takes to run after a sender on a busy P sent to it, i.e. to be
//!   taken by the idle P ([`workloads::wake_latency`]; Go: `BenchmarkWakeupLatency`).
//!
//! On a shared, noisy machine only figures taken side by side mean anything, so the
//! contenders alternate: each round runs goro at 1 P, Go at `-cpu 1`, goro at 2 Ps, Go
//! at `-cpu 2`. The table gives the median over the rounds (5 by default).
//!
//! - goro: a fresh child process per round and P count (this binary, re-run with
//!   `GORO_MAXPROCS` set). Each workload is sized so that its timed run takes about
//!   `--target-ms` (after a warm-up run), except `Sieve`, which is one run of the whole
//!   sieve (several seconds), as Go's benchmark does at this -benchtime.
//! - Go: `go test -c` builds `bench/go/` once; each round runs the test binary with
//!   `-test.cpu P -test.benchtime <target>ms` (`WakeupLatency`: `-test.benchtime
//!   1000x`) and parses its metrics. Without `go` on the PATH (or if the build fails)
//!   the Go column stays empty and the tool says why.
//!
//! Every wait is bounded: a child or Go run that exceeds its bound is killed and the
//! tool panics, as does any workload that fails its checks (wrong token, wrong prime,
//! lost number, wrong coefficient).
//!
//! `benches/chan.rs` includes this file as a module for [`workloads`].

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

// The three examples each include examples/support/bounded.rs (they are standalone
// programs); here that file is loaded three times, which is fine.
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../../examples/chain.rs"]
pub mod chain;
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../../examples/powser.rs"]
pub mod powser;
#[allow(dead_code, clippy::duplicate_mod)]
#[path = "../../../examples/sieve.rs"]
pub mod sieve;

/// The workloads that are not examples, and the examples' entry points.
pub mod workloads {
    use std::time::{Duration, Instant};

    use goro::chan::{channel, Receiver, Sender, TrySendError};

    pub use super::{chain, powser, sieve};

    /// Go's `wakeDelay`: the sender's extra wait, so that the receiver is likely parked
    /// when the send comes.
    pub const WAKE_DELAY: Duration = Duration::from_micros(5);
    /// The delays of Go's `benchmarkWakeupParallel`, in µs.
    pub const DELAYS_US: [u64; 8] = [0, 1, 2, 5, 10, 20, 50, 100];

    /// How a `WakeupParallel` coroutine waits.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Wait {
        /// Busy-wait on the clock, keeping the P (Go's `WakeupParallelSpinning`).
        Spinning,
        /// A nanosleep system call (`std::thread::sleep`) inside `goro::blocking`, so
        /// that sysmon may retake the P after ~20 µs, as Go's `WakeupParallelSyscall`
        /// (`syscall.Nanosleep` between entersyscall and exitsyscall).
        Syscall,
    }

    impl Wait {
        /// Both kinds.
        pub const ALL: [Wait; 2] = [Wait::Spinning, Wait::Syscall];

        /// Go's benchmark name, without `Benchmark`.
        pub fn name(self) -> &'static str {
            match self {
                Wait::Spinning => "WakeupParallelSpinning",
                Wait::Syscall => "WakeupParallelSyscall",
            }
        }

        /// Waits `d`.
        ///
        /// `Syscall` with `d` = 0: `std::thread::sleep(0)` makes no system call at all,
        /// so this sleeps 1 ns instead; Linux treats a 1 ns and a 0 ns nanosleep alike
        /// (both expire at once, within the thread's timer slack, 50 µs by default).
        pub fn wait(self, d: Duration) {
            match self {
                Wait::Spinning => spin(d),
                Wait::Syscall => {
                    goro::blocking(|| std::thread::sleep(d.max(Duration::from_nanos(1))))
                }
            }
        }
    }

    /// Busy-waits `d` on the clock (Go: `for time.Now().Before(end) {}`).
    pub fn spin(d: Duration) {
        let end = Instant::now() + d;
        while Instant::now() < end {}
    }

    /// Sub-benchmark name, as Go's port in `bench/go/` names it: `0us`, `5us`, ...
    pub fn delay_name(us: u64) -> String {
        format!("{us}us")
    }

    /// Go's `benchmarkWakeupParallel` (runtime/proc_test.go), `iters` iterations: two
    /// coroutines take turns; in each turn one waits `delay` and receives while the
    /// other waits `delay + WAKE_DELAY` and sends, on an unbuffered channel. One
    /// iteration = both turns. Returns the time from the start signal to both ends.
    ///
    /// Call it from a coroutine (as Go runs it from the benchmark goroutine), with at
    /// least 2 Ps (Go skips it at GOMAXPROCS=1).
    ///
    /// # Panics
    ///
    /// If a channel closes early (a lost message or a panicked partner).
    pub fn wakeup_parallel(wait: Wait, delay: Duration, iters: u64) -> Duration {
        let (ping_tx, ping_rx) = channel::<()>(0);
        let (pong_tx, pong_rx) = channel::<()>(0);
        let (start_tx, start_rx) = channel::<()>(0);
        let (done_tx, done_rx) = channel::<()>(0);
        let done2 = done_tx.clone();
        const LOST: &str = "WakeupParallel: a channel closed early";
        let a = goro::go!(move || {
            start_rx.recv().expect(LOST);
            for _ in 0..iters {
                wait.wait(delay + WAKE_DELAY);
                ping_tx.send(()).expect(LOST);
                wait.wait(delay);
                pong_rx.recv().expect(LOST);
            }
            done_tx.send(()).expect(LOST);
        });
        let b = goro::go!(move || {
            for _ in 0..iters {
                wait.wait(delay);
                ping_rx.recv().expect(LOST);
                wait.wait(delay + WAKE_DELAY);
                pong_tx.send(()).expect(LOST);
            }
            done2.send(()).expect(LOST);
        });
        let start = Instant::now();
        start_tx.send(()).expect(LOST);
        done_rx.recv().expect(LOST);
        done_rx.recv().expect(LOST);
        let elapsed = start.elapsed();
        a.join().expect("WakeupParallel coroutine panicked");
        b.join().expect("WakeupParallel coroutine panicked");
        elapsed
    }

    /// Two coroutines passing a number back and forth over two unbuffered channels:
    /// the echo (spawned here, lives until [`shutdown`](Self::shutdown)) and a driver.
    pub struct PingPong {
        driver: PingPongDriver,
        echo: goro::JoinHandle<()>,
    }

    /// The driver's ends (cheap to clone).
    #[derive(Clone)]
    pub struct PingPongDriver {
        ping: Sender<u64>,
        pong: Receiver<u64>,
    }

    impl Default for PingPong {
        fn default() -> Self {
            PingPong::new()
        }
    }

    impl PingPong {
        /// Starts the echo coroutine: it sends back each number plus one.
        pub fn new() -> PingPong {
            let (ping, ping_rx) = channel::<u64>(0);
            let (pong_tx, pong) = channel::<u64>(0);
            let echo = goro::go!(move || {
                for v in ping_rx.iter() {
                    pong_tx
                        .send(v + 1)
                        .expect("PingPong: the driver went away under the echo");
                }
            });
            PingPong {
                driver: PingPongDriver { ping, pong },
                echo,
            }
        }

        /// The driver's ends.
        pub fn driver(&self) -> PingPongDriver {
            self.driver.clone()
        }

        /// Closes the ping channel and joins the echo.
        pub fn shutdown(self) -> Result<(), String> {
            self.driver.ping.close();
            self.echo
                .join()
                .map_err(|_| "PingPong: the echo panicked".to_string())
        }
    }

    impl PingPongDriver {
        /// `n` round trips, each checked.
        pub fn round_trips(&self, n: u64) -> Result<(), String> {
            for i in 0..n {
                self.ping
                    .send(i)
                    .map_err(|_| "PingPong: ping closed".to_string())?;
                let v = self
                    .pong
                    .recv()
                    .map_err(|_| "PingPong: pong closed".to_string())?;
                if v != i + 1 {
                    return Err(format!("PingPong: sent {i}, got back {v}"));
                }
            }
            Ok(())
        }
    }

    /// Busy spin of the sender before each sample of [`wake_latency`]: long enough for
    /// the receiver to be parked again (Go's port uses the same).
    pub const LATENCY_SPIN: Duration = Duration::from_micros(200);

    /// The samples of [`wake_latency`].
    pub struct Latency {
        /// Wake-up latencies, ns, sorted.
        pub sorted_ns: Vec<u64>,
        /// Sends that found the receiver not parked (no sample taken).
        pub missed: usize,
        /// Samples the receiver took on the sender's OS thread: it can run there only
        /// once the sender's coroutine leaves the thread, i.e. when the idle P did not
        /// take it within [`LATENCY_SPIN`] and the sender's next send found it not
        /// parked (a missed sample) and parked the sender. Such samples are late by
        /// more than `LATENCY_SPIN`.
        pub on_sender_thread: usize,
    }

    impl Latency {
        /// The `p`-quantile (nearest rank), in µs.
        pub fn quantile_us(&self, p: f64) -> f64 {
            let n = self.sorted_ns.len();
            assert!(n > 0, "no latency samples");
            let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            self.sorted_ns[i] as f64 / 1e3
        }
    }

    /// Wake-up latency of a coroutine parked on a channel, woken by a sender that keeps
    /// its P busy: the calling coroutine (the sender) spins [`LATENCY_SPIN`], reads
    /// the clock and sends that instant on an unbuffered channel (`try_send`: if the
    /// receiver is not parked yet, the sample is dropped and counted as missed), and
    /// spins on. The receiver, a coroutine spawned here, records `now - instant`. As
    /// the sender never lets go of its P, the receiver (readied into that P's
    /// `runnext`) runs only when the idle P takes it: this measures the wake-up of the
    /// idle P plus its steal (with the `runnext` back-off).
    ///
    /// Call it from a coroutine, with at least 2 Ps.
    ///
    /// # Panics
    ///
    /// If the receiver goes away or panics.
    pub fn wake_latency(samples: usize) -> Latency {
        type Sample = Option<(Instant, std::thread::ThreadId)>;
        let (tx, rx) = channel::<Sample>(0);
        let receiver = goro::go!(move || {
            let mut lat = Vec::with_capacity(samples);
            let mut on_sender_thread = 0;
            for (t, sender_thread) in rx.iter().flatten() {
                lat.push(t.elapsed().as_nanos() as u64);
                if std::thread::current().id() == sender_thread {
                    on_sender_thread += 1;
                }
            }
            (lat, on_sender_thread)
        });
        let mut missed = 0;
        for _ in 0..samples {
            spin(LATENCY_SPIN);
            let sample = Some((Instant::now(), std::thread::current().id()));
            match tx.try_send(sample) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    missed += 1;
                    tx.send(None).expect("wake_latency: the receiver went away");
                }
                Err(TrySendError::Closed(_)) => panic!("wake_latency: the receiver went away"),
            }
        }
        spin(LATENCY_SPIN);
        drop(tx);
        let (mut lat, on_sender_thread) = receiver
            .join()
            .expect("wake_latency: the receiver panicked");
        lat.sort_unstable();
        Latency {
            sorted_ns: lat,
            missed,
            on_sender_thread,
        }
    }
}

use goro_bench::run_bounded;
use goro_bench::tools::{build_go_test, child_setup, load_average, median, run_ok, Finished};
use workloads::{Wait, DELAYS_US};

/// Set (to anything) in the child processes.
const CHILD_ENV: &str = "GORO_CHAN_COMPARE_CHILD";
/// The child's target time per timed run, in ms.
const TARGET_ENV: &str = "GORO_CHAN_COMPARE_TARGET_MS";
/// P counts (goro's GORO_MAXPROCS, Go's -cpu).
const PS: [usize; 2] = [1, 2];
/// Samples of the wake-up latency.
const LATENCY_SAMPLES: usize = 1000;
/// The wake-up latency rows: quantiles and the maximum.
const LATENCY_QUANTILES: [&str; 4] = ["p50", "p90", "p99", "max"];
/// Bound of one timed goro run (in the child).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound of one goro child (all workloads at one P count).
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);
/// Bound of `go test -c`.
const GO_BUILD_TIMEOUT: Duration = Duration::from_secs(300);
/// Bound of one run of Go's test binary.
const GO_RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// The Go benchmarks of the table (all but the latency one).
const GO_BENCH: &str = "^Benchmark(Chain|ChainBuf|Sieve|Powser|PingPong|\
                        WakeupParallelSpinning|WakeupParallelSyscall)$";

/// Which side a figure is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Side {
    Goro,
    Go,
}

/// (row name, Ps, side) -> the figure of each round.
type Samples = HashMap<(String, usize, Side), Vec<f64>>;

/// The rows of the table at `ps` Ps: name and unit.
fn rows(ps: usize) -> Vec<(String, &'static str)> {
    let mut v: Vec<(String, &'static str)> = vec![
        ("Chain".into(), "ns/hop"),
        ("ChainBuf".into(), "ns/hop"),
        ("Sieve".into(), "ns/transfer"),
        ("Powser".into(), "ns/get"),
        ("PingPong".into(), "ns/round trip"),
    ];
    if ps >= 2 {
        for wait in Wait::ALL {
            for us in DELAYS_US {
                v.push((
                    format!("{}/{}", wait.name(), workloads::delay_name(us)),
                    "ns/op",
                ));
            }
        }
        for q in LATENCY_QUANTILES {
            v.push((format!("WakeupLatency {q}"), "µs"));
        }
    }
    v
}

struct Options {
    rounds: usize,
    target_ms: u64,
}

fn parse_args() -> Options {
    let mut o = Options {
        rounds: 5,
        target_ms: 150,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| -> u64 {
            args.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{name} needs a number"))
        };
        match a.as_str() {
            "--rounds" => o.rounds = value("--rounds") as usize,
            "--target-ms" => o.target_ms = value("--target-ms"),
            other => panic!(
                "unknown argument {other:?} (usage: chan_compare [--rounds N] [--target-ms N])"
            ),
        }
    }
    assert!(o.rounds > 0 && o.target_ms > 0);
    o
}

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        child_main();
        return;
    }
    let opts = parse_args();
    let started = Instant::now();
    let load_before = load_average();
    println!(
        "chan_compare: {} rounds, target {} ms per timed run (Go: -benchtime {}ms); {} CPUs; \
         load average at start: {load_before}",
        opts.rounds,
        opts.target_ms,
        opts.target_ms,
        thread::available_parallelism().map_or(0, |n| n.get()),
    );
    let go_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let go_bin =
        std::env::temp_dir().join(format!("goro_chan_compare_{}.test", std::process::id()));
    let go = match build_go_test(&go_dir, &go_bin, GO_BUILD_TIMEOUT) {
        Ok(v) => {
            println!("Go: {v}");
            true
        }
        Err(why) => {
            println!("Go was not measured: {why}");
            false
        }
    };

    let mut samples = Samples::new();
    let mut notes: Vec<String> = Vec::new();
    for round in 1..=opts.rounds {
        for ps in PS {
            let stamp = |what: &str| {
                eprintln!(
                    "[{:>5.1}s] round {round}/{}: {what}",
                    started.elapsed().as_secs_f64(),
                    opts.rounds
                )
            };
            stamp(&format!("goro at {ps} P"));
            for (name, value) in run_goro_child(ps, opts.target_ms) {
                if let Some(note) = name.strip_prefix("note:") {
                    notes.push(format!("round {round}, goro {ps} P: {note} = {value}"));
                    continue;
                }
                samples
                    .entry((name, ps, Side::Goro))
                    .or_default()
                    .push(value);
            }
            if go {
                stamp(&format!("Go at -cpu {ps}"));
                let mut results = run_go(
                    &go_dir,
                    &go_bin,
                    ps,
                    GO_BENCH,
                    &format!("{}ms", opts.target_ms),
                );
                if ps >= 2 {
                    results.extend(run_go(
                        &go_dir,
                        &go_bin,
                        ps,
                        "^BenchmarkWakeupLatency$",
                        &format!("{LATENCY_SAMPLES}x"),
                    ));
                }
                for (name, procs, value) in results {
                    assert_eq!(procs, ps, "Go ran {name} at another GOMAXPROCS");
                    if let Some(note) = name.strip_prefix("note:") {
                        notes.push(format!("round {round}, Go -cpu {ps}: {note} = {value}"));
                        continue;
                    }
                    samples.entry((name, ps, Side::Go)).or_default().push(value);
                }
            }
        }
    }
    if go {
        let _ = std::fs::remove_file(&go_bin);
    }
    let load_after = load_average();
    print_table(&samples, go);
    println!();
    println!("Per-round notes (wake-up latency runs):");
    for n in &notes {
        println!("  {n}");
    }
    println!();
    println!(
        "load average at start: {load_before}; at end: {load_after}; total time {:.0} s",
        started.elapsed().as_secs_f64()
    );
}

// ---- goro side (the child) ----

/// The child: measures every workload once at this process's P count and prints
/// `result <name> <value>` lines (`note:` names are printed under the table).
fn child_main() {
    let (ps, target) = child_setup(TARGET_ENV, 150);
    let report = |name: &str, value: f64| println!("result\t{name}\t{value:.3}");

    for (name, cap) in [("Chain", 0), ("ChainBuf", 1)] {
        let ch = chain::Chain::new(chain::HOPS, cap);
        let hops = ch.driver().hops() as f64;
        let (d, n) = sized(target, |n| {
            let drv = ch.driver();
            run_bounded(RUN_TIMEOUT, name, move || {
                let start = Instant::now();
                drv.pass(n).unwrap_or_else(|e| panic!("{e}"));
                start.elapsed()
            })
        });
        report(name, ns(d) / (n as f64 * hops));
        run_bounded(RUN_TIMEOUT, "chain shutdown", move || ch.shutdown())
            .unwrap_or_else(|e| panic!("{e}"));
    }

    let run = run_bounded(RUN_TIMEOUT, "Sieve", || sieve::run(sieve::PRIMES))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        run.primes.last(),
        Some(&sieve::PRIME_5000),
        "Sieve: wrong 5000th prime"
    );
    report("Sieve", ns(run.elapsed) / run.transfers as f64);

    // Powser: whole runs until the target is reached, after one warm-up run.
    let powser_run =
        || run_bounded(RUN_TIMEOUT, "Powser", powser::run).unwrap_or_else(|e| panic!("{e}"));
    powser_run();
    let (mut total, mut gets) = (Duration::ZERO, 0u64);
    while total < target {
        let r = powser_run();
        total += r.elapsed;
        gets += r.gets;
    }
    report("Powser", ns(total) / gets as f64);

    let pp = workloads::PingPong::new();
    let (d, n) = sized(target, |n| {
        let drv = pp.driver();
        run_bounded(RUN_TIMEOUT, "PingPong", move || {
            let start = Instant::now();
            drv.round_trips(n).unwrap_or_else(|e| panic!("{e}"));
            start.elapsed()
        })
    });
    report("PingPong", ns(d) / n as f64);
    run_bounded(RUN_TIMEOUT, "PingPong shutdown", move || pp.shutdown())
        .unwrap_or_else(|e| panic!("{e}"));

    if ps >= 2 {
        for wait in Wait::ALL {
            for us in DELAYS_US {
                let name = format!("{}/{}", wait.name(), workloads::delay_name(us));
                let delay = Duration::from_micros(us);
                let (d, n) = sized(target, |n| {
                    run_bounded(RUN_TIMEOUT, &name, move || {
                        workloads::wakeup_parallel(wait, delay, n)
                    })
                });
                report(&name, ns(d) / n as f64);
            }
        }
        let lat = run_bounded(RUN_TIMEOUT, "WakeupLatency", || {
            workloads::wake_latency(LATENCY_SAMPLES)
        });
        for (q, p) in LATENCY_QUANTILES.iter().zip([0.5, 0.9, 0.99, 1.0]) {
            report(&format!("WakeupLatency {q}"), lat.quantile_us(p));
        }
        report("note:latency missed samples", lat.missed as f64);
        report(
            "note:latency samples taken on the sender's thread",
            lat.on_sender_thread as f64,
        );
    }
}

fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}

/// Sizes N so that `run(N)` takes about `target` (probing from N = 1; the probes warm
/// up), then times one run of N. Returns (time, N).
fn sized(target: Duration, mut run: impl FnMut(u64) -> Duration) -> (Duration, u64) {
    let floor = target / 10;
    let mut n = 1u64;
    loop {
        let d = run(n);
        if d >= floor {
            let n = ((n as f64) * target.as_secs_f64() / d.as_secs_f64())
                .ceil()
                .max(1.0) as u64;
            return (run(n), n);
        }
        let grow = if d.is_zero() {
            100.0
        } else {
            (floor.as_secs_f64() * 1.5 / d.as_secs_f64()).clamp(2.0, 100.0)
        };
        n = ((n as f64) * grow) as u64;
    }
}

/// Runs one goro child at `ps` Ps; returns its (name, value) lines.
fn run_goro_child(ps: usize, target_ms: u64) -> Vec<(String, f64)> {
    let exe = std::env::current_exe().expect("current_exe");
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ENV, "1")
        .env("GORO_MAXPROCS", ps.to_string())
        .env(TARGET_ENV, target_ms.to_string());
    let Finished { stdout, stderr, .. } =
        run_ok(cmd, CHILD_TIMEOUT, &format!("goro child at {ps} P"));
    if !stderr.trim().is_empty() {
        eprint!("{stderr}");
    }
    let results: Vec<(String, f64)> = stdout
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            if f.next()? != "result" {
                return None;
            }
            let name = f.next()?.to_string();
            let value = f.next()?.parse().expect("child printed a bad number");
            Some((name, value))
        })
        .collect();
    for (row, _) in rows(ps) {
        assert!(
            results.iter().any(|(n, _)| *n == row),
            "the goro child at {ps} P did not report {row}:\n{stdout}"
        );
    }
    results
}

// ---- Go side ----

/// Runs the Go benchmarks matching `pattern` at `-cpu ps`; returns (row name,
/// GOMAXPROCS, value) per metric of the table (`note:` rows for the others).
fn run_go(
    dir: &Path,
    bin: &Path,
    ps: usize,
    pattern: &str,
    benchtime: &str,
) -> Vec<(String, usize, f64)> {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args([
        "-test.run=^$".to_string(),
        format!("-test.bench={pattern}"),
        format!("-test.cpu={ps}"),
        format!("-test.benchtime={benchtime}"),
        "-test.count=1".to_string(),
        "-test.timeout=170s".to_string(),
    ]);
    let stdout = run_ok(cmd, GO_RUN_TIMEOUT, &format!("Go benchmarks at -cpu {ps}")).stdout;
    let results = parse_go_bench(&stdout);
    assert!(!results.is_empty(), "no Go results:\n{stdout}");
    results
}

/// Parses `BenchmarkName[-P]  N  v1 unit1  v2 unit2 ...` lines (no `-P` means P = 1)
/// into the table's rows.
fn parse_go_bench(out: &str) -> Vec<(String, usize, f64)> {
    let mut rows = Vec::new();
    for line in out.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(full) = f.first().and_then(|n| n.strip_prefix("Benchmark")) else {
            continue;
        };
        let (name, procs) = match full.rsplit_once('-') {
            Some((n, p)) if p.parse::<usize>().is_ok() => (n, p.parse().unwrap_or(1)),
            _ => (full, 1),
        };
        // Skipped benchmarks report 0 iterations.
        if f.get(1).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0) == 0 {
            continue;
        }
        let metrics: HashMap<&str, f64> = f[2..]
            .chunks(2)
            .filter_map(|c| Some((*c.get(1)?, c[0].parse().ok()?)))
            .collect();
        let mut push = |row: String, unit: &str| {
            if let Some(&v) = metrics.get(unit) {
                rows.push((row, procs, v));
            }
        };
        match name {
            "Chain" | "ChainBuf" => push(name.into(), "ns/hop"),
            "Sieve" => push(name.into(), "ns/transfer"),
            "Powser" => push(name.into(), "ns/get"),
            "PingPong" => push(name.into(), "ns/op"),
            "WakeupLatency" => {
                for q in LATENCY_QUANTILES {
                    push(format!("WakeupLatency {q}"), &format!("{q}-us"));
                }
                push("note:latency missed samples".into(), "missed");
            }
            n if n.starts_with("WakeupParallel") => push(n.into(), "ns/op"),
            _ => {}
        }
    }
    rows
}

// ---- report ----

fn fmt_value(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    }
}

fn print_table(samples: &Samples, go: bool) {
    println!();
    println!("Median over the rounds (lower is better); goro/Go = ratio of the medians.");
    println!(
        "{:<34} {:<13} {:>2} {:>9} {:>9} {:>8}   {:<19} {:<19}",
        "workload", "unit", "Ps", "goro", "Go", "goro/Go", "goro min..max", "Go min..max"
    );
    for ps in PS {
        for (name, unit) in rows(ps) {
            let get = |side| samples.get(&(name.clone(), ps, side));
            let goro = get(Side::Goro).and_then(|v| median(v));
            let gov = get(Side::Go).and_then(|v| median(v));
            let ratio = match (goro, gov) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => "-".into(),
            };
            let range = |side| match get(side) {
                Some(v) if !v.is_empty() => {
                    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = v.iter().copied().fold(0.0, f64::max);
                    format!("{}..{}", fmt_value(Some(lo)), fmt_value(Some(hi)))
                }
                _ => "-".into(),
            };
            println!(
                "{:<34} {:<13} {:>2} {:>9} {:>9} {:>8}   {:<19} {:<19}",
                name,
                unit,
                ps,
                fmt_value(goro),
                fmt_value(gov),
                ratio,
                range(Side::Goro),
                range(Side::Go)
            );
        }
    }
    if !go {
        println!("(Go column empty: Go was not measured, see above.)");
    }
    println!();
    println!(
        "WakeupLatency: wake-up latency of a coroutine parked on a channel by a sender on a \
         busy P, measured on the idle P ({LATENCY_SAMPLES} samples per round at 2 Ps; the \
         sender spins {} µs before each send). WakeupParallel*: 2 Ps only (Go skips them at \
         GOMAXPROCS=1). Syscall: nanosleep inside goro::blocking (sysmon retakes the P).",
        workloads::LATENCY_SPIN.as_micros()
    );
}

#[cfg(test)]
mod tests {

    #[test]
    fn parses_go_output() {
        let out = "\
BenchmarkChain-2   \t      68\t   4066369 ns/op\t       406.6 ns/hop
BenchmarkSieve     \t       1\t6904442384 ns/op\t       351.4 ns/transfer
BenchmarkWakeupParallelSpinning/5us         \t       0\t               NaN ns/op
BenchmarkWakeupParallelSpinning/5us-2       \t    4501\t     46389 ns/op
BenchmarkWakeupLatency-2 \t 1092\t 231722 ns/op\t 36.00 missed\t 86.85 p50-us\t 93.04 p90-us\t 250.1 p99-us\t 900.0 max-us
PASS
";
        let r = super::parse_go_bench(out);
        assert_eq!(
            r,
            vec![
                ("Chain".to_string(), 2, 406.6),
                ("Sieve".to_string(), 1, 351.4),
                ("WakeupParallelSpinning/5us".to_string(), 2, 46389.0),
                ("WakeupLatency p50".to_string(), 2, 86.85),
                ("WakeupLatency p90".to_string(), 2, 93.04),
                ("WakeupLatency p99".to_string(), 2, 250.1),
                ("WakeupLatency max".to_string(), 2, 900.0),
                ("note:latency missed samples".to_string(), 2, 36.0),
            ]
        );
    }

    #[test]
    fn rows_per_ps() {
        assert_eq!(super::rows(1).len(), 5);
        assert_eq!(super::rows(2).len(), 5 + 16 + 4);
    }
}
