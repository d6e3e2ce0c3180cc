//! Power series over channels, after McIlroy's "Squinting at Power Series" (Go's
//! `test/chan/powser1.go`): every series and every operation on series is a coroutine
//! that hands out coefficients on request over two unbuffered channels. Prints ten
//! coefficients of each series, checked, and the time per coefficient fetched.
//!
//! ```text
//! cargo run --release --example powser
//! ```
//!
//! Exit status 1 if a coefficient is wrong or the run takes over a minute. `compare`
//! times the same code (`goro_bench::workloads::powser` is `series.rs`).

mod series;

use std::time::Duration;

fn main() {
    println!("power series over channels, {} P(s)", goro::maxprocs());
    let run = goro::go!(series::run);
    let run = match run.join_timeout(Duration::from_secs(60)) {
        Ok(Ok(Ok(run))) => run,
        Ok(Ok(Err(wrong))) => fail(&wrong),
        Ok(Err(panic)) => fail(goro::panic_message(&*panic)),
        Err(_) => fail("still running after 60 s"),
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

fn fail(why: &str) -> ! {
    eprintln!("WRONG: {why}");
    std::process::exit(1)
}
