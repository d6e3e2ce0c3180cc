//! The `blocking` suite on goro, from the worker's main thread: a ticker's lateness beside
//! blockers that goro knows nothing of, and sysmon's own cost. A wrong result panics.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{env_number, Measurement};

pub fn run(name: &str) -> Option<Measurement> {
    match name {
        "sysmon/busy" | "sysmon/idle" => Some(sysmon_cost(name)),
        _ => name.strip_prefix("ticker/").map(ticker),
    }
}

const TICK: Duration = Duration::from_millis(1);
const BLOCKERS: usize = 4;
const SLEEP_FOR: Duration = Duration::from_millis(20);
const SPIN_FOR: Duration = Duration::from_millis(50);
const BURST_GAP: Duration = Duration::from_millis(30);
const WARM_UP: Duration = Duration::from_millis(50);

/// `sleep`: a `std::thread::sleep`, which goro knows nothing of; `cpu`: a spin with no
/// runtime call.
fn block(kind: &str) {
    match kind {
        "none" => {}
        "sleep" => std::thread::sleep(SLEEP_FOR),
        "cpu" => {
            let start = Instant::now();
            let mut x = 1u64;
            while start.elapsed() < SPIN_FOR {
                for _ in 0..1000 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                }
            }
            std::hint::black_box(x);
        }
        _ => panic!("no blocker kind {kind:?}"),
    }
}

/// The ticker's lateness p50 (µs; p99 and max as companions) over `GORO_BENCH_BURSTS`
/// (default 20) bursts: `BLOCKERS` coroutines `block` at once, the program joins them,
/// then `BURST_GAP` passes. Go's side is `bench/go/blockfree.go`.
fn ticker(kind: &str) -> Measurement {
    let bursts = env_number("GORO_BENCH_BURSTS").unwrap_or(20);
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let ticker = goro::go!(move || {
        let mut late = Vec::with_capacity(1 << 14);
        // Relaxed: a stop flag publishes no data; seeing it one tick late is harmless.
        while !s.load(Ordering::Relaxed) {
            let t = Instant::now();
            goro::time::sleep(TICK);
            late.push(t.elapsed().saturating_sub(TICK));
        }
        late
    });
    std::thread::sleep(WARM_UP);
    let kind: Arc<str> = kind.into();
    for _ in 0..bursts {
        let k = kind.clone();
        on_coroutines(BLOCKERS, "a blocker", move || block(&k));
        std::thread::sleep(BURST_GAP);
    }
    stop.store(true, Ordering::Relaxed); // Relaxed: see the ticker's loop
    let mut late = ticker.join().expect("the ticker panicked");
    late.sort_unstable();
    let us = |p: f64| super::quantile(&late, p).as_secs_f64() * 1e6;
    Measurement::value(us(0.5))
        .with(&format!("ticker/{kind}/p99"), us(0.99))
        .with(&format!("ticker/{kind}/max"), us(1.0))
}

/// Runs `f` on `n` coroutines and joins them; `what` names one in the panic message.
fn on_coroutines(n: usize, what: &str, f: impl Fn() + Clone + Send + 'static) {
    let hs: Vec<_> = (0..n).map(|_| goro::go!(f.clone())).collect();
    for h in hs {
        h.join().unwrap_or_else(|_| panic!("{what} panicked"));
    }
}

/// sysmon's context switches and CPU nanoseconds so far (0s if it is not running).
fn sysmon_stats() -> (u64, u64) {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "goro-sysmon" {
            continue;
        }
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let switches = status
            .lines()
            .filter(|l| l.contains("ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        let cpu = std::fs::read_to_string(t.path().join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0);
        return (switches, cpu);
    }
    (0, 0)
}

/// sysmon's wake-ups per second (the figure) and CPU in % of a core, beside four
/// coroutines yielding for 2 s (`sysmon/busy`) or an idle runtime.
fn sysmon_cost(name: &str) -> Measurement {
    const RUN: Duration = Duration::from_secs(2);
    let busy = name == "sysmon/busy";
    goro::go!(|| ()).join().expect("warm-up"); // start the runtime and sysmon
    let (s0, c0) = sysmon_stats();
    let t0 = Instant::now();
    if busy {
        on_coroutines(4, "a yielder", || {
            let t = Instant::now();
            while t.elapsed() < RUN {
                goro::yield_now();
            }
        });
    } else {
        std::thread::sleep(RUN);
    }
    let secs = t0.elapsed().as_secs_f64();
    let (s1, c1) = sysmon_stats();
    Measurement::value((s1 - s0) as f64 / secs)
        .with(&format!("{name}/cpu"), (c1 - c0) as f64 / secs / 1e7)
}
