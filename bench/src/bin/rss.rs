//! Resident memory per parked coroutine.
//!
//! ```text
//! cargo run --release -p goro-bench --bin rss -- [N ...]   # default: 100000 1000000
//! ```
//!
//! For each N, in a fresh child process (this binary re-executed with
//! `GORO_RSS_CHILD=N`, so one N's stacks and pools cannot flatter the next): read
//! `VmRSS`, spawn N coroutines (default stack size) that each start a wait, store their
//! unparker in a shared table and park, wait until all N are parked, read `VmRSS`
//! again, and print the difference per coroutine. Then unpark and join them all.
//!
//! Also printed: the stack guard mechanism (`GuardInstall`: one mapping for many
//! stacks; `Mprotect`: two mappings per stack, capped by `vm.max_map_count`), that
//! limit, the process's mapping count while parked, and the growth of its page tables
//! (`VmPTE`, kernel memory that `VmRSS` does not include).
//!
//! Every wait is bounded: a coroutine that never parks, a wake-up that is lost or a
//! child that hangs ends the run with a message instead of hanging it. A spawn failure
//! (e.g. `vm.max_map_count` reached with `Mprotect` guards) is reported with the count
//! reached, and the figures are computed for that count.

use std::env;
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use goro::park::{self, Unparker, WaitReason};
use goro_bench::{
    join_timeout, kib_to_mib, map_count, max_map_count, proc_status_kib, vm_rss_kib, wait_until,
};

/// Set in the child's environment to the N it must measure.
const CHILD_ENV: &str = "GORO_RSS_CHILD";
const DEFAULT_NS: [usize; 2] = [100_000, 1_000_000];

fn main() -> ExitCode {
    if let Ok(n) = env::var(CHILD_ENV) {
        let n: usize = match n.parse() {
            Ok(n) => n,
            Err(e) => {
                eprintln!("{CHILD_ENV}={n:?}: {e}");
                return ExitCode::FAILURE;
            }
        };
        return match child(n) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("N = {n}: {e}");
                ExitCode::FAILURE
            }
        };
    }

    let mut ns = Vec::new();
    for arg in env::args().skip(1) {
        match arg.replace('_', "").parse::<usize>() {
            Ok(n) if n > 0 => ns.push(n),
            _ => {
                eprintln!("usage: rss [N ...]  (N: a positive coroutine count; got {arg:?})");
                return ExitCode::FAILURE;
            }
        }
    }
    if ns.is_empty() {
        ns.extend(DEFAULT_NS);
    }

    let exe = match env::current_exe() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cannot find this executable to re-run it: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for n in ns {
        let mut child = match Command::new(&exe).env(CHILD_ENV, n.to_string()).spawn() {
            Ok(c) => c,
            Err(e) => {
                eprintln!("N = {n}: cannot start the child process: {e}");
                ok = false;
                continue;
            }
        };
        // The child bounds its own waits; this is the backstop for a child that hangs
        // anyway (inside the runtime, say).
        let limit = child_timeout(n);
        let deadline = Instant::now() + limit;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Some(status),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(50)),
                Ok(None) => break None,
                Err(e) => {
                    eprintln!("N = {n}: waiting for the child: {e}");
                    break None;
                }
            }
        };
        match status {
            Some(s) if s.success() => {}
            Some(s) => {
                eprintln!("N = {n}: child failed: {s}");
                ok = false;
            }
            None => {
                eprintln!("N = {n}: child still running after {limit:?}; killing it");
                let _ = child.kill();
                let _ = child.wait();
                ok = false;
            }
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// How long the child may take to get N coroutines parked, or to join them all.
fn phase_timeout(n: usize) -> Duration {
    Duration::from_secs(60) + Duration::from_micros(100u64.saturating_mul(n as u64))
}

/// The parent's backstop: both phases, and then some.
fn child_timeout(n: usize) -> Duration {
    phase_timeout(n) * 3
}

/// Turns an I/O error into a message naming what was being read.
fn io_err(what: &'static str) -> impl Fn(std::io::Error) -> String {
    move |e| format!("{what}: {e}")
}

/// One measurement, in the child process.
fn child(n: usize) -> Result<(), String> {
    println!("--- N = {n} ---");
    println!(
        "stack guard: {:?}, vm.max_map_count = {}, default stack = {} KiB virtual{}, {} Ps",
        goro::debug::stack_guard_kind(),
        max_map_count().map_or_else(|e| format!("unknown ({e})"), |v| v.to_string()),
        goro::DEFAULT_STACK_SIZE / 1024,
        env::var("GORO_STACK_SIZE").map_or(String::new(), |v| format!(" (GORO_STACK_SIZE={v})")),
        goro::maxprocs(),
    );

    // Start the runtime (its worker threads) before the baseline, so it is not counted.
    if goro::go!(|| ()).join().is_err() {
        return Err("a trivial coroutine panicked".into());
    }

    // The tables are filled with None before the baseline: their pages are touched
    // now, so that the difference is the coroutines' (G, stack pages, join packet,
    // closure), not this harness's bookkeeping.
    let slots: Arc<Mutex<Vec<Option<Unparker>>>> =
        Arc::new(Mutex::new((0..n).map(|_| None).collect()));
    let mut handles: Vec<Option<goro::JoinHandle<()>>> = (0..n).map(|_| None).collect();
    let parked = Arc::new(AtomicUsize::new(0));

    let rss0 = vm_rss_kib().map_err(io_err("VmRSS"))?;
    let pte0 = proc_status_kib("VmPTE").ok();
    let maps0 = map_count().map_err(io_err("/proc/self/maps"))?;

    let t_spawn = Instant::now();
    let mut spawned = 0usize;
    let mut spawn_error = None;
    for (i, handle) in handles.iter_mut().enumerate() {
        let (slots, parked) = (slots.clone(), parked.clone());
        let r = goro::Builder::new().spawn(move || {
            let u = park::prepare();
            slots.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(u);
            // Counted in the commit action, which runs once this coroutine is off its
            // stack: when the count is N, all N are really parked (or already woken).
            park::park_commit(WaitReason::Park, || {
                parked.fetch_add(1, Ordering::Release);
            });
        });
        match r {
            Ok(h) => {
                *handle = Some(h);
                spawned += 1;
            }
            Err(e) => {
                spawn_error = Some(e);
                break;
            }
        }
    }
    let spawn_time = t_spawn.elapsed();
    if let Some(e) = &spawn_error {
        println!("spawn failed after {spawned} of {n} coroutines: {e}");
    }

    let limit = phase_timeout(n);
    if !wait_until(limit, || parked.load(Ordering::Acquire) == spawned) {
        panic!(
            "only {} of {spawned} coroutines parked after {limit:?}",
            parked.load(Ordering::Acquire)
        );
    }
    let park_time = t_spawn.elapsed();

    let rss1 = vm_rss_kib().map_err(io_err("VmRSS"))?;
    let pte1 = proc_status_kib("VmPTE").ok();
    let maps1 = map_count().map_err(io_err("/proc/self/maps"))?;

    let per_kib = |d: u64| {
        if spawned == 0 {
            0.0
        } else {
            d as f64 * 1024.0 / spawned as f64
        }
    };
    let drss = rss1.saturating_sub(rss0);
    let per = per_kib(drss);
    println!(
        "{spawned} parked: {:.1} MiB RSS ({:.1} MiB over the {:.1} MiB baseline), \
         {:.0} bytes ({:.2} KiB) per coroutine",
        kib_to_mib(rss1),
        kib_to_mib(drss),
        kib_to_mib(rss0),
        per,
        per / 1024.0,
    );
    if let (Some(p0), Some(p1)) = (pte0, pte1) {
        let d = p1.saturating_sub(p0);
        println!(
            "page tables (VmPTE, not in RSS): +{:.1} MiB, {:.0} bytes per coroutine",
            kib_to_mib(d),
            per_kib(d),
        );
    }
    println!("mappings while parked: {maps1} ({maps0} before spawning)");
    println!(
        "spawn: {:.1} ms ({:.0} ns per coroutine); all parked after {:.1} ms",
        spawn_time.as_secs_f64() * 1e3,
        spawn_time.as_nanos() as f64 / spawned.max(1) as f64,
        park_time.as_secs_f64() * 1e3,
    );

    // Wake them all, then join them all.
    let t_wake = Instant::now();
    let unparkers: Vec<Unparker> = slots
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter_mut()
        .filter_map(Option::take)
        .collect();
    if unparkers.len() != spawned {
        return Err(format!(
            "{} unparkers published by {spawned} parked coroutines",
            unparkers.len()
        ));
    }
    let woken = unparkers
        .into_iter()
        .map(Unparker::unpark)
        .filter(|&w| w)
        .count();
    if woken != spawned {
        return Err(format!(
            "unpark woke {woken} of {spawned} parked coroutines"
        ));
    }
    let deadline = Instant::now() + limit;
    for h in handles.into_iter().flatten() {
        let left = deadline.saturating_duration_since(Instant::now());
        match join_timeout(h, left) {
            Ok(Ok(())) => {}
            Ok(Err(_)) => return Err("a parked coroutine panicked".into()),
            Err(h) => panic!(
                "coroutine {} not finished {limit:?} after being unparked",
                h.id()
            ),
        }
    }
    println!(
        "unpark + join all: {:.1} ms",
        t_wake.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}
