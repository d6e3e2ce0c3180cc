//! Go's `TestPingPongHog` pair (runtime/proc_test.go), shared by `tests/rt_fairness.rs`
//! and `compare`'s fairness row (`bench/src/workloads/fairness.rs` includes this file):
//! two coroutines pass a ball back and forth, each doing some work before it passes.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender};

/// One coroutine of a pair: waits for the ball, does `units` of work, passes it back
/// with a plain send (as Go's test does), until `done` closes. Adds the units it did to `count`.
pub fn player(
    units: u64,
    count: Arc<AtomicU64>,
    ball: Sender<()>,
    wait: Receiver<()>,
    done: Receiver<()>,
) {
    loop {
        goro::select! {
            recv(done) -> _ => return,
            recv(wait) -> _ => {
                let mut u = 0u64;
                for _ in 0..units {
                    u = black_box(u + 1);
                }
                // Relaxed: a count, read after the coroutines are joined.
                count.fetch_add(u, Ordering::Relaxed);
                if ball.send(()).is_err() {
                    return;
                }
            },
        }
    }
}

/// Starts a pair of [`player`]s and serves it the ball; returns their handles. The ball
/// travels on a one-slot channel: the partner waits in its `select!`, so a pass hands it
/// straight over, and the slot lets the last pass return after `done` closed (Go's test
/// leaves that goroutine blocked; ours are joined).
pub fn pair(units: u64, count: &Arc<AtomicU64>, done: &Receiver<()>) -> Vec<goro::JoinHandle<()>> {
    let (ball, wait) = channel::<()>(1);
    let hs = (0..2)
        .map(|_| {
            let (c, b, w, d) = (count.clone(), ball.clone(), wait.clone(), done.clone());
            goro::go!(move || player(units, c, b, w, d))
        })
        .collect();
    ball.send(()).expect("serve the pair");
    hs
}

/// How many units of [`player`]'s work take `d` here (the best of a few tries).
pub fn units_per(d: Duration) -> u64 {
    (0..5)
        .map(|_| {
            let t = Instant::now();
            let mut u = 0u64;
            while t.elapsed() < d {
                for _ in 0..1000 {
                    u = black_box(u + 1);
                }
            }
            u
        })
        .max()
        .unwrap_or(1)
}
