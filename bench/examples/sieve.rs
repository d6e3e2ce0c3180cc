//! The concurrent prime sieve (`goro_bench::workloads::tasks::sieve`): a generator
//! coroutine feeds 2, 3, 4, ... into a pipeline of filter coroutines, one per prime.
//!
//! ```text
//! cargo run --release -p goro-bench --example sieve [-- PRIMES]
//! ```
//!
//! Prints the last prime found and the time per channel transfer; the primes are
//! checked against a sequential sieve (exit status 1 if anything is off).

use std::time::Duration;

use goro_bench::harness::run_bounded;
use goro_bench::workloads::tasks::{sieve, transfers, Coroutines};
use goro_bench::workloads::SIEVE_PRIMES;

fn main() {
    let n = match std::env::args().nth(1).map(|s| s.parse()) {
        None => SIEVE_PRIMES,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("usage: sieve [PRIMES]");
            std::process::exit(64)
        }
    };
    println!(
        "concurrent prime sieve: first {n} primes, {} P(s)",
        goro::maxprocs()
    );
    match run_bounded(Duration::from_secs(120), "sieve", move || {
        sieve::<Coroutines>(n)
    }) {
        Ok(run) => {
            let transfers = transfers(&run.primes);
            println!(
                "prime #{n} = {} (checked); {:.1} ms, {transfers} channel transfers, {:.1} ns \
                 per transfer",
                run.primes.last().expect("n > 0"),
                run.elapsed.as_secs_f64() * 1e3,
                run.elapsed.as_secs_f64() * 1e9 / transfers as f64,
            )
        }
        Err(msg) => {
            eprintln!("WRONG: {msg}");
            std::process::exit(1)
        }
    }
}
