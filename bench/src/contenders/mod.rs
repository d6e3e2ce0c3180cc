//! The contenders of [`crate::workloads`]' contract: goro, may, tokio, plain threads, Go,
//! the floor of a fresh stack (`floor`, spawn-and-park only),
//! the `sync` suite's peers (goro without its back-off, parking_lot), two echo server
//! programs: `example` (`examples/echo_server`) and `base` (`compare --baseline PATH`),
//! and the `async` suite's `goro_recipe` (tokio futures through `goro::blocking`).

use std::io::{self, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::workloads::tasks::Coroutines;
use crate::workloads::{self, sync::Impl, Measurement, Outcome, Suite, Workload};

pub mod floor;
pub mod may;
pub mod threads;
pub mod tokio;

/// One contender.
pub trait Contender: Sync {
    fn name(&self) -> &'static str;
    /// Whether it has an implementation of `w` (echo: a server); by default the
    /// comparison's workloads, which every contender runs.
    fn supports(&self, w: &Workload) -> bool {
        in_comparison(w)
    }
    /// Runs `w` once, in this worker process: the figure, or why it cannot (a skip).
    fn run(&self, w: &Workload) -> Outcome;
    /// Its echo server on `addr`: prints `LISTENING <addr>` on stdout (see
    /// [`listening`]), then serves until the process exits.
    fn serve(&self, _addr: SocketAddr) -> io::Result<()> {
        Err(io::Error::other("no echo server"))
    }
    /// Where its implementation of `w` departs from the contract's letter.
    fn note(&self, _w: &Workload) -> Option<&'static str> {
        None
    }
}

/// Every contender, in column order.
pub static ALL: &[&dyn Contender] = &[
    &Goro,
    &may::May,
    &tokio::Tokio,
    &threads::Threads,
    &Go,
    &floor::Floor,
    &SyncPeer(Impl::GoroNoBackoff),
    &SyncPeer(Impl::ParkingLot),
    &Server("example"),
    &Server("base"),
    &GoroRecipe,
];

/// The contender named `name`.
pub fn find(name: &str) -> Option<&'static dyn Contender> {
    ALL.iter().copied().find(|c| c.name() == name)
}

/// Prints the line a server's start is recognised by, `LISTENING <addr>`.
pub fn listening(addr: SocketAddr) -> io::Result<()> {
    let mut out = io::stdout().lock();
    writeln!(out, "LISTENING {addr}")?;
    out.flush()
}

/// `compare worker CONTENDER WORKLOAD`: one run, its [`Measurement`] as the last
/// stdout line; the exit status.
pub fn worker(c: &dyn Contender, w: &Workload) -> i32 {
    if cfg!(debug_assertions) {
        eprintln!("compare: WARNING: a debug build; the figures mean little");
    }
    let mut m = if w.suite == Suite::Echo {
        Measurement::skip("echo is measured against `compare serve`")
    } else if w.suite == Suite::Async {
        Measurement::skip("the async suite runs ecosystem/'s slow_gets, not a worker")
    } else if !c.supports(w) {
        Measurement::skip(format!("no {} implementation of {}", c.name(), w.name()))
    } else {
        match c.run(w) {
            Ok(m) if m.value.is_some_and(f64::is_finite) => m,
            Ok(m) if m.skip.is_some() => m,
            Ok(m) => Measurement::skip(format!("not a finite figure: {:?}", m.value)),
            Err(why) => Measurement::skip(why),
        }
    };
    m.note = m.note.or_else(|| c.note(w).map(String::from));
    let json = serde_json::to_string(&m).expect("a measurement serialises");
    println!("{json}");
    0
}

/// goro: the workloads' own implementations.
pub struct Goro;

impl Contender for Goro {
    fn name(&self) -> &'static str {
        "goro"
    }
    fn supports(&self, _w: &Workload) -> bool {
        true
    }
    fn run(&self, w: &Workload) -> Outcome {
        let name = w.name();
        if let Some(m) = workloads::sync::measure(name, Impl::Goro)
            .or_else(|| workloads::timers::run(name))
            .or_else(|| workloads::cancel::run(name))
            .or_else(|| workloads::blocking::run(name).map(Ok))
            .or_else(|| workloads::fairness::run(name).map(Ok))
            .or_else(|| workloads::dump::run(name).map(Ok))
        {
            return m;
        }
        if workloads::park_tasks(name).is_some() {
            // Spawned from `main`, a plain thread, as a user's program spawns (issue
            // 38); Go's main is a goroutine with a P.
            return workloads::tasks::now(workloads::tasks::run::<Coroutines>(name))
                .unwrap_or_else(|| Err(format!("no goro workload {name}")));
        }
        crate::harness::run_bounded(std::time::Duration::MAX, name, move || {
            workloads::tasks::now(workloads::tasks::run::<Coroutines>(name))
                .or_else(|| workloads::chan::run(name).map(Ok))
        })
        .unwrap_or_else(|| Err(format!("no goro workload {name}")))
    }
    fn serve(&self, addr: SocketAddr) -> io::Result<()> {
        workloads::echo::serve(addr)
    }
}

/// The other implementations of the `sync` suite's ports: goro without its
/// randomised back-off, and parking_lot's mutex on plain threads.
pub struct SyncPeer(Impl);

impl Contender for SyncPeer {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    fn supports(&self, w: &Workload) -> bool {
        workloads::sync::Bench::from_name(w.name())
            .is_some_and(|b| b.contenders().contains(&self.0))
    }
    fn run(&self, w: &Workload) -> Outcome {
        workloads::sync::measure(w.name(), self.0).unwrap_or_else(|| Err("not a sync port".into()))
    }
}

/// Go: `bench/go/` (the harness builds it and passes its path in `GORO_BENCH_GO`),
/// and Go's own `time` package benchmarks for the timer latency rows.
pub struct Go;

/// The environment variables through which the harness hands the Go binaries (or why
/// there are none) to the workers.
pub const GO_BIN: &str = "GORO_BENCH_GO";
pub const GO_TIME_TESTS: &str = "GORO_BENCH_GO_TIME";
pub const NO_GO: &str = "GORO_BENCH_NO_GO";

/// Go's `time` benchmarks and the sub-benchmarks that give the rows.
const GO_TIME: &[&str] = &["ParallelTimerLatency", "StaggeredTickerLatency"];

impl Go {
    fn binary(var: &str) -> Result<String, String> {
        std::env::var(var).map_err(|_| {
            std::env::var(NO_GO).unwrap_or_else(|_| format!("{var} is not set (no Go build)"))
        })
    }

    /// One of Go's own `time` benchmarks: its first sub-benchmark's average (and
    /// maximum) lateness in µs, the others' averages as companions named after them
    /// (`StaggeredTickerLatency/work-dur=300µs/tickers-per-P=1` is `.../300us/1`).
    fn time_bench(name: &str) -> Outcome {
        let bench = format!("^Benchmark{name}$");
        let out = Command::new(Go::binary(GO_TIME_TESTS)?)
            .args(["-test.run", "^$", "-test.bench", &bench])
            .args(["-test.benchtime", "100x", "-test.cpu"])
            .arg(workloads::procs().to_string())
            .output()
            .map_err(|e| format!("Go's time benchmarks: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let mut m: Option<Measurement> = None;
        for line in crate::harness::go::parse_bench_output(&text) {
            let metric = |unit: &str| Some(line.metrics.get(unit)? / 1e3);
            let (Some(avg), Some(max)) = (metric("avg-late-ns"), metric("max-late-ns")) else {
                continue;
            };
            m = Some(match m {
                None => Measurement::value(avg).with(&format!("{name}/max"), max),
                Some(m) => {
                    let mut row = line.name.replace('µ', "u");
                    for prefix in ["work-dur=", "tickers-per-P="] {
                        row = row.replace(prefix, "");
                    }
                    m.with(&row, avg)
                }
            });
        }
        m.ok_or_else(|| format!("Go's {name} printed no figures:\n{text}"))
    }

    /// Replaces this process with the Go binary (same pid, stdio and environment).
    fn exec(args: &[&str]) -> io::Error {
        match Go::binary(GO_BIN) {
            Ok(bin) => Command::new(bin).args(args).exec(),
            Err(why) => io::Error::other(why),
        }
    }
}

impl Contender for Go {
    fn name(&self) -> &'static str {
        "go"
    }
    fn supports(&self, w: &Workload) -> bool {
        // No sysmon, and no figure beside goro's dump (Go's goroutine profile is not timed).
        !matches!(w.name(), "sysmon/busy" | "sysmon/idle" | "dump_100k")
    }
    fn run(&self, w: &Workload) -> Outcome {
        if GO_TIME.contains(&w.name()) {
            return Go::time_bench(w.name());
        }
        Err(Go::exec(&[w.name()]).to_string())
    }
    fn serve(&self, _addr: SocketAddr) -> io::Result<()> {
        Err(Go::exec(&["serve"]))
    }
}

/// An echo server program, run as `PATH --addr ADDR`: `base`, another build's (`--baseline`,
/// handed over in `GORO_BENCH_BASELINE`) for before/after runs, or `example`, this build's
/// `examples/echo_server` (`cargo build --release --example echo_server`).
pub struct Server(&'static str);

pub const BASELINE: &str = "GORO_BENCH_BASELINE";

impl Contender for Server {
    fn name(&self) -> &'static str {
        self.0
    }
    fn supports(&self, w: &Workload) -> bool {
        w.suite == Suite::Echo
    }
    fn run(&self, _w: &Workload) -> Outcome {
        Err("only an echo server".into())
    }
    fn serve(&self, addr: SocketAddr) -> io::Result<()> {
        let bin = match self.0 {
            "base" => std::env::var(BASELINE).map_err(|_| io::Error::other("no --baseline"))?,
            _ => {
                let me = std::env::current_exe()?;
                let bin = me.with_file_name("examples").join("echo_server");
                if !bin.is_file() {
                    return Err(io::Error::other(format!(
                        "{} is missing: cargo build --release --example echo_server",
                        bin.display()
                    )));
                }
                bin.to_string_lossy().into_owned()
            }
        };
        Err(Command::new(bin).args(["--addr", &addr.to_string()]).exec())
    }
}

/// The old way to call async Rust from a coroutine, for the `async` suite:
/// `goro::blocking(|| handle.block_on(fut))` on a tokio runtime of the program's, one OS
/// thread per call in flight (`slow_gets recipe`, run by the harness).
pub struct GoroRecipe;

impl Contender for GoroRecipe {
    fn name(&self) -> &'static str {
        "goro_recipe"
    }
    fn supports(&self, w: &Workload) -> bool {
        w.suite == Suite::Async
    }
    fn run(&self, _w: &Workload) -> Outcome {
        Err("the async suite runs ecosystem/'s slow_gets, not a worker".into())
    }
}

/// The comparison's workloads, which every contender runs.
pub fn in_comparison(w: &Workload) -> bool {
    matches!(
        w.name(),
        "chain" | "chainbuf" | "sieve" | "pingpong" | "spawn_join" | "yield" | "sleep_lateness"
    ) || workloads::mutex_tasks(w.name()).is_some()
        || workloads::park_tasks(w.name()).is_some()
        || w.suite == Suite::Echo
}
