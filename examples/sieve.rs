//! The concurrent prime sieve: a generator coroutine sends 2, 3, 4, ... down a
//! pipeline of filter coroutines, one per prime found so far; each filter drops the
//! multiples of its prime and passes the rest on. Whatever comes out at the end is the
//! next prime, and gets a filter of its own. All channels are unbuffered.
//!
//! This is the classic Go program (Go's `test/chan/sieve1.go`, and the `Sieve` of the
//! GOMAXPROCS 1.5 scheduler benchmarks, golang.org/s/go15gomaxprocs), here computing
//! the first 5 000 primes.
//!
//! ```text
//! cargo run --release --example sieve [-- PRIMES]
//! ```
//!
//! Prints the last prime found and the time, per run and per channel transfer, and
//! checks the primes against a sequential sieve and that no number was lost on the
//! way (exit status 1 if anything is off).
//!
//! `bench/benches/chan.rs` and `bench/src/bin/chan_compare.rs` include this file as a
//! module and time [`run`] itself.

use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

#[path = "support/bounded.rs"]
mod support;
use support::bounded;

/// Primes of one run.
pub const PRIMES: usize = 5_000;
/// The 5 000th prime.
pub const PRIME_5000: u32 = 48_611;

/// The result of one run.
pub struct SieveRun {
    /// The primes, in order.
    pub primes: Vec<u32>,
    /// From the start of the generator to the arrival of the last prime (spawning
    /// included, tear-down not).
    pub elapsed: Duration,
    /// Channel transfers needed to find these primes (see [`transfers`]).
    pub transfers: u64,
}

/// Sends 2, 3, 4, ... on `out` until `quit` closes; returns how many it sent.
fn generate(out: Sender<u32>, quit: Receiver<()>) -> u64 {
    let mut n = 2u32;
    loop {
        let stop = goro::select! {
            send(out, n) -> r => r.is_err(),
            recv(quit) -> _ => true,
        };
        if stop {
            return u64::from(n - 2);
        }
        n += 1;
    }
}

/// Passes on the numbers from `input` that `p` does not divide, until `input` closes;
/// returns how many it dropped.
fn filter(p: u32, input: Receiver<u32>, out: Sender<u32>) -> u64 {
    let mut dropped = 0;
    for v in input.iter() {
        if v % p == 0 {
            dropped += 1;
        } else {
            // The next stage outlives this one: a failure would lose `v`.
            out.send(v)
                .expect("sieve: the next filter went away under a live one");
        }
    }
    dropped
}

/// Runs the sieve until it has found `n` primes, then tears it down and checks it.
///
/// Call it from a coroutine (the driver). The clock runs from the start of the
/// generator to the arrival of the `n`th prime; the tear-down (closing the generator's
/// quit channel, draining the numbers still in flight, joining every coroutine) and
/// the checks are not timed.
///
/// Fails if the primes differ from a sequential sieve's, or if numbers were lost or
/// duplicated: every number the generator sent must be either dropped by exactly one
/// filter or received by the driver.
pub fn run(n: usize) -> Result<SieveRun, String> {
    assert!(n > 0);
    let (quit_tx, quit_rx) = channel::<()>(0);
    let (head, mut rx) = channel::<u32>(0);
    let start = Instant::now();
    let generator = goro::go!(move || generate(head, quit_rx));
    let mut filters = Vec::with_capacity(n);
    let mut primes = Vec::with_capacity(n);
    loop {
        let p = rx
            .recv()
            .map_err(|_| "sieve: the pipeline closed early".to_string())?;
        primes.push(p);
        if primes.len() == n {
            break;
        }
        let (tx, next) = channel::<u32>(0);
        let input = std::mem::replace(&mut rx, next);
        filters.push(goro::go!(move || filter(p, input, tx)));
    }
    let elapsed = start.elapsed();

    // Tear-down: the generator stops, its channel closes, and so does every filter's
    // in turn; the driver drains what was still in flight.
    drop(quit_tx);
    let drained = rx.iter().count() as u64;
    let sent = generator
        .join()
        .map_err(|_| "sieve: the generator panicked".to_string())?;
    let mut dropped = 0;
    for (i, f) in filters.into_iter().enumerate() {
        dropped += f
            .join()
            .map_err(|_| format!("sieve: filter {i} panicked"))?;
    }
    let received = primes.len() as u64 + drained;
    if sent != dropped + received {
        return Err(format!(
            "sieve: the generator sent {sent} numbers but the filters dropped {dropped} and \
             the driver received {received}: numbers lost or duplicated"
        ));
    }
    let want = sequential_primes(n);
    if primes != want {
        let i = primes
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "sieve: prime #{} is {}, expected {}",
            i + 1,
            primes[i],
            want[i]
        ));
    }
    Ok(SieveRun {
        transfers: transfers(&primes),
        primes,
        elapsed,
    })
}

/// The first `n` primes, by a sequential sieve of Eratosthenes.
pub fn sequential_primes(n: usize) -> Vec<u32> {
    let mut limit = 64usize;
    loop {
        let spf = smallest_factors(limit);
        let primes: Vec<u32> = (2..=limit)
            .filter(|&m| spf[m] as usize == m)
            .map(|m| m as u32)
            .take(n)
            .collect();
        if primes.len() == n {
            return primes;
        }
        limit *= 2;
    }
}

/// `spf[m]` = the smallest prime factor of m, for 2 <= m <= limit.
fn smallest_factors(limit: usize) -> Vec<u32> {
    let mut spf = vec![0u32; limit + 1];
    for m in 2..=limit {
        if spf[m] == 0 {
            for k in (m..=limit).step_by(m) {
                if spf[k] == 0 {
                    spf[k] = m as u32;
                }
            }
        }
    }
    spf
}

/// Channel transfers the sieve needs to find `primes` (the first primes, in order):
/// number m (2 <= m <= the last prime) is received by the filters of the primes below
/// its smallest prime factor p and by p's filter (which drops it), or, if m is the
/// k-th prime, by the k - 1 filters and then the driver. Either way m travels over
/// π(spf(m)) channels. Numbers past the last prime that were in flight when it
/// arrived are not counted.
pub fn transfers(primes: &[u32]) -> u64 {
    let Some(&last) = primes.last() else {
        return 0;
    };
    let limit = last as usize;
    let spf = smallest_factors(limit);
    // index[p] = π(p) for the primes p.
    let mut index = vec![0u64; limit + 1];
    for (k, &p) in primes.iter().enumerate() {
        index[p as usize] = k as u64 + 1;
    }
    (2..=limit).map(|m| index[spf[m] as usize]).sum()
}

fn main() {
    let n = match std::env::args().nth(1) {
        None => PRIMES,
        Some(s) => match s.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: sieve [PRIMES] (got {s:?})");
                std::process::exit(64)
            }
        },
    };
    println!(
        "concurrent prime sieve: first {n} primes, {} P(s)",
        goro::maxprocs()
    );
    let run = match bounded(Duration::from_secs(120), "sieve", move || run(n)) {
        Ok(r) => r,
        Err(msg) => {
            eprintln!("WRONG: {msg}");
            std::process::exit(1)
        }
    };
    let last = *run.primes.last().expect("n > 0");
    if n == PRIMES && last != PRIME_5000 {
        eprintln!("WRONG: the 5000th prime came out as {last}, expected {PRIME_5000}");
        std::process::exit(1);
    }
    println!(
        "prime #{n} = {last} (checked); {:.1} ms, {} channel transfers, {:.1} ns per transfer",
        run.elapsed.as_secs_f64() * 1e3,
        run.transfers,
        run.elapsed.as_secs_f64() * 1e9 / run.transfers as f64,
    );
}
