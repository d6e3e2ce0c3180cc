//! Task workloads on goro: spawn+join, yield, spawn-and-park (with the RSS per parked
//! coroutine), sleep lateness under load, and the `blocking` suite's ticker beside
//! blockers and sysmon's cost.
//!
//! The measured part runs in a coroutine (the driver, joined from the worker's main
//! thread) where a Go program runs it in a goroutine. A wrong result panics: the worker
//! exits non-zero and the harness reports a failure.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::channel;

use super::{
    env_number, parked, per, spin, Measurement, Outcome, SLEEP_COUNT, SPAWN_TASKS, YIELD_COUNT,
    YIELD_TASKS_PER_WORKER,
};
use crate::harness::procfs;

/// goro's run of a `proc`, `time` (sleep lateness) or `blocking` workload, from the
/// worker's main thread; None if it is not one of them.
pub fn run(name: &str) -> Option<Outcome> {
    let procs = goro::maxprocs();
    let name: &'static str = super::Workload::find(name)?.name();
    let on_coroutine = move |f: fn(usize) -> Outcome| {
        goro::go!(move || f(procs))
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    };
    Some(match name {
        "spawn_join" => on_coroutine(|_| Ok(spawn_join())),
        "yield" => on_coroutine(|procs| Ok(Measurement::value(yields::<Coroutines>(procs)))),
        "sleep_lateness" => {
            on_coroutine(|procs| Ok(Measurement::value(sleep_lateness::<Coroutines>(procs))))
        }
        "sysmon/busy" => Ok(sysmon_cost(true)),
        "sysmon/idle" => Ok(sysmon_cost(false)),
        _ => {
            if let Some(kind) = name.strip_prefix("ticker/") {
                return Some(Ok(ticker(kind)));
            }
            let n = super::park_tasks(name)?;
            goro::go!(move || spawn_park(name, n))
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }
    })
}

/// Spawn `SPAWN_TASKS` coroutines, then join them in order; ns per task.
fn spawn_join() -> Measurement {
    let n = SPAWN_TASKS;
    let t = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| goro::go!(move || i)).collect();
    let mut sum = 0usize;
    for (i, h) in handles.into_iter().enumerate() {
        let v = h.join().expect("a task does not panic");
        assert_eq!(v, i, "task {i} returned {v}");
        sum += v;
    }
    let elapsed = t.elapsed();
    assert_eq!(sum, n * (n - 1) / 2);
    Measurement::value(per(elapsed, n))
}

/// The tasks of a runtime whose spawn does not fail: what [`yields`] and
/// [`sleep_lateness`] need, so that goro's coroutines and plain threads
/// (`contenders::threads`) run the same code.
pub trait Tasks {
    type Handle<T>;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T>;
    /// Joins `h`; a task's panic is a failed run.
    fn join<T>(h: Self::Handle<T>) -> T;
    fn yield_now();
    fn sleep(d: Duration);
}

/// goro's coroutines.
pub struct Coroutines;

impl Tasks for Coroutines {
    type Handle<T> = goro::JoinHandle<T>;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Self::Handle<T> {
        goro::go!(f)
    }
    fn join<T>(h: Self::Handle<T>) -> T {
        h.join().expect("a task does not panic")
    }
    fn yield_now() {
        goro::yield_now()
    }
    fn sleep(d: Duration) {
        goro::time::sleep(d)
    }
}

/// `YIELD_TASKS_PER_WORKER` tasks per P (per "worker" for threads) each yield
/// `YIELD_COUNT` times; ns per yield.
pub fn yields<R: Tasks>(procs: usize) -> f64 {
    let tasks = YIELD_TASKS_PER_WORKER * procs;
    let t = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            R::spawn(|| {
                for _ in 0..YIELD_COUNT {
                    R::yield_now();
                }
            })
        })
        .collect();
    for h in handles {
        R::join(h);
    }
    per(t.elapsed(), tasks * YIELD_COUNT)
}

/// 1 ms sleeps (the calling task) under 2 spin-and-yield tasks per P; mean µs late.
pub fn sleep_lateness<R: Tasks>(procs: usize) -> f64 {
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2 * procs)
        .map(|_| {
            let stop = stop.clone();
            R::spawn(move || {
                // Relaxed: a stop flag publishes no data; seeing it one loop late is
                // harmless.
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_micros(50));
                    R::yield_now();
                }
            })
        })
        .collect();
    let nap = Duration::from_millis(1);
    let mut late_us = 0.0;
    for _ in 0..SLEEP_COUNT {
        let t = Instant::now();
        R::sleep(nap);
        late_us += t.elapsed().as_secs_f64() * 1e6 - 1e3;
    }
    // Relaxed: see the load loop.
    stop.store(true, Ordering::Relaxed);
    for h in load {
        R::join(h);
    }
    late_us / SLEEP_COUNT as f64
}

/// Spawn-and-park: `n` coroutines each parked on its own rendezvous receive, then
/// released in spawn order and joined.
fn spawn_park(name: &str, n: usize) -> Outcome {
    let started = Arc::new(AtomicUsize::new(0));
    let before = procfs::rss_bytes();
    let pte_before = procfs::status_kib("VmPTE").unwrap_or(0);
    let mut release = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        let (tx, rx) = channel::<()>(0);
        let started = started.clone();
        let spawned = goro::Builder::new().spawn(move || {
            // Relaxed: a count the driver polls; the receive below does not depend on it.
            started.fetch_add(1, Ordering::Relaxed);
            rx.recv().is_ok()
        });
        match spawned {
            Ok(h) => {
                release.push(tx);
                handles.push(h);
            }
            Err(e) => {
                let created = handles.len();
                drop(release);
                for h in handles {
                    let _ = h.join();
                }
                return Err(format!(
                    "coroutine {} of {n} could not be spawned ({e}); the {created} spawned \
                     were released and joined",
                    i + 1
                ));
            }
        }
    }
    let spawn = t.elapsed();
    // Every coroutine counts itself just before it parks: once all have counted, at
    // most one per P is between the count and the park; a short sleep covers those.
    let deadline = Instant::now() + Duration::from_secs(30);
    // Relaxed: see above.
    while started.load(Ordering::Relaxed) < n {
        assert!(
            Instant::now() < deadline,
            "coroutines did not start in 30 s"
        );
        goro::time::sleep(Duration::from_millis(1));
    }
    goro::time::sleep(Duration::from_millis(10));
    let after = procfs::rss_bytes();
    let pte = procfs::status_kib("VmPTE")
        .unwrap_or(0)
        .saturating_sub(pte_before)
        * 1024;
    let t = Instant::now();
    for tx in release {
        tx.send(()).expect("a parked coroutine is waiting");
    }
    for h in handles {
        assert!(h.join().expect("a parked coroutine does not panic"));
    }
    Ok(parked(name, n, spawn, t.elapsed(), [before, after])
        .with(&format!("{name}_pte"), pte as f64 / n as f64))
}

const TICK: Duration = Duration::from_millis(1);
const BLOCKERS: usize = 4;
const SLEEP_FOR: Duration = Duration::from_millis(20);
const SPIN_FOR: Duration = Duration::from_millis(50);
const BURST_GAP: Duration = Duration::from_millis(30);
const WARM_UP: Duration = Duration::from_millis(50);

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

/// The ticker's lateness p50 (µs; p99 and max as companions) while `GORO_BENCH_BURSTS`
/// (default 20) times four coroutines block at once with `kind` (`none`: return at
/// once, `sleep`: `std::thread::sleep(20ms)`, which goro knows nothing of; `cpu`: a
/// 50 ms spin with no runtime call) and the program waits for them, then 30 ms pass.
/// Go's side is `bench/go/blockfree.go`.
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
        let hs: Vec<_> = (0..BLOCKERS)
            .map(|_| {
                let k = kind.clone();
                goro::go!(move || block(&k))
            })
            .collect();
        for h in hs {
            h.join().expect("a blocker panicked");
        }
        std::thread::sleep(BURST_GAP);
    }
    stop.store(true, Ordering::Relaxed); // Relaxed: see the ticker's loop
    let mut late = ticker.join().expect("the ticker panicked");
    late.sort_unstable();
    let n = late.len();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Measurement::value(us(late[n / 2]))
        .with(&format!("ticker/{kind}/p99"), us(late[n * 99 / 100]))
        .with(&format!("ticker/{kind}/max"), us(late[n - 1]))
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
/// coroutines yielding for 2 s (`busy`) or an idle runtime.
fn sysmon_cost(busy: bool) -> Measurement {
    const RUN: Duration = Duration::from_secs(2);
    goro::go!(|| ()).join().expect("warm-up"); // start the runtime and sysmon
    let (s0, c0) = sysmon_stats();
    let t0 = Instant::now();
    if busy {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                goro::go!(move || {
                    let t = Instant::now();
                    while t.elapsed() < RUN {
                        goro::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("a yielder panicked");
        }
    } else {
        std::thread::sleep(RUN);
    }
    let secs = t0.elapsed().as_secs_f64();
    let (s1, c1) = sysmon_stats();
    let what = if busy { "busy" } else { "idle" };
    Measurement::value((s1 - s0) as f64 / secs)
        .with(&format!("sysmon/{what}/cpu"), (c1 - c0) as f64 / secs / 1e7)
}
