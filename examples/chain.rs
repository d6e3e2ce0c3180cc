//! A daisy chain of coroutines (Go's `BenchmarkChain`, after Rob Pike's whispers): each
//! coroutine receives a number from the channel on its left and sends it, plus one,
//! to the channel on its right; tokens go in at the head one at a time.
//!
//! ```text
//! cargo run --release --example chain [-- HOPS TOKENS]
//! ```
//!
//! Prints the time per hop for unbuffered links (Go's `Chain`) and links of capacity 1
//! (`ChainBuf`), every token checked. Exit status 1 if a token is wrong or a run takes
//! over a minute.

use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

/// `hops` coroutines linked by channels of capacity `cap`: the head's sender, the
/// tail's receiver and the coroutines.
fn build(hops: usize, cap: usize) -> (Sender<u64>, Receiver<u64>, Vec<goro::JoinHandle<()>>) {
    let (head, mut rx) = channel::<u64>(cap);
    let links = (0..hops)
        .map(|_| {
            let (tx, next) = channel(cap);
            let left = std::mem::replace(&mut rx, next);
            goro::go!(move || left.iter().try_for_each(|v| tx.send(v + 1)).unwrap_or(()))
        })
        .collect();
    (head, rx, links)
}

/// Sends `tokens` numbers through the chain, one at a time; each must come out `hops`
/// larger.
fn pass(head: &Sender<u64>, tail: &Receiver<u64>, hops: usize, tokens: u64) -> Result<(), String> {
    for t in 0..tokens {
        head.send(t).map_err(|_| "the chain closed early")?;
        let out = tail.recv().map_err(|_| "the chain closed early")?;
        if out != t + hops as u64 {
            return Err(format!(
                "token {t} came out as {out}, not {}",
                t + hops as u64
            ));
        }
    }
    Ok(())
}

fn run(hops: usize, cap: usize, tokens: u64) -> Result<Duration, String> {
    let (head, tail, links) = build(hops, cap);
    // One token to warm up (first touches of the stacks), then the timed run.
    pass(&head, &tail, hops, 1)?;
    let start = Instant::now();
    pass(&head, &tail, hops, tokens)?;
    let elapsed = start.elapsed();
    // Closing the head ends the first link's loop, which drops its sender, and so on.
    drop(head);
    for link in links {
        link.join().map_err(|_| "a link panicked")?;
    }
    Ok(elapsed)
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
    let hops = arg(1, 10_000) as usize;
    let tokens = arg(2, 200);
    println!(
        "chain of {hops} coroutines, {tokens} tokens, {} P(s)",
        goro::maxprocs()
    );
    for (name, cap) in [("Chain (unbuffered)", 0), ("ChainBuf (capacity 1)", 1)] {
        let result = goro::go!(move || run(hops, cap, tokens))
            .join_timeout(Duration::from_secs(60))
            .map_err(|_| "still running after 60 s".to_string())
            .and_then(|r| r.map_err(|p| goro::panic_message(&*p).to_string()))
            .and_then(|r| r);
        match result {
            Ok(e) => println!(
                "{name}: {tokens} tokens x {hops} hops in {:.1} ms: {:.1} ns per hop; every \
                 token checked",
                e.as_secs_f64() * 1e3,
                e.as_secs_f64() * 1e9 / (tokens as f64 * hops as f64)
            ),
            Err(why) => {
                eprintln!("{name}: WRONG: {why}");
                std::process::exit(1)
            }
        }
    }
}
