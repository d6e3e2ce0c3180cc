//! goro next to may, tokio, plain threads and Go, on the same workloads, in one table
//! per suite.
//!
//! ```text
//! cargo run --release -p goro-bench --bin compare -- [--suite chan,sync,time,proc,echo,blocking|all]
//!     [--only ROW,...] [--readme] [--contenders goro,may,...] [--rounds N]
//!     [--json F] [--plot F.svg] [--markdown F.md] [--target-ms N] [--secs S] ...
//! compare list                         the rows, by suite
//! compare worker CONTENDER WORKLOAD    one run (what the harness starts)
//! compare serve CONTENDER [--addr A]   a contender's echo server
//! compare load --addr A [--conns C] .. the echo load generator
//! ```
//!
//! Every run is a fresh child process; for each row the contenders take turns round
//! after round, in an order that rotates every round; each child gets the row's P
//! count as `GORO_MAXPROCS` and `GOMAXPROCS`. The tables (stdout, and `--markdown`)
//! give the median of the rounds and the ratio to goro (> 1: goro ahead), footnotes
//! for skips, failures and stand-ins, and the spread. `src/workloads/` is the
//! contract, `src/contenders/` the implementations, `bench/go/` Go's side.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};
use goro_bench::contenders::{self, Contender};
use goro_bench::harness::orchestrate::{Launcher, Load};
use goro_bench::harness::report::{self, fmt_num, Got, Results, RowResult, Run};
use goro_bench::harness::{go, procfs};
use goro_bench::workloads::{self, Suite, Workload, README_ROWS};

#[derive(Parser)]
#[command(
    name = "compare",
    about = "goro next to may, tokio, plain threads and Go"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Lists the workloads and their rows, by suite.
    List,
    /// One run of WORKLOAD on CONTENDER; prints its measurement as a JSON line.
    Worker { contender: String, workload: String },
    /// CONTENDER's echo server: prints `LISTENING <addr>`, serves until stdin closes.
    Serve {
        contender: String,
        #[arg(long, default_value = "127.0.0.1:0")]
        addr: SocketAddr,
    },
    /// The closed-loop echo load generator.
    Load(workloads::echo::Config),
}

#[derive(Args)]
struct RunArgs {
    /// Suites to run: chan, sync, time, proc, echo, blocking, or all.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    suite: Vec<String>,
    /// Only these rows (a companion row selects its workload).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only the full comparison's rows (the README's table and its section of
    /// docs/benchmarks.md).
    #[arg(long)]
    readme: bool,
    /// Contenders, in column order (default: all but `example`, and `base` only with
    /// --baseline).
    #[arg(long, value_delimiter = ',')]
    contenders: Vec<String>,
    /// Runs per contender and row.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: u16,
    /// Bound of one worker run, seconds.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
    /// Time of one sized run of a Go benchmark port (Go's -benchtime), ms.
    #[arg(long, default_value_t = 200)]
    target_ms: u64,
    /// Echo: measured seconds per run.
    #[arg(long, default_value_t = 2.0)]
    secs: f64,
    /// Echo: warm-up seconds per run.
    #[arg(long, default_value_t = 0.5)]
    warmup: f64,
    /// Blocking: bursts of blockers per ticker run.
    #[arg(long, default_value_t = 20)]
    bursts: u64,
    /// Echo: another build's echo server (`PATH --addr ADDR`) as the contender `base`.
    #[arg(long)]
    baseline: Option<PathBuf>,
    /// Echo: the load generator.
    #[arg(long, value_enum, default_value = "goro")]
    load: Load,
    /// Writes every run's figures, the medians and the machine as JSON.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Writes the ratios to goro as an SVG chart.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Writes the markdown tables (as printed) with the command line above them.
    #[arg(long)]
    markdown: Option<PathBuf>,
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Some(Cmd::List) => list(),
        Some(Cmd::Worker {
            contender,
            workload,
        }) => match (contenders::find(&contender), Workload::find(&workload)) {
            (Some(c), Some(w)) => contenders::worker(c, w),
            _ => usage(&format!(
                "unknown contender {contender:?} or workload {workload:?}"
            )),
        },
        Some(Cmd::Serve { contender, addr }) => match contenders::find(&contender) {
            Some(c) => serve(c, addr),
            None => usage(&format!("unknown contender {contender:?}")),
        },
        Some(Cmd::Load(cfg)) => workloads::echo::main(&cfg),
        None => run(&cli.run),
    };
    let _ = std::io::stdout().flush();
    // Exit without waiting for anything: a worker may leave tasks parked (the sieve's
    // filters, as Go's program does).
    std::process::exit(code);
}

fn usage(e: &str) -> i32 {
    eprintln!("compare: {e} (compare list names them)");
    2
}

fn list() -> i32 {
    for w in workloads::ALL {
        let rows: Vec<String> = w
            .rows()
            .map(|r| format!("{} ({})", r.name, r.unit))
            .collect();
        println!("{:?} at {:?} P: {}", w.suite, w.procs, rows.join(", "));
    }
    0
}

/// `serve`: the contender's echo server. If stdin is a pipe (the harness's), its EOF
/// ends the process, whatever the server is doing; otherwise a signal does.
fn serve(c: &dyn Contender, addr: SocketAddr) -> i32 {
    // A shell starts a background job with SIGINT ignored; `kill -INT` must stop it.
    // SAFETY: restoring a signal's default action has no preconditions.
    unsafe { libc::signal(libc::SIGINT, libc::SIG_DFL) };
    let piped = nix::sys::stat::fstat(std::io::stdin())
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFIFO);
    if piped {
        std::thread::spawn(|| {
            let mut sink = [0u8; 512];
            while !matches!(std::io::stdin().read(&mut sink), Ok(0) | Err(_)) {}
            let _ = std::io::stdout().flush();
            std::process::exit(0);
        });
    }
    match c.serve(addr) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("compare serve {}: {e}", c.name());
            1
        }
    }
}

/// The workloads asked for, in table order.
fn selection(a: &RunArgs) -> Result<Vec<&'static Workload>, String> {
    let mut only: Vec<&str> = a.only.iter().map(String::as_str).collect();
    if a.readme {
        only.extend(README_ROWS);
    }
    if !only.is_empty() {
        for name in &only {
            Workload::find(name).ok_or_else(|| format!("no workload or row {name:?}"))?;
        }
        let picked = |w: &Workload| only.iter().any(|n| w.rows().any(|r| r.name == *n));
        return Ok(workloads::ALL.iter().filter(|w| picked(w)).collect());
    }
    let mut suites = Vec::new();
    for s in &a.suite {
        if s == "all" {
            return Ok(workloads::ALL.iter().collect());
        }
        suites.push(
            <Suite as clap::ValueEnum>::from_str(s, true).map_err(|_| format!("no suite {s:?}"))?,
        );
    }
    Ok(workloads::ALL
        .iter()
        .filter(|w| suites.contains(&w.suite))
        .collect())
}

/// The command line, as the tables show it.
fn command_line() -> String {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .map(|a| {
            if a.contains([' ', '*']) {
                format!("'{a}'")
            } else {
                a
            }
        })
        .collect();
    format!(
        "cargo run --release -p goro-bench --bin compare -- {}",
        args.join(" ")
    )
}

fn run(a: &RunArgs) -> i32 {
    match measure(a) {
        Ok(code) => code,
        Err(e) => usage(&e),
    }
}

fn measure(a: &RunArgs) -> Result<i32, String> {
    if cfg!(debug_assertions) {
        eprintln!("compare: WARNING: a debug build; run it with --release");
    }
    let selected = selection(a)?;
    let cs: Vec<&'static dyn Contender> = if a.contenders.is_empty() {
        contenders::ALL
            .iter()
            .copied()
            .filter(|c| c.name() != "example" && (c.name() != "base" || a.baseline.is_some()))
            .collect()
    } else {
        a.contenders
            .iter()
            .map(|n| contenders::find(n).ok_or_else(|| format!("no contender {n:?}")))
            .collect::<Result<_, _>>()?
    };
    let t0 = Instant::now();
    let machine = report::machine_info();
    let tmp = std::env::temp_dir().join(format!("goro-compare-{}", std::process::id()));
    let go = if cs.iter().any(|c| c.name() == "go") {
        eprintln!("compare: building bench/go ...");
        go::build(&tmp, selected.iter().any(|w| w.suite == Suite::Time))
    } else {
        Err("not selected".into())
    };
    if let Err(why) = &go {
        eprintln!("compare: Go not measured: {why}");
    }
    let launcher = Launcher {
        me: std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?,
        go,
        timeout: Duration::from_secs(a.timeout),
        target_ms: a.target_ms,
        bursts: a.bursts,
        echo_secs: a.secs,
        echo_warmup: a.warmup,
        load: a.load,
        baseline: a.baseline.clone(),
    };
    let names: Vec<&'static str> = cs.iter().map(|c| c.name()).collect();
    let rounds = usize::from(a.rounds);
    let mut rows: Vec<RowResult> = Vec::new();
    let mut workload_secs = Vec::new();
    for w in &selected {
        for &procs in w.procs {
            let first = rows.len();
            rows.extend(w.rows().map(|r| RowResult::new(r, w.suite, procs, &names)));
            let t = Instant::now();
            for round in 0..rounds {
                let mut order: Vec<usize> = (0..cs.len()).collect();
                order.rotate_left(round % cs.len().max(1));
                for (position, &ci) in order.iter().enumerate() {
                    let c = cs[ci];
                    if !c.supports(w) {
                        continue; // an empty cell: "-"
                    }
                    let started = Instant::now();
                    let result = launcher.run(c, w, procs);
                    let wall_secs = started.elapsed().as_secs_f64();
                    for (k, r) in w.rows().enumerate() {
                        let got = match &result {
                            Ok(m) if m.skip.is_some() => {
                                Got::Skip(m.skip.clone().unwrap_or_default())
                            }
                            Ok(m) if k == 0 => m
                                .value
                                .map_or_else(|| Got::Failed("no figure".into()), Got::Value),
                            Ok(m) => match m.also.get(r.name) {
                                Some(&v) => Got::Value(v),
                                None => continue, // not measured by this contender: "-"
                            },
                            Err(e) => Got::Failed(e.clone()),
                        };
                        if k == 0 {
                            eprintln!(
                                "  {:<28} {procs} P round {}/{rounds} {:<15} {} ({wall_secs:.2} s)",
                                w.name(),
                                round + 1,
                                c.name(),
                                match &got {
                                    Got::Value(v) => format!("{} {}", fmt_num(*v), r.unit),
                                    Got::Skip(why) => format!("skip: {why}"),
                                    Got::Failed(why) => format!("FAILED: {why}"),
                                }
                            );
                        }
                        let note = result.as_ref().ok().and_then(|m| m.note.clone());
                        rows[first + k].cells[ci].runs.push(Run {
                            round,
                            position,
                            got,
                            note,
                            wall_secs,
                        });
                    }
                }
            }
            workload_secs.push((
                format!("{} ({procs} P)", w.name()),
                t.elapsed().as_secs_f64(),
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    for r in &mut rows {
        r.finish(rounds);
    }
    let results = Results {
        tool: "goro-bench compare",
        command: command_line(),
        ratio_convention: "ratio_to_goro > 1 means goro is ahead: contender/goro for \
                           lower-is-better figures, goro/contender for throughputs",
        machine,
        go: launcher
            .go
            .as_ref()
            .map_or_else(|e| format!("Go: {e}"), |g| g.version.clone()),
        rounds,
        contenders: names,
        rows,
        workload_secs,
        total_secs: t0.elapsed().as_secs_f64(),
        load_average_end: procfs::load_average(),
    };
    let md = results.markdown();
    print!("{md}");
    eprintln!("\ncompare: time per workload (all contenders and rounds):");
    for (w, s) in &results.workload_secs {
        eprintln!("  {w:<40} {s:>7.1} s");
    }
    eprintln!("compare: total {:.0} s", results.total_secs);
    let mut code = 0;
    let mut write = |path: &Option<PathBuf>, text: String| {
        if let Some(p) = path {
            match std::fs::write(p, text) {
                Ok(()) => eprintln!("compare: wrote {}", p.display()),
                Err(e) => {
                    eprintln!("compare: cannot write {}: {e}", p.display());
                    code = 1;
                }
            }
        }
    };
    write(&a.markdown, md);
    write(&a.plot, report::svg(&results));
    let json = serde_json::to_string_pretty(&results).expect("the results serialise");
    write(&a.json, json + "\n");
    Ok(code)
}
