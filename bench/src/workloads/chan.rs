//! goro's side of the `chan` suite rows only goro runs: `Powser`, `WakeupParallel*` and
//! `WakeupLatency` (chain, sieve and ping-pong are [`super::tasks`]'s). `benches/chan.rs`
//! times the same functions.

use std::time::{Duration, Instant};

use goro::chan::{channel, TrySendError};

use super::{sized, spin, target, Measurement, LATENCY_SAMPLES};

/// goro's run of these rows, on the calling coroutine.
pub fn run(name: &str) -> Option<Measurement> {
    let target = target();
    let m = match name {
        "Powser" => {
            super::powser::run().unwrap_or_else(|e| panic!("{e}")); // warm-up
            let (mut total, mut gets) = (Duration::ZERO, 0u64);
            while total < target {
                let r = super::powser::run().unwrap_or_else(|e| panic!("{e}"));
                total += r.elapsed;
                gets += r.gets;
            }
            Measurement::value(total.as_nanos() as f64 / gets as f64)
        }
        "WakeupLatency" => wake_latency(LATENCY_SAMPLES),
        _ => {
            let (kind, us) = name.split_once('/')?;
            let wait = Wait::ALL.into_iter().find(|w| w.name() == kind)?;
            let delay = Duration::from_micros(us.strip_suffix("us")?.parse().ok()?);
            Measurement::value(sized(target, |n| wakeup_parallel(wait, delay, n)))
        }
    };
    Some(m)
}

/// Go's `wakeDelay`: the sender's extra wait, so that the receiver is likely parked.
pub const WAKE_DELAY: Duration = Duration::from_micros(5);
/// Go's `benchmarkWakeupParallel` delays.
pub const DELAYS_US: [u64; 8] = [0, 1, 2, 5, 10, 20, 50, 100];

/// How a `WakeupParallel` coroutine waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Busy-wait on the clock, keeping the P (Go's `WakeupParallelSpinning`).
    Spinning,
    /// A nanosleep inside `goro::blocking`, so that sysmon may retake the P after ~20 µs,
    /// as in Go's `WakeupParallelSyscall` (`syscall.Nanosleep` in entersyscall/exitsyscall).
    Syscall,
}

impl Wait {
    pub const ALL: [Wait; 2] = [Wait::Spinning, Wait::Syscall];

    pub fn name(self) -> &'static str {
        match self {
            Wait::Spinning => "WakeupParallelSpinning",
            Wait::Syscall => "WakeupParallelSyscall",
        }
    }

    /// `Syscall` sleeps at least 1 ns: `std::thread::sleep(0)` makes no system call, and
    /// Linux treats a 1 ns and a 0 ns nanosleep alike (both expire within the timer slack).
    pub fn wait(self, d: Duration) {
        match self {
            Wait::Spinning => spin(d),
            Wait::Syscall => goro::blocking(|| std::thread::sleep(d.max(Duration::from_nanos(1)))),
        }
    }
}

/// As Go's port in `bench/go/` names its sub-benchmarks.
pub fn delay_name(us: u64) -> String {
    format!("{us}us")
}

/// Go's `benchmarkWakeupParallel` (`runtime/proc_test.go`), from a coroutine at >= 2 Ps
/// (Go skips 1 P): two coroutines take turns waiting `delay` and receiving while the other
/// waits `delay + WAKE_DELAY` and sends; an iteration is both turns. The time from the
/// start signal to both ends; panics if a channel closes early.
pub fn wakeup_parallel(wait: Wait, delay: Duration, iters: u64) -> Duration {
    let (ping_tx, ping_rx) = channel::<()>(0);
    let (pong_tx, pong_rx) = channel::<()>(0);
    let (start_tx, start_rx) = channel::<()>(0);
    let (done_tx, done_rx) = channel::<()>(0);
    let done2 = done_tx.clone();
    const LOST: &str = "WakeupParallel: a channel closed early";
    let a = goro::go!(move || {
        start_rx.recv().expect(LOST);
        for _ in 0..iters {
            wait.wait(delay + WAKE_DELAY);
            ping_tx.send(()).expect(LOST);
            wait.wait(delay);
            pong_rx.recv().expect(LOST);
        }
        done_tx.send(()).expect(LOST);
    });
    let b = goro::go!(move || {
        for _ in 0..iters {
            wait.wait(delay);
            ping_rx.recv().expect(LOST);
            wait.wait(delay + WAKE_DELAY);
            pong_tx.send(()).expect(LOST);
        }
        done2.send(()).expect(LOST);
    });
    let start = Instant::now();
    start_tx.send(()).expect(LOST);
    done_rx.recv().expect(LOST);
    done_rx.recv().expect(LOST);
    let elapsed = start.elapsed();
    a.join().expect("WakeupParallel coroutine panicked");
    b.join().expect("WakeupParallel coroutine panicked");
    elapsed
}

/// The sender's spin before each sample, long enough for the receiver to park again (as
/// in Go's port).
pub const LATENCY_SPIN: Duration = Duration::from_micros(200);

/// `WakeupLatency`, from a coroutine at >= 2 Ps: this one spins and `try_send`s the time
/// to a coroutine parked on a channel (not parked yet: a miss). As the sender keeps its P,
/// the receiver (in that P's `runnext`) runs only once the idle P wakes and steals it
/// (with the `runnext` back-off): that is what this measures. p50 in µs, with p90, p99,
/// max, the misses and `on_sender_thread`: samples taken on the sender's thread, which the
/// receiver gets only if the idle P did not take it within [`LATENCY_SPIN`] and a miss
/// parked the sender (so late by more than that). Panics if the receiver goes away or panics.
pub fn wake_latency(samples: usize) -> Measurement {
    type Sample = Option<(Instant, std::thread::ThreadId)>;
    let (tx, rx) = channel::<Sample>(0);
    let receiver = goro::go!(move || {
        let mut lat = Vec::with_capacity(samples);
        let mut on_sender_thread = 0;
        for (t, sender_thread) in rx.iter().flatten() {
            lat.push(t.elapsed().as_nanos() as u64);
            if std::thread::current().id() == sender_thread {
                on_sender_thread += 1;
            }
        }
        (lat, on_sender_thread)
    });
    let mut missed = 0;
    for _ in 0..samples {
        spin(LATENCY_SPIN);
        let sample = Some((Instant::now(), std::thread::current().id()));
        match tx.try_send(sample) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                missed += 1;
                tx.send(None).expect("wake_latency: the receiver went away");
            }
            Err(TrySendError::Closed(_)) => panic!("wake_latency: the receiver went away"),
        }
    }
    spin(LATENCY_SPIN);
    drop(tx);
    let (mut lat, on_sender_thread) = receiver
        .join()
        .expect("wake_latency: the receiver panicked");
    lat.sort_unstable();
    let us = |p: f64| super::quantile(&lat, p) as f64 / 1e3;
    Measurement::value(us(0.5))
        .with("WakeupLatency/p90", us(0.9))
        .with("WakeupLatency/p99", us(0.99))
        .with("WakeupLatency/max", us(1.0))
        .with("WakeupLatency/missed", missed as f64)
        .with("WakeupLatency/on_sender_thread", on_sender_thread as f64)
}
