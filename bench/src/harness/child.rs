//! Child processes under a timeout.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` to its end with stdin null, capturing stdout and stderr (lossily decoded).
/// It blocks on the pipes, which end when the child exits: no polling next to the Ps the
/// child measures, and the exit is seen at once. After `timeout` the child is killed and
/// reaped; the error names `what`, the timeout and the end of its output. If a process it
/// left behind holds the pipes open, the wait lasts until `timeout`, 5 s more, and fails.
pub fn run_with_timeout(cmd: Command, timeout: Duration, what: &str) -> Result<Finished, String> {
    let (mut child, out, err) = spawn(cmd, Stdio::null(), what)?;
    let deadline = Instant::now() + timeout;
    let pipes_end = |by: Instant| out.wait(by) && err.wait(by);
    let ended = pipes_end(deadline);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            // The pipes ended just before the exit, or the child closed them early.
            Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(1)),
            failed => {
                kill(&mut child);
                pipes_end(Instant::now() + Duration::from_secs(2));
                return Err(match failed {
                    Err(e) => format!("{what}: wait failed: {e}"),
                    _ => format!(
                        "{what}: not done after {timeout:?} (hang?); killed{}",
                        tail(&(out.text() + &err.text()))
                    ),
                });
            }
        }
    };
    if !(ended || pipes_end(Instant::now() + Duration::from_secs(5))) {
        return Err(format!(
            "{what}: its output pipes stayed open after it exited"
        ));
    }
    Ok(Finished {
        status,
        stdout: out.text(),
        stderr: err.text(),
    })
}

pub(super) fn spawn(
    mut cmd: Command,
    stdin: Stdio,
    what: &str,
) -> Result<(Child, Drain, Drain), String> {
    cmd.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let out = Drain::start(child.stdout.take());
    let err = Drain::start(child.stderr.take());
    Ok((child, out, err))
}

/// A pipe drained by a thread (so it never fills); the buffer shows a hung child's output.
pub(super) struct Drain {
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
            let _end = tx;
            let Some(mut pipe) = pipe else { return };
            let mut chunk = [0u8; 8192];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => into
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        });
        Drain { buf, end }
    }

    /// Whether the pipe reached its end by `deadline`.
    pub(super) fn wait(&self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        matches!(
            self.end.recv_timeout(left),
            Err(mpsc::RecvTimeoutError::Disconnected)
        )
    }

    pub(super) fn text(&self) -> String {
        let buf = self.buf.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&buf).into_owned()
    }
}

pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The last two meaningful lines of a child's output, on one line, after ": " (a
/// panic's location and message), or "" if there are none.
pub fn tail(output: &str) -> String {
    let lines: Vec<&str> = output
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(e, "sleeper: not done after 200ms (hang?); killed: started");
    }

    #[test]
    fn names_a_child_that_cannot_start() {
        let cmd = Command::new("/nonexistent/goro-bench-test");
        let e = run_with_timeout(cmd, Duration::from_secs(1), "ghost").unwrap_err();
        assert!(e.starts_with("cannot start ghost: "), "{e}");
    }
}
