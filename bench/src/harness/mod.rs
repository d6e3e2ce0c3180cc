//! The harness: running each measurement in a fresh child process under a timeout,
//! the Go side, medians and spreads, the markdown, JSON and SVG outputs, the `/proc`
//! readers, and the bounded waits every workload uses so that a runtime bug shows up
//! as a clear panic instead of a hang.

use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod child;
pub mod go;
pub mod orchestrate;
pub mod procfs;
pub mod report;

/// Runs `f` in a fresh coroutine and returns its result, waiting at most `timeout`, from
/// a plain thread: the coroutine hands its result over a std channel and this thread
/// blocks in `recv_timeout`. Panics if `f` panicked (with its message) or is not done
/// after `timeout` (then the coroutine is left running: the panic is to end the process).
pub fn run_bounded<T, F>(timeout: Duration, what: &str, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let h = goro::go!(move || {
        // An unbounded std channel's send never blocks.
        let _ = tx.send(f());
    });
    let v = rx.recv_timeout(timeout);
    if let Err(mpsc::RecvTimeoutError::Timeout) = v {
        panic!("{what}: not done after {timeout:?} (hang? lost wake-up? timer never fired?)");
    }
    if let Err(payload) = h.join() {
        panic!(
            "{what}: coroutine panicked: {}",
            goro::panic_message(&*payload)
        );
    }
    v.expect("the coroutine sent its result before it ended")
}

/// Runs `f` in a fresh coroutine, waits for it as long as it takes and returns its
/// result; re-raises its panic with the message.
pub fn in_coroutine<T, F>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    run_bounded(Duration::MAX, "benchmark", f)
}

/// Benchmarks `f` as `name` in `g`: each sample times `f(iters)` on a fresh coroutine.
pub fn bench_on_coroutine(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    f: fn(u64),
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            in_coroutine(move || {
                let start = Instant::now();
                f(iters);
                start.elapsed()
            })
        })
    });
}

/// Polls `cond` until it returns true or `timeout` has passed; returns whether it did.
/// For plain threads: between polls it yields, then sleeps up to a millisecond.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut spins = 0u32;
    while !cond() {
        if Instant::now() >= deadline {
            return false;
        }
        spins += 1;
        if spins < 100 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    true
}

/// Spins without yielding until `cond` holds, as Go's benchmarks do with
/// `for atomic.Load(..) < n {}`; panics with `what()` if it has not after `timeout`.
/// The clock is read only every 1024 polls, so the loop stays a tight atomic poll.
pub fn spin_until<M: std::fmt::Display>(
    timeout: Duration,
    what: impl FnOnce() -> M,
    mut cond: impl FnMut() -> bool,
) {
    let start = Instant::now();
    let mut polls = 0u32;
    while !cond() {
        std::hint::spin_loop();
        polls = polls.wrapping_add(1);
        if polls & 1023 == 0 && start.elapsed() > timeout {
            panic!("not done after spinning {timeout:?}: {}", what());
        }
    }
}

/// The median (the mean of the middle two for an even count), or None for none.
pub fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    // For an odd count both indices are the middle one.
    (n > 0).then(|| (s[(n - 1) / 2] + s[n / 2]) / 2.0)
}

/// `criterion_main!` for the benches' one criterion configuration (1 s warm-up, 3 s
/// measurement, 10 samples; the docs' A/B scripts override these on the command line),
/// plus a line saying how many Ps the runtime runs with.
#[macro_export]
macro_rules! bench_main {
    ($($target:path),+ $(,)?) => {
        criterion::criterion_group! {
            name = benches;
            config = criterion::Criterion::default()
                .warm_up_time(std::time::Duration::from_secs(1))
                .measurement_time(std::time::Duration::from_secs(3))
                .sample_size(10);
            targets = $($target),+
        }
        fn main() {
            eprintln!(
                "goro: {} Ps (GORO_MAXPROCS={})",
                goro::maxprocs(),
                std::env::var("GORO_MAXPROCS").unwrap_or_else(|_| "unset".into())
            );
            benches();
            criterion::Criterion::default().configure_from_args().final_summary();
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn bounded_waits() {
        assert!(!wait_until(Duration::from_millis(20), || false));
        assert_eq!(run_bounded(Duration::from_secs(10), "sum", || 2 + 2), 4);
        assert_eq!(in_coroutine(|| 7), 7);
    }
}
