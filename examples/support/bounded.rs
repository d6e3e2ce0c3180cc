//! Shared by the channel examples (`chain`, `sieve`, `powser`): run the workload on a
//! coroutine with a time limit, so that a hang fails instead of hanging.

use std::sync::mpsc;
use std::time::Duration;

/// Runs `f` on a coroutine and returns its result; exits the process with status 2 if
/// it is not done after `timeout` (a hang) or panicked.
pub fn bounded<T, F>(timeout: Duration, what: &str, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let _h = goro::go!(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(timeout) {
        Ok(v) => v,
        Err(mpsc::RecvTimeoutError::Timeout) => {
            eprintln!("{what}: not done after {timeout:?} (hang?)");
            std::process::exit(2)
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            eprintln!("{what}: the coroutine panicked");
            std::process::exit(2)
        }
    }
}
