//! Go's channel benchmarks on goro beyond the comparison's chain, sieve and ping-pong
//! (those are [`super::tasks`], shared with may and threads): powser (`powser.rs`),
//! Go's `WakeupParallel*` benchmarks ([`wakeup_parallel`]) and the wake-up latency of
//! a coroutine parked on a channel ([`wake_latency`]). [`run`] is goro's side of these
//! rows of the `chan` suite; `benches/chan.rs` times the same functions.

use std::time::{Duration, Instant};

use goro::chan::{channel, TrySendError};

use super::{sized, spin, target, Measurement, LATENCY_SAMPLES};

/// goro's run of one of these `chan` suite workloads, on the calling coroutine.
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
        "WakeupLatency" => {
            let lat = wake_latency(LATENCY_SAMPLES);
            Measurement::value(lat.quantile_us(0.5))
                .with("WakeupLatency/p90", lat.quantile_us(0.9))
                .with("WakeupLatency/p99", lat.quantile_us(0.99))
                .with("WakeupLatency/max", lat.quantile_us(1.0))
                .with("WakeupLatency/missed", lat.missed as f64)
                .with(
                    "WakeupLatency/on_sender_thread",
                    lat.on_sender_thread as f64,
                )
        }
        _ => {
            let (kind, us) = name.split_once('/')?;
            let wait = Wait::ALL.into_iter().find(|w| w.name() == kind)?;
            let delay = Duration::from_micros(us.strip_suffix("us")?.parse().ok()?);
            Measurement::value(sized(target, |n| wakeup_parallel(wait, delay, n)))
        }
    };
    Some(m)
}

/// Go's `wakeDelay`: the sender's extra wait, so that the receiver is likely parked
/// when the send comes.
pub const WAKE_DELAY: Duration = Duration::from_micros(5);
/// The delays of Go's `benchmarkWakeupParallel`, in µs.
pub const DELAYS_US: [u64; 8] = [0, 1, 2, 5, 10, 20, 50, 100];

/// How a `WakeupParallel` coroutine waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wait {
    /// Busy-wait on the clock, keeping the P (Go's `WakeupParallelSpinning`).
    Spinning,
    /// A nanosleep system call (`std::thread::sleep`) inside `goro::blocking`, so
    /// that sysmon may retake the P after ~20 µs, as Go's `WakeupParallelSyscall`
    /// (`syscall.Nanosleep` between entersyscall and exitsyscall).
    Syscall,
}

impl Wait {
    /// Both kinds.
    pub const ALL: [Wait; 2] = [Wait::Spinning, Wait::Syscall];

    /// Go's benchmark name, without `Benchmark`.
    pub fn name(self) -> &'static str {
        match self {
            Wait::Spinning => "WakeupParallelSpinning",
            Wait::Syscall => "WakeupParallelSyscall",
        }
    }

    /// Waits `d`.
    ///
    /// `Syscall` with `d` = 0: `std::thread::sleep(0)` makes no system call at all,
    /// so this sleeps 1 ns instead; Linux treats a 1 ns and a 0 ns nanosleep alike
    /// (both expire at once, within the thread's timer slack, 50 µs by default).
    pub fn wait(self, d: Duration) {
        match self {
            Wait::Spinning => spin(d),
            Wait::Syscall => goro::blocking(|| std::thread::sleep(d.max(Duration::from_nanos(1)))),
        }
    }
}

/// Sub-benchmark name, as Go's port in `bench/go/` names it: `0us`, `5us`, ...
pub fn delay_name(us: u64) -> String {
    format!("{us}us")
}

/// Go's `benchmarkWakeupParallel` (runtime/proc_test.go), `iters` iterations: two
/// coroutines take turns; in each turn one waits `delay` and receives while the
/// other waits `delay + WAKE_DELAY` and sends, on an unbuffered channel. One
/// iteration = both turns. Returns the time from the start signal to both ends.
///
/// Call it from a coroutine (as Go runs it from the benchmark goroutine), with at
/// least 2 Ps (Go skips it at GOMAXPROCS=1).
///
/// # Panics
///
/// If a channel closes early (a lost message or a panicked partner).
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

/// Busy spin of the sender before each sample of [`wake_latency`]: long enough for
/// the receiver to be parked again (Go's port uses the same).
pub const LATENCY_SPIN: Duration = Duration::from_micros(200);

/// The samples of [`wake_latency`].
pub struct Latency {
    /// Wake-up latencies, ns, sorted.
    pub sorted_ns: Vec<u64>,
    /// Sends that found the receiver not parked (no sample taken).
    pub missed: usize,
    /// Samples the receiver took on the sender's OS thread: it can run there only
    /// once the sender's coroutine leaves the thread, i.e. when the idle P did not
    /// take it within [`LATENCY_SPIN`] and the sender's next send found it not
    /// parked (a missed sample) and parked the sender. Such samples are late by
    /// more than `LATENCY_SPIN`.
    pub on_sender_thread: usize,
}

impl Latency {
    /// The `p`-quantile (nearest rank), in µs.
    pub fn quantile_us(&self, p: f64) -> f64 {
        let n = self.sorted_ns.len();
        assert!(n > 0, "no latency samples");
        let i = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
        self.sorted_ns[i] as f64 / 1e3
    }
}

/// Wake-up latency of a coroutine parked on a channel, woken by a sender that keeps
/// its P busy: the calling coroutine (the sender) spins [`LATENCY_SPIN`], reads
/// the clock and sends that instant on an unbuffered channel (`try_send`: if the
/// receiver is not parked yet, the sample is dropped and counted as missed), and
/// spins on. The receiver, a coroutine spawned here, records `now - instant`. As
/// the sender never lets go of its P, the receiver (readied into that P's
/// `runnext`) runs only when the idle P takes it: this measures the wake-up of the
/// idle P plus its steal (with the `runnext` back-off).
///
/// Call it from a coroutine, with at least 2 Ps.
///
/// # Panics
///
/// If the receiver goes away or panics.
pub fn wake_latency(samples: usize) -> Latency {
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
    Latency {
        sorted_ns: lat,
        missed,
        on_sender_thread,
    }
}
