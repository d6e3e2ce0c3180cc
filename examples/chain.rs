//! A daisy chain of coroutines: each one receives a number from the channel on its
//! left and sends it, plus one, to the channel on its right. A driver drops tokens in
//! at the head, one at a time, and takes them out at the tail.
//!
//! This is the workload of the `Chain` and `ChainBuf` benchmarks that Go used to tune
//! its scheduler for GOMAXPROCS > 1 (golang.org/s/go15gomaxprocs): unbuffered links
//! (`Chain`) or links of capacity 1 (`ChainBuf`). Every hop is a hand-off between two
//! coroutines, so the time per hop is the price of a channel transfer plus a switch.
//!
//! ```text
//! cargo run --release --example chain [-- HOPS TOKENS]
//! ```
//!
//! Prints the time per hop for both kinds of link and checks that every token comes
//! out of the tail incremented once per hop (exit status 1 if not).
//!
//! `bench/benches/chan.rs` and `bench/src/bin/chan_compare.rs` include this file as a
//! module and time [`Chain`] itself.

use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

#[path = "support/bounded.rs"]
mod support;
use support::bounded;

/// Links in the chain of Go's benchmark.
pub const HOPS: usize = 10_000;

/// A chain of `hops` coroutines, built once and used for as many tokens as wanted.
pub struct Chain {
    driver: ChainDriver,
    links: Vec<goro::JoinHandle<()>>,
}

/// The two ends of a chain: what a driver coroutine needs (cheap to clone).
#[derive(Clone)]
pub struct ChainDriver {
    head: Sender<u64>,
    tail: Receiver<u64>,
    hops: usize,
}

impl Chain {
    /// Spawns `hops` link coroutines joined by channels of capacity `cap` (0: Go's
    /// unbuffered channels). A link lives until the channel on its left closes.
    pub fn new(hops: usize, cap: usize) -> Chain {
        let (head, mut left) = channel::<u64>(cap);
        let mut links = Vec::with_capacity(hops);
        for _ in 0..hops {
            let (right_tx, right_rx) = channel::<u64>(cap);
            let input = std::mem::replace(&mut left, right_rx);
            links.push(goro::go!(move || {
                for v in input.iter() {
                    // The right side closes only after this link is gone; a failure
                    // here would be a lost value.
                    right_tx
                        .send(v + 1)
                        .expect("chain link: the right channel closed under a live link");
                }
            }));
        }
        Chain {
            driver: ChainDriver {
                head,
                tail: left,
                hops,
            },
            links,
        }
    }

    /// The ends, for a driver coroutine.
    pub fn driver(&self) -> ChainDriver {
        self.driver.clone()
    }

    /// Closes the head and waits for every link to end (each one ends when its left
    /// channel closes, which closes the next). Call it from a coroutine (from a thread
    /// it works too, blocking the thread). Fails if a link panicked.
    pub fn shutdown(self) -> Result<(), String> {
        self.driver.head.close();
        let n = self.links.len();
        for (i, h) in self.links.into_iter().enumerate() {
            h.join()
                .map_err(|_| format!("chain link {i} of {n} panicked"))?;
        }
        Ok(())
    }
}

impl ChainDriver {
    /// Links in the chain.
    pub fn hops(&self) -> usize {
        self.hops
    }

    /// Passes `tokens` tokens through the chain, one at a time: sends one at the head,
    /// waits for it at the tail, checks that it was incremented once per hop.
    pub fn pass(&self, tokens: u64) -> Result<(), String> {
        let hops = self.hops as u64;
        for i in 0..tokens {
            self.head
                .send(i)
                .map_err(|_| "chain: the head closed".to_string())?;
            let v = self
                .tail
                .recv()
                .map_err(|_| "chain: the tail closed".to_string())?;
            if v != i + hops {
                return Err(format!(
                    "chain: token {i} came out as {v}, expected {}",
                    i + hops
                ));
            }
        }
        Ok(())
    }
}

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
    let hops = arg(1, HOPS as u64) as usize;
    let tokens = arg(2, 200);
    println!(
        "chain of {hops} coroutines, {tokens} tokens, {} P(s)",
        goro::maxprocs()
    );
    for (name, cap) in [("Chain (unbuffered)", 0), ("ChainBuf (capacity 1)", 1)] {
        let built = Instant::now();
        let chain = Chain::new(hops, cap);
        let build_time = built.elapsed();
        let d = chain.driver();
        let result = bounded(Duration::from_secs(60), name, move || {
            // One token to warm up (first touches of the stacks), then the timed run.
            d.pass(1)?;
            let start = Instant::now();
            d.pass(tokens)?;
            Ok::<_, String>(start.elapsed())
        });
        let elapsed = match result {
            Ok(e) => e,
            Err(msg) => {
                eprintln!("{name}: WRONG: {msg}");
                std::process::exit(1)
            }
        };
        if let Err(msg) = bounded(Duration::from_secs(60), "shutdown", move || {
            chain.shutdown()
        }) {
            eprintln!("{name}: {msg}");
            std::process::exit(1)
        }
        let per_hop = elapsed.as_secs_f64() * 1e9 / (tokens as f64 * hops as f64);
        println!(
            "{name}: {tokens} tokens x {hops} hops in {:.1} ms: {per_hop:.1} ns per hop \
             (built in {:.1} ms); every token checked",
            elapsed.as_secs_f64() * 1e3,
            build_time.as_secs_f64() * 1e3,
        );
    }
}
