//! `dump_100k`, goro's only: the time `goro::debug::dump()` takes with 100 000
//! coroutines parked in three places (a channel receive, a sleep, a mutex), stacks
//! walked and grouped; its companion, the lines the dump has (a screen's worth, for a
//! few kinds of coroutine). Go's goroutine profile has no figure beside it here.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver};

use super::Measurement;

const PARKED: usize = 100_000;

#[inline(never)]
fn receiving(rx: Receiver<()>) {
    let _ = rx.recv();
    black_box(());
}

#[inline(never)]
fn sleeping(until: Instant) {
    goro::time::sleep_until(until);
    black_box(());
}

#[inline(never)]
fn locking(m: Arc<goro::sync::Mutex<()>>) {
    drop(m.lock());
    black_box(());
}

pub fn run(name: &str) -> Option<Measurement> {
    (name == "dump_100k").then(|| {
        let (tx, rx) = channel::<()>(0);
        let m = Arc::new(goro::sync::Mutex::new(()));
        let held = m.lock();
        let until = Instant::now() + Duration::from_secs(60);
        let mut hs = Vec::with_capacity(PARKED);
        for i in 0..PARKED {
            hs.push(match i % 100 {
                0 => goro::go!(move || sleeping(until)),
                1 => {
                    let m = m.clone();
                    goro::go!(move || locking(m))
                }
                _ => {
                    let rx = rx.clone();
                    goro::go!(move || receiving(rx))
                }
            });
        }
        // Every one parked (bounded): then time the dump.
        let start = Instant::now();
        while goro::debug::stats().waiting < PARKED && start.elapsed() < Duration::from_secs(60) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let t = Instant::now();
        let dump = goro::debug::dump();
        let took = t.elapsed();
        assert!(
            dump.contains("receiving"),
            "the dump names the receivers:\n{dump}"
        );
        let lines = dump.lines().count();
        drop(tx);
        drop(held);
        // The sleepers end at `until`; they are left to it (the worker exits first).
        drop(hs);
        Measurement::value(took.as_secs_f64() * 1e3).with("dump_100k/lines", lines as f64)
    })
}
