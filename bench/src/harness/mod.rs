//! The harness (see the crate doc), and the bounded waits: a runtime bug panics, not hangs.

use std::sync::mpsc;
use std::time::{Duration, Instant};

pub mod child;
pub mod go;
pub mod orchestrate;
pub mod procfs;
pub mod report;

/// Runs `f` in a fresh coroutine and waits for its result, from a plain thread, at most
/// `timeout`. Panics with `f`'s message if it panicked, or naming `what` if it is not done
/// by then (the coroutine is left running: the panic is to end the process).
pub fn run_bounded<T, F>(timeout: Duration, what: &str, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let h = goro::go!(move || {
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

/// Benchmarks `f` as `name` in `g`: each sample times `f(iters)` on a fresh coroutine.
pub fn bench_on_coroutine(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    f: fn(u64),
) {
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            run_bounded(Duration::MAX, name, move || {
                let start = Instant::now();
                f(iters);
                start.elapsed()
            })
        })
    });
}

/// Polls `cond` from a plain thread (yielding, later sleeping 1 ms) until it holds or
/// `timeout` has passed; whether it held.
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

/// Spins without yielding until `cond` holds, like Go's `for atomic.Load(..) < n {}`, reading
/// the clock every 1024 polls only; panics with `what()` after `timeout`.
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
    (n > 0).then(|| (s[(n - 1) / 2] + s[n / 2]) / 2.0)
}

/// `criterion_main!` with the benches' one configuration (the docs' A/B scripts override
/// it on the command line), after a line with goro's P count.
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
    }
}
