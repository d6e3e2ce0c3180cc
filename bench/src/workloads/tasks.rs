//! The comparison's task workloads, written once for every contender whose tasks block
//! (goro's coroutines, may's coroutines, plain threads; tokio's futures have their own
//! in `contenders/tokio.rs`): chain, chainbuf, sieve, pingpong, spawn_join, yield, the
//! mutex, sleep lateness and spawn-and-park.
//!
//! - [`Chain`]: a daisy chain of tasks, each receiving a number from the channel on its
//!   left and sending it, plus one, to the channel on its right (the `Chain` and
//!   `ChainBuf` benchmarks Go used to tune its scheduler for GOMAXPROCS > 1,
//!   golang.org/s/go15gomaxprocs: unbuffered links, or links of capacity 1).
//! - [`sieve`]: the concurrent prime sieve (Go's `test/chan/sieve1.go`): a generator
//!   feeds 2, 3, 4, ... into a pipeline of filters, one per prime found.
//! - [`PingPong`]: two tasks passing a number back and forth.
//!
//! Every task is spawned through [`Tasks`]; a runtime that refuses one (a stack or a
//! thread the OS will not give) makes the run a skip that says so, after the tasks
//! made so far are released and joined. A wrong result is an error, never a figure.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::sync::CountingMutex;
use super::{
    expect_eq, ops_per_task, parked, per, spin, Measurement, Outcome, CHAIN_HOPS, CHAIN_TOKENS,
    MUTEX_OPS, PINGPONG_ROUNDS, SIEVE_LAST_PRIME, SIEVE_PRIMES, SLEEP_COUNT, SPAWN_TASKS,
    YIELD_COUNT, YIELD_TASKS_PER_WORKER,
};
use crate::harness::procfs;

/// How the tasks a workload keeps alive hold the system's resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alive {
    /// Running or blocked.
    Running,
    /// Exited but not joined yet (a thread keeps its stack until then).
    Unjoined,
}

/// A runtime's tasks, channels and mutex: what the workloads here need.
pub trait Tasks: Sized + 'static {
    type Handle<T: Send + 'static>;
    type Tx<T: Send + 'static>: Send + 'static;
    type Rx<T: Send + 'static>: Send + 'static;
    type Mutex: CountingMutex;
    /// The measured time a long hand-off workload (chain, sieve, pingpong) may take
    /// before it gives up with a skip that gives the rate reached (plain threads, whose
    /// hand-offs cost microseconds); the workload is never shrunk.
    const BUDGET: Option<Duration> = None;
    /// Spawns a task, or says why the runtime cannot.
    fn spawn<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Self::Handle<T>, String>;
    /// Joins a task; its panic is an error.
    fn join<T: Send + 'static>(h: Self::Handle<T>) -> Result<T, String>;
    /// A channel of capacity `cap` (0: rendezvous), or the closest the runtime has.
    fn channel<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>);
    /// A channel of capacity `cap` that the workload never fills (one value in flight
    /// at most), so that a runtime without a bounded channel may use an unbounded one.
    fn pipe<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        Self::channel(cap)
    }
    /// Sends `v`; false once the receiver is gone.
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> bool;
    /// The next value; `None` once the sender is gone.
    fn recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Option<T>;
    fn yield_now();
    fn sleep(d: Duration);
    /// Whether `n` more tasks, alive at once as `alive` says, fit in the system's
    /// limits; if not, which limit says no (checked before, not found out: past some
    /// limits the process aborts or hangs).
    fn room(_n: usize, _alive: Alive) -> Result<(), String> {
        Ok(())
    }
}

/// The run of a comparison workload on `R`, from a task of `R` (or, for threads, the
/// main thread); None if `name` is not one of them.
pub fn run<R: Tasks>(name: &str) -> Option<Outcome> {
    let procs = super::procs();
    Some(match name {
        "chain" => chain::<R>(0),
        "chainbuf" => chain::<R>(1),
        "sieve" => sieve::<R>().map(|t| Measurement::value(t.as_secs_f64() * 1e3)),
        "pingpong" => ping_pong::<R>(),
        "spawn_join" => spawn_join::<R>(),
        "yield" => yields::<R>(procs).map(Measurement::value),
        "sleep_lateness" => sleep_lateness::<R>(procs).map(Measurement::value),
        _ => match (super::mutex_tasks(name), super::park_tasks(name)) {
            (Some(tasks), _) => mutex::<R>(tasks),
            (_, Some(n)) => spawn_park::<R>(name, n),
            _ => return None,
        },
    })
}

/// Fails, once `R`'s [`Tasks::BUDGET`] has passed since `start`, with the rate reached
/// and the time the whole run would take: `done` of `total` units of `what`, the work
/// growing as the `growth` power of the units (the sieve's hops grow as the square of
/// the primes found).
fn check_budget<R: Tasks>(
    start: Instant,
    done: usize,
    total: usize,
    what: &str,
    growth: i32,
) -> Result<(), String> {
    let (Some(budget), t) = (R::BUDGET, start.elapsed()) else {
        return Ok(());
    };
    if done >= total || t <= budget {
        return Ok(());
    }
    let whole = t.as_secs_f64() * (total as f64 / done as f64).powi(growth);
    Err(format!(
        "over the {} s budget: {done} of {total} {what} took {:.1} s ({:.1} us each); the \
         whole run would take about {whole:.0} s",
        budget.as_secs(),
        t.as_secs_f64(),
        per(t, done) / 1e3
    ))
}

/// Polls (sleeping 1 ms) until `n` tasks have counted themselves in `started`.
fn wait_started<R: Tasks>(started: &AtomicUsize, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    // Relaxed: a count; what the tasks do next does not depend on it.
    while started.load(Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            return Err(format!("{n} tasks did not start in 30 s"));
        }
        R::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Joins every handle (after a failure: their errors are not news).
fn join_all<R: Tasks, T: Send + 'static>(handles: Vec<R::Handle<T>>) {
    for h in handles {
        let _ = R::join(h);
    }
}

/// The error of a spawn that failed after `created` others, which were released and
/// joined.
fn refused(what: &str, i: usize, n: usize, why: String) -> String {
    format!(
        "{what} {} of {n} could not be spawned ({why}); the {i} created before were \
         released and joined",
        i + 1
    )
}

/// A chain of tasks, built once and used for as many tokens as wanted.
pub struct Chain<R: Tasks> {
    head: R::Tx<u64>,
    tail: R::Rx<u64>,
    links: Vec<R::Handle<()>>,
}

impl<R: Tasks> Chain<R> {
    /// Spawns `hops` links joined by channels of capacity `cap` (0: Go's unbuffered
    /// channels) and waits until every link has started (not timed). A link lives
    /// until the channel on its left closes.
    pub fn new(hops: usize, cap: usize) -> Result<Chain<R>, String> {
        R::room(hops, Alive::Running)?;
        let started = Arc::new(AtomicUsize::new(0));
        let (head, mut tail) = R::pipe(cap);
        let mut links = Vec::with_capacity(hops);
        for i in 0..hops {
            let (tx, next) = R::pipe(cap);
            let input = std::mem::replace(&mut tail, next);
            let started = started.clone();
            let link = R::spawn(move || {
                started.fetch_add(1, Ordering::Relaxed); // Relaxed: see wait_started
                drop(started);
                while let Some(v) = R::recv(&input) {
                    if !R::send(&tx, v + 1) {
                        return;
                    }
                }
            });
            match link {
                Ok(h) => links.push(h),
                Err(why) => {
                    // Closing the head ends the links made so far, one after the other.
                    drop(head);
                    join_all::<R, _>(links);
                    return Err(refused("link", i, hops, why));
                }
            }
        }
        wait_started::<R>(&started, hops)?;
        Ok(Chain { head, tail, links })
    }

    /// Links in the chain.
    pub fn hops(&self) -> usize {
        self.links.len()
    }

    /// Passes `tokens` tokens through, one at a time, each checked at the tail (one
    /// added per hop).
    pub fn pass(&self, tokens: u64) -> Result<(), String> {
        let want = |i: u64| i + self.hops() as u64;
        for i in 0..tokens {
            if !R::send(&self.head, i) {
                return Err("chain: the head closed".into());
            }
            match R::recv(&self.tail) {
                Some(v) if v == want(i) => {}
                got => {
                    return Err(format!(
                        "chain: token {i} came out as {got:?}, not {}",
                        want(i)
                    ))
                }
            }
        }
        Ok(())
    }

    /// Closes the head and joins every link (each ends when its left channel closes,
    /// which closes the next).
    pub fn shutdown(self) -> Result<(), String> {
        drop(self.head);
        let n = self.links.len();
        for (i, h) in self.links.into_iter().enumerate() {
            R::join(h).map_err(|e| format!("chain link {i} of {n}: {e}"))?;
        }
        Ok(())
    }
}

/// `chain` and `chainbuf`: `CHAIN_TOKENS` tokens through `CHAIN_HOPS` links; ns per hop.
fn chain<R: Tasks>(cap: usize) -> Outcome {
    let chain = Chain::<R>::new(CHAIN_HOPS, cap)?;
    let t = Instant::now();
    for k in 1..=CHAIN_TOKENS {
        let over = chain
            .pass(1)
            .and_then(|()| check_budget::<R>(t, k, CHAIN_TOKENS, "tokens", 1));
        if let Err(e) = over {
            chain.shutdown()?;
            return Err(e);
        }
    }
    let elapsed = t.elapsed();
    chain.shutdown()?;
    Ok(Measurement::value(per(elapsed, CHAIN_TOKENS * CHAIN_HOPS)))
}

/// Two tasks passing a number back and forth over two rendezvous channels: the echo
/// (spawned here) and the caller.
pub struct PingPong<R: Tasks> {
    ping: R::Tx<u64>,
    pong: R::Rx<u64>,
    echo: R::Handle<()>,
}

impl<R: Tasks> PingPong<R> {
    /// Starts the echo task: it sends back each number plus one.
    pub fn new() -> Result<PingPong<R>, String> {
        let (ping, ping_rx) = R::pipe::<u64>(0);
        let (pong_tx, pong) = R::pipe::<u64>(0);
        let echo = R::spawn(move || {
            while let Some(v) = R::recv(&ping_rx) {
                if !R::send(&pong_tx, v + 1) {
                    return;
                }
            }
        })?;
        Ok(PingPong { ping, pong, echo })
    }

    /// `n` round trips, each checked.
    pub fn round_trips(&self, n: u64) -> Result<(), String> {
        for i in 0..n {
            if !R::send(&self.ping, i) {
                return Err("pingpong: the echo is gone".into());
            }
            let back = R::recv(&self.pong).ok_or("pingpong: the echo is gone")?;
            expect_eq(format_args!("pingpong: {i} back"), back, i + 1)?;
        }
        Ok(())
    }

    /// Closes the ping channel and joins the echo.
    pub fn shutdown(self) -> Result<(), String> {
        drop(self.ping);
        R::join(self.echo).map_err(|e| format!("pingpong: the echo: {e}"))
    }
}

/// `pingpong`: `PINGPONG_ROUNDS` round trips, in batches of 1024; ns per round trip.
fn ping_pong<R: Tasks>() -> Outcome {
    const BATCH: usize = 1024;
    let pp = PingPong::<R>::new()?;
    let t = Instant::now();
    let mut done = 0;
    while done < PINGPONG_ROUNDS {
        let n = BATCH.min(PINGPONG_ROUNDS - done);
        done += n;
        let over = pp
            .round_trips(n as u64)
            .and_then(|()| check_budget::<R>(t, done, PINGPONG_ROUNDS, "round trips", 1));
        if let Err(e) = over {
            pp.shutdown()?;
            return Err(e);
        }
    }
    let elapsed = t.elapsed();
    pp.shutdown()?;
    Ok(Measurement::value(per(elapsed, PINGPONG_ROUNDS)))
}

/// The sieve until it has found `SIEVE_PRIMES` primes: the time from the start of
/// the generator to the arrival of the last prime (spawning included), checked: the
/// primes must rise, each must be prime, and the last must be the 5 000th prime, so
/// they are exactly the first 5 000.
///
/// The tear-down is not timed: the caller drops its end of the pipeline, so the last
/// filter's next send fails and it returns, which closes the channel of the one
/// before, and so on back to the generator; every task is joined.
pub fn sieve<R: Tasks>() -> Result<Duration, String> {
    let n = SIEVE_PRIMES;
    R::room(n + 1, Alive::Running)?;
    let start = Instant::now();
    let (gen_tx, mut rx) = R::channel::<u32>(0);
    let mut tasks = vec![R::spawn(move || {
        let mut i = 2;
        while R::send(&gen_tx, i) {
            i += 1;
        }
    })?];
    let mut primes: Vec<u32> = Vec::with_capacity(n);
    let mut failed = None;
    while failed.is_none() {
        let Some(p) = R::recv(&rx) else {
            failed = Some("sieve: the pipeline closed early".to_string());
            break;
        };
        primes.push(p);
        if primes.len() == n {
            break;
        }
        if let Err(e) = check_budget::<R>(start, primes.len(), n, "primes", 2) {
            failed = Some(e);
            break;
        }
        let (tx, next) = R::channel::<u32>(0);
        let input = std::mem::replace(&mut rx, next);
        let filter = R::spawn(move || {
            while let Some(v) = R::recv(&input) {
                if v % p != 0 && !R::send(&tx, v) {
                    return;
                }
            }
        });
        match filter {
            Ok(h) => tasks.push(h),
            Err(why) => failed = Some(refused("filter", tasks.len() - 1, n, why)),
        }
    }
    let elapsed = start.elapsed();
    drop(rx);
    let joined: Result<Vec<()>, String> = tasks.into_iter().map(R::join).collect();
    if let Some(e) = failed {
        return Err(e);
    }
    joined.map_err(|e| format!("sieve: {e}"))?;
    let primes = &primes;
    let composite = |i: usize| {
        let p = primes[i];
        primes[..i]
            .iter()
            .take_while(|&&q| q * q <= p)
            .any(|&q| p.is_multiple_of(q))
    };
    if let Some(i) = (1..n).find(|&i| primes[i] <= primes[i - 1] || composite(i)) {
        return Err(format!("sieve: {} came after {}", primes[i], primes[i - 1]));
    }
    expect_eq(
        "sieve: the last prime",
        u64::from(primes[n - 1]),
        SIEVE_LAST_PRIME,
    )?;
    Ok(elapsed)
}

/// `spawn_join`: `SPAWN_TASKS` tasks spawned, then joined in order, each returning its
/// index; ns per task.
fn spawn_join<R: Tasks>() -> Outcome {
    R::room(SPAWN_TASKS, Alive::Unjoined)?;
    let t = Instant::now();
    let mut handles = Vec::with_capacity(SPAWN_TASKS);
    for i in 0..SPAWN_TASKS {
        match R::spawn(move || i as u64) {
            Ok(h) => handles.push(h),
            Err(why) => {
                join_all::<R, _>(handles);
                return Err(refused("task", i, SPAWN_TASKS, why));
            }
        }
    }
    let mut sum = 0;
    for (i, h) in handles.into_iter().enumerate() {
        let v = R::join(h)?;
        expect_eq(format_args!("spawn_join: task {i}'s result"), v, i as u64)?;
        sum += v;
    }
    let elapsed = t.elapsed();
    expect_eq("spawn_join: the sum of the results", sum, super::SPAWN_SUM)?;
    Ok(Measurement::value(per(elapsed, SPAWN_TASKS)))
}

/// Spawns `n` copies of `f` and joins them all.
fn spawn_n<R: Tasks, T: Send + 'static>(
    n: usize,
    f: impl Fn() -> T + Clone + Send + 'static,
) -> Result<Vec<T>, String> {
    let handles: Vec<_> = (0..n)
        .map(|_| R::spawn(f.clone()))
        .collect::<Result<_, _>>()?;
    handles.into_iter().map(R::join).collect()
}

/// `yield`: `YIELD_TASKS_PER_WORKER` tasks per P (per "worker" for threads) each yield
/// `YIELD_COUNT` times; ns per yield.
pub fn yields<R: Tasks>(procs: usize) -> Result<f64, String> {
    let tasks = YIELD_TASKS_PER_WORKER * procs;
    let t = Instant::now();
    spawn_n::<R, _>(tasks, || (0..YIELD_COUNT).for_each(|_| R::yield_now()))?;
    Ok(per(t.elapsed(), tasks * YIELD_COUNT))
}

/// `sleep_lateness`: `SLEEP_COUNT` 1 ms sleeps (the calling task) under 2
/// spin-50-µs-and-yield tasks per P; the mean lateness in µs.
pub fn sleep_lateness<R: Tasks>(procs: usize) -> Result<f64, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    // Relaxed: a stop flag publishes no data; seeing it one loop late is harmless.
    let spinner = move || {
        while !s.load(Ordering::Relaxed) {
            spin(Duration::from_micros(50));
            R::yield_now();
        }
    };
    let load: Result<Vec<_>, String> = (0..2 * procs).map(|_| R::spawn(spinner.clone())).collect();
    let nap = Duration::from_millis(1);
    let mut late_us = 0.0;
    if load.is_ok() {
        for _ in 0..SLEEP_COUNT {
            let t = Instant::now();
            R::sleep(nap);
            late_us += t.elapsed().as_secs_f64() * 1e6 - 1e3;
        }
    }
    stop.store(true, Ordering::Relaxed); // Relaxed: see the load loop
    for h in load? {
        R::join(h)?;
    }
    Ok(late_us / SLEEP_COUNT as f64)
}

/// The comparison's mutex: `tasks` tasks share `MUTEX_OPS` lock/increment/unlock
/// rounds of `R`'s mutex, spawning and joining timed; the final count is checked. ns
/// per operation.
fn mutex<R: Tasks>(tasks: usize) -> Outcome {
    let each = ops_per_task(tasks)?;
    let m = Arc::new(R::Mutex::with_zero());
    let t = Instant::now();
    let counter = m.clone();
    spawn_n::<R, _>(tasks, move || (0..each).for_each(|_| counter.increment()))?;
    let elapsed = t.elapsed();
    expect_eq("mutex: the count", m.count(), MUTEX_OPS as u64)?;
    Ok(Measurement::value(per(elapsed, MUTEX_OPS)))
}

/// Spawn-and-park: `n` tasks each parked on its own rendezvous receive, then released
/// in spawn order and joined. ns per spawn; the wake+exit time and the RSS and page
/// tables per parked task as companions.
fn spawn_park<R: Tasks>(name: &str, n: usize) -> Outcome {
    R::room(n, Alive::Running)?;
    let started = Arc::new(AtomicUsize::new(0));
    let before = procfs::rss_bytes();
    let pte_before = procfs::status_kib("VmPTE").unwrap_or(0);
    let mut release = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        let (tx, rx) = R::pipe::<()>(0);
        let started = started.clone();
        let task = R::spawn(move || {
            started.fetch_add(1, Ordering::Relaxed); // Relaxed: see wait_started
            drop(started);
            R::recv(&rx).is_some()
        });
        match task {
            Ok(h) => {
                release.push(tx);
                handles.push(h);
            }
            Err(why) => {
                drop(release); // wakes every parked task (its receive ends)
                join_all::<R, _>(handles);
                return Err(refused("task", i, n, why));
            }
        }
    }
    let spawn = t.elapsed();
    // Every task counts itself just before it parks: once all have counted, the few
    // between the count and the park get a short sleep to get there.
    wait_started::<R>(&started, n)?;
    R::sleep(Duration::from_millis(10));
    let after = procfs::rss_bytes();
    let pte = procfs::status_kib("VmPTE")
        .unwrap_or(0)
        .saturating_sub(pte_before)
        * 1024;
    let t = Instant::now();
    for (i, tx) in release.iter().enumerate() {
        if !R::send(tx, ()) {
            return Err(format!("spawn_park: task {i} is gone"));
        }
    }
    for (i, h) in handles.into_iter().enumerate() {
        if !R::join(h)? {
            return Err(format!("spawn_park: task {i} was woken without its value"));
        }
    }
    Ok(parked(name, n, spawn, t.elapsed(), [before, after])
        .with(&format!("{name}_pte"), pte as f64 / n as f64))
}

/// goro's coroutines.
pub struct Coroutines;

impl Tasks for Coroutines {
    type Handle<T: Send + 'static> = goro::JoinHandle<T>;
    type Tx<T: Send + 'static> = goro::chan::Sender<T>;
    type Rx<T: Send + 'static> = goro::chan::Receiver<T>;
    type Mutex = goro::sync::Mutex<u64>;
    fn spawn<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<goro::JoinHandle<T>, String> {
        goro::Builder::new().spawn(f).map_err(|e| e.to_string())
    }
    fn join<T: Send + 'static>(h: goro::JoinHandle<T>) -> Result<T, String> {
        h.join()
            .map_err(|p| format!("a coroutine panicked: {}", goro::panic_message(&*p)))
    }
    fn channel<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        goro::chan::channel(cap)
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> bool {
        tx.send(v).is_ok()
    }
    fn recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Option<T> {
        rx.recv().ok()
    }
    fn yield_now() {
        goro::yield_now()
    }
    fn sleep(d: Duration) {
        goro::time::sleep(d)
    }
}
