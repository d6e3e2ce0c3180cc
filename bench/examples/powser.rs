//! Power series over channels (`goro_bench::workloads::powser`): prints every series,
//! checked, and the time per coefficient fetched.

use std::time::Duration;

use goro_bench::harness::run_bounded;
use goro_bench::workloads::powser::run;

fn main() {
    println!("power series over channels, {} P(s)", goro::maxprocs());
    let run = match run_bounded(Duration::from_secs(60), "powser", run) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("WRONG: {msg}");
            std::process::exit(1)
        }
    };
    for (name, coefs) in &run.series {
        let shown: Vec<String> = coefs.iter().map(|r| r.to_string()).collect();
        println!("{name:>10}: {}", shown.join(" "));
    }
    println!(
        "all {} series checked; {:.2} ms, {} stream gets, {:.0} ns per get",
        run.series.len(),
        run.elapsed.as_secs_f64() * 1e3,
        run.gets,
        run.elapsed.as_secs_f64() * 1e9 / run.gets as f64,
    );
}
