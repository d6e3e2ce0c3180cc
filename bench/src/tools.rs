//! What the comparison tools (`chan_compare`, `sync_compare`, `echo_compare`,
//! `compare`) share: running a child process under a timeout, the load average, the
//! median, and building the Go side.
//!
//! No polling while a child runs: [`run_child`] blocks on its output pipes, which
//! reach their end when it exits, so a tool does not wake up next to the Ps its child
//! is measuring, and sees the exit at once.

use std::fmt;
use std::io::{self, Read};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// A child that ran to its end.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Why [`run_child`] gave no [`Finished`].
#[derive(Debug)]
pub enum ChildError {
    /// It could not be started.
    Start(io::Error),
    /// Still running at the timeout; it was killed (and reaped). Its output so far.
    TimedOut { stdout: String, stderr: String },
    /// Waiting for it failed; it was killed (and reaped).
    Wait(io::Error),
    /// It exited, but its output pipes stayed open (a process it left behind holds
    /// them).
    PipesOpen,
}

impl ChildError {
    /// The error as a sentence about the child `what`, run under `timeout`.
    pub fn describe(&self, what: &str, timeout: Duration) -> String {
        match self {
            ChildError::Start(e) => format!("cannot start {what}: {e}"),
            ChildError::TimedOut { stdout, stderr } => format!(
                "{what}: not done after {timeout:?} (hang?); killed. Output so far:\n{stdout}\n{stderr}"
            ),
            ChildError::Wait(e) => format!("{what}: wait failed: {e}"),
            ChildError::PipesOpen => {
                format!("{what}: its output pipes stayed open after it exited")
            }
        }
    }
}

/// Runs `cmd` to its end with stdin null (no caller needs one), capturing its stdout
/// and stderr (lossily decoded); after `timeout` it is killed and reaped, and the error
/// carries its output so far.
///
/// It waits for the end of the output pipes, which comes with the child's exit, so it
/// sees the exit at once and does not wake up meanwhile. If a process the child left
/// behind holds the pipes open, that wait lasts until `timeout`, then 5 s more, and
/// gives [`ChildError::PipesOpen`].
pub fn run_child(mut cmd: Command, timeout: Duration) -> Result<Finished, ChildError> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().map_err(ChildError::Start)?;
    let deadline = Instant::now() + timeout;
    let out = Drain::start(child.stdout.take());
    let err = Drain::start(child.stderr.take());
    // The pipes reach their end when the child exits: wait for that, without polling.
    let mut ended = out.wait(deadline) && err.wait(deadline);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            // The pipes ended just before the exit, or the child closed them early.
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(1)),
            Ok(None) => {
                kill(&mut child);
                let grace = Instant::now() + Duration::from_secs(2);
                out.wait(grace);
                err.wait(grace);
                return Err(ChildError::TimedOut {
                    stdout: out.text(),
                    stderr: err.text(),
                });
            }
            Err(e) => {
                kill(&mut child);
                return Err(ChildError::Wait(e));
            }
        }
    };
    if !ended {
        let grace = Instant::now() + Duration::from_secs(5);
        ended = out.wait(grace) && err.wait(grace);
    }
    if !ended {
        return Err(ChildError::PipesOpen);
    }
    Ok(Finished {
        status,
        stdout: out.text(),
        stderr: err.text(),
    })
}

/// [`run_child`], its error told as a sentence naming `what`, the timeout and (on a
/// timeout) the output so far.
pub fn run_with_timeout(cmd: Command, timeout: Duration, what: &str) -> Result<Finished, String> {
    run_child(cmd, timeout).map_err(|e| e.describe(what, timeout))
}

/// [`run_with_timeout`] for a tool that stops at any failure: the output of a child
/// that exited 0.
///
/// # Panics
///
/// If the child cannot be started, is not done after `timeout` (it is killed), or
/// exits non-zero: naming `what`, with its output.
#[track_caller]
pub fn run_ok(cmd: Command, timeout: Duration, what: &str) -> Finished {
    let f = match run_with_timeout(cmd, timeout, what) {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    if !f.status.success() {
        panic!("{what} failed ({}):\n{}\n{}", f.status, f.stdout, f.stderr);
    }
    f
}

/// A pipe read to its end on a thread, into a buffer that can be looked at any time
/// (the output so far of a child that hangs).
struct Drain {
    buf: Arc<Mutex<Vec<u8>>>,
    /// Disconnected at the pipe's end.
    end: mpsc::Receiver<()>,
}

impl Drain {
    fn start(pipe: Option<impl Read + Send + 'static>) -> Drain {
        let buf: Arc<Mutex<Vec<u8>>> = Arc::default();
        let (tx, end) = mpsc::channel::<()>();
        let into = buf.clone();
        thread::spawn(move || {
            let _end = tx; // dropped at the end of the pipe
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => lock(&into).extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
        Drain { buf, end }
    }

    /// Whether the pipe reached its end by `deadline`.
    fn wait(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        matches!(
            self.end.recv_timeout(left),
            Err(mpsc::RecvTimeoutError::Disconnected)
        )
    }

    /// What has been read so far.
    fn text(&self) -> String {
        String::from_utf8_lossy(&lock(&self.buf)).into_owned()
    }
}

fn lock(buf: &Mutex<Vec<u8>>) -> MutexGuard<'_, Vec<u8>> {
    buf.lock().unwrap_or_else(|p| p.into_inner())
}

/// In a measuring child process: its P count (from `GORO_MAXPROCS`, which the parent
/// sets and the runtime must have taken) and the time to spend on one figure (ms in
/// the environment variable `target_env`, `default_ms` without it).
pub fn child_setup(target_env: &str, default_ms: u64) -> (usize, Duration) {
    let procs: usize = std::env::var("GORO_MAXPROCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .expect("the child needs GORO_MAXPROCS");
    assert_eq!(
        goro::maxprocs(),
        procs,
        "the runtime did not take GORO_MAXPROCS"
    );
    let ms = std::env::var(target_env)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_ms);
    (procs, Duration::from_millis(ms))
}

/// Kills our child, by its handle, and reaps it.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The three load averages of /proc/loadavg.
pub fn read_load_average() -> io::Result<String> {
    let s = std::fs::read_to_string("/proc/loadavg")?;
    Ok(s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
}

/// The three load averages of /proc/loadavg, or why not.
pub fn load_average() -> String {
    read_load_average().unwrap_or_else(|e| format!("(unreadable: {e})"))
}

/// The median (of a sorted copy; the mean of the middle two for an even count), or
/// None for no values.
pub fn median(v: &[f64]) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    Some(if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    })
}

// ---- Go ----

/// Why there is no Go toolchain to build with.
#[derive(Debug)]
pub struct NoGo {
    /// No `go` on the PATH at all (rather than one that fails).
    pub not_found: bool,
    message: String,
}

impl fmt::Display for NoGo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<NoGo> for String {
    fn from(e: NoGo) -> String {
        e.message
    }
}

/// `go version`'s line, or why `go` cannot be used.
pub fn go_version() -> Result<String, NoGo> {
    match Command::new("go").arg("version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => {
            let stderr = String::from_utf8_lossy(&o.stderr);
            Err(NoGo {
                not_found: false,
                message: match stderr.lines().map(str::trim).find(|l| !l.is_empty()) {
                    Some(line) => format!("`go version` failed ({}): {line}", o.status),
                    None => format!("`go version` failed: {}", o.status),
                },
            })
        }
        Err(e) => Err(NoGo {
            not_found: e.kind() == io::ErrorKind::NotFound,
            message: format!("`go` is not runnable from the PATH ({e})"),
        }),
    }
}

/// The command `go build -o BIN .` in `src`, after checking that `src` is there and
/// creating BIN's directory; to be run under a timeout ([`run_with_timeout`]).
pub fn go_build_command(src: &Path, bin: &Path) -> Result<Command, String> {
    if !src.is_dir() {
        return Err(format!("{} is missing", src.display()));
    }
    if let Some(dir) = bin.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let mut cmd = Command::new("go");
    cmd.arg("build")
        .arg("-o")
        .arg(bin)
        .arg(".")
        .current_dir(src);
    Ok(cmd)
}

/// Builds the Go test binary of the package in `dir` (`go test -c -o OUT`); returns
/// the Go version, or why Go cannot be measured.
///
/// # Panics
///
/// If the build is not done after `timeout` (a hang: the tools stop there), with its
/// output so far.
#[track_caller]
pub fn build_go_test(dir: &Path, out: &Path, timeout: Duration) -> Result<String, String> {
    let version = go_version()?;
    let mut cmd = Command::new("go");
    cmd.current_dir(dir).args(["test", "-c", "-o"]).arg(out);
    let f = match run_with_timeout(cmd, timeout, "go test -c") {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    if !f.status.success() {
        return Err(format!(
            "`go test -c` in {} failed ({}):\n{}{}",
            dir.display(),
            f.status,
            f.stdout,
            f.stderr
        ));
    }
    Ok(version)
}

/// Echoes one tokio connection (TCP_NODELAY, a 16 KiB buffer) until EOF: the
/// connection handler of both tokio echo servers (`echo_tokio` and `compare`'s). An
/// error ends it and is returned with the step that failed ("setup", "read",
/// "write"), for the caller to log or not.
pub async fn tokio_echo(conn: &mut tokio::net::TcpStream) -> Result<(), (&'static str, io::Error)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    conn.set_nodelay(true).map_err(|e| ("setup", e))?;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match conn.read(&mut buf).await {
            Ok(0) => return Ok(()),
            Ok(n) => conn.write_all(&buf[..n]).await.map_err(|e| ("write", e))?,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(("read", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[5.0]), Some(5.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn runs_a_child() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 3"]);
        let f = run_with_timeout(cmd, Duration::from_secs(10), "sh").unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(f.stdout, "out\n");
        assert_eq!(f.stderr, "err\n");
    }

    #[test]
    fn kills_a_late_child() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; exec sleep 30"]);
        let t = Instant::now();
        let e = run_with_timeout(cmd, Duration::from_millis(200), "sleeper").unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert!(e.starts_with("sleeper: not done after 200ms"), "{e}");
        assert!(e.contains("started"), "{e}");
    }

    #[test]
    fn names_a_child_that_cannot_start() {
        let cmd = Command::new("/nonexistent/goro-bench-test");
        let e = run_with_timeout(cmd, Duration::from_secs(1), "ghost").unwrap_err();
        assert!(e.starts_with("cannot start ghost: "), "{e}");
    }
}
