//! The children of a `compare` run, every wait bounded: `compare worker` (Go's replaces
//! itself with the Go program), `compare serve`, the echo load generator, and for the
//! `async` suite the `ecosystem/` crate's `slow_server` and `slow_gets` (or Go's
//! `goro-bench-go slow_gets`).

use std::ffi::OsStr;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::Deserialize;

use super::child::{self, run_with_timeout, spawn, tail, Drain};
use super::go::GoBuild;
use super::{procfs, wait_until};
use crate::contenders::{self, Contender};
use crate::workloads::{Measurement, Outcome, Suite, Workload, ECHO_SIZE, SLOW_GETS_BINS};

/// Bound of a server's start (until `LISTENING`) and of its exit after stdin closes.
const SERVER_BOUND: Duration = Duration::from_secs(10);
/// Bound of the load run beyond its warm-up and measuring time.
const LOAD_SLACK: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Load {
    /// `compare load`: goro coroutine clients.
    Goro,
    /// `goro-bench-go load`: the same closed loop on Go's runtime.
    Go,
}

/// `compare`'s options that the children run with.
#[derive(Clone, Debug, clap::Args)]
pub struct Settings {
    /// Bound of one worker run, seconds.
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// Time of one sized run of a Go benchmark port (Go's -benchtime), ms.
    #[arg(long, default_value_t = 200)]
    pub target_ms: u64,
    /// Echo: measured seconds per run.
    #[arg(long, default_value_t = 2.0)]
    pub secs: f64,
    /// Echo: warm-up seconds per run.
    #[arg(long, default_value_t = 0.5)]
    pub warmup: f64,
    /// Blocking: bursts of blockers per ticker run.
    #[arg(long, default_value_t = 20)]
    pub bursts: u64,
    /// Echo: another build's echo server (`PATH --addr ADDR`) as the contender `base`.
    #[arg(long)]
    pub baseline: Option<PathBuf>,
    /// Echo: the load generator.
    #[arg(long, value_enum, default_value = "goro")]
    pub load: Load,
    /// Async: concurrent GETs per slow_gets run.
    #[arg(long, default_value_t = 10_000)]
    pub gets: u64,
    /// Async: how long the slow server takes to answer each GET, ms.
    #[arg(long, default_value_t = 300)]
    pub gets_delay_ms: u64,
    /// Async: the directory of `slow_gets` and `slow_server` (default: the repository's
    /// ecosystem/target/release, built by `cargo build --release --manifest-path
    /// ecosystem/Cargo.toml`).
    #[arg(long)]
    pub ecosystem_bin: Option<PathBuf>,
}

/// How the children start: `me` is this binary, re-run as worker, server and load generator.
pub struct Launcher {
    pub me: PathBuf,
    pub go: Result<GoBuild, String>,
    pub settings: Settings,
}

/// The line of `slow_gets` (ecosystem/src/bin/slow_gets.rs, bench/go/slowgets.go).
#[derive(Deserialize)]
struct GetsLine {
    n: u64,
    wall_ms: f64,
    req_per_s: f64,
    peak_threads: f64,
    peak_rss_kib: f64,
    cpu_ms: f64,
    errors: u64,
}

/// The figures `compare` reads from the load generator's JSON line.
#[derive(Deserialize)]
struct LoadLine {
    conns: u64,
    rps: f64,
    p99_us: f64,
    busiest_over_mean: f64,
}

impl Launcher {
    fn command(&self, args: &[&str], procs: usize) -> Command {
        let go = self.go.as_ref();
        let time_tests = go.ok().and_then(|g| g.time_tests.as_deref());
        // What the workers read: the Go binaries (or why there are none), the baseline.
        let handed = [
            (contenders::GO_BIN, go.ok().map(|g| g.bin.as_os_str())),
            (contenders::GO_TIME_TESTS, time_tests.map(Path::as_os_str)),
            (contenders::NO_GO, go.err().map(OsStr::new)),
            (
                contenders::BASELINE,
                self.settings.baseline.as_deref().map(Path::as_os_str),
            ),
        ];
        let mut cmd = Command::new(&self.me);
        cmd.args(args)
            .env("GORO_MAXPROCS", procs.to_string())
            .env("GOMAXPROCS", procs.to_string())
            .env("GORO_BENCH_TARGET_MS", self.settings.target_ms.to_string())
            .env("GORO_BENCH_BURSTS", self.settings.bursts.to_string())
            .envs(handed.into_iter().filter_map(|(var, v)| Some((var, v?))));
        cmd
    }

    /// One run of `w` at `procs` on `c` (which supports it).
    pub fn run(&self, c: &dyn Contender, w: &Workload, procs: usize) -> Outcome {
        if w.suite == Suite::Echo {
            return self.echo(c, w, procs);
        }
        if w.suite == Suite::Async {
            return self.slow_gets(c, w, procs);
        }
        let cmd = self.command(&["worker", c.name(), w.name()], procs);
        let timeout = Duration::from_secs(self.settings.timeout);
        run_json(cmd, timeout, "the worker")
    }

    /// One echo run: start the server, load it while sampling its and the machine's CPU, stop it.
    fn echo(&self, c: &dyn Contender, w: &Workload, procs: usize) -> Outcome {
        let conns = w.name().trim_start_matches("echo/");
        let conns: u64 = conns.parse().expect("echo/CONNS");
        let mut srv = Server::start(self.command(&["serve", c.name()], procs))?;
        let pid = srv.child.id();
        let (warmup, secs) = (self.settings.warmup, self.settings.secs);
        let sampler = thread::spawn(move || {
            let read = || -> Option<[Duration; 3]> {
                let (u, s) = procfs::process_cpu(pid)?;
                Some([u, s, procfs::machine_busy()?])
            };
            thread::sleep(Duration::from_secs_f64(warmup));
            let a = read()?;
            thread::sleep(Duration::from_secs_f64(secs));
            let b = read()?;
            Some([0, 1, 2].map(|i| b[i].saturating_sub(a[i]).as_secs_f64()))
        });
        let load = self.load(srv.addr, conns, procs);
        let cpu = sampler.join().ok().flatten();
        if let Ok(Some(status)) = srv.child.try_wait() {
            let log = srv.log();
            return Err(format!("the server exited during the load ({status}){log}"));
        }
        srv.stop()?;
        let v = load?;
        // The companion rows: p99 latency, fairness, and CPU µs per round trip.
        let cpu = cpu.map_or([f64::NAN; 3], |c| c.map(|t| t * 1e6 / (v.rps * secs)));
        let figures = [v.p99_us, v.busiest_over_mean].into_iter().chain(cpu);
        let rows = ["p99", "fairness", "user", "sys", "machine"];
        let mut m = Measurement::value(v.rps);
        for (k, x) in rows.iter().zip(figures) {
            if x.is_finite() {
                m = m.with(&format!("{}/{k}", w.name()), x);
            }
        }
        Ok(m)
    }

    /// One `slow_gets` run: a fresh `slow_server` child answering after
    /// `--gets-delay-ms`, and `--gets` concurrent GETs at it from the contender's client
    /// (`slow_gets goro|recipe|tokio`, or Go's); the figures of its line, every answer
    /// checked by the client (a wrong one fails the run).
    fn slow_gets(&self, c: &dyn Contender, w: &Workload, procs: usize) -> Outcome {
        let dir = (self.settings.ecosystem_bin.clone()).unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(SLOW_GETS_BINS)
        });
        let bins = ["slow_gets", "slow_server"].map(|b| dir.join(b));
        if let Some(missing) = bins.iter().find(|b| !b.is_file()) {
            return Ok(Measurement::skip(format!(
                "{} is missing: cargo build --release --manifest-path ecosystem/Cargo.toml",
                missing.display()
            )));
        }
        let [gets_bin, server_bin] = bins;
        let mut client = match (c.name(), &self.go) {
            ("go", Ok(g)) => {
                let mut cmd = Command::new(&g.bin);
                cmd.arg("slow_gets");
                cmd
            }
            ("go", Err(why)) => return Ok(Measurement::skip(format!("Go: {why}"))),
            (name, _) => {
                let mode = match name {
                    "goro" => "goro",
                    "goro_recipe" => "recipe",
                    "tokio" => "tokio",
                    _ => return Ok(Measurement::skip(format!("no {name} client"))),
                };
                let mut cmd = Command::new(&gets_bin);
                cmd.arg(mode);
                cmd
            }
        };
        let (n, delay) = (self.settings.gets, self.settings.gets_delay_ms);
        let mut server = Command::new(&server_bin);
        server.arg(delay.to_string());
        let mut srv = Server::start(server)?;
        let url = format!("http://{}", srv.addr);
        client
            .args([&n.to_string(), &url])
            .env("GORO_MAXPROCS", procs.to_string())
            .env("GOMAXPROCS", procs.to_string());
        let bound = Duration::from_secs(self.settings.timeout);
        let got: Result<GetsLine, String> = run_json(client, bound, "the client");
        if let Ok(Some(status)) = srv.child.try_wait() {
            let log = srv.log();
            return Err(format!("the server exited during the GETs ({status}){log}"));
        }
        drop(srv);
        let v = got?;
        if v.n != n || v.errors != 0 {
            return Err(format!(
                "the client made {} GETs with {} errors, not {n} without",
                v.n, v.errors
            ));
        }
        let name = w.name();
        Ok(Measurement::value(v.req_per_s)
            .with(&format!("{name}/wall"), v.wall_ms)
            .with(&format!("{name}/threads"), v.peak_threads)
            .with(&format!("{name}/rss"), v.peak_rss_kib / 1024.0)
            .with(&format!("{name}/cpu"), v.cpu_ms))
    }

    fn load(&self, addr: SocketAddr, conns: u64, procs: usize) -> Result<LoadLine, String> {
        let mut cmd = match (self.settings.load, &self.go) {
            (Load::Goro, _) => self.command(&["load", "--json"], procs),
            (Load::Go, Ok(g)) => {
                let mut cmd = Command::new(&g.bin);
                cmd.arg("load").env("GOMAXPROCS", procs.to_string());
                cmd
            }
            (Load::Go, Err(why)) => return Err(format!("--load go: {why}")),
        };
        let (secs, warmup) = (self.settings.secs, self.settings.warmup);
        cmd.args(["--addr", &addr.to_string(), "--conns", &conns.to_string()])
            .args(["--size", &ECHO_SIZE.to_string()])
            .args(["--secs", &secs.to_string(), "--warmup", &warmup.to_string()]);
        let bound = Duration::from_secs_f64(secs + warmup) + LOAD_SLACK;
        let v: LoadLine = run_json(cmd, bound, "the load")?;
        if v.conns != conns {
            return Err(format!(
                "the load measured {} connections, not {conns}",
                v.conns
            ));
        }
        Ok(v)
    }
}

/// Runs `cmd` within `bound`: its last stdout line that is a JSON object, or why none.
fn run_json<T: DeserializeOwned>(cmd: Command, bound: Duration, what: &str) -> Result<T, String> {
    let f = run_with_timeout(cmd, bound, what)?;
    if !f.status.success() {
        return Err(format!("{what}: {}{}", f.status, tail(&f.stderr)));
    }
    let line = (f.stdout.lines().map(str::trim))
        .rfind(|l| l.starts_with('{'))
        .ok_or_else(|| format!("{what} exited 0 without a JSON line{}", tail(&f.stderr)))?;
    serde_json::from_str(line).map_err(|e| format!("{what}: bad JSON line {line:?}: {e}"))
}

/// An echo server child: killed when dropped unless stopped (std signals no reaped child).
struct Server {
    child: Child,
    addr: SocketAddr,
    stderr: Drain,
}

impl Server {
    /// Starts it and waits (bounded) for its address line (see [`listening`]).
    fn start(cmd: Command) -> Result<Server, String> {
        let (child, stdout, stderr) = spawn(cmd, Stdio::piped(), "the server")?;
        let mut srv = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
        };
        let (mut addr, mut ended) = (None, false);
        wait_until(SERVER_BOUND, || {
            ended = stdout.wait(Instant::now()) && srv.stderr.wait(Instant::now());
            addr = listening(&stdout.text()).or_else(|| listening(&srv.stderr.text()));
            addr.is_some() || ended
        });
        let log = srv.log();
        srv.addr = addr.ok_or_else(|| match ended {
            true => format!("the server exited without listening{log}"),
            false => format!("the server did not listen within {SERVER_BOUND:?}{log}"),
        })?;
        Ok(srv)
    }

    fn log(&self) -> String {
        tail(&self.stderr.text())
    }

    fn exits_within(&mut self, timeout: Duration) -> bool {
        wait_until(timeout, || matches!(self.child.try_wait(), Ok(Some(_))))
    }

    /// Closes its stdin (a `compare serve` exits then), sends SIGINT (an example's
    /// server stops then) after a second, and waits; kills it after the bound.
    fn stop(&mut self) -> Result<(), String> {
        drop(self.child.stdin.take());
        if self.exits_within(Duration::from_secs(1)) {
            return Ok(());
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            // Our child, not reaped yet (we hold its `Child`): `pid` names no other process.
            let pid = nix::unistd::Pid::from_raw(pid);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
        }
        if self.exits_within(SERVER_BOUND - Duration::from_secs(1)) {
            return Ok(());
        }
        child::kill(&mut self.child);
        Err(format!(
            "the server was still running {SERVER_BOUND:?} after its stop; killed"
        ))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        child::kill(&mut self.child);
    }
}

/// The address in the first complete line of `text` with `LISTENING <addr>` or (another
/// build's `examples/echo_server`) `listening on <addr>`.
fn listening(text: &str) -> Option<SocketAddr> {
    let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
    complete.lines().find_map(|line| {
        let (_, rest) =
            (line.split_once("LISTENING ")).or_else(|| line.split_once("listening on "))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}
