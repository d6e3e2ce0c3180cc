//! Blocking code that never heard of the runtime: how late a 1 ms ticker is while
//! other coroutines block its Ps, goro next to Go, alternated in one run.
//!
//! ```text
//! cargo run --release -p goro-bench --bin blockfree [-- --rounds 3 --bursts 20]
//! ```
//!
//! Each run is a fresh process: a ticker coroutine sleeps 1 ms in a loop, recording
//! each lateness (elapsed - 1 ms), while `--bursts` times four coroutines block at
//! once and the program waits for them, then lets the ticker run alone for 30 ms.
//!
//! - `sleep`: goro's blockers call `std::thread::sleep(20ms)`, a `nanosleep` goro
//!   knows nothing of (sysmon retakes the P: the blocker's CPU clock stands still).
//!   Go's make the raw `syscall.Nanosleep`, which passes through its `entersyscall`:
//!   Go's best case, a call its runtime is told about.
//! - `cpu`: each blocker spins 50 ms with no runtime call. Go preempts it with a
//!   signal at 10 ms; goro cannot, and takes the P from under it after 12 ms.
//! - `none`: the blockers return at once: the ticker's lateness on this machine with
//!   nothing blocking (its timer wake-ups, the VM's stalls), the floor of the rows
//!   above.
//!
//! It prints the ticker's lateness p50 / p99 / max per row, the median over the rounds
//! for each, at `GORO_MAXPROCS` / `GOMAXPROCS` 1 and 2, and goro/Go of the max. Go's
//! side is bench/go/blockfree (built with `go build`; `bench/go/install.sh` installs
//! Go). Without Go the Go columns say why.
//!
//! `--child goro KIND BURSTS` is the goro side of one run (what the driver starts).
//!
//! `--sysmon` measures what watching for blocked threads costs instead: sysmon's
//! wake-ups per second and its CPU time (its thread's `schedstat`) while four
//! coroutines yield for 2 s, and while the runtime idles for 2 s.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro_bench::tools::{go_build_command, go_version, load_average, median, run_ok};

const TICK: Duration = Duration::from_millis(1);
const BLOCKERS: usize = 4;
const SLEEP_FOR: Duration = Duration::from_millis(20);
const SPIN_FOR: Duration = Duration::from_millis(50);
const BURST_GAP: Duration = Duration::from_millis(30);
const WARM_UP: Duration = Duration::from_millis(50);
const KINDS: [&str; 3] = ["none", "sleep", "cpu"];
/// A run that takes longer than this is a hang.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

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
        _ => unreachable!("kinds are checked by the caller"),
    }
}

/// One run in this process: "ticks p50_ns p99_ns max_ns", as the Go side prints.
fn child(kind: &str, bursts: usize) -> String {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let ticker = goro::go!(move || {
        let mut late = Vec::with_capacity(1 << 14);
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
    stop.store(true, Ordering::Relaxed);
    let mut late = ticker.join().expect("the ticker panicked");
    late.sort_unstable();
    let n = late.len();
    format!(
        "{n} {} {} {}",
        late[n / 2].as_nanos(),
        late[n * 99 / 100].as_nanos(),
        late[n - 1].as_nanos()
    )
}

/// p50, p99, max in nanoseconds, from a run's line.
fn parse(line: &str, who: &str) -> [f64; 3] {
    let v: Vec<f64> = line
        .split_whitespace()
        .map(|x| {
            x.parse()
                .unwrap_or_else(|_| panic!("{who}: bad output {line:?}"))
        })
        .collect();
    assert!(v.len() == 4 && v[0] > 0.0, "{who}: bad output {line:?}");
    [v[1], v[2], v[3]]
}

struct Args {
    rounds: usize,
    bursts: usize,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        rounds: 3,
        bursts: 20,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut num = |name: &str| -> Result<usize, String> {
            let v = it.next().ok_or(format!("{name} needs a value"))?;
            match v.parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{name} must be a positive number, not {v:?}")),
            }
        };
        match flag.as_str() {
            "--rounds" => a.rounds = num("--rounds")?,
            "--bursts" => a.bursts = num("--bursts")?,
            _ => return Err(format!("unknown argument {flag:?}")),
        }
    }
    Ok(a)
}

fn go_binary() -> Result<PathBuf, String> {
    let version = go_version()?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("go/blockfree");
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/go/blockfree");
    run_ok(
        go_build_command(&src, &bin)?,
        RUN_TIMEOUT,
        "go build (blockfree)",
    );
    eprintln!("Go side: {version}");
    Ok(bin)
}

fn us(ns: f64) -> String {
    format!("{:.0}", ns / 1e3)
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

/// `--sysmon`: sysmon's wake-ups and CPU beside a busy and an idle runtime.
fn sysmon_cost() {
    const RUN: Duration = Duration::from_secs(2);
    goro::go!(|| ()).join().expect("warm-up"); // start the runtime and sysmon
    println!("| workload | sysmon wake-ups/s | sysmon CPU, % of a core | yields/s |");
    println!("|---|---:|---:|---:|");
    for busy in [true, false] {
        let (s0, c0) = sysmon_stats();
        let t0 = Instant::now();
        let mut yields = 0u64;
        if busy {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    goro::go!(move || {
                        let (t, mut n) = (Instant::now(), 0u64);
                        while t.elapsed() < RUN {
                            goro::yield_now();
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            yields = hs.into_iter().map(|h| h.join().expect("yielder")).sum();
        } else {
            std::thread::sleep(RUN);
        }
        let secs = t0.elapsed().as_secs_f64();
        let (s1, c1) = sysmon_stats();
        println!(
            "| {} | {:.0} | {:.2} | {:.0} |",
            if busy {
                "4 coroutines yielding"
            } else {
                "idle"
            },
            (s1 - s0) as f64 / secs,
            (c1 - c0) as f64 / secs / 1e7,
            yields as f64 / secs
        );
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("--sysmon") {
        sysmon_cost();
        return ExitCode::SUCCESS;
    }
    if argv.get(1).map(String::as_str) == Some("--child") {
        let (kind, bursts) = match (argv.get(3), argv.get(4).and_then(|b| b.parse().ok())) {
            (Some(k), Some(b)) if KINDS.contains(&k.as_str()) => (k.clone(), b),
            _ => {
                eprintln!("usage: blockfree --child goro none|sleep|cpu BURSTS");
                return ExitCode::from(2);
            }
        };
        println!("{}", child(&kind, bursts));
        return ExitCode::SUCCESS;
    }
    let a = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("blockfree: {e}\nusage: blockfree [--rounds N] [--bursts N]");
            return ExitCode::from(2);
        }
    };
    let go = go_binary();
    if let Err(e) = &go {
        eprintln!("Go side skipped: {e}");
    }
    let me = std::env::current_exe().expect("current_exe");
    println!("load average at the start: {}", load_average());
    println!("\n| Ps | blockers | Go p50 / p99 / max µs | goro p50 / p99 / max µs | goro/Go max |");
    println!("|---|---|---|---|---|");
    for procs in ["1", "2"] {
        for kind in KINDS {
            let mut runs: [Vec<[f64; 3]>; 2] = [Vec::new(), Vec::new()];
            for round in 0..a.rounds {
                // Alternate who goes first.
                for who in [round % 2, 1 - round % 2] {
                    let bursts = a.bursts.to_string();
                    let mut cmd = if who == 0 {
                        let mut c = Command::new(&me);
                        c.args(["--child", "goro", kind, &bursts]);
                        c
                    } else {
                        let Ok(bin) = &go else { continue };
                        let mut c = Command::new(bin);
                        c.args([kind, &bursts]);
                        c
                    };
                    cmd.env("GORO_MAXPROCS", procs).env("GOMAXPROCS", procs);
                    let name = if who == 0 { "goro" } else { "go" };
                    let f = run_ok(cmd, RUN_TIMEOUT, name);
                    runs[who].push(parse(f.stdout.trim(), name));
                }
            }
            let med =
                |v: &[[f64; 3]], i: usize| median(&v.iter().map(|r| r[i]).collect::<Vec<_>>());
            let cell = |v: &[[f64; 3]]| match (med(v, 0), med(v, 1), med(v, 2)) {
                (Some(a), Some(b), Some(c)) => format!("{} / {} / {}", us(a), us(b), us(c)),
                _ => "skipped (no Go)".to_string(),
            };
            let ratio = match (med(&runs[0], 2), med(&runs[1], 2)) {
                (Some(g), Some(o)) => format!("{:.2}", g / o),
                _ => "-".to_string(),
            };
            println!(
                "| {procs} | {kind} | {} | {} | {ratio} |",
                cell(&runs[1]),
                cell(&runs[0])
            );
        }
    }
    ExitCode::SUCCESS
}
