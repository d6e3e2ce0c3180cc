//! `fairness`, goro's side (Go's is `bench/go/fairness.go`): Go's `TestPingPongHog`
//! shape at one P — a "hog" pair of coroutines doing 10⁶ units of work per hand-off
//! and a "light" pair doing 10³ share the P for 100 ms — and the figure is hog / light,
//! the units each pair got done (1 when the slice is shared evenly; Go's test fails
//! past 20). The companions, goro's only (Go has no plain threads to ready a goroutine
//! from): how long a coroutine readied from a plain thread waits, beside a pair that
//! ping-pongs 1 ms of work per hand-off, before it runs (median and max of 20).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::channel;

use super::Measurement;

// The pair itself is the test's (tests/rt_fairness.rs), one source for both.
#[path = "../../../tests/common/pingpong_hog.rs"]
mod pingpong_hog;
use pingpong_hog::pair;

/// Units of a hog hand-off and of a light one (Go's test).
const HOG_UNITS: u64 = 1_000_000;
const LIGHT_UNITS: u64 = 1_000;
/// How long the pairs share the P.
const RUN: Duration = Duration::from_millis(100);
/// Wake-ups timed beside the busy pair.
const WAKES: usize = 20;

pub fn run(name: &str) -> Option<Measurement> {
    (name == "fairness").then(|| {
        let ratio = hog_light();
        let mut waits = wakes_beside_a_pair();
        waits.sort_unstable();
        let ms = |p| super::quantile(&waits, p).as_secs_f64() * 1e3;
        Measurement::value(ratio)
            .with("fairness/wake_p50", ms(0.5))
            .with("fairness/wake_max", ms(1.0))
    })
}

fn hog_light() -> f64 {
    let (stop, done) = channel::<()>(0);
    let hog = Arc::new(AtomicU64::new(0));
    let light = Arc::new(AtomicU64::new(0));
    let mut hs = pair(HOG_UNITS, &hog, &done);
    hs.extend(pair(LIGHT_UNITS, &light, &done));
    std::thread::sleep(RUN);
    drop(stop);
    hs.into_iter()
        .for_each(|h| h.join().expect("a player panicked"));
    // Relaxed: the joins ordered the counts before these reads.
    hog.load(Ordering::Relaxed) as f64 / light.load(Ordering::Relaxed).max(1) as f64
}

fn wakes_beside_a_pair() -> Vec<Duration> {
    let (stop, done) = channel::<()>(0);
    let count = Arc::new(AtomicU64::new(0));
    let players = pair(
        pingpong_hog::units_per(Duration::from_millis(1)),
        &count,
        &done,
    );
    std::thread::sleep(Duration::from_millis(30));
    let waits = (0..WAKES)
        .map(|_| {
            let (tx, rx) = channel::<Instant>(0);
            let probe = goro::go!(move || rx.recv().expect("the probe's value").elapsed());
            std::thread::sleep(Duration::from_millis(15)); // the probe parks
            tx.send(Instant::now()).expect("wake the probe"); // from a plain thread
            probe.join().expect("the probe panicked")
        })
        .collect();
    drop(stop);
    players
        .into_iter()
        .for_each(|h| h.join().expect("a player panicked"));
    waits
}
