//! The comparison's task workloads, written once for every contender (goro's and may's
//! coroutines, plain threads, tokio's tasks): chain and chainbuf ([`Chain`]: Go's daisy
//! chain of golang.org/s/go15gomaxprocs, links unbuffered or of capacity 1), the prime
//! [`sieve`] (Go's `test/chan/sieve1.go`), pingpong (a chain of one link), spawn_join,
//! yield, the mutex, sleep lateness and spawn-and-park.
//!
//! They are `async`, for tokio; on the runtimes whose calls block, every operation is a
//! ready future, so a task completes in its first poll ([`now`]). A runtime that refuses
//! a task makes the run a skip that says so (the tasks made so far released and joined);
//! a wrong result is an error, never a figure.

use std::future::{ready, Future};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::sync::CountingMutex;
use super::{
    expect_eq, per, spin, Measurement, Outcome, CHAIN_HOPS, CHAIN_TOKENS, MUTEX_OPS,
    PINGPONG_ROUNDS, SIEVE_LAST_PRIME, SIEVE_PRIMES, SLEEP_COUNT, SPAWN_TASKS, YIELD_COUNT,
    YIELD_TASKS_PER_WORKER,
};
use crate::harness::procfs;

/// Runs `f` to its end on this stack, in one poll: for a blocking runtime's tasks.
///
/// # Panics
///
/// If `f` awaited something other than a blocking runtime's ready futures.
pub fn now<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a blocking runtime's task awaited a future that was not ready"),
    }
}

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
    type Handle<T: Send + 'static>: Send;
    type Tx<T: Send + 'static>: Send + 'static;
    type Rx<T: Send + 'static>: Send + 'static;
    type Mutex: Send + Sync + 'static;
    /// How long a hand-off workload (chain, sieve, pingpong) may run before it gives up
    /// with the rate reached (for threads, whose hand-offs cost µs); never shrunk.
    const BUDGET: Option<Duration> = None;
    /// Spawns a task running the future `f` makes (on the task, so that a blocking
    /// runtime's spawn moves only `f`'s captures), or says why the runtime cannot.
    fn spawn<T: Send + 'static, F: Future<Output = T> + Send + 'static>(
        f: impl FnOnce() -> F + Send + 'static,
    ) -> Result<Self::Handle<T>, String>;
    /// Joins a task; its panic is an error.
    fn join<T: Send + 'static>(
        h: Self::Handle<T>,
    ) -> impl Future<Output = Result<T, String>> + Send;
    /// A channel of capacity `cap` (0: rendezvous), or the closest the runtime has.
    fn channel<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>);
    /// A channel of capacity `cap` that the workload never fills (one value in flight
    /// at most), so that a runtime without a bounded channel may use an unbounded one.
    fn pipe<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        Self::channel(cap)
    }
    /// A channel for one value (the runtime's one-shot channel, if it has one).
    fn once<T: Send + 'static>() -> (Self::Tx<T>, Self::Rx<T>) {
        Self::pipe(0)
    }
    /// Sends `v`; false once the receiver is gone.
    fn send<T: Send + 'static>(tx: &mut Self::Tx<T>, v: T) -> impl Future<Output = bool> + Send;
    /// The next value; `None` once the sender is gone.
    fn recv<T: Send + 'static>(rx: &mut Self::Rx<T>) -> impl Future<Output = Option<T>> + Send;
    /// Yields `times` times (this hot loop and `increment`'s are the runtime's own, so
    /// that their figures carry nothing of the harness's futures).
    fn yield_now(times: usize) -> impl Future<Output = ()> + Send;
    fn sleep(d: Duration) -> impl Future<Output = ()> + Send;
    /// A mutex around a counter at 0.
    fn mutex() -> Self::Mutex;
    /// Locks, adds one, unlocks, `times` times.
    fn increment(m: &Self::Mutex, times: usize) -> impl Future<Output = ()> + Send;
    fn count(m: &Self::Mutex) -> impl Future<Output = u64> + Send;
    /// Whether `n` more tasks, alive as `alive` says, fit in the system's limits, or
    /// which one says no (asked first: past some limits the process aborts or hangs).
    fn room(_n: usize, _alive: Alive) -> Result<(), String> {
        Ok(())
    }
}

/// [`Tasks`] as plain calls, for a runtime whose calls block (goro's and may's
/// coroutines, threads): the blanket impl runs each task's future with [`now`]. Its
/// `send`, `recv` and `join` do their work when called and return a ready future (no
/// state machine per operation), so a task's future is made on the task, as
/// [`Tasks::spawn`] does, never ahead of it.
pub trait Blocking: Sized + 'static {
    type Handle<T: Send + 'static>: Send;
    type Tx<T: Send + 'static>: Send + 'static;
    type Rx<T: Send + 'static>: Send + 'static;
    type Mutex: CountingMutex;
    const BUDGET: Option<Duration> = None;
    fn spawn<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Self::Handle<T>, String>;
    fn join<T: Send + 'static>(h: Self::Handle<T>) -> Result<T, String>;
    fn channel<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>);
    fn pipe<T: Send + 'static>(cap: usize) -> (Self::Tx<T>, Self::Rx<T>) {
        Self::channel(cap)
    }
    fn send<T: Send + 'static>(tx: &Self::Tx<T>, v: T) -> bool;
    fn recv<T: Send + 'static>(rx: &Self::Rx<T>) -> Option<T>;
    fn yield_now();
    fn sleep(d: Duration);
    fn room(_n: usize, _alive: Alive) -> Result<(), String> {
        Ok(())
    }
}

impl<B: Blocking> Tasks for B {
    type Handle<T: Send + 'static> = B::Handle<T>;
    type Tx<T: Send + 'static> = B::Tx<T>;
    type Rx<T: Send + 'static> = B::Rx<T>;
    type Mutex = B::Mutex;
    const BUDGET: Option<Duration> = B::BUDGET;
    fn spawn<T: Send + 'static, F: Future<Output = T> + Send + 'static>(
        f: impl FnOnce() -> F + Send + 'static,
    ) -> Result<B::Handle<T>, String> {
        B::spawn(move || now(f()))
    }
    fn join<T: Send + 'static>(h: B::Handle<T>) -> impl Future<Output = Result<T, String>> + Send {
        ready(B::join(h))
    }
    fn channel<T: Send + 'static>(cap: usize) -> (B::Tx<T>, B::Rx<T>) {
        B::channel(cap)
    }
    fn pipe<T: Send + 'static>(cap: usize) -> (B::Tx<T>, B::Rx<T>) {
        B::pipe(cap)
    }
    fn send<T: Send + 'static>(tx: &mut B::Tx<T>, v: T) -> impl Future<Output = bool> + Send {
        ready(B::send(tx, v))
    }
    fn recv<T: Send + 'static>(rx: &mut B::Rx<T>) -> impl Future<Output = Option<T>> + Send {
        ready(B::recv(rx))
    }
    async fn yield_now(times: usize) {
        (0..times).for_each(|_| B::yield_now());
    }
    async fn sleep(d: Duration) {
        B::sleep(d);
    }
    fn mutex() -> B::Mutex {
        B::Mutex::with_zero()
    }
    async fn increment(m: &B::Mutex, times: usize) {
        (0..times).for_each(|_| m.increment());
    }
    fn count(m: &B::Mutex) -> impl Future<Output = u64> + Send {
        ready(m.count())
    }
    fn room(n: usize, alive: Alive) -> Result<(), String> {
        B::room(n, alive)
    }
}

/// The run of a comparison workload on `R` (for tokio, in a task; for the blocking
/// runtimes, [`now`] it from a task or the main thread); None if `name` is not one.
pub async fn run<R: Tasks>(name: &'static str) -> Option<Outcome> {
    let procs = super::procs();
    Some(match name {
        "chain" => chain::<R>(CHAIN_HOPS, 0, CHAIN_TOKENS, 1).await,
        "chainbuf" => chain::<R>(CHAIN_HOPS, 1, CHAIN_TOKENS, 1).await,
        "sieve" => sieve::<R>()
            .await
            .map(|t| Measurement::value(t.as_secs_f64() * 1e3)),
        "pingpong" => chain::<R>(1, 0, PINGPONG_ROUNDS, 1024).await,
        "spawn_join" => spawn_join::<R>().await,
        "yield" => yields::<R>(procs).await.map(Measurement::value),
        "sleep_lateness" => sleep_lateness::<R>(procs).await.map(Measurement::value),
        _ => match (super::mutex_tasks(name), super::park_tasks(name)) {
            (Some(tasks), _) => mutex::<R>(tasks).await,
            (_, Some(n)) => spawn_park::<R>(name, n).await,
            _ => return None,
        },
    })
}

/// Fails once `R`'s [`Tasks::BUDGET`] has passed since `start`, with the rate reached and
/// the whole run's estimated time: `done` of `total` `what`, the work growing as their
/// `growth` power (the sieve's hops: as the square of the primes found).
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
async fn wait_started<R: Tasks>(started: &AtomicUsize, n: usize) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    // Relaxed: a count; what the tasks do next does not depend on it.
    while started.load(Ordering::Relaxed) < n {
        if Instant::now() > deadline {
            return Err(format!("{n} tasks did not start in 30 s"));
        }
        R::sleep(Duration::from_millis(1)).await;
    }
    Ok(())
}

/// Joins every handle; the first error.
async fn join_all<R: Tasks, T: Send + 'static>(
    handles: Vec<R::Handle<T>>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::with_capacity(handles.len());
    let mut first = Ok(());
    for h in handles {
        match R::join(h).await {
            Ok(v) => out.push(v),
            Err(e) => first = first.and(Err(e)),
        }
    }
    first.map(|()| out)
}

/// The error of a spawn that failed after `i` others, which were released and joined.
async fn refused<R: Tasks, T: Send + 'static>(
    what: &str,
    i: usize,
    n: usize,
    why: String,
    created: Vec<R::Handle<T>>,
) -> String {
    let _ = join_all::<R, T>(created).await;
    format!(
        "{what} {} of {n} could not be spawned ({why}); the {i} created before were \
         released and joined",
        i + 1
    )
}

/// A task that passes on what `rx` gives, through `f` (which may drop it), to `tx`,
/// until either side closes: a chain link, a sieve filter.
fn relay<R: Tasks, T: Send + 'static>(
    mut rx: R::Rx<T>,
    mut tx: R::Tx<T>,
    started: Option<Arc<AtomicUsize>>,
    f: impl Fn(T) -> Option<T> + Send + 'static,
) -> Result<R::Handle<()>, String> {
    R::spawn(move || async move {
        if let Some(s) = started {
            s.fetch_add(1, Ordering::Relaxed); // Relaxed: see wait_started
        }
        while let Some(v) = R::recv(&mut rx).await {
            if let Some(v) = f(v) {
                if !R::send(&mut tx, v).await {
                    return;
                }
            }
        }
    })
}

/// A chain of tasks, built once and used for as many tokens as wanted.
pub struct Chain<R: Tasks> {
    head: R::Tx<u64>,
    tail: R::Rx<u64>,
    links: Vec<R::Handle<()>>,
}

impl<R: Tasks> Chain<R> {
    /// Spawns `hops` links joined by channels of capacity `cap` (0: unbuffered, as Go's)
    /// and waits until all have started (untimed); a link lives until its left one closes.
    pub async fn new(hops: usize, cap: usize) -> Result<Chain<R>, String> {
        R::room(hops, Alive::Running)?;
        let started = Arc::new(AtomicUsize::new(0));
        let (head, mut tail) = R::pipe(cap);
        let mut links = Vec::with_capacity(hops);
        for i in 0..hops {
            let (tx, next) = R::pipe(cap);
            let input = std::mem::replace(&mut tail, next);
            match relay::<R, _>(input, tx, Some(started.clone()), |v| Some(v + 1)) {
                Ok(h) => links.push(h),
                Err(why) => {
                    // Closing the head ends the links made so far, one after the other.
                    drop(head);
                    return Err(refused::<R, _>("link", i, hops, why, links).await);
                }
            }
        }
        wait_started::<R>(&started, hops).await?;
        Ok(Chain { head, tail, links })
    }

    /// Links in the chain.
    pub fn hops(&self) -> usize {
        self.links.len()
    }

    /// Passes `tokens` tokens through, one at a time, each checked at the tail (+1 a hop).
    pub async fn pass(&mut self, tokens: u64) -> Result<(), String> {
        let hops = self.hops() as u64;
        for i in 0..tokens {
            if !R::send(&mut self.head, i).await {
                return Err("chain: the head closed".into());
            }
            let out = R::recv(&mut self.tail)
                .await
                .ok_or("chain: the tail closed")?;
            if out != i + hops {
                return Err(format!(
                    "chain: token {i} came out as {out}, not {}",
                    i + hops
                ));
            }
        }
        Ok(())
    }

    /// Closes the head and joins every link (each ends when its left channel closes).
    pub async fn shutdown(self) -> Result<(), String> {
        drop(self.head);
        join_all::<R, _>(self.links)
            .await
            .map(drop)
            .map_err(|e| format!("chain: {e}"))
    }
}

/// `chain`, `chainbuf` and `pingpong` (a chain of one link: the caller and an echo
/// task): `tokens` tokens through `hops` links, passed `batch` at a time between the
/// budget's checks; ns per hop (for ping-pong, per round trip).
async fn chain<R: Tasks>(hops: usize, cap: usize, tokens: usize, batch: usize) -> Outcome {
    let mut chain = Chain::<R>::new(hops, cap).await?;
    let unit = if hops == 1 { "round trips" } else { "hops" };
    let t = Instant::now();
    let mut done = 0;
    while done < tokens {
        let n = batch.min(tokens - done);
        done += n;
        let over = chain.pass(n as u64).await;
        let over = over.and_then(|()| check_budget::<R>(t, done * hops, tokens * hops, unit, 1));
        if let Err(e) = over {
            chain.shutdown().await?;
            return Err(e);
        }
    }
    let elapsed = t.elapsed();
    chain.shutdown().await?;
    Ok(Measurement::value(per(elapsed, tokens * hops)))
}

/// The sieve until it has found `SIEVE_PRIMES` primes: the time from the generator's
/// start to the last prime's arrival (spawning included), checked: rising, each a prime,
/// the last the 5 000th, so exactly the first 5 000. The tear-down, untimed: the caller
/// drops its end, so the last filter's next send fails and it returns, which closes the
/// channel of the one before, and so on back to the generator; every task is joined.
pub async fn sieve<R: Tasks>() -> Result<Duration, String> {
    let n = SIEVE_PRIMES;
    R::room(n + 1, Alive::Running)?;
    let start = Instant::now();
    let (mut gen_tx, mut rx) = R::channel::<u32>(0);
    let mut tasks = vec![R::spawn(move || async move {
        let mut i = 2;
        while R::send(&mut gen_tx, i).await {
            i += 1;
        }
    })?];
    let mut primes: Vec<u32> = Vec::with_capacity(n);
    let found: Result<(), String> = async {
        loop {
            let p = R::recv(&mut rx)
                .await
                .ok_or("sieve: the pipeline closed early")?;
            primes.push(p);
            if primes.len() == n {
                return Ok(());
            }
            check_budget::<R>(start, primes.len(), n, "primes", 2)?;
            let (tx, next) = R::channel::<u32>(0);
            let input = std::mem::replace(&mut rx, next);
            let filter = relay::<R, _>(input, tx, None, move |v| (v % p != 0).then_some(v));
            let i = tasks.len();
            tasks.push(filter.map_err(|why| format!("filter {i} of {n}: {why}"))?);
        }
    }
    .await;
    let elapsed = start.elapsed();
    drop(rx);
    let joined = join_all::<R, _>(tasks).await;
    found?;
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
    let last = u64::from(primes[n - 1]);
    expect_eq("sieve: the last prime", last, SIEVE_LAST_PRIME)?;
    Ok(elapsed)
}

/// `spawn_join`: `SPAWN_TASKS` tasks spawned, then joined in order, each returning its
/// index; ns per task.
async fn spawn_join<R: Tasks>() -> Outcome {
    R::room(SPAWN_TASKS, Alive::Unjoined)?;
    let t = Instant::now();
    let mut handles = Vec::with_capacity(SPAWN_TASKS);
    for i in 0..SPAWN_TASKS {
        match R::spawn(move || async move { i as u64 }) {
            Ok(h) => handles.push(h),
            Err(why) => return Err(refused::<R, _>("task", i, SPAWN_TASKS, why, handles).await),
        }
    }
    let mut sum = 0;
    for (i, h) in handles.into_iter().enumerate() {
        let v = R::join(h).await?;
        if v != i as u64 {
            return Err(format!("spawn_join: task {i} returned {v}"));
        }
        sum += v;
    }
    let elapsed = t.elapsed();
    let want = (SPAWN_TASKS * (SPAWN_TASKS - 1) / 2) as u64;
    expect_eq("spawn_join: the sum of the results", sum, want)?;
    Ok(Measurement::value(per(elapsed, SPAWN_TASKS)))
}

/// Spawns `n` tasks of `f()` (called on each task) and joins them all.
async fn spawn_n<R: Tasks, F: Future<Output = ()> + Send + 'static>(
    n: usize,
    f: impl FnOnce() -> F + Clone + Send + 'static,
) -> Result<(), String> {
    let handles: Vec<_> = (0..n)
        .map(|_| R::spawn(f.clone()))
        .collect::<Result<_, _>>()?;
    join_all::<R, _>(handles).await.map(drop)
}

/// `yield`: `YIELD_TASKS_PER_WORKER` tasks per P (per "worker" for threads) each yield
/// `YIELD_COUNT` times; ns per yield.
pub async fn yields<R: Tasks>(procs: usize) -> Result<f64, String> {
    let tasks = YIELD_TASKS_PER_WORKER * procs;
    let t = Instant::now();
    spawn_n::<R, _>(tasks, || R::yield_now(YIELD_COUNT)).await?;
    Ok(per(t.elapsed(), tasks * YIELD_COUNT))
}

/// `sleep_lateness`: `SLEEP_COUNT` 1 ms sleeps (the calling task) under 2
/// spin-50-µs-and-yield tasks per P; the mean lateness in µs.
pub async fn sleep_lateness<R: Tasks>(procs: usize) -> Result<f64, String> {
    let stop = Arc::new(AtomicBool::new(false));
    let load: Result<Vec<_>, String> = (0..2 * procs)
        .map(|_| {
            let stop = stop.clone();
            R::spawn(move || async move {
                // Relaxed: a stop flag publishes no data; seeing it a loop late is harmless.
                while !stop.load(Ordering::Relaxed) {
                    spin(Duration::from_micros(50));
                    R::yield_now(1).await;
                }
            })
        })
        .collect();
    let nap = Duration::from_millis(1);
    let mut late_us = 0.0;
    if load.is_ok() {
        for _ in 0..SLEEP_COUNT {
            let t = Instant::now();
            R::sleep(nap).await;
            late_us += t.elapsed().as_secs_f64() * 1e6 - 1e3;
        }
    }
    stop.store(true, Ordering::Relaxed); // Relaxed: see the load loop
    join_all::<R, _>(load?).await?;
    Ok(late_us / SLEEP_COUNT as f64)
}

/// The comparison's mutex: `tasks` tasks share `MUTEX_OPS` lock/increment/unlock rounds
/// of `R`'s mutex (spawning and joining timed), the count checked; ns per operation.
async fn mutex<R: Tasks>(tasks: usize) -> Outcome {
    let each = MUTEX_OPS
        .is_multiple_of(tasks)
        .then_some(MUTEX_OPS / tasks)
        .ok_or_else(|| format!("mutex: {MUTEX_OPS} operations do not split over {tasks} tasks"))?;
    let m = Arc::new(R::mutex());
    let t = Instant::now();
    let shared = m.clone();
    spawn_n::<R, _>(
        tasks,
        move || async move { R::increment(&shared, each).await },
    )
    .await?;
    let elapsed = t.elapsed();
    expect_eq("mutex: the count", R::count(&m).await, MUTEX_OPS as u64)?;
    Ok(Measurement::value(per(elapsed, MUTEX_OPS)))
}

/// Spawn-and-park: `n` tasks each parked on its own one-value channel, then released
/// in spawn order and joined. ns per spawn; the wake+exit time and the RSS and page
/// tables per parked task as companions.
async fn spawn_park<R: Tasks>(name: &str, n: usize) -> Outcome {
    R::room(n, Alive::Running)?;
    let started = Arc::new(AtomicUsize::new(0));
    let before = procfs::rss_bytes();
    let pte_before = procfs::status_kib("VmPTE").unwrap_or(0);
    let faults_before = procfs::minor_faults();
    let mut release = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        let (tx, mut rx) = R::once::<()>();
        let started = started.clone();
        let task = R::spawn(move || async move {
            started.fetch_add(1, Ordering::Relaxed); // Relaxed: see wait_started
            drop(started);
            R::recv(&mut rx).await.is_some()
        });
        match task {
            Ok(h) => {
                release.push(tx);
                handles.push(h);
            }
            Err(why) => {
                drop(release); // wakes every parked task (its receive ends)
                return Err(refused::<R, _>("task", i, n, why, handles).await);
            }
        }
    }
    let spawn = t.elapsed();
    // Every task counts itself just before it parks: once all have counted, the few
    // between the count and the park get a short sleep to get there.
    wait_started::<R>(&started, n).await?;
    R::sleep(Duration::from_millis(10)).await;
    let after = procfs::rss_bytes();
    let pte = procfs::status_kib("VmPTE")
        .unwrap_or(0)
        .saturating_sub(pte_before)
        * 1024;
    let faults = procfs::minor_faults().saturating_sub(faults_before);
    let t = Instant::now();
    for (i, tx) in release.iter_mut().enumerate() {
        if !R::send(tx, ()).await {
            return Err(format!("spawn_park: task {i} is gone"));
        }
    }
    let woken = join_all::<R, _>(handles).await?;
    if let Some(i) = woken.iter().position(|&ok| !ok) {
        return Err(format!("spawn_park: task {i} was woken without its value"));
    }
    let wake = per(t.elapsed(), n);
    let per_task = |bytes: u64| bytes as f64 / n as f64;
    // Memory counts the page tables too: a stack's reservation costs them whether or
    // not RSS shows it (one 4 KiB page of them per 2 MiB of address space touched).
    let rss = per_task(after.saturating_sub(before) + pte);
    Ok(Measurement::value(per(spawn, n))
        .with(&format!("{name}_wake"), wake)
        .with(&format!("{name}_rss"), rss)
        .with(&format!("{name}_pte"), per_task(pte))
        .with(&format!("{name}_faults"), per_task(faults)))
}

/// goro's coroutines.
pub struct Coroutines;

impl Blocking for Coroutines {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contenders::threads::Threads;

    /// A blocking runtime's loops run when their future is polled, not when it is made,
    /// and `spawn_n` makes each task's future on the task: else `yield` would time every
    /// yield on the caller, one after the other.
    #[test]
    fn work_runs_on_the_tasks() {
        let m = Threads::mutex();
        let f = Threads::increment(&m, 3);
        assert_eq!(m.count(), 0, "increment ran before it was polled");
        now(f);
        assert_eq!(m.count(), 3);

        let caller = std::thread::current().id();
        let on_caller = Arc::new(AtomicUsize::new(0));
        let seen = on_caller.clone();
        let task = move || {
            // Relaxed: a count read after every task is joined.
            let here = std::thread::current().id() == caller;
            seen.fetch_add(usize::from(here), Ordering::Relaxed);
            async {}
        };
        now(spawn_n::<Threads, _>(4, task)).unwrap();
        assert_eq!(
            on_caller.load(Ordering::Relaxed),
            0,
            "a task's future was made on the caller"
        );
    }
}
