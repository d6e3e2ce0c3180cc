//! `compare` (see `--help`), every run a fresh child process. `src/workloads/` is the
//! contract, `src/contenders/` the implementations, `bench/go/` Go's side.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Args, Parser, Subcommand, ValueEnum};
use goro_bench::contenders::{self, Contender};
use goro_bench::harness::orchestrate::{Launcher, Settings};
use goro_bench::harness::report::{self, fmt_num, Got, Results, RowResult, Run};
use goro_bench::harness::{go, procfs};
use goro_bench::workloads::{self, Suite, Workload, README_ROWS};

/// goro next to may, tokio, plain threads and Go
#[derive(Parser)]
#[command(name = "compare", args_conflicts_with_subcommands = true)]
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
    /// Suites to run: chan, sync, time, proc, echo, blocking, async, or all.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    suite: Vec<String>,
    /// Only these rows (a companion row selects its workload).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Only the full comparison's rows (the README's table and its section of docs/benchmarks.md)
    #[arg(long)]
    readme: bool,
    /// Contenders, in column order (default: all but `example`, and `base` only with --baseline)
    #[arg(long, value_delimiter = ',')]
    contenders: Vec<String>,
    /// Runs per contender and row.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: u16,
    #[command(flatten)]
    children: Settings,
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
        None => measure(&cli.run).unwrap_or_else(|e| usage(&e)),
    };
    let _ = std::io::stdout().flush();
    // Exit at once: a worker may leave coroutines parked (the sieve's filters, as in Go's program).
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

/// The contender's echo server, until the EOF of a piped stdin (the harness's) or a signal.
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
    if let Some(name) = only.iter().find(|n| Workload::find(n).is_none()) {
        return Err(format!("no workload or row {name:?}"));
    }
    // --only (or --readme) overrides --suite.
    let mut suites = Vec::new();
    for s in a.suite.iter().filter(|_| only.is_empty()) {
        match s.as_str() {
            "all" => suites.extend(Suite::value_variants()),
            _ => suites.push(Suite::from_str(s, true).map_err(|_| format!("no suite {s:?}"))?),
        }
    }
    let picked = |w: &Workload| only.iter().any(|n| w.rows().any(|r| r.name == *n));
    Ok((workloads::ALL.iter())
        .filter(|w| suites.contains(&w.suite) || picked(w))
        .collect())
}

fn command_line() -> String {
    let quote = |a: String| match a.contains([' ', '*']) {
        true => format!("'{a}'"),
        false => a,
    };
    let args: Vec<String> = std::env::args().skip(1).map(quote).collect();
    let args = args.join(" ");
    format!("cargo run --release -p goro-bench --bin compare -- {args}")
}

fn measure(a: &RunArgs) -> Result<i32, String> {
    if cfg!(debug_assertions) {
        eprintln!("compare: WARNING: a debug build; run it with --release");
    }
    let selected = selection(a)?;
    let cs: Vec<&'static dyn Contender> = if a.contenders.is_empty() {
        let baseline = a.children.baseline.is_some();
        (contenders::ALL.iter().copied())
            .filter(|c| c.name() != "example" && (c.name() != "base" || baseline))
            .collect()
    } else {
        (a.contenders.iter())
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
        settings: a.children.clone(),
    };
    let rounds = usize::from(a.rounds);
    let (mut rows, mut workload_secs) = (Vec::new(), Vec::new());
    for w in &selected {
        for &procs in w.procs {
            let t = Instant::now();
            rows.extend(measure_rows(&launcher, w, procs, &cs, rounds));
            let label = format!("{} ({procs} P)", w.name());
            workload_secs.push((label, t.elapsed().as_secs_f64()));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let results = Results {
        tool: "goro-bench compare",
        command: command_line(),
        ratio_convention: "ratio_to_goro > 1 means goro is ahead: contender/goro for \
                           lower-is-better figures, goro/contender for throughputs",
        machine,
        go: (launcher.go.as_ref()).map_or_else(|e| format!("Go: {e}"), |g| g.version.clone()),
        rounds,
        contenders: cs.iter().map(|c| c.name()).collect(),
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
    let json = serde_json::to_string_pretty(&results).expect("the results serialise") + "\n";
    let mut code = 0;
    for (path, text) in [
        (&a.markdown, md),
        (&a.plot, report::svg(&results)),
        (&a.json, json),
    ] {
        let Some(p) = path else { continue };
        match std::fs::write(p, text) {
            Ok(()) => eprintln!("compare: wrote {}", p.display()),
            Err(e) => {
                eprintln!("compare: cannot write {}: {e}", p.display());
                code = 1;
            }
        }
    }
    Ok(code)
}

/// The rows of `w` at `procs`: `rounds` runs of every contender that supports it (the
/// others' cells stay empty, "-"), in an order that rotates every round.
fn measure_rows(
    launcher: &Launcher,
    w: &Workload,
    procs: usize,
    cs: &[&dyn Contender],
    rounds: usize,
) -> Vec<RowResult> {
    let names: Vec<&'static str> = cs.iter().map(|c| c.name()).collect();
    let mut rows: Vec<RowResult> = (w.rows())
        .map(|r| RowResult::new(r, w.suite, procs, &names))
        .collect();
    for round in 0..rounds {
        for position in 0..cs.len() {
            let ci = (round + position) % cs.len();
            if !cs[ci].supports(w) {
                continue;
            }
            let started = Instant::now();
            let result = launcher.run(cs[ci], w, procs);
            let wall_secs = started.elapsed().as_secs_f64();
            for (k, row) in rows.iter_mut().enumerate() {
                let Some(got) = Got::of(&result, k, row.name) else {
                    continue; // a companion row this contender does not measure: "-"
                };
                if k == 0 {
                    let figure = match &got {
                        Got::Value(v) => format!("{} {}", fmt_num(*v), row.unit),
                        Got::Skip(why) => format!("skip: {why}"),
                        Got::Failed(why) => format!("FAILED: {why}"),
                    };
                    eprintln!(
                        "  {:<28} {procs} P round {}/{rounds} {:<15} {figure} ({wall_secs:.2} s)",
                        w.name(),
                        round + 1,
                        names[ci]
                    );
                }
                let note = result.as_ref().ok().and_then(|m| m.note.clone());
                let run = Run {
                    round,
                    position,
                    got,
                    note,
                    wall_secs,
                };
                row.cells[ci].runs.push(run);
            }
        }
    }
    for r in &mut rows {
        r.finish(rounds);
    }
    rows
}
