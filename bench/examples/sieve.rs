//! The concurrent prime sieve (`goro_bench::workloads::tasks::sieve`): a generator
//! coroutine feeds 2, 3, 4, ... into a pipeline of filter coroutines, one per prime.
//!
//! ```text
//! cargo run --release -p goro-bench --example sieve
//! ```
//!
//! Prints the time to find the first 5 000 primes, checked (exit status 1 if anything
//! is off).

use std::time::Duration;

use goro_bench::harness::run_bounded;
use goro_bench::workloads::tasks::{now, sieve, Coroutines};
use goro_bench::workloads::{SIEVE_LAST_PRIME, SIEVE_PRIMES};

fn main() {
    let p = goro::maxprocs();
    match run_bounded(Duration::from_secs(120), "sieve", || {
        now(sieve::<Coroutines>())
    }) {
        Ok(t) => println!(
            "concurrent prime sieve, {p} P(s): prime #{SIEVE_PRIMES} = {SIEVE_LAST_PRIME} \
             (checked) in {:.1} ms",
            t.as_secs_f64() * 1e3
        ),
        Err(msg) => {
            eprintln!("WRONG: {msg}");
            std::process::exit(1)
        }
    }
}
