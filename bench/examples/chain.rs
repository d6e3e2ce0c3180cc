//! A daisy chain of coroutines (`goro_bench::workloads::tasks::Chain`): each one
//! receives a number from the channel on its left and sends it, plus one, to the
//! channel on its right; tokens go in at the head one at a time.
//!
//! ```text
//! cargo run --release -p goro-bench --example chain [-- HOPS TOKENS]
//! ```
//!
//! Prints the time per hop for unbuffered links (Go's `Chain`) and links of capacity 1
//! (`ChainBuf`), every token checked (exit status 1 if one is wrong).

use std::time::{Duration, Instant};

use goro_bench::harness::run_bounded;
use goro_bench::workloads::tasks::{now, Chain, Coroutines};
use goro_bench::workloads::CHAIN_HOPS;

fn arg(n: usize, default: u64) -> u64 {
    match std::env::args().nth(n) {
        None => default,
        Some(s) => s.parse().unwrap_or_else(|_| {
            eprintln!("usage: chain [HOPS [TOKENS]] (got {s:?})");
            std::process::exit(64)
        }),
    }
}

fn main() {
    let hops = arg(1, CHAIN_HOPS as u64) as usize;
    let tokens = arg(2, 200);
    println!(
        "chain of {hops} coroutines, {tokens} tokens, {} P(s)",
        goro::maxprocs()
    );
    for (name, cap) in [("Chain (unbuffered)", 0), ("ChainBuf (capacity 1)", 1)] {
        let result = run_bounded(Duration::from_secs(60), name, move || {
            now(async {
                let mut chain = Chain::<Coroutines>::new(hops, cap).await?;
                // One token to warm up (first touches of the stacks), then the timed run.
                chain.pass(1).await?;
                let start = Instant::now();
                chain.pass(tokens).await?;
                let elapsed = start.elapsed();
                chain.shutdown().await.map(|()| elapsed)
            })
        });
        match result {
            Ok(e) => println!(
                "{name}: {tokens} tokens x {hops} hops in {:.1} ms: {:.1} ns per hop; every \
                 token checked",
                e.as_secs_f64() * 1e3,
                e.as_secs_f64() * 1e9 / (tokens as f64 * hops as f64)
            ),
            Err(msg) => {
                eprintln!("{name}: WRONG: {msg}");
                std::process::exit(1)
            }
        }
    }
}
