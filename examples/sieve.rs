//! The concurrent prime sieve (Go's `test/chan/sieve1.go`): a coroutine feeds 2, 3,
//! 4, ... into a pipeline of filters, one coroutine per prime found so far; each
//! filter passes on what its prime does not divide, so the pipeline's end yields the
//! next prime.
//!
//! ```text
//! cargo run --release --example sieve [-- PRIMES]
//! ```
//!
//! Prints the time to find the first 5 000 primes (checked against the 5 000th,
//! 48 611). Exit status 1 if a number is wrong or the run takes over two minutes.

use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

/// Sends 2, 3, 4, ... until the pipeline is torn down.
fn generate(out: Sender<u32>) {
    (2..).try_for_each(|i| out.send(i)).ok();
}

/// Passes on the numbers `prime` does not divide.
fn filter(input: Receiver<u32>, out: Sender<u32>, prime: u32) {
    for i in input.iter().filter(|i| i % prime != 0) {
        if out.send(i).is_err() {
            return;
        }
    }
}

/// The first `n` primes, from a pipeline of `n` coroutines.
fn primes(n: usize) -> Vec<u32> {
    let (tx, mut rx) = channel(0);
    let mut coroutines = vec![goro::go!(move || generate(tx))];
    let mut primes = Vec::with_capacity(n);
    while primes.len() < n {
        let prime = rx.recv().expect("the pipeline ended early");
        primes.push(prime);
        let (tx, next) = channel(0);
        let input = std::mem::replace(&mut rx, next);
        coroutines.push(goro::go!(move || filter(input, tx, prime)));
    }
    // Closing the last receiver ends the last filter's send, and so on up the chain.
    drop(rx);
    for c in coroutines {
        c.join().expect("a sieve coroutine panicked");
    }
    primes
}

fn main() {
    let n: usize = match std::env::args().nth(1) {
        None => 5_000,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: sieve [PRIMES] (got {s:?})");
            std::process::exit(64)
        }),
    };
    let run = goro::go!(move || {
        let start = Instant::now();
        let primes = primes(n);
        (start.elapsed(), primes)
    });
    let (elapsed, primes) = match run.join_timeout(Duration::from_secs(120)) {
        Ok(Ok(done)) => done,
        Ok(Err(panic)) => fail(goro::panic_message(&*panic)),
        Err(_) => fail("still running after 120 s"),
    };
    // Checked by trial division against the primes before each one.
    let composite = |i: usize| {
        primes[..i]
            .iter()
            .take_while(|&&q| q * q <= primes[i])
            .any(|&q| primes[i] % q == 0)
    };
    if let Some(i) = (1..primes.len()).find(|&i| primes[i] <= primes[i - 1] || composite(i)) {
        fail(&format!("{} came after {}", primes[i], primes[i - 1]));
    }
    if n == 5_000 && primes.last() != Some(&48_611) {
        fail(&format!("prime #5000 is 48611, got {:?}", primes.last()));
    }
    println!(
        "concurrent prime sieve, {} P(s): prime #{n} = {} (checked) in {:.1} ms",
        goro::maxprocs(),
        primes.last().unwrap_or(&0),
        elapsed.as_secs_f64() * 1e3
    );
}

fn fail(why: &str) -> ! {
    eprintln!("WRONG: {why}");
    std::process::exit(1)
}
