//! goro's echo server next to a tokio one and a Go one, measured in ONE run, in one
//! table.
//!
//! ```text
//! cargo build --release --example echo_server
//! cargo run --release -p goro-bench --bin echo_compare [-- --secs S] [--warmup S] [--rounds R]
//!     [--baseline PATH] [--load goro|go]
//! ```
//!
//! Servers, each a child process with 2 Ps / worker threads:
//!
//! - goro: `target/release/examples/echo_server` with `GORO_MAXPROCS=2`. This tool builds
//!   nothing: if the binary is missing it prints the command above and stops.
//! - tokio: `src/bin/echo_tokio.rs` with `--threads 2`.
//! - base (only with `--baseline PATH`): another build of `examples/echo_server`, run
//!   as goro's, for a before/after comparison of a change in the same run (copy the
//!   old binary aside before rebuilding).
//! - Go: `goro-compare-go serve`, the echo server of `compare`'s Go contender
//!   (`bench/go/compare/serve.go`, standard library only), built with `go build` into a
//!   temporary directory at start, run with `GOMAXPROCS=2`. Without `go` on the PATH,
//!   or if the build fails, the Go columns stay empty and the tool says why.
//!
//! The load is `src/bin/echo_load.rs` (closed loop, 64-byte messages, goro coroutine
//! clients with `GORO_MAXPROCS=2`), also a child process, so that it shares no runtime
//! with the server it measures, at 1, 50 and 500 connections, for `--secs` (default 5)
//! after a `--warmup` (default 1) per point. The tokio server and the load generator
//! are this binary re-run in their role (`echo_tokio.rs` and `echo_load.rs` are included
//! here as modules): `cargo run --bin echo_compare` builds only this binary, and this
//! way it never runs a stale one.
//!
//! `--load go` swaps in a load generator that the project's runtime did not write:
//! `goro-compare-go load` (`bench/go/compare/load.go`, the Go binary built for the Go
//! server), the same closed loop on Go's runtime (one goroutine per connection, every
//! echoed byte checked, the same JSON line) with `GOMAXPROCS=2`. It tells whether a
//! ranking of the servers owes anything to goro's client. It needs Go: without it (or
//! if the build fails) the tool exits 1.
//!
//! On a shared, noisy machine only figures taken side by side mean anything, so for
//! every connection count the servers take turns, each in a fresh process (started,
//! loaded, stopped with SIGINT, which must make it exit 0), and the order of the
//! servers rotates from round to round (`--rounds`, default 3). The table gives, per
//! server and connection count, the median requests/s, the median p99 latency and the
//! median fairness (the busiest connection's round trips over the mean), and the ratios
//! of the median requests/s. With the defaults the run takes about 3 minutes.
//!
//! A second table gives the CPU time per round trip over the measuring window: the
//! server's user and system time (`/proc/PID/stat`) and the whole machine's busy time
//! (`/proc/stat`: server, load generator and anything else). The server and the load
//! generator share two vCPUs and both keep them busy, so req/s is about 2 s / the
//! machine's time per round trip: a server is faster by using less CPU per round trip,
//! or by making the load generator use less.
//!
//! Every wait is bounded (a server's start and stop 10 s, a load run its duration +
//! 30 s, the Go build 180 s); on any error (a load error, wrong bytes, a server that
//! crashes, hangs or does not stop cleanly) the children are killed and the tool exits
//! 1 with the error and the server's log.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goro_bench::tools::{
    go_build_command, go_version, kill, load_average, median, run_with_timeout, Finished,
};

#[allow(dead_code)]
#[path = "echo_load.rs"]
mod echo_load;
#[allow(dead_code)]
#[path = "echo_tokio.rs"]
mod echo_tokio;

/// First argument of a child that runs as the load generator.
const AS_LOAD: &str = "--as-echo-load";
/// First argument of a child that runs as the tokio server.
const AS_TOKIO: &str = "--as-echo-tokio";
/// Connection counts, in the table's order.
const CONNS: [usize; 3] = [1, 50, 500];
/// Message size.
const SIZE: usize = 64;
/// Ps of the servers and of the load generator.
const PROCS: usize = 2;
/// Bound of a server's start (until its listening line) and of its stop after SIGINT.
const SERVER_BOUND: Duration = Duration::from_secs(10);
/// Bound of a load run beyond its warm-up and measuring time.
const LOAD_SLACK: Duration = Duration::from_secs(30);
/// Bound of `go build`.
const GO_BUILD_BOUND: Duration = Duration::from_secs(180);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Server {
    Goro,
    Tokio,
    Go,
    /// Another build of goro's echo server (`--baseline PATH`), for before/after runs.
    Baseline,
}

impl Server {
    fn name(self) -> &'static str {
        match self {
            Server::Goro => "goro",
            Server::Tokio => "tokio",
            Server::Go => "Go",
            Server::Baseline => "base",
        }
    }
}

/// Who generates the load (`--load`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoadGen {
    /// `echo_load.rs` with goro coroutine clients (this binary re-run as echo_load).
    Goro,
    /// `goro-compare-go load` (`bench/go/compare/load.go`), on Go's runtime.
    Go,
}

impl LoadGen {
    /// The load generator's name in messages and in the table's heading.
    fn name(self) -> &'static str {
        match self {
            LoadGen::Goro => "echo_load",
            LoadGen::Go => "goro-compare-go load",
        }
    }
}

struct Options {
    secs: f64,
    warmup: f64,
    rounds: usize,
    baseline: Option<PathBuf>,
    load: LoadGen,
}

fn usage(err: &str) -> ! {
    eprintln!("echo_compare: {err}");
    eprintln!(
        "usage: echo_compare [--secs S] [--warmup S] [--rounds R] [--baseline PATH] \
         [--load goro|go]"
    );
    std::process::exit(2);
}

fn parse_args(args: Vec<String>) -> Options {
    let mut o = Options {
        secs: 5.0,
        warmup: 1.0,
        rounds: 3,
        baseline: None,
        load: LoadGen::Goro,
    };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        let secs = |s: String, zero_ok: bool| -> f64 {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v <= 3600.0 && (*v > 0.0 || (zero_ok && *v == 0.0)))
                .unwrap_or_else(|| usage(&format!("{s:?} is not a valid number of seconds")))
        };
        match a.as_str() {
            "--secs" => o.secs = secs(value("--secs"), false),
            "--warmup" => o.warmup = secs(value("--warmup"), true),
            "--rounds" => {
                o.rounds = value("--rounds")
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= 100)
                    .unwrap_or_else(|| usage("--rounds must be a whole number in 1..=100"))
            }
            "--baseline" => {
                let p = PathBuf::from(value("--baseline"));
                if !p.is_file() {
                    usage(&format!("--baseline {}: no such file", p.display()));
                }
                o.baseline = Some(p);
            }
            "--load" => {
                o.load = match value("--load").as_str() {
                    "goro" => LoadGen::Goro,
                    "go" => LoadGen::Go,
                    other => usage(&format!("--load must be goro or go, not {other:?}")),
                }
            }
            "-h" | "--help" => usage("goro's, tokio's and Go's echo servers under one load"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    o
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some(AS_LOAD) => std::process::exit(echo_load::main_with_args(args[1..].to_vec())),
        Some(AS_TOKIO) => std::process::exit(echo_tokio::main_with_args(args[1..].to_vec())),
        _ => {}
    }
    let opts = parse_args(args);
    let status = match run(&opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("echo_compare: ERROR: {e}");
            1
        }
    };
    std::process::exit(status);
}

/// One measured point.
#[derive(Clone, Copy, Debug)]
struct Point {
    rps: f64,
    p99_us: f64,
    fairness: f64,
    /// CPU per counted round trip, if /proc could be read.
    cpu: Option<Cpu>,
}

/// CPU time per round trip over the measuring window, in µs: the server's user and
/// system time, and the whole machine's busy time (server, load generator and anything
/// else; the two vCPUs give at most 2 s per second).
#[derive(Clone, Copy, Debug)]
struct Cpu {
    srv_user: f64,
    srv_sys: f64,
    busy: f64,
}

/// Reads the server's and the machine's CPU time at the end of the warm-up and at the
/// end of the measuring window (on its own thread, while the load runs). The window
/// starts when the load generator is spawned, so it trails the generator's own window
/// by its connection set-up (milliseconds).
fn sample_cpu(pid: u32, warmup: f64, secs: f64) -> thread::JoinHandle<Option<[Duration; 3]>> {
    thread::spawn(move || {
        let read = || -> Option<[Duration; 3]> {
            let (u, s) = goro_bench::process_cpu(pid).ok()?;
            Some([u, s, goro_bench::machine_busy().ok()?])
        };
        thread::sleep(Duration::from_secs_f64(warmup));
        let a = read()?;
        thread::sleep(Duration::from_secs_f64(secs));
        let b = read()?;
        Some([0, 1, 2].map(|i| b[i].saturating_sub(a[i])))
    })
}

type Samples = HashMap<(Server, usize), Vec<Point>>;

/// How to start each server and the load generator.
struct Launch {
    goro: PathBuf,
    me: PathBuf,
    /// `goro-compare-go`: the Go server, and the load generator with `--load go`.
    go: Option<PathBuf>,
    baseline: Option<PathBuf>,
    load: LoadGen,
}

impl Launch {
    fn command(&self, s: Server) -> Command {
        let mut cmd;
        match s {
            Server::Goro | Server::Baseline => {
                cmd = Command::new(match s {
                    Server::Baseline => self.baseline.as_ref().expect("a baseline is measured"),
                    _ => &self.goro,
                });
                cmd.args(["--addr", "127.0.0.1:0"])
                    .env("GORO_MAXPROCS", PROCS.to_string());
            }
            Server::Tokio => {
                cmd = Command::new(&self.me);
                cmd.args([AS_TOKIO, "--addr", "127.0.0.1:0", "--threads"])
                    .arg(PROCS.to_string());
            }
            Server::Go => {
                // Binds 127.0.0.1:0 itself; stops at SIGINT (or stdin EOF).
                cmd = Command::new(self.go.as_ref().expect("Go is measured"));
                cmd.arg("serve").env("GOMAXPROCS", PROCS.to_string());
            }
        }
        cmd
    }
}

fn run(opts: &Options) -> Result<(), String> {
    if cfg!(debug_assertions) {
        eprintln!("echo_compare: WARNING: a debug build; run it with --release");
    }
    match echo_load::raise_nofile_limit() {
        Ok(n) if n < 1200 => eprintln!(
            "echo_compare: WARNING: RLIMIT_NOFILE is {n}: 500 connections may fail (raise the hard limit)"
        ),
        Ok(_) => {}
        Err(e) => eprintln!("echo_compare: WARNING: getrlimit: {e}"),
    }
    let me = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let dir = me
        .parent()
        .ok_or("the executable has no directory")?
        .to_path_buf();
    let goro = dir.join("examples").join("echo_server");
    if !goro.is_file() {
        return Err(format!(
            "goro's echo server is not built ({} is missing); run\n    cargo build {}--example echo_server\nfirst",
            goro.display(),
            if cfg!(debug_assertions) { "" } else { "--release " }
        ));
    }
    let tmp = std::env::temp_dir().join(format!("goro-echo-compare-{}", std::process::id()));
    let go = match (build_go(&tmp), opts.load) {
        (Ok((bin, version)), LoadGen::Goro) => {
            eprintln!("echo_compare: Go server built with {version}");
            Some(bin)
        }
        (Ok((bin, version)), LoadGen::Go) => {
            eprintln!("echo_compare: Go server and load generator built with {version}");
            Some(bin)
        }
        (Err(why), LoadGen::Goro) => {
            eprintln!("echo_compare: Go not measured: {why}");
            None
        }
        (Err(why), LoadGen::Go) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(format!(
                "--load go needs Go's load generator, which could not be built: {why}"
            ));
        }
    };
    let go_missing = go.is_none();
    let launch = Launch {
        goro,
        me,
        go,
        baseline: opts.baseline.clone(),
        load: opts.load,
    };
    let result = measure(opts, &launch);
    let _ = std::fs::remove_dir_all(&tmp);
    let samples = result?;
    print_table(&samples, opts, go_missing);
    Ok(())
}

/// Builds `bench/go/compare` into `tmp`; the binary and `go version`, or why not.
fn build_go(tmp: &Path) -> Result<(PathBuf, String), String> {
    let version = go_version()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("go")
        .join("compare");
    if !src.join("serve.go").is_file() {
        return Err(format!("{} is missing", src.join("serve.go").display()));
    }
    let bin = tmp.join("goro-compare-go");
    let f = run_with_timeout(go_build_command(&src, &bin)?, GO_BUILD_BOUND, "go build")?;
    if !f.status.success() {
        return Err(format!(
            "`go build` failed ({}):\n{}{}",
            f.status, f.stdout, f.stderr
        ));
    }
    Ok((bin, version))
}

fn measure(opts: &Options, launch: &Launch) -> Result<Samples, String> {
    let mut servers = vec![Server::Goro, Server::Tokio];
    if launch.go.is_some() {
        servers.push(Server::Go);
    }
    if launch.baseline.is_some() {
        servers.push(Server::Baseline);
    }
    let per_point = opts.warmup + opts.secs + 0.3;
    let total = per_point * (opts.rounds * CONNS.len() * servers.len()) as f64;
    eprintln!(
        "echo_compare: {} rounds x {} connection counts x {} servers, {} s + {} s warm-up \
         each, load by {}: about {:.0} s; load average {}",
        opts.rounds,
        CONNS.len(),
        servers.len(),
        opts.secs,
        opts.warmup,
        launch.load.name(),
        total,
        load_average()
    );
    let mut samples = Samples::new();
    for round in 0..opts.rounds {
        let mut order = servers.clone();
        order.rotate_left(round % servers.len());
        for &conns in &CONNS {
            for &server in &order {
                let p = measure_point(opts, launch, server, conns).map_err(|e| {
                    format!(
                        "round {}, {} server, {conns} connections: {e}",
                        round + 1,
                        server.name()
                    )
                })?;
                let cpu = p.cpu.map_or(String::new(), |c| {
                    format!(
                        ", server {:.2} + {:.2} us/rt, machine {:.2} us/rt",
                        c.srv_user, c.srv_sys, c.busy
                    )
                });
                eprintln!(
                    "  round {}/{} {:>3} conns {:<5}: {:>8.0} req/s, p99 {:>6} us, busiest/mean {:.2}{cpu}",
                    round + 1,
                    opts.rounds,
                    conns,
                    server.name(),
                    p.rps,
                    p.p99_us,
                    p.fairness
                );
                samples.entry((server, conns)).or_default().push(p);
            }
        }
    }
    Ok(samples)
}

/// Starts `server`, loads it with `conns` connections, stops it.
fn measure_point(
    opts: &Options,
    launch: &Launch,
    server: Server,
    conns: usize,
) -> Result<Point, String> {
    let mut srv = RunningServer::start(server, launch.command(server))?;
    let sampler = srv.pid().map(|pid| sample_cpu(pid, opts.warmup, opts.secs));
    let load = run_load(launch, srv.addr, conns, opts);
    let window = sampler.and_then(|h| h.join().ok().flatten());
    let died = srv.exited();
    let stopped = srv.stop();
    let point = match (load, died) {
        (_, Some(status)) => Err(format!(
            "the server died during the load ({status})\n{}",
            srv.log_tail()
        )),
        (Err(e), None) => Err(format!("{e}\nserver log:\n{}", srv.log_tail())),
        (Ok(p), None) => Ok(p),
    }?;
    let round_trips = point.rps * opts.secs;
    let point = Point {
        cpu: window.filter(|_| round_trips > 0.0).map(|[u, s, b]| Cpu {
            srv_user: u.as_secs_f64() * 1e6 / round_trips,
            srv_sys: s.as_secs_f64() * 1e6 / round_trips,
            busy: b.as_secs_f64() * 1e6 / round_trips,
        }),
        ..point
    };
    stopped.map_err(|e| format!("{e}\nserver log:\n{}", srv.log_tail()))?;
    Ok(point)
}

/// Runs the load generator (a child: this binary as echo_load, or with `--load go`
/// `goro-compare-go load`, at `PROCS` Ps either way) and parses its JSON line, the last
/// one on its stdout (the two print the same format).
fn run_load(
    launch: &Launch,
    addr: SocketAddr,
    conns: usize,
    opts: &Options,
) -> Result<Point, String> {
    let mut cmd;
    match launch.load {
        LoadGen::Goro => {
            cmd = Command::new(&launch.me);
            cmd.arg(AS_LOAD).env("GORO_MAXPROCS", PROCS.to_string());
        }
        LoadGen::Go => {
            let go = launch.go.as_ref().ok_or("--load go without a Go binary")?;
            cmd = Command::new(go);
            cmd.arg("load").env("GOMAXPROCS", PROCS.to_string());
        }
    }
    cmd.args(["--addr", &addr.to_string()])
        .args(["--conns", &conns.to_string()])
        .args(["--secs", &opts.secs.to_string()])
        .args(["--warmup", &opts.warmup.to_string()])
        .args(["--size", &SIZE.to_string()]);
    if launch.load == LoadGen::Goro {
        cmd.arg("--json");
    }
    let name = launch.load.name();
    let bound = Duration::from_secs_f64(opts.warmup + opts.secs) + LOAD_SLACK;
    let Finished {
        status,
        stdout: out,
        stderr: err,
    } = run_with_timeout(cmd, bound, name)?;
    if !status.success() {
        return Err(format!("{name} failed ({status}):\n{out}{err}"));
    }
    let line = out
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("{name} printed no JSON line:\n{out}{err}"))?;
    let fields = parse_flat_json(line);
    let get = |k: &str| {
        fields
            .get(k)
            .copied()
            .ok_or_else(|| format!("{name}'s JSON has no {k:?}: {line}"))
    };
    if get("conns")? != conns as f64 {
        return Err(format!(
            "{name} measured the wrong connection count: {line}"
        ));
    }
    Ok(Point {
        rps: get("rps")?,
        p99_us: get("p99_us")?,
        fairness: get("busiest_over_mean")?,
        cpu: None,
    })
}

/// The numeric fields of a flat JSON object (`{"k":1.5,...}`); others are skipped.
fn parse_flat_json(line: &str) -> HashMap<String, f64> {
    let body = line.trim().trim_start_matches('{').trim_end_matches('}');
    body.split(',')
        .filter_map(|kv| {
            let (k, v) = kv.split_once(':')?;
            let k = k.trim().trim_matches('"').to_string();
            Some((k, v.trim().parse().ok()?))
        })
        .collect()
}

/// A server child process: killed when dropped unless stopped cleanly.
struct RunningServer {
    name: &'static str,
    child: Option<Child>,
    /// Held open: the Go server stops when its stdin reaches EOF.
    _stdin: Option<ChildStdin>,
    addr: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
}

impl RunningServer {
    /// Starts `cmd` and waits (bounded) for its `NAME: listening on ADDR` line.
    fn start(server: Server, mut cmd: Command) -> Result<RunningServer, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        let stdin = child.stdin.take();
        let stderr = child.stderr.take().expect("stderr is piped");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (first_tx, first_rx) = mpsc::channel();
        {
            let log = log.clone();
            thread::spawn(move || {
                let mut first = Some(first_tx);
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(tx) = first.take() {
                        let _ = tx.send(line.clone());
                    }
                    log.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
        }
        let mut srv = RunningServer {
            name: server.name(),
            child: Some(child),
            _stdin: stdin,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let line = first_rx
            .recv_timeout(SERVER_BOUND)
            .map_err(|_| format!("{} printed nothing within {SERVER_BOUND:?}", srv.name))?;
        srv.addr = line
            .split_once("listening on ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| format!("{}: no address in its first line: {line:?}", srv.name))?;
        Ok(srv)
    }

    /// The server's process id while it runs.
    fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status if the server has exited already.
    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.as_mut()?.try_wait().ok().flatten()
    }

    /// SIGINT, then a bounded wait for a clean exit (status 0).
    fn stop(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Err(e) = sigint(&child) {
            kill(&mut child);
            return Err(format!("{}: kill(SIGINT): {e}", self.name));
        }
        let t = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => {
                    return Err(format!(
                        "{} did not stop cleanly on SIGINT: {status}",
                        self.name
                    ))
                }
                Ok(None) if t.elapsed() < SERVER_BOUND => thread::sleep(Duration::from_millis(5)),
                Ok(None) => {
                    kill(&mut child);
                    return Err(format!(
                        "{} still running {SERVER_BOUND:?} after SIGINT (hang?); killed",
                        self.name
                    ));
                }
                Err(e) => {
                    kill(&mut child);
                    return Err(format!("{}: wait failed: {e}", self.name));
                }
            }
        }
    }

    /// The last lines of the server's stderr.
    fn log_tail(&self) -> String {
        thread::sleep(Duration::from_millis(50)); // let the reader catch up
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        let skip = log.len().saturating_sub(30);
        let mut s = String::new();
        if skip > 0 {
            let _ = writeln!(s, "  ... {skip} lines before");
        }
        for l in &log[skip..] {
            let _ = writeln!(s, "  {l}");
        }
        s
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill(&mut child);
        }
    }
}

fn sigint(child: &Child) -> io::Result<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) has no memory-safety preconditions. `pid` is our child, which has
    // not been reaped (we hold its `Child` and have not waited for it), so the pid still
    // names it and no other process.
    if unsafe { libc::kill(pid, libc::SIGINT) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn print_table(samples: &Samples, opts: &Options, go_missing: bool) {
    let med = |s: Server, c: usize, f: fn(&Point) -> f64| {
        samples
            .get(&(s, c))
            .and_then(|v| median(&v.iter().map(f).collect::<Vec<_>>()))
    };
    let cell = |s: Server, c: usize| match (med(s, c, |p| p.rps), med(s, c, |p| p.p99_us)) {
        (Some(r), Some(p)) => format!("{r:.0} ({p:.0} us)"),
        _ => "-".into(),
    };
    let ratio = |a: Server, b: Server, c: usize| match (med(a, c, |p| p.rps), med(b, c, |p| p.rps))
    {
        (Some(x), Some(y)) if y > 0.0 => format!("{:.2}", x / y),
        _ => "-".into(),
    };
    let fair =
        |s: Server, c: usize| med(s, c, |p| p.fairness).map_or("-".into(), |f| format!("{f:.2}"));
    println!();
    println!(
        "Echo, {SIZE}-byte messages, closed loop; servers and load generator ({}) at {PROCS} \
         Ps/threads each; median of {} rounds of {} s (+{} s warm-up).",
        opts.load.name(),
        opts.rounds,
        opts.secs,
        opts.warmup
    );
    println!("req/s (p99 latency); goro/X = ratio of the median req/s (higher: goro faster); fairness = busiest connection / mean.");
    println!();
    println!(
        "| conns | goro req/s (p99) | tokio req/s (p99) | Go req/s (p99) | goro/tokio | goro/Go | fairness goro / tokio / Go |"
    );
    println!("|---:|---:|---:|---:|---:|---:|:---:|");
    for &c in &CONNS {
        println!(
            "| {c} | {} | {} | {} | {} | {} | {} / {} / {} |",
            cell(Server::Goro, c),
            cell(Server::Tokio, c),
            cell(Server::Go, c),
            ratio(Server::Goro, Server::Tokio, c),
            ratio(Server::Goro, Server::Go, c),
            fair(Server::Goro, c),
            fair(Server::Tokio, c),
            fair(Server::Go, c),
        );
    }
    if let Some(b) = &opts.baseline {
        println!();
        println!(
            "Baseline `{}` (\"base\", another build of goro's echo server):",
            b.display()
        );
        println!();
        println!("| conns | base req/s (p99) | goro/base | fairness base |");
        println!("|---:|---:|---:|:---:|");
        for &c in &CONNS {
            println!(
                "| {c} | {} | {} | {} |",
                cell(Server::Baseline, c),
                ratio(Server::Goro, Server::Baseline, c),
                fair(Server::Baseline, c)
            );
        }
    }
    println!();
    println!(
        "CPU per round trip (us, medians): server user + system time; in parentheses the whole \
         machine's busy time (server + load generator), which bounds req/s at 2 vCPUs."
    );
    println!();
    let base = opts.baseline.is_some();
    println!(
        "| conns | goro | tokio | Go |{}",
        if base { " base |" } else { "" }
    );
    println!("|---:|---:|---:|---:|{}", if base { "---:|" } else { "" });
    let cpu = |s: Server, c: usize| {
        let get = |f: fn(&Cpu) -> f64| {
            samples.get(&(s, c)).and_then(|v| {
                median(
                    &v.iter()
                        .filter_map(|p| p.cpu.as_ref().map(f))
                        .collect::<Vec<_>>(),
                )
            })
        };
        match (get(|c| c.srv_user), get(|c| c.srv_sys), get(|c| c.busy)) {
            (Some(u), Some(y), Some(b)) => format!("{u:.2} + {y:.2} ({b:.2})"),
            _ => "-".into(),
        }
    };
    for &c in &CONNS {
        println!(
            "| {c} | {} | {} | {} |{}",
            cpu(Server::Goro, c),
            cpu(Server::Tokio, c),
            cpu(Server::Go, c),
            if base {
                format!(" {} |", cpu(Server::Baseline, c))
            } else {
                String::new()
            }
        );
    }
    println!();
    if go_missing {
        println!("Go was not measured (see the message above).");
    }
    println!("load average at the end: {}", load_average());
}
