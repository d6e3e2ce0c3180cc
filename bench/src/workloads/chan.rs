//! Channel workloads: the chain, the prime sieve, ping-pong and Go's wake-up
//! benchmarks, on goro's channels (powser is `powser.rs`).
//!
//! - [`Chain`]: a daisy chain of coroutines, each receiving a number from the channel
//!   on its left and sending it, plus one, to the channel on its right (the `Chain` and
//!   `ChainBuf` benchmarks Go used to tune its scheduler for GOMAXPROCS > 1,
//!   golang.org/s/go15gomaxprocs: unbuffered links, or links of capacity 1).
//! - [`sieve`]: the concurrent prime sieve (Go's `test/chan/sieve1.go`): a generator
//!   feeds 2, 3, 4, ... into a pipeline of filters, one per prime found.
//! - [`PingPong`]: two coroutines passing a number back and forth.
//! - [`wakeup_parallel`], [`wake_latency`]: Go's `WakeupParallel*` benchmarks and the
//!   wake-up latency of a coroutine parked on a channel.
//!
//! [`run`] is goro's side of the `chan` suite; `benches/chan.rs` and
//! `examples/{chain,sieve}.rs` use the same types.

use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, Sender, TrySendError};

use super::{
    per, sized, target, Measurement, CHAIN_HOPS, CHAIN_TOKENS, LATENCY_SAMPLES, PINGPONG_ROUNDS,
    SIEVE_LAST_PRIME, SIEVE_PRIMES,
};

/// goro's run of a `chan` suite workload, on the calling coroutine.
pub fn run(name: &str) -> Option<Measurement> {
    let target = target();
    let m = match name {
        "chain" | "chainbuf" => {
            let chain = Chain::new(CHAIN_HOPS, usize::from(name == "chainbuf"));
            let d = chain.driver();
            let t = Instant::now();
            d.pass(CHAIN_TOKENS as u64)
                .unwrap_or_else(|e| panic!("{e}"));
            let elapsed = t.elapsed();
            chain.shutdown().unwrap_or_else(|e| panic!("{e}"));
            Measurement::value(per(elapsed, CHAIN_TOKENS * CHAIN_HOPS))
        }
        "sieve" => {
            let run = sieve(SIEVE_PRIMES).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(
                run.primes.last().map(|&p| u64::from(p)),
                Some(SIEVE_LAST_PRIME)
            );
            Measurement::value(run.elapsed.as_secs_f64() * 1e3)
        }
        "pingpong" => {
            let pp = PingPong::new();
            let t = Instant::now();
            pp.driver()
                .round_trips(PINGPONG_ROUNDS as u64)
                .unwrap_or_else(|e| panic!("{e}"));
            let elapsed = t.elapsed();
            pp.shutdown().unwrap_or_else(|e| panic!("{e}"));
            Measurement::value(per(elapsed, PINGPONG_ROUNDS))
        }
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
pub fn sieve(n: usize) -> Result<SieveRun, String> {
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

/// Busy-waits `d` on the clock (Go: `for time.Now().Before(end) {}`).
pub fn spin(d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {}
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

/// Two coroutines passing a number back and forth over two unbuffered channels:
/// the echo (spawned here, lives until [`shutdown`](Self::shutdown)) and a driver.
pub struct PingPong {
    driver: PingPongDriver,
    echo: goro::JoinHandle<()>,
}

/// The driver's ends (cheap to clone).
#[derive(Clone)]
pub struct PingPongDriver {
    ping: Sender<u64>,
    pong: Receiver<u64>,
}

impl Default for PingPong {
    fn default() -> Self {
        PingPong::new()
    }
}

impl PingPong {
    /// Starts the echo coroutine: it sends back each number plus one.
    pub fn new() -> PingPong {
        let (ping, ping_rx) = channel::<u64>(0);
        let (pong_tx, pong) = channel::<u64>(0);
        let echo = goro::go!(move || {
            for v in ping_rx.iter() {
                pong_tx
                    .send(v + 1)
                    .expect("PingPong: the driver went away under the echo");
            }
        });
        PingPong {
            driver: PingPongDriver { ping, pong },
            echo,
        }
    }

    /// The driver's ends.
    pub fn driver(&self) -> PingPongDriver {
        self.driver.clone()
    }

    /// Closes the ping channel and joins the echo.
    pub fn shutdown(self) -> Result<(), String> {
        self.driver.ping.close();
        self.echo
            .join()
            .map_err(|_| "PingPong: the echo panicked".to_string())
    }
}

impl PingPongDriver {
    /// `n` round trips, each checked.
    pub fn round_trips(&self, n: u64) -> Result<(), String> {
        for i in 0..n {
            self.ping
                .send(i)
                .map_err(|_| "PingPong: ping closed".to_string())?;
            let v = self
                .pong
                .recv()
                .map_err(|_| "PingPong: pong closed".to_string())?;
            if v != i + 1 {
                return Err(format!("PingPong: sent {i}, got back {v}"));
            }
        }
        Ok(())
    }
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
