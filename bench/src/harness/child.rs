//! Child processes under a timeout.
//!
//! No polling while a child runs: [`run_child`] blocks on its output pipes, which
//! reach their end when it exits, so a tool does not wake up next to the Ps its child
//! is measuring, and sees the exit at once.

use std::io::{self, Read};
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

/// Kills our child, by its handle, and reaps it.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
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
