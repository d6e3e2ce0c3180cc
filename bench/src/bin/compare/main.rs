//! goro next to may, tokio, plain threads and Go, on the same workloads, in one table.
//!
//! ```text
//! cargo run --release -p goro-bench --bin compare -- [--reps N] [--procs N]
//!     [--contenders goro,may,tokio,threads,go] [--only chain,sieve,...]
//!     [--json FILE] [--plot FILE.svg] [--timeout SECS]
//! ```
//!
//! What it measures: the twelve workloads of `common.rs` (rendezvous and buffered
//! channel chains, Go's prime sieve, ping-pong, spawn+join, yield, a mutex under 2, 8
//! and 64 tasks, sleep lateness under CPU load, RSS per parked task, and an echo
//! server's requests/s), each implemented by every contender with the SAME parameters
//! and measuring the SAME quantity (`common.rs` is the contract; `goro_impl.rs`,
//! `may_impl.rs`, `tokio_impl.rs`, `threads_impl.rs` and the Go program in
//! `bench/go/compare/` implement it).
//!
//! Fairness rules:
//!
//! - every run is a FRESH child process (this binary re-run as
//!   `compare --worker CONTENDER WORKLOAD`, or the Go program as
//!   `goro-compare-go WORKLOAD`), so no run inherits another's heap, stacks, pools or
//!   threads, and each one prints its figure as one JSON line;
//! - for each workload, the contenders take turns rep after rep (`--reps`, default 5),
//!   and their order rotates every rep, so that none always runs first (or right after
//!   the same neighbour) on a machine whose load drifts;
//! - every child gets the same parallelism: `GORO_MAXPROCS` = `--procs` (default 2),
//!   which the Rust workers read as their number of Ps / worker threads, and
//!   `GOMAXPROCS` for Go;
//! - the table gives the MEDIAN of the reps (the min-max spread is printed below it and
//!   is in the JSON), and each contender's ratio to goro, oriented so that > 1 means
//!   goro is ahead: contender / goro for the lower-is-better figures, goro / contender
//!   for echo's requests/s.
//!
//! Echo: the server is a child (`compare --serve CONTENDER`, `goro-compare-go serve`)
//! that binds 127.0.0.1:0 and prints `LISTENING <addr>`; the load is `echo_load.rs`
//! (included here as a module, run as this binary re-executed with `--as-echo-load`,
//! so it is never a stale build and shares no runtime with the server), a closed loop
//! of `ECHO_CONNS` goro-coroutine clients sending 64-byte messages for `ECHO_SECS` s
//! after `ECHO_WARMUP_SECS` s of warm-up, at the same `GORO_MAXPROCS`. The server is
//! stopped by closing its stdin.
//!
//! Go: if `go` is on the PATH, `bench/go/compare/` is built with `go build` into a
//! temporary directory at start; without it, or if the build fails, the Go column says
//! why.
//!
//! Every wait is bounded: a worker has `--timeout` seconds (default 60), a server 10 s
//! to listen and 10 s to exit after its stdin closes, the load its duration + 30 s;
//! a child past its bound is killed and the run recorded as a failure. A worker that
//! prints `{"skip": ...}` shows as "skip" with its reason in the footnotes; a non-zero
//! exit or no result line shows as "failed", with the reason.
//!
//! Outputs: the markdown table on stdout (progress goes to stderr); `--json FILE`:
//! every rep of every contender and workload (values, skips and failures with their
//! reasons, wall times), the medians, spreads and ratios, and the machine (CPUs,
//! kernel, CPU model, procs, date, Go version); `--plot FILE.svg`: horizontal grouped
//! bars of the ratios to goro, log scale.
//!
//! The default run (12 workloads x 5 contenders x 5 reps, 300 children) must stay
//! under 10 minutes on a 2-core machine: the workers take about 2 s or less (the
//! parameters in `common.rs` were chosen for that), an echo run 2.5 s, and plain
//! threads give up (a skip whose reason gives the rate reached) on the hand-off
//! workloads (chain, chainbuf, sieve, pingpong) past 4 s of measured time, where a
//! full run would take tens of seconds (see `threads_impl.rs`). Internal modes:
//! `--worker CONTENDER WORKLOAD`, `--serve CONTENDER`, `--as-echo-load ARGS...`.

mod common;
#[allow(dead_code)]
#[path = "../echo_load.rs"]
mod echo_load;
mod goro_impl;
mod may_impl;
mod threads_impl;
mod tokio_impl;

use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use goro_bench::tools::{self, kill, median, ChildError, Finished};
use serde_json::{json, Value};

use common::{Contender, Workload};

/// First argument of a child that runs as the echo load generator.
const AS_LOAD: &str = "--as-echo-load";
/// The Go column when there is no toolchain.
const NO_GO: &str = "no go toolchain on PATH (apt-get install golang-go)";
/// Echo messages, bytes.
const ECHO_SIZE: usize = 64;
/// Bound of a server's start (until `LISTENING`) and of its exit after stdin closes.
const SERVER_BOUND: Duration = Duration::from_secs(10);
/// Bound of the load run beyond its warm-up and measuring time.
const LOAD_SLACK: Duration = Duration::from_secs(30);
/// Bound of `go build`.
const GO_BUILD_BOUND: Duration = Duration::from_secs(300);

const USAGE: &str = "\
usage: compare [--reps N] [--procs N] [--contenders goro,may,tokio,threads,go]
               [--only WORKLOAD,...] [--json FILE] [--plot FILE.svg] [--timeout SECS]
       compare --worker CONTENDER WORKLOAD     (one run, prints {\"value\": ..} or {\"skip\": ..})
       compare --serve CONTENDER               (echo server: prints LISTENING <addr>, stops at stdin EOF)

Compares goro with may, tokio, plain threads and Go on the workloads of
bench/src/bin/compare/common.rs. Each run is a fresh child process; the contenders'
order rotates every rep; the table gives medians and ratios to goro (> 1: goro ahead).

  --reps N          reps per contender and workload (default 5, at least 1)
  --procs N         GORO_MAXPROCS (and GOMAXPROCS) of every child (default 2)
  --contenders L    comma-separated subset, in column order (default: all five)
  --only L          comma-separated workloads (default: all), among:
                    chain chainbuf sieve pingpong spawn_join yield mutex2 mutex8
                    mutex64 sleep_lateness spawn_park_{10k,100k,1m}[_wake,_rss] echo
                    (one spawn_park run gives all three of its rows: naming one
                    selects the three)
  --json FILE       every raw figure, the medians, spreads, ratios and the machine
  --plot FILE.svg   the ratios to goro as an SVG bar chart (log scale)
  --timeout SECS    bound of one worker run (default 60); a late one is killed
  -h, --help        this text";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("--worker") => worker(&args[1..]),
        Some("--serve") => serve(&args[1..]),
        Some(AS_LOAD) => echo_load::main_with_args(args[1..].to_vec()),
        Some("-h" | "--help") => {
            println!("{USAGE}");
            0
        }
        _ => match parse_args(&args) {
            Ok(opts) => orchestrate(&opts),
            Err(e) => {
                eprintln!("compare: {e}\n{USAGE}");
                2
            }
        },
    };
    let _ = io::stdout().flush();
    // Exit without waiting for anything: a worker may leave tasks parked (the sieve's
    // filters, as Go's program does).
    std::process::exit(code);
}

// ---------------------------------------------------------------------------------
// Worker and server modes.

/// `--worker CONTENDER WORKLOAD`: one run, one result line.
fn worker(args: &[String]) -> i32 {
    let [c, w] = args else {
        eprintln!("compare: --worker needs CONTENDER WORKLOAD\n{USAGE}");
        return 2;
    };
    let (Some(c), Some(w)) = (Contender::parse(c), Workload::parse(w)) else {
        eprintln!("compare: unknown contender {c:?} or workload {w:?}\n{USAGE}");
        return 2;
    };
    if w == Workload::Echo {
        eprintln!(
            "compare: echo is measured with `compare --serve {}`",
            c.name()
        );
        return 2;
    }
    if w.primary() != w {
        eprintln!(
            "compare: {} is measured by a run of {}",
            w.name(),
            w.primary().name()
        );
        return 2;
    }
    if cfg!(debug_assertions) {
        eprintln!("compare: WARNING: a debug build; the figures mean little");
    }
    let outcome = match c {
        Contender::Goro => goro_impl::run(w),
        Contender::May => may_impl::run(w),
        Contender::Tokio => tokio_impl::run(w),
        Contender::Threads => threads_impl::run(w),
        Contender::Go => {
            eprintln!("compare: Go's worker is the program in bench/go/compare/");
            return 2;
        }
    };
    common::print_outcome(&outcome, common::note(c, w));
    0
}

/// `--serve CONTENDER`: the contender's echo server, until stdin reaches EOF.
fn serve(args: &[String]) -> i32 {
    let [c] = args else {
        eprintln!("compare: --serve needs CONTENDER\n{USAGE}");
        return 2;
    };
    let Some(c) = Contender::parse(c) else {
        eprintln!("compare: unknown contender {c:?}\n{USAGE}");
        return 2;
    };
    // The stop signal: stdin's EOF (the orchestrator closes the pipe) ends the process,
    // whatever the server is doing.
    thread::spawn(|| {
        let mut sink = [0u8; 512];
        let mut stdin = io::stdin();
        loop {
            match stdin.read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let _ = io::stdout().flush();
        std::process::exit(0);
    });
    let served = match c {
        Contender::Goro => goro_impl::serve(),
        Contender::May => may_impl::serve(),
        Contender::Tokio => tokio_impl::serve(),
        Contender::Threads => threads_impl::serve(),
        Contender::Go => {
            eprintln!("compare: Go's server is `goro-compare-go serve`");
            return 2;
        }
    };
    match served {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("compare --serve {}: {e}", c.name());
            1
        }
    }
}

// ---------------------------------------------------------------------------------
// Options.

struct Options {
    reps: usize,
    procs: usize,
    contenders: Vec<Contender>,
    workloads: Vec<Workload>,
    json: Option<PathBuf>,
    plot: Option<PathBuf>,
    timeout: Duration,
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        reps: 5,
        procs: 2,
        contenders: Contender::ALL.to_vec(),
        workloads: Workload::ALL.to_vec(),
        json: None,
        plot: None,
        timeout: Duration::from_secs(60),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match a.as_str() {
            "--reps" => {
                o.reps = value("--reps")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or("--reps must be a whole number in 1..=1000")?
            }
            "--procs" => {
                o.procs = value("--procs")?
                    .parse()
                    .ok()
                    .filter(|n| (1..=1024).contains(n))
                    .ok_or("--procs must be a whole number in 1..=1024")?
            }
            "--contenders" => {
                o.contenders = list(&value("--contenders")?, Contender::parse, "contender")?
            }
            "--only" => o.workloads = list(&value("--only")?, Workload::parse, "workload")?,
            "--json" => o.json = Some(value("--json")?.into()),
            "--plot" => o.plot = Some(value("--plot")?.into()),
            "--timeout" => {
                let secs: f64 = value("--timeout")?
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 1.0 && *s <= 3600.0)
                    .ok_or("--timeout must be a number of seconds in 1..=3600")?;
                o.timeout = Duration::from_secs_f64(secs);
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    o.workloads = with_companions(&o.workloads);
    Ok(o)
}

/// The rows to measure for the workloads asked for: each one's primary, followed by
/// the primary's companions (one run measures them all), without repeats.
fn with_companions(asked: &[Workload]) -> Vec<Workload> {
    let mut rows = Vec::new();
    for w in asked.iter().map(|w| w.primary()) {
        if !rows.contains(&w) {
            rows.push(w);
            rows.extend(w.companions());
        }
    }
    rows
}

/// A comma-separated list of names, without repeats, in the order given.
fn list<T: PartialEq + Copy>(
    s: &str,
    parse: fn(&str) -> Option<T>,
    what: &str,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let v = parse(name).ok_or_else(|| format!("unknown {what} {name:?}"))?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    if out.is_empty() {
        return Err(format!("an empty list of {what}s"));
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------
// Running children.

/// What one run gave.
#[derive(Clone, Debug)]
enum Outcome {
    Value(f64),
    Skip(String),
    Failed(String),
}

/// One run of one contender on one workload.
#[derive(Clone, Debug)]
struct Run {
    rep: usize,
    /// Its place in that rep's order (0: first).
    position: usize,
    outcome: Outcome,
    /// Anything worth a footnote next to a figure (say, a capacity-1 stand-in).
    note: Option<String>,
    /// Wall time of the child (for echo: server start to stop).
    wall: Duration,
}

/// Runs `cmd` to its end, capturing its output; kills it after `bound`. A timeout
/// says so on one line (it goes into a footnote), with the tail of the child's stderr.
fn run_bounded(cmd: Command, bound: Duration, what: &str) -> Result<Finished, String> {
    tools::run_child(cmd, bound).map_err(|e| match e {
        ChildError::TimedOut { stderr, .. } => format!(
            "no result after {:.0} s (hang?); killed{}",
            bound.as_secs_f64(),
            tail_suffix(&stderr)
        ),
        e => e.describe(what, bound),
    })
}

/// The last meaningful lines of a child's stderr, on one line (a panic's location and
/// message), or "" if there are none.
fn stderr_tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    let mut s = lines[lines.len().saturating_sub(2)..].join(" ");
    if s.chars().count() > 240 {
        s = s.chars().take(240).collect::<String>() + "...";
    }
    s
}

fn tail_suffix(stderr: &str) -> String {
    match stderr_tail(stderr) {
        t if t.is_empty() => String::new(),
        t => format!(": {t}"),
    }
}

/// The result line of a worker: the last stdout line that is a JSON object.
fn interpret(f: &Finished) -> (Outcome, Option<String>) {
    let line = f
        .stdout
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with('{'));
    if !f.status.success() {
        return (
            Outcome::Failed(format!("{}{}", f.status, tail_suffix(&f.stderr))),
            None,
        );
    }
    let Some(line) = line else {
        return (
            Outcome::Failed(format!(
                "exited 0 without a result line{}",
                tail_suffix(&f.stderr)
            )),
            None,
        );
    };
    parse_result_line(line)
}

/// The companion figures of a worker's result line (`also`), by workload name.
fn also_figures(f: &Finished) -> Vec<(String, f64)> {
    let line = f
        .stdout
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with('{'));
    let v: Option<Value> = line.and_then(|l| serde_json::from_str(l).ok());
    let Some(Value::Object(also)) = v.and_then(|mut v| v.get_mut("also").map(Value::take)) else {
        return Vec::new();
    };
    also.into_iter()
        .filter_map(|(k, x)| Some((k, x.as_f64().filter(|x| x.is_finite())?)))
        .collect()
}

fn parse_result_line(line: &str) -> (Outcome, Option<String>) {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            return (
                Outcome::Failed(format!("bad result line {line:?}: {e}")),
                None,
            )
        }
    };
    let note = v.get("note").and_then(Value::as_str).map(String::from);
    if let Some(x) = v.get("value").and_then(Value::as_f64) {
        if x.is_finite() {
            return (Outcome::Value(x), note);
        }
    }
    if let Some(why) = v.get("skip").and_then(Value::as_str) {
        return (Outcome::Skip(why.to_string()), note);
    }
    (Outcome::Failed(format!("bad result line {line:?}")), None)
}

/// How to start each contender's children.
struct Launcher {
    me: PathBuf,
    go: Result<GoBuild, String>,
    procs: usize,
    timeout: Duration,
}

struct GoBuild {
    bin: PathBuf,
    version: String,
}

impl Launcher {
    /// The child for `c` with `args` (Rust: this binary with `rust_args`; Go: the Go
    /// binary with `go_args`), with the parallelism set. None: Go is not available.
    fn command(&self, c: Contender, rust_args: &[&str], go_args: &[&str]) -> Option<Command> {
        let procs = self.procs.to_string();
        let mut cmd = match c {
            Contender::Go => {
                let mut cmd = Command::new(&self.go.as_ref().ok()?.bin);
                cmd.args(go_args).env("GOMAXPROCS", &procs);
                cmd
            }
            _ => {
                let mut cmd = Command::new(&self.me);
                cmd.args(rust_args);
                cmd
            }
        };
        cmd.env("GORO_MAXPROCS", &procs);
        Some(cmd)
    }

    fn go_missing(&self) -> Option<&str> {
        self.go.as_ref().err().map(String::as_str)
    }

    /// One worker run: its outcome, its note, and its companion figures by name.
    fn worker(&self, c: Contender, w: Workload) -> (Outcome, Option<String>, Vec<(String, f64)>) {
        if w == Workload::Echo {
            let (o, n) = self.echo(c);
            return (o, n, Vec::new());
        }
        let Some(cmd) = self.command(c, &["--worker", c.name(), w.name()], &[w.name()]) else {
            return (
                Outcome::Skip(self.go_missing().unwrap_or("").into()),
                None,
                Vec::new(),
            );
        };
        match run_bounded(cmd, self.timeout, &format!("{} {}", c.name(), w.name())) {
            Ok(f) => {
                let (o, n) = interpret(&f);
                (o, n, also_figures(&f))
            }
            Err(e) => (Outcome::Failed(e), None, Vec::new()),
        }
    }

    /// One echo run: start the server, load it, stop it.
    fn echo(&self, c: Contender) -> (Outcome, Option<String>) {
        let Some(cmd) = self.command(c, &["--serve", c.name()], &["serve"]) else {
            return (Outcome::Skip(self.go_missing().unwrap_or("").into()), None);
        };
        let mut srv = match Server::start(cmd) {
            Ok(Started::Listening(s)) => s,
            Ok(Started::Skip(why)) => return (Outcome::Skip(why), None),
            Err(e) => return (Outcome::Failed(e), None),
        };
        let load = self.load(srv.addr);
        if let Some(status) = srv.exited() {
            return (
                Outcome::Failed(format!(
                    "the server exited during the load ({status}){}",
                    tail_suffix(&srv.log())
                )),
                None,
            );
        }
        let stop = srv.stop();
        match load {
            Ok(rps) => (Outcome::Value(rps), stop.err()),
            Err(e) => (Outcome::Failed(e), None),
        }
    }

    /// The echo load generator (this binary as echo_load); requests/s.
    fn load(&self, addr: SocketAddr) -> Result<f64, String> {
        let mut cmd = Command::new(&self.me);
        cmd.arg(AS_LOAD)
            .args(["--addr", &addr.to_string()])
            .args(["--conns", &common::ECHO_CONNS.to_string()])
            .args(["--size", &ECHO_SIZE.to_string()])
            .args(["--secs", &common::ECHO_SECS.to_string()])
            .args(["--warmup", &common::ECHO_WARMUP_SECS.to_string()])
            .arg("--json")
            .env("GORO_MAXPROCS", self.procs.to_string());
        let bound =
            Duration::from_secs_f64(common::ECHO_SECS + common::ECHO_WARMUP_SECS) + LOAD_SLACK;
        let f = run_bounded(cmd, bound, "echo_load").map_err(|e| format!("echo_load: {e}"))?;
        if !f.status.success() {
            return Err(format!("echo_load: {}{}", f.status, tail_suffix(&f.stderr)));
        }
        let line = f
            .stdout
            .lines()
            .map(str::trim)
            .rfind(|l| l.starts_with('{'))
            .ok_or("echo_load printed no JSON line")?;
        let v: Value = serde_json::from_str(line)
            .map_err(|e| format!("echo_load's JSON line {line:?}: {e}"))?;
        if v.get("conns").and_then(Value::as_u64) != Some(common::ECHO_CONNS as u64) {
            return Err(format!(
                "echo_load measured another connection count: {line}"
            ));
        }
        v.get("rps")
            .and_then(Value::as_f64)
            .filter(|r| r.is_finite())
            .ok_or_else(|| format!("echo_load's JSON has no \"rps\": {line}"))
    }
}

enum Started {
    Listening(Server),
    /// The server printed `{"skip": ...}` instead of listening.
    Skip(String),
}

/// An echo server child: killed when dropped unless stopped.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn start(mut cmd: Command) -> Result<Started, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let log: Arc<Mutex<String>> = Arc::default();
        if let Some(err) = child.stderr.take() {
            let log = log.clone();
            thread::spawn(move || {
                for line in BufReader::new(err).lines() {
                    let Ok(line) = line else { break };
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    if log.len() < 1 << 16 {
                        log.push_str(&line);
                        log.push('\n');
                    }
                }
            });
        }
        // Every stdout line goes to `lines` (read to the end, so the pipe never fills).
        let (tx, lines) = mpsc::channel::<String>();
        if let Some(out) = child.stdout.take() {
            thread::spawn(move || {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        let mut srv = Server {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let deadline = Instant::now() + SERVER_BOUND;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    let line = line.trim();
                    if let Some(addr) = line.strip_prefix("LISTENING ") {
                        srv.addr = addr
                            .trim()
                            .parse()
                            .map_err(|e| format!("bad address in {line:?}: {e}"))?;
                        return Ok(Started::Listening(srv));
                    }
                    if line.starts_with('{') {
                        return match parse_result_line(line).0 {
                            Outcome::Skip(why) => Ok(Started::Skip(why)),
                            _ => Err(format!("the server printed {line:?} instead of listening")),
                        };
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "the server did not print LISTENING within {} s{}",
                        SERVER_BOUND.as_secs(),
                        tail_suffix(&srv.log())
                    ))
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Its stdout closed: it exited (or is exiting).
                    let status = srv.wait_exit(Duration::from_secs(2));
                    thread::sleep(Duration::from_millis(20)); // let the log reader finish
                    return Err(format!(
                        "the server exited without listening ({}){}",
                        status.map_or("still running".into(), |s| s.to_string()),
                        tail_suffix(&srv.log())
                    ));
                }
            }
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// Waits up to `bound` for the child to exit; kills it after that.
    fn wait_exit(&mut self, bound: Duration) -> Option<ExitStatus> {
        let child = self.child.as_mut()?;
        let t = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => {
                    self.child = None;
                    return Some(status);
                }
                Ok(None) if t.elapsed() < bound => thread::sleep(Duration::from_millis(5)),
                _ => {
                    kill(child);
                    self.child = None;
                    return None;
                }
            }
        }
    }

    /// Closes its stdin and waits for a clean exit; why not, if not.
    fn stop(&mut self) -> Result<(), String> {
        if let Some(child) = self.child.as_mut() {
            drop(child.stdin.take());
        }
        match self.wait_exit(SERVER_BOUND) {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(format!("the server exited with {status} at stdin EOF")),
            None => Err(format!(
                "the server was still running {} s after stdin EOF; killed",
                SERVER_BOUND.as_secs()
            )),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill(&mut child);
        }
    }
}

// ---------------------------------------------------------------------------------
// Go.

/// Builds `bench/go/compare/` into `tmp`; the binary and `go version`, or why not.
fn build_go(tmp: &Path) -> Result<GoBuild, String> {
    let version = tools::go_version().map_err(|e| {
        if e.not_found {
            NO_GO.to_string()
        } else {
            e.to_string()
        }
    })?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("go")
        .join("compare");
    let bin = tmp.join("goro-compare-go");
    let cmd = tools::go_build_command(&src, &bin)?;
    let f = run_bounded(cmd, GO_BUILD_BOUND, "go build").map_err(|e| format!("go build: {e}"))?;
    if !f.status.success() {
        let first = f
            .stderr
            .lines()
            .chain(f.stdout.lines())
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("no output")
            .to_string();
        return Err(format!("go build failed: {first}"));
    }
    Ok(GoBuild { bin, version })
}

// ---------------------------------------------------------------------------------
// The orchestrator.

/// Every run, by workload and contender (indices into the options' lists).
type Runs = Vec<Vec<Vec<Run>>>;

fn orchestrate(o: &Options) -> i32 {
    if cfg!(debug_assertions) {
        eprintln!("compare: WARNING: a debug build; run it with --release");
    }
    let me = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("compare: current_exe: {e}");
            return 1;
        }
    };
    let t0 = Instant::now();
    let machine = machine_info(o.procs);
    let tmp = std::env::temp_dir().join(format!("goro-compare-{}", std::process::id()));
    let go = if o.contenders.contains(&Contender::Go) {
        eprintln!("compare: building bench/go/compare ...");
        let go = build_go(&tmp);
        match &go {
            Ok(g) => eprintln!("compare: Go built with {}", g.version),
            Err(why) => eprintln!("compare: Go not measured: {why}"),
        }
        go
    } else {
        Err("not selected".into())
    };
    let launcher = Launcher {
        me,
        go,
        procs: o.procs,
        timeout: o.timeout,
    };
    let n = o.contenders.len();
    eprintln!(
        "compare: {} workloads x {} contenders x {} reps, GORO_MAXPROCS={}, load average {}",
        o.workloads.len(),
        n,
        o.reps,
        o.procs,
        load_average()
    );

    let mut runs: Runs = vec![vec![Vec::new(); n]; o.workloads.len()];
    for (wi, &w) in o.workloads.iter().enumerate() {
        if w.primary() != w {
            continue; // filled by its primary's runs
        }
        for rep in 0..o.reps {
            let mut order: Vec<usize> = (0..n).collect();
            order.rotate_left(rep % n);
            for (position, &ci) in order.iter().enumerate() {
                let c = o.contenders[ci];
                let t = Instant::now();
                let (outcome, note, also) = launcher.worker(c, w);
                let wall = t.elapsed();
                for cw in w.companions() {
                    let Some(cwi) = o.workloads.iter().position(|&x| x == cw) else {
                        continue;
                    };
                    let outcome = match (&outcome, also.iter().find(|(k, _)| k == cw.name())) {
                        (Outcome::Value(_), Some(&(_, v))) => Outcome::Value(v),
                        (Outcome::Value(_), None) => Outcome::Failed(format!(
                            "the run of {} gave no {} figure",
                            w.name(),
                            cw.name()
                        )),
                        (other, _) => other.clone(),
                    };
                    eprintln!(
                        "  {:<20} {:<7} {}",
                        cw.name(),
                        c.name(),
                        shown(&outcome, cw)
                    );
                    runs[cwi][ci].push(Run {
                        rep,
                        position,
                        outcome,
                        note: note.clone(),
                        wall,
                    });
                }
                let shown = shown(&outcome, w);
                eprintln!(
                    "  {:<20} rep {}/{} {:<7} {shown} ({:.2} s)",
                    w.name(),
                    rep + 1,
                    o.reps,
                    c.name(),
                    wall.as_secs_f64()
                );
                runs[wi][ci].push(Run {
                    rep,
                    position,
                    outcome,
                    note,
                    wall,
                });
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let total = t0.elapsed();

    let stats = Stats::new(o, &runs);
    print_table(o, &stats, &machine, &launcher, total);
    let mut code = 0;
    if let Some(path) = &o.json {
        let doc = json_doc(o, &runs, &stats, &machine, &launcher, total);
        let text = serde_json::to_string_pretty(&doc).expect("JSON values serialise");
        match std::fs::write(path, text + "\n") {
            Ok(()) => eprintln!("compare: raw figures written to {}", path.display()),
            Err(e) => {
                eprintln!("compare: cannot write {}: {e}", path.display());
                code = 1;
            }
        }
    }
    if let Some(path) = &o.plot {
        match std::fs::write(path, svg(o, &stats)) {
            Ok(()) => eprintln!("compare: plot written to {}", path.display()),
            Err(e) => {
                eprintln!("compare: cannot write {}: {e}", path.display());
                code = 1;
            }
        }
    }
    code
}

/// One run's outcome as the progress lines show it.
fn shown(outcome: &Outcome, w: Workload) -> String {
    match outcome {
        Outcome::Value(v) => format!("{} {}", fmt_num(*v), w.unit()),
        Outcome::Skip(why) => format!("skip: {why}"),
        Outcome::Failed(why) => format!("FAILED: {why}"),
    }
}

/// The summary of one contender on one workload.
#[derive(Clone, Debug, Default)]
struct Cell {
    median: Option<f64>,
    min: Option<f64>,
    max: Option<f64>,
    /// To goro's median, oriented so that > 1 means goro is ahead.
    ratio: Option<f64>,
    values: usize,
    skips: Vec<String>,
    failures: Vec<String>,
    notes: Vec<String>,
}

impl Cell {
    fn of(runs: &[Run]) -> Cell {
        let mut c = Cell::default();
        let mut vals = Vec::new();
        for r in runs {
            match &r.outcome {
                Outcome::Value(v) => vals.push(*v),
                Outcome::Skip(why) => c.skips.push(why.clone()),
                Outcome::Failed(why) => c.failures.push(why.clone()),
            }
            if let Some(n) = &r.note {
                if !c.notes.contains(n) {
                    c.notes.push(n.clone());
                }
            }
        }
        c.values = vals.len();
        vals.sort_by(f64::total_cmp);
        c.median = median(&vals);
        c.min = vals.first().copied();
        c.max = vals.last().copied();
        c
    }

    /// What the footnote says about this cell, if anything.
    fn footnote(&self, reps: usize) -> Option<String> {
        let mut parts = Vec::new();
        let distinct = |v: &[String]| {
            let mut d: Vec<(String, usize)> = Vec::new();
            for s in v {
                match d.iter_mut().find(|(t, _)| t == s) {
                    Some((_, k)) => *k += 1,
                    None => d.push((s.clone(), 1)),
                }
            }
            // Reasons that differ only in their figures (rates, counts) would repeat the
            // same sentence per rep: show the first, and say the rest is in the JSON.
            let total: usize = d.iter().map(|(_, k)| k).sum();
            let (first, k) = d[0].clone();
            if d.len() > 1 {
                format!("{first} (first of {total} reps; the others' figures are in the JSON)")
            } else if k > 1 && k < reps {
                format!("{first} ({k} reps)")
            } else {
                first
            }
        };
        if !self.skips.is_empty() {
            let lead = if self.values > 0 || !self.failures.is_empty() {
                format!("{} of {reps} reps skipped: ", self.skips.len())
            } else {
                "skip: ".into()
            };
            parts.push(lead + &distinct(&self.skips));
        }
        if !self.failures.is_empty() {
            let lead = if self.values > 0 || !self.skips.is_empty() {
                format!("{} of {reps} reps failed: ", self.failures.len())
            } else {
                "failed: ".into()
            };
            parts.push(lead + &distinct(&self.failures));
        }
        parts.extend(self.notes.iter().cloned());
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// The table's word for a cell without a figure.
    fn missing_word(&self) -> &'static str {
        if self.failures.is_empty() {
            "skip"
        } else {
            "failed"
        }
    }
}

/// The cells, by workload and contender.
struct Stats {
    cells: Vec<Vec<Cell>>,
}

impl Stats {
    fn new(o: &Options, runs: &Runs) -> Stats {
        let goro = o.contenders.iter().position(|&c| c == Contender::Goro);
        let cells = o
            .workloads
            .iter()
            .zip(runs)
            .map(|(&w, per_c)| {
                let mut cells: Vec<Cell> = per_c.iter().map(|r| Cell::of(r)).collect();
                let base = goro.and_then(|g| cells[g].median);
                for c in &mut cells {
                    c.ratio = match (base, c.median) {
                        (Some(g), Some(x)) if g > 0.0 && x > 0.0 => {
                            Some(if w.higher_is_better() { g / x } else { x / g })
                        }
                        _ => None,
                    };
                }
                cells
            })
            .collect();
        Stats { cells }
    }
}

/// A figure with about three significant digits.
fn fmt_num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A ratio with about three significant digits.
fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// Numbered footnotes, the same text sharing a number.
#[derive(Default)]
struct Footnotes(Vec<String>);

impl Footnotes {
    fn mark(&mut self, text: String) -> usize {
        match self.0.iter().position(|t| *t == text) {
            Some(i) => i + 1,
            None => {
                self.0.push(text);
                self.0.len()
            }
        }
    }
}

fn print_table(o: &Options, s: &Stats, m: &Machine, l: &Launcher, total: Duration) {
    let mut notes = Footnotes::default();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n## goro vs {}\n",
        o.contenders
            .iter()
            .filter(|&&c| c != Contender::Goro)
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        out,
        "Median of {} reps per cell, every run a fresh process, the contenders' order rotated \
         every rep; GORO_MAXPROCS={} (Go: GOMAXPROCS={}). {} CPUs ({}), Linux {}, {}.{}\n",
        o.reps,
        o.procs,
        o.procs,
        m.nproc,
        m.cpu,
        m.kernel,
        m.date,
        match &l.go {
            Ok(g) => format!(" Go: {}.", g.version),
            Err(_) => String::new(),
        }
    );
    let header: Vec<&str> = o.contenders.iter().map(|c| c.name()).collect();
    let _ = writeln!(out, "| workload | unit | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---:|".repeat(header.len()));
    for (wi, &w) in o.workloads.iter().enumerate() {
        let mut row = format!("| {} | {} |", w.name(), w.unit());
        for (ci, &c) in o.contenders.iter().enumerate() {
            let cell = &s.cells[wi][ci];
            let mut text = match (cell.median, cell.ratio) {
                (Some(v), Some(r)) if c != Contender::Goro => {
                    format!("{} ({}x)", fmt_num(v), fmt_ratio(r))
                }
                (Some(v), _) => fmt_num(v),
                (None, _) => cell.missing_word().to_string(),
            };
            if let Some(f) = cell.footnote(o.reps) {
                let k = notes.mark(format!("{}: {f}", c.name()));
                let _ = write!(text, " [{k}]");
            }
            let _ = write!(row, " {text} |");
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(
        out,
        "\nIn parentheses: the ratio to goro's median, > 1 when goro is ahead: contender / goro \
         for the lower-is-better figures (all but echo), goro / contender for echo (req/s, \
         higher is better)."
    );
    if !notes.0.is_empty() {
        let _ = writeln!(out);
        for (i, t) in notes.0.iter().enumerate() {
            let _ = writeln!(out, "{}. {t}", i + 1);
        }
    }
    let _ = writeln!(out, "\nSpread (min-max of the reps):\n");
    let _ = writeln!(out, "| workload | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---:|".repeat(header.len()));
    for (wi, &w) in o.workloads.iter().enumerate() {
        let mut row = format!("| {} |", w.name());
        for cell in &s.cells[wi] {
            let text = match (cell.min, cell.max) {
                (Some(a), Some(b)) => format!("{}-{}", fmt_num(a), fmt_num(b)),
                _ => "-".into(),
            };
            let _ = write!(row, " {text} |");
        }
        let _ = writeln!(out, "{row}");
    }
    let _ = writeln!(
        out,
        "\nTotal time {:.0} s; load average at the end {}.",
        total.as_secs_f64(),
        load_average()
    );
    print!("{out}");
}

// ---------------------------------------------------------------------------------
// The machine, the JSON.

struct Machine {
    nproc: usize,
    kernel: String,
    cpu: String,
    date: String,
    load_start: String,
}

fn machine_info(_procs: usize) -> Machine {
    let kernel = Command::new("uname")
        .arg("-r")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    Machine {
        nproc: thread::available_parallelism().map_or(0, |n| n.get()),
        kernel,
        cpu,
        date: utc_now(),
        load_start: load_average(),
    }
}

fn load_average() -> String {
    tools::read_load_average().unwrap_or_else(|_| "unknown".into())
}

/// Now, UTC, as `YYYY-MM-DDTHH:MM:SSZ`.
fn utc_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, mo, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m as u32, d as u32)
}

fn json_doc(
    o: &Options,
    runs: &Runs,
    s: &Stats,
    m: &Machine,
    l: &Launcher,
    total: Duration,
) -> Value {
    let results: Vec<Value> = o
        .workloads
        .iter()
        .enumerate()
        .map(|(wi, &w)| {
            let contenders: Vec<Value> = o
                .contenders
                .iter()
                .enumerate()
                .map(|(ci, &c)| {
                    let cell = &s.cells[wi][ci];
                    let reps: Vec<Value> = runs[wi][ci]
                        .iter()
                        .map(|r| {
                            let mut v = json!({
                                "rep": r.rep,
                                "position": r.position,
                                "wall_secs": r.wall.as_secs_f64(),
                            });
                            let (k, x) = match &r.outcome {
                                Outcome::Value(x) => ("value", json!(x)),
                                Outcome::Skip(why) => ("skip", json!(why)),
                                Outcome::Failed(why) => ("failed", json!(why)),
                            };
                            v[k] = x;
                            if let Some(n) = &r.note {
                                v["note"] = json!(n);
                            }
                            v
                        })
                        .collect();
                    json!({
                        "contender": c.name(),
                        "runs": reps,
                        "median": cell.median,
                        "min": cell.min,
                        "max": cell.max,
                        "ratio_to_goro": cell.ratio,
                        "footnote": cell.footnote(o.reps),
                    })
                })
                .collect();
            json!({
                "workload": w.name(),
                "unit": w.unit(),
                "higher_is_better": w.higher_is_better(),
                "contenders": contenders,
            })
        })
        .collect();
    json!({
        "tool": "goro-bench compare",
        "ratio_convention": "ratio_to_goro > 1 means goro is ahead: contender/goro for \
                             lower-is-better figures, goro/contender for echo req/s",
        "machine": {
            "nproc": m.nproc,
            "kernel": m.kernel,
            "cpu": m.cpu,
            "date": m.date,
            "load_average_start": m.load_start,
            "load_average_end": load_average(),
        },
        "settings": {
            "reps": o.reps,
            "procs": o.procs,
            "timeout_secs": o.timeout.as_secs_f64(),
            "contenders": o.contenders.iter().map(|c| c.name()).collect::<Vec<_>>(),
            "workloads": o.workloads.iter().map(|w| w.name()).collect::<Vec<_>>(),
            "echo": {
                "conns": common::ECHO_CONNS,
                "size": ECHO_SIZE,
                "secs": common::ECHO_SECS,
                "warmup_secs": common::ECHO_WARMUP_SECS,
            },
        },
        "go": match &l.go {
            Ok(g) => json!({"version": g.version}),
            Err(why) => json!({"version": null, "why_not": why}),
        },
        "results": results,
        "total_secs": total.as_secs_f64(),
    })
}

// ---------------------------------------------------------------------------------
// The plot.

/// Colours of the bars, by contender.
fn colour(c: Contender) -> &'static str {
    match c {
        Contender::Goro => "#7f7f7f",
        Contender::May => "#d62728",
        Contender::Tokio => "#ff7f0e",
        Contender::Threads => "#2ca02c",
        Contender::Go => "#1f77b4",
    }
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Horizontal grouped bars of the ratio to goro, one group per workload, log scale.
fn svg(o: &Options, s: &Stats) -> String {
    let others: Vec<(usize, Contender)> = o
        .contenders
        .iter()
        .copied()
        .enumerate()
        .filter(|&(_, c)| c != Contender::Goro)
        .collect();
    let ratios: Vec<f64> = s
        .cells
        .iter()
        .flat_map(|row| others.iter().filter_map(|&(ci, _)| row[ci].ratio))
        .collect();
    let lo = ratios.iter().copied().fold(1.0f64, f64::min) / 1.5;
    let hi = ratios.iter().copied().fold(1.0f64, f64::max) * 1.5;
    let (d0, d1) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let (l0, l1) = (f64::from(d0), f64::from(d1));

    let (width, label_w, right) = (960.0, 150.0, 80.0);
    let plot_w = width - label_w - right;
    let (bar_h, bar_gap, group_gap) = (12.0, 2.0, 14.0);
    let k = others.len().max(1) as f64;
    let group_h = k * (bar_h + bar_gap) - bar_gap + group_gap;
    let top = 76.0;
    let plot_h = group_h * o.workloads.len() as f64;
    let height = top + plot_h + 100.0;
    let x = |r: f64| label_w + (r.log10() - l0) / (l1 - l0) * plot_w;

    let mut g = String::new();
    let _ = writeln!(
        g,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"##
    );
    let _ = writeln!(
        g,
        r##"<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>"##
    );
    let _ = writeln!(
        g,
        r##"<text x="{}" y="24" text-anchor="middle" font-size="16" font-weight="bold">goro vs {}: ratio to goro (&gt; 1: goro ahead)</text>"##,
        width / 2.0,
        xml_escape(
            &others
                .iter()
                .map(|(_, c)| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    let _ = writeln!(
        g,
        r##"<text x="{}" y="44" text-anchor="middle" fill="#444">median of {} reps, GORO_MAXPROCS={}; contender / goro for times and sizes, goro / contender for echo req/s; log scale</text>"##,
        width / 2.0,
        o.reps,
        o.procs
    );
    // Grid and ticks.
    let axis_y = top + plot_h;
    for d in d0..=d1 {
        let decade = 10f64.powi(d);
        let mults: &[f64] = if d1 - d0 <= 3 {
            &[1.0, 2.0, 5.0]
        } else {
            &[1.0]
        };
        for &m in mults {
            let v = decade * m;
            if d == d1 && m > 1.0 {
                continue;
            }
            let xv = x(v);
            let stroke = if m == 1.0 { "#ccc" } else { "#eee" };
            let _ = writeln!(
                g,
                r##"<line x1="{xv:.1}" y1="{top}" x2="{xv:.1}" y2="{axis_y}" stroke="{stroke}"/>"##
            );
            let label = if d < 0 {
                format!("{:.*}", (-d) as usize, v)
            } else {
                format!("{v:.0}")
            };
            let _ = writeln!(
                g,
                r##"<text x="{xv:.1}" y="{:.1}" text-anchor="middle" fill="#444">{label}</text>"##,
                axis_y + 16.0
            );
        }
    }
    let _ = writeln!(
        g,
        r##"<line x1="{label_w}" y1="{axis_y}" x2="{:.1}" y2="{axis_y}" stroke="black"/>"##,
        label_w + plot_w
    );
    let _ = writeln!(
        g,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">ratio to goro (log scale; &gt; 1: goro ahead, &lt; 1: the other is ahead)</text>"##,
        label_w + plot_w / 2.0,
        axis_y + 36.0
    );
    // Bars.
    let x1 = x(1.0);
    for (wi, &w) in o.workloads.iter().enumerate() {
        let gy = top + group_h * wi as f64 + group_gap / 2.0;
        let _ = writeln!(
            g,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end" dominant-baseline="middle">{}</text>"##,
            label_w - 8.0,
            gy + (group_h - group_gap) / 2.0,
            xml_escape(w.name())
        );
        for (bi, &(ci, c)) in others.iter().enumerate() {
            let y = gy + bi as f64 * (bar_h + bar_gap);
            let cell = &s.cells[wi][ci];
            match cell.ratio {
                Some(r) => {
                    let xr = x(r);
                    let (bx, bw) = (xr.min(x1), (xr - x1).abs().max(1.0));
                    let _ = writeln!(
                        g,
                        r##"<rect x="{bx:.1}" y="{y:.1}" width="{bw:.1}" height="{bar_h}" fill="{}"><title>{} {}: {:.2}</title></rect>"##,
                        colour(c),
                        c.name(),
                        xml_escape(w.name()),
                        r
                    );
                    let _ = writeln!(
                        g,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" dominant-baseline="middle" fill="#333">{}</text>"##,
                        xr.max(x1) + 4.0,
                        y + bar_h / 2.0,
                        fmt_ratio(r)
                    );
                }
                None => {
                    let word = if cell.median.is_some() {
                        "no goro figure"
                    } else {
                        cell.missing_word()
                    };
                    let _ = writeln!(
                        g,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" font-style="italic" dominant-baseline="middle" fill="{}">{} {word}</text>"##,
                        x1 + 4.0,
                        y + bar_h / 2.0,
                        colour(c),
                        c.name()
                    );
                }
            }
        }
    }
    let _ = writeln!(
        g,
        r##"<line x1="{x1:.1}" y1="{}" x2="{x1:.1}" y2="{axis_y}" stroke="black" stroke-width="1.5"/>"##,
        top - 6.0
    );
    // Legend.
    let ly = axis_y + 64.0;
    let mut lx = label_w;
    for &(_, c) in &others {
        let _ = writeln!(
            g,
            r##"<rect x="{lx:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{ly:.1}" dominant-baseline="middle">{}</text>"##,
            ly - 6.0,
            colour(c),
            lx + 16.0,
            c.name()
        );
        lx += 100.0;
    }
    let _ = writeln!(
        g,
        r##"<line x1="{lx:.1}" y1="{:.1}" x2="{lx:.1}" y2="{:.1}" stroke="black" stroke-width="1.5"/><text x="{:.1}" y="{ly:.1}" dominant-baseline="middle">goro (= 1)</text>"##,
        ly - 7.0,
        ly + 7.0,
        lx + 6.0
    );
    lx += 100.0;
    if others.is_empty() || !o.contenders.contains(&Contender::Goro) {
        let _ = writeln!(
            g,
            r##"<text x="{lx:.1}" y="{ly:.1}" dominant-baseline="middle">(no ratios: goro and at least one other contender are needed)</text>"##
        );
    }
    g.push_str("</svg>\n");
    g
}
