//! The orchestrator: every run a fresh child process, the contenders' order rotated
//! every round, every wait bounded.
//!
//! - A workload run is `compare worker CONTENDER WORKLOAD` (this binary again) with
//!   `GORO_MAXPROCS` and `GOMAXPROCS` set to the row's P count; the Go contender's
//!   worker replaces itself with the Go program. Its last stdout line is a
//!   [`Measurement`]; a non-zero exit, no line or a timeout is a failure.
//! - An echo run starts `compare serve CONTENDER` (it binds 127.0.0.1:0 and prints
//!   `LISTENING <addr>`), measures it with `compare load` (goro's closed-loop client,
//!   or Go's with `--load go`) while it samples the server's and the machine's CPU
//!   time from /proc, then stops it by closing its stdin.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::child::{kill, run_child, ChildError, Finished};
use super::go::GoBuild;
use super::procfs;
use crate::contenders::{self, Contender};
use crate::workloads::{Measurement, Suite, Workload};

/// Bound of a server's start (until `LISTENING`) and of its exit after stdin closes.
const SERVER_BOUND: Duration = Duration::from_secs(10);
/// Bound of the load run beyond its warm-up and measuring time.
const LOAD_SLACK: Duration = Duration::from_secs(30);

/// Which load generator measures the echo servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Load {
    /// `compare load`: goro coroutine clients.
    Goro,
    /// `goro-bench-go load`: the same closed loop on Go's runtime.
    Go,
}

/// How to start the children.
pub struct Launcher {
    /// This binary (`compare`), re-run as worker, server and load generator.
    pub me: PathBuf,
    /// The Go binaries, or why there are none.
    pub go: Result<GoBuild, String>,
    /// Bound of one worker run.
    pub timeout: Duration,
    /// `--target-ms`, `--bursts`, `--secs`, `--warmup`, `--load`, `--baseline`.
    pub target_ms: u64,
    pub bursts: u64,
    pub echo_secs: f64,
    pub echo_warmup: f64,
    pub load: Load,
    pub baseline: Option<PathBuf>,
}

/// What one run gave: a measurement, or why the run failed.
pub type RunResult = Result<Measurement, String>;

impl Launcher {
    /// This binary with `args`, the parallelism and the settings in its environment.
    fn command(&self, args: &[&str], procs: usize) -> Command {
        let mut cmd = Command::new(&self.me);
        cmd.args(args)
            .env("GORO_MAXPROCS", procs.to_string())
            .env("GOMAXPROCS", procs.to_string())
            .env("GORO_BENCH_TARGET_MS", self.target_ms.to_string())
            .env("GORO_BENCH_BURSTS", self.bursts.to_string());
        match &self.go {
            Ok(g) => {
                cmd.env(contenders::GO_BIN, &g.bin);
                if let Some(t) = &g.time_tests {
                    cmd.env(contenders::GO_TIME_TESTS, t);
                }
            }
            Err(why) => {
                cmd.env(contenders::NO_GO, why);
            }
        }
        if let Some(b) = &self.baseline {
            cmd.env(contenders::BASELINE, b);
        }
        cmd
    }

    /// One run of `w` at `procs` on `c`.
    pub fn run(&self, c: &dyn Contender, w: &Workload, procs: usize) -> RunResult {
        if !c.supports(w) {
            return Ok(contenders::unsupported(c, w));
        }
        if w.suite == Suite::Echo {
            return self.echo(c, w, procs);
        }
        let cmd = self.command(&["worker", c.name(), w.name()], procs);
        let f = run_child(cmd, self.timeout).map_err(|e| match e {
            ChildError::TimedOut { stderr, .. } => format!(
                "no result after {:.0} s (hang?); killed{}",
                self.timeout.as_secs_f64(),
                tail(&stderr)
            ),
            e => e.describe(w.name(), self.timeout),
        })?;
        result_line(&f)
    }

    /// One echo run: start the server, load it, stop it.
    fn echo(&self, c: &dyn Contender, w: &Workload, procs: usize) -> RunResult {
        let conns: usize = w
            .name()
            .trim_start_matches("echo/")
            .parse()
            .expect("echo/CONNS");
        let mut srv = Server::start(self.command(&["serve", c.name()], procs))?;
        let pid = srv.child.as_ref().map_or(0, Child::id);
        let (warmup, secs) = (self.echo_warmup, self.echo_secs);
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
        if let Some(status) = srv.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
            return Err(format!(
                "the server exited during the load ({status}){}",
                tail(&srv.log())
            ));
        }
        srv.stop()?;
        let v = load?;
        let get = |k: &str| v.get(k).and_then(serde_json::Value::as_f64);
        let rps = get("rps").ok_or("the load's JSON has no rps")?;
        let mut m = Measurement::value(rps)
            .with(
                &format!("{}/p99", w.name()),
                get("p99_us").unwrap_or(f64::NAN),
            )
            .with(
                &format!("{}/fairness", w.name()),
                get("busiest_over_mean").unwrap_or(f64::NAN),
            );
        if let Some([u, s, busy]) = cpu.filter(|_| rps > 0.0) {
            let per_rt = |t: f64| t * 1e6 / (rps * secs);
            for (k, t) in [("user", u), ("sys", s), ("machine", busy)] {
                m = m.with(&format!("{}/{k}", w.name()), per_rt(t));
            }
        }
        m.also.retain(|_, v| v.is_finite());
        Ok(m)
    }

    /// The load generator's JSON line.
    fn load(
        &self,
        addr: SocketAddr,
        conns: usize,
        procs: usize,
    ) -> Result<serde_json::Value, String> {
        let mut cmd = match (self.load, &self.go) {
            (Load::Goro, _) => self.command(&["load", "--json"], procs),
            (Load::Go, Ok(g)) => {
                let mut cmd = Command::new(&g.bin);
                cmd.arg("load").env("GOMAXPROCS", procs.to_string());
                cmd
            }
            (Load::Go, Err(why)) => return Err(format!("--load go: {why}")),
        };
        cmd.args(["--addr", &addr.to_string(), "--conns", &conns.to_string()])
            .args(["--size", &crate::workloads::ECHO_SIZE.to_string()])
            .args(["--secs", &self.echo_secs.to_string()])
            .args(["--warmup", &self.echo_warmup.to_string()]);
        let bound = Duration::from_secs_f64(self.echo_secs + self.echo_warmup) + LOAD_SLACK;
        let f = run_child(cmd, bound).map_err(|e| e.describe("the load", bound))?;
        if !f.status.success() {
            return Err(format!("the load: {}{}", f.status, tail(&f.stderr)));
        }
        let line = last_json(&f)
            .ok_or_else(|| format!("the load printed no JSON line{}", tail(&f.stderr)))?;
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{line:?}: {e}"))?;
        if v.get("conns").and_then(serde_json::Value::as_u64) != Some(conns as u64) {
            return Err(format!(
                "the load measured another connection count: {line}"
            ));
        }
        Ok(v)
    }
}

/// The last stdout line that is a JSON object.
fn last_json(f: &Finished) -> Option<&str> {
    f.stdout
        .lines()
        .map(str::trim)
        .rfind(|l| l.starts_with('{'))
}

/// A worker's result: its measurement line, or why there is none.
fn result_line(f: &Finished) -> RunResult {
    if !f.status.success() {
        return Err(format!("{}{}", f.status, tail(&f.stderr)));
    }
    let line =
        last_json(f).ok_or_else(|| format!("exited 0 without a result line{}", tail(&f.stderr)))?;
    serde_json::from_str(line).map_err(|e| format!("bad result line {line:?}: {e}"))
}

/// The last two meaningful lines of a child's stderr, on one line, after ": " (a
/// panic's location and message), or "" if there are none.
pub fn tail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("note: run with `RUST_BACKTRACE"))
        .collect();
    let mut s = lines[lines.len().saturating_sub(2)..].join(" ");
    if s.chars().count() > 240 {
        s = s.chars().take(240).collect::<String>() + "...";
    }
    if s.is_empty() {
        s
    } else {
        format!(": {s}")
    }
}

/// An echo server child: killed when dropped unless stopped.
struct Server {
    child: Option<Child>,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl Server {
    /// Starts it and waits (bounded) for `LISTENING <addr>` on its stdout (or
    /// `listening on <addr>` anywhere: another build's `examples/echo_server`).
    fn start(mut cmd: Command) -> Result<Server, String> {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start the server: {e}"))?;
        let log: Arc<Mutex<String>> = Arc::default();
        let (tx, lines) = mpsc::channel::<String>();
        let out = child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>);
        let err = child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>);
        for (pipe, logged) in [(out, false), (err, true)] {
            let (tx, log) = (tx.clone(), log.clone());
            // Every line is read to the end, so that the pipe never fills.
            thread::spawn(move || {
                for line in BufReader::new(pipe?).lines() {
                    let line = line.ok()?;
                    if logged {
                        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                        if log.len() < 1 << 16 {
                            log.push_str(&line);
                            log.push('\n');
                        }
                    }
                    let _ = tx.send(line);
                }
                Some(())
            });
        }
        drop(tx);
        let mut srv = Server {
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let deadline = Instant::now() + SERVER_BOUND;
        loop {
            let line = lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .map_err(|e| match e {
                    mpsc::RecvTimeoutError::Timeout => {
                        format!(
                            "the server did not listen within {SERVER_BOUND:?}{}",
                            tail(&srv.log())
                        )
                    }
                    mpsc::RecvTimeoutError::Disconnected => {
                        format!("the server exited without listening{}", tail(&srv.log()))
                    }
                })?;
            let addr = line
                .split_once("LISTENING ")
                .or_else(|| line.split_once("listening on "))
                .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok());
            if let Some(addr) = addr {
                srv.addr = addr;
                return Ok(srv);
            }
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Closes its stdin (a `compare serve` exits then), sends SIGINT (an example's
    /// server stops then) after a second, and waits; kills it after the bound.
    fn stop(&mut self) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        drop(child.stdin.take());
        let t = Instant::now();
        let mut signalled = false;
        while t.elapsed() < SERVER_BOUND {
            if let Ok(Some(_)) = child.try_wait() {
                return Ok(());
            }
            if !signalled && t.elapsed() > Duration::from_secs(1) {
                signalled = true;
                if let Ok(pid) = i32::try_from(child.id()) {
                    // `pid` is our child, not reaped yet (we hold its `Child`), so it
                    // names no other process.
                    let pid = nix::unistd::Pid::from_raw(pid);
                    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
                }
            }
            thread::sleep(Duration::from_millis(5));
        }
        kill(&mut child);
        Err(format!(
            "the server was still running {SERVER_BOUND:?} after its stop; killed"
        ))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill(&mut child);
        }
    }
}
