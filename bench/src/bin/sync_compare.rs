//! goro's `Sema*` / `Mutex*` benchmarks next to std's and parking_lot's mutexes and to
//! Go itself, measured in ONE run, in one table.
//!
//! ```text
//! cargo run --release -p goro-bench --bin sync_compare [-- --json FILE] [--rounds N]
//! ```
//!
//! The workloads are `goro_bench::sync_workloads` (the same code `benches/sync.rs`
//! times with criterion); the Go side is `bench/go/` (`go test -bench`). On a shared,
//! noisy machine only figures taken side by side mean anything, so the contenders
//! alternate: each round runs goro at 1 P, Go at `-cpu 1`, goro at 2 Ps, Go at
//! `-cpu 2`, and within a goro run every benchmark runs goro, goro without back-off,
//! std and parking_lot one after the other. The table gives the median of the rounds.
//!
//! - goro runs in a fresh child process per round and P count (this binary, re-run
//!   with `GORO_MAXPROCS` set: the runtime reads it at start-up). For each benchmark
//!   and contender the child sizes N so that one run takes about 200 ms (`--target-ms`),
//!   then times one run of N iterations. ns/op = wall time / N.
//! - Go: `go test -c` builds `bench/go/` once; each round runs the test binary with
//!   `-test.bench '^Benchmark(Sema|Mutex|WorkOnly)' -test.cpu P -test.benchtime 200ms`
//!   and its `ns/op` lines are parsed. Without `go` on the PATH (or if the build
//!   fails) the Go column says why it is empty.
//!
//! Every wait is bounded: a child or a Go run that exceeds its bound is killed and the
//! tool panics, as does any run that fails its correctness checks.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use goro_bench::sync_workloads::{run, Bench, Contender};
use goro_bench::tools::{build_go_test, child_setup, load_average, median, run_ok, Finished};

/// Set (to anything) in the child processes.
const CHILD_ENV: &str = "GORO_SYNC_COMPARE_CHILD";
/// The child's target time per timed run, in ms.
const TARGET_ENV: &str = "GORO_SYNC_COMPARE_TARGET_MS";
/// P counts (goro's GORO_MAXPROCS, Go's -cpu).
const PS: [usize; 2] = [1, 2];
/// Bound of one goro child (all benchmarks at one P count).
const CHILD_TIMEOUT: Duration = Duration::from_secs(180);
/// Bound of `go test -c`.
const GO_BUILD_TIMEOUT: Duration = Duration::from_secs(300);
/// Bound of one run of Go's test binary (all benchmarks at one -cpu).
const GO_RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// The Go benchmarks this tool runs (`-test.bench`).
const GO_BENCH_REGEX: &str = "^Benchmark(Sema|Mutex|WorkOnly)";

/// Removes a file when dropped (the Go test binary, also when the tool panics).
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Columns of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Column {
    Rust(Contender),
    Go,
}

/// Samples: (benchmark, Ps, column) -> ns/op of each round.
type Samples = HashMap<(Bench, usize, Column), Vec<f64>>;

struct Options {
    json: Option<PathBuf>,
    rounds: usize,
    target_ms: u64,
}

fn parse_args() -> Options {
    let mut o = Options {
        json: None,
        rounds: 5,
        target_ms: 200,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| panic!("{name} needs a value"))
        };
        match a.as_str() {
            "--json" => o.json = Some(PathBuf::from(value("--json"))),
            "--rounds" => o.rounds = value("--rounds").parse().expect("--rounds N"),
            "--target-ms" => o.target_ms = value("--target-ms").parse().expect("--target-ms N"),
            // `cargo bench`/test harness style flags are not ours.
            other => panic!(
                "unknown argument {other:?} (usage: sync_compare [--json FILE] \
                 [--rounds N] [--target-ms N])"
            ),
        }
    }
    assert!(o.rounds > 0 && o.target_ms > 0);
    o
}

fn main() {
    if std::env::var_os(CHILD_ENV).is_some() {
        child_main();
        return;
    }
    let opts = parse_args();
    let started = Instant::now();
    let load_before = load_average();
    println!(
        "sync_compare: {} rounds, goro target {} ms per run, Go -benchtime {}ms; {} CPUs; \
         load average at start: {load_before}",
        opts.rounds,
        opts.target_ms,
        opts.target_ms,
        thread::available_parallelism().map_or(0, |n| n.get()),
    );

    let go_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let go_bin =
        std::env::temp_dir().join(format!("goro_sync_compare_{}.test", std::process::id()));
    let _remove_go_bin = RemoveOnDrop(go_bin.clone());
    let go = match build_go_test(&go_dir, &go_bin, GO_BUILD_TIMEOUT) {
        Ok(v) => {
            println!("Go: {v}");
            true
        }
        Err(why) => {
            println!("Go was not measured: {why}");
            false
        }
    };

    let mut samples = Samples::new();
    for round in 0..opts.rounds {
        for ps in PS {
            eprintln!(
                "[{:>5.1}s] round {}/{}: goro at {ps} P",
                started.elapsed().as_secs_f64(),
                round + 1,
                opts.rounds
            );
            for (bench, contender, ns) in run_goro_child(ps, opts.target_ms) {
                samples
                    .entry((bench, ps, Column::Rust(contender)))
                    .or_default()
                    .push(ns);
            }
            if go {
                eprintln!(
                    "[{:>5.1}s] round {}/{}: Go at -cpu {ps}",
                    started.elapsed().as_secs_f64(),
                    round + 1,
                    opts.rounds
                );
                for (bench, procs, ns) in run_go(&go_dir, &go_bin, ps, opts.target_ms) {
                    samples
                        .entry((bench, procs, Column::Go))
                        .or_default()
                        .push(ns);
                }
            }
        }
    }
    let load_after = load_average();

    print_table(&samples, go);
    println!();
    println!(
        "load average at start: {load_before}; at end: {load_after}; total time {:.0} s",
        started.elapsed().as_secs_f64()
    );
    if let Some(path) = &opts.json {
        std::fs::write(path, to_json(&samples, &load_before, &load_after))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        println!("wrote {}", path.display());
    }
}

// ---- goro side ----

/// The child: runs every benchmark with every contender once at this process's P
/// count and prints `result <bench> <contender> <ns/op> <iters>` lines.
fn child_main() {
    let (_, target) = child_setup(TARGET_ENV, 200);
    for bench in Bench::ALL {
        for &contender in bench.contenders() {
            let (ns, iters) = measure(bench, contender, target);
            println!(
                "result\t{}\t{}\t{ns:.3}\t{iters}",
                bench.name(),
                contender.name()
            );
        }
    }
}

/// Sizes N so that a run takes about `target`, then times one run of N iterations.
/// Returns (ns/op, N).
fn measure(bench: Bench, contender: Contender, target: Duration) -> (f64, u64) {
    let probe_floor = target / 10;
    let mut n = 100u64;
    loop {
        let d = run(bench, contender, n);
        if d >= probe_floor {
            let n = ((n as f64) * target.as_secs_f64() / d.as_secs_f64()).ceil() as u64;
            let n = n.max(1);
            let d = run(bench, contender, n);
            return (d.as_nanos() as f64 / n as f64, n);
        }
        // Aim at 1.5 x the floor, growing at least 2x and at most 100x per probe.
        let factor = if d.is_zero() {
            100.0
        } else {
            (probe_floor.as_secs_f64() * 1.5 / d.as_secs_f64()).clamp(2.0, 100.0)
        };
        n = ((n as f64) * factor) as u64;
    }
}

/// Runs one goro child at `ps` Ps; returns its results.
fn run_goro_child(ps: usize, target_ms: u64) -> Vec<(Bench, Contender, f64)> {
    // /proc/self/exe is this very binary even if a concurrent `cargo build` has
    // replaced the file at its path meanwhile (the children must run the same code).
    let proc_exe = Path::new("/proc/self/exe");
    let exe = if proc_exe.exists() {
        proc_exe.to_path_buf()
    } else {
        std::env::current_exe().expect("current_exe")
    };
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ENV, "1")
        .env("GORO_MAXPROCS", ps.to_string())
        .env(TARGET_ENV, target_ms.to_string());
    let Finished { stdout, stderr, .. } =
        run_ok(cmd, CHILD_TIMEOUT, &format!("goro child at {ps} P"));
    if !stderr.trim().is_empty() {
        eprint!("{stderr}");
    }
    let results: Vec<_> = stdout
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            if f.len() != 5 || f[0] != "result" {
                return None;
            }
            let bench = Bench::from_name(f[1]).expect("child printed an unknown benchmark");
            let contender = Contender::from_name(f[2]).expect("child printed an unknown contender");
            Some((
                bench,
                contender,
                f[3].parse().expect("child printed a bad ns/op"),
            ))
        })
        .collect();
    let expected: usize = Bench::ALL.iter().map(|b| b.contenders().len()).sum();
    assert_eq!(results.len(), expected, "goro child output:\n{stdout}");
    results
}

// ---- Go side ----

/// Runs Go's benchmarks at `-cpu ps`; returns (benchmark, GOMAXPROCS, ns/op).
fn run_go(dir: &Path, bin: &Path, ps: usize, benchtime_ms: u64) -> Vec<(Bench, usize, f64)> {
    let mut cmd = Command::new(bin);
    cmd.current_dir(dir).args([
        "-test.run=^$".to_string(),
        // bench/go/ holds other tools' benchmarks too (chan_bench_test.go).
        format!("-test.bench={GO_BENCH_REGEX}"),
        format!("-test.cpu={ps}"),
        format!("-test.benchtime={benchtime_ms}ms"),
        "-test.count=1".to_string(),
        "-test.timeout=150s".to_string(),
    ]);
    let stdout = run_ok(cmd, GO_RUN_TIMEOUT, &format!("Go benchmarks at -cpu {ps}")).stdout;
    let results = parse_go_bench(&stdout);
    assert_eq!(
        results.len(),
        Bench::ALL.len(),
        "unexpected Go output:\n{stdout}"
    );
    for &(_, procs, _) in &results {
        assert_eq!(procs, ps, "Go ran at another GOMAXPROCS:\n{stdout}");
    }
    results
}

/// Parses `BenchmarkName[-P]  <N>  <x> ns/op` lines (no `-P` suffix means P = 1).
fn parse_go_bench(out: &str) -> Vec<(Bench, usize, f64)> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let name = f.first()?.strip_prefix("Benchmark")?;
            let ns_at = f.iter().position(|&t| t == "ns/op")?;
            let ns: f64 = f.get(ns_at.checked_sub(1)?)?.parse().ok()?;
            let (name, procs) = match name.rsplit_once('-') {
                Some((n, p)) if p.parse::<usize>().is_ok() => (n, p.parse().ok()?),
                _ => (name, 1),
            };
            Some((Bench::from_name(name)?, procs, ns))
        })
        .collect()
}

// ---- report ----

fn cell(samples: &Samples, key: (Bench, usize, Column)) -> Option<f64> {
    samples.get(&key).and_then(|v| median(v))
}

fn fmt_ns(v: Option<f64>) -> String {
    match v {
        Some(x) if x >= 100.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.1}"),
        None => "-".into(),
    }
}

fn print_table(samples: &Samples, go: bool) {
    println!();
    println!("Median ns/op over the rounds (lower is better); ratio = goro / Go.");
    println!(
        "{:<17} {:>2} {:>11} {:>16} {:>9} {:>12} {:>9} {:>12}",
        "benchmark",
        "Ps",
        "goro ns/op",
        "goro no-backoff",
        "std",
        "parking_lot",
        "Go ns/op",
        "goro/Go"
    );
    for bench in Bench::ALL {
        for ps in PS {
            let c = |col| cell(samples, (bench, ps, col));
            let goro = c(Column::Rust(Contender::Goro));
            let gov = c(Column::Go);
            let ratio = match (goro, gov) {
                (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
                _ => "-".into(),
            };
            println!(
                "{:<17} {:>2} {:>11} {:>16} {:>9} {:>12} {:>9} {:>12}",
                bench.name(),
                ps,
                fmt_ns(goro),
                fmt_ns(c(Column::Rust(Contender::GoroNoBackoff))),
                fmt_ns(c(Column::Rust(Contender::Std))),
                fmt_ns(c(Column::Rust(Contender::ParkingLot))),
                fmt_ns(gov),
                ratio
            );
        }
    }
    if !go {
        println!("(Go column empty: Go was not measured, see above.)");
    }
    println!();
    println!("Spread over the rounds, min..max ns/op:");
    println!(
        "{:<17} {:>2} {:>17} {:>17} {:>17} {:>17} {:>17}",
        "benchmark", "Ps", "goro", "goro no-backoff", "std", "parking_lot", "Go"
    );
    for bench in Bench::ALL {
        for ps in PS {
            let range = |col| match samples.get(&(bench, ps, col)) {
                Some(v) if !v.is_empty() => {
                    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
                    let hi = v.iter().copied().fold(0.0, f64::max);
                    format!("{}..{}", fmt_ns(Some(lo)), fmt_ns(Some(hi)))
                }
                _ => "-".into(),
            };
            println!(
                "{:<17} {:>2} {:>17} {:>17} {:>17} {:>17} {:>17}",
                bench.name(),
                ps,
                range(Column::Rust(Contender::Goro)),
                range(Column::Rust(Contender::GoroNoBackoff)),
                range(Column::Rust(Contender::Std)),
                range(Column::Rust(Contender::ParkingLot)),
                range(Column::Go)
            );
        }
    }
    println!();
    const NOTES: &str = "\
Notes: SemaSyntBlock/SemaWorkBlock at 1 P equal their Nonblock twins (the taker keeps
GOMAXPROCS/2 = 0 units), in Go as in goro. *Slack runs 10 workers per P, all contending
(Go's SetParallelism(10)). std/parking_lot run on plain threads, as many as goro has
workers, NOT confined to P cores: at 1 P, *Slack's 10 threads use both CPUs. WorkOnly:
the local work alone (goro column: Rust's loop on coroutines; Go: Go's loop).";
    println!("{NOTES}");
}

fn to_json(samples: &Samples, load_before: &str, load_after: &str) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "{{\"load_average_start\":\"{load_before}\",\"load_average_end\":\"{load_after}\",\"rows\":["
    );
    let mut first = true;
    for bench in Bench::ALL {
        for ps in PS {
            let cols = Contender::ALL
                .iter()
                .map(|&c| (c.name(), Column::Rust(c)))
                .chain(std::iter::once(("go", Column::Go)));
            for (name, col) in cols {
                let Some(v) = samples.get(&(bench, ps, col)) else {
                    continue;
                };
                if !first {
                    s.push(',');
                }
                first = false;
                let list: Vec<String> = v.iter().map(|x| format!("{x:.3}")).collect();
                let _ = write!(
                    s,
                    "{{\"bench\":\"{}\",\"ps\":{ps},\"contender\":\"{name}\",\"median_ns\":{:.3},\"samples_ns\":[{}]}}",
                    bench.name(),
                    median(v).unwrap_or(f64::NAN),
                    list.join(",")
                );
            }
        }
    }
    s.push_str("]}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_bench_lines() {
        let out = "goos: linux\nBenchmarkSemaUncontended      \t17587137\t        23.27 ns/op\n\
                   BenchmarkMutexSlack-2         \t 4717264\t        70.02 ns/op\n\
                   BenchmarkNotOurs-2 \t 1\t 5 ns/op\nPASS\n";
        assert_eq!(
            parse_go_bench(out),
            vec![
                (Bench::SemaUncontended, 1, 23.27),
                (Bench::MutexSlack, 2, 70.02)
            ]
        );
    }
}
