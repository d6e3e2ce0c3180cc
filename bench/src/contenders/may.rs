//! The may contender: every workload of [`Workload`] on may 0.3's stackful coroutines
//! (`may::config().set_workers(common::procs())`), with may's own primitives.
//!
//! How each workload maps onto may (see `workloads` for what is measured):
//!
//! - tasks are coroutines with may's default stack (`0x1000` words: 32 KiB on 64-bit,
//!   enough for every coroutine here: none keeps a large buffer or recurses). The body
//!   of every workload runs in a coroutine of its own (as Go's main goroutine is a
//!   goroutine); the calling thread only joins it.
//! - channels: may 0.3 has no bounded or rendezvous channel: `may::sync::{mpsc, mpmc,
//!   spsc}` are all unbounded. In `Chain`, `ChainBuf` and `PingPong` at most one value
//!   is ever queued in a channel (one token in flight), so a bound of 0 or 1 would never
//!   make a sender wait there: they use `may::sync::mpsc` as it is (and `Chain` and
//!   `ChainBuf` are the same program). The sieve's generator would run away on an
//!   unbounded channel, so `Sieve` uses a capacity-1 channel built here from
//!   `may::sync::mpsc` and a `may::sync::Semphore` of one credit (`bounded`). The
//!   sieve is ~13 million such hand-offs, each parking and waking a coroutine on both
//!   the channel and the semaphore: it takes about 20 s on a 2-core machine (tokio:
//!   about 3 s), far past the ~2 s of the other workloads, but well inside
//!   `compare`'s default 60 s worker timeout.
//! - the mutex is `may::sync::Mutex` (a coroutine waiting for it is parked, not its
//!   thread); yield is `may::coroutine::yield_now`, sleep `may::coroutine::sleep`.
//! - `SpawnPark`: each coroutine waits on its own `may::sync::mpsc` receive.
//! - echo: `may::net`, one coroutine per connection (read, then `write_all`).
//!
//! What may cannot do here: every coroutine stack is a separate `mmap` with a
//! `PROT_NONE` guard page at its bottom (generator's `Stack::new`), i.e. two kernel
//! memory mappings per live coroutine (measured: 10 000 parked coroutines add 18 000
//! mappings, the other 1 000 come from may's pool, allocated at start-up). Linux caps
//! mappings per process at `vm.max_map_count` (65 530 by default), so about 32 700
//! coroutines can be alive at once. Past that the stack allocation fails (ENOMEM) and
//! may panics inside `spawn` ("failed to alloc sys stack"); with `RUST_BACKTRACE=1`
//! the panic's own backtrace then fails to allocate and the process deadlocks. So
//! `SpawnJoin` (100 000 spawned before the first join) and `SpawnPark` (up to 1 000 000
//! parked) are refused up front, with the numbers, when the limit cannot hold them.

use std::io::{ErrorKind, Read, Write};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use may::coroutine::{yield_now, JoinHandle};
use may::net::{TcpListener, TcpStream};
use may::sync::{mpsc, Mutex, Semphore};

use super::{Contender, Figure};
use crate::harness::procfs;
use crate::workloads::{self as common, Measurement, Workload};

/// Sets may's worker count; must run before may's scheduler starts (its first use).
fn configure() {
    may::config().set_workers(common::procs());
}

/// Spawns a coroutine with may's default stack, turning may's panic on a failed stack
/// allocation into an error.
///
/// # Safety
///
/// `may::coroutine::Builder::spawn`'s contract: `f` must not use a thread-local value
/// across a point where it may block or yield (the coroutine can resume on another
/// worker thread, leaving the reference pointing at the first thread's copy), and it
/// must fit in may's default coroutine stack (32 KiB on 64-bit; overflowing it hits the
/// guard page and kills the process).
unsafe fn go<F, T>(f: F) -> Result<JoinHandle<T>, String>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let spawned = std::panic::catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller upholds `Builder::spawn`'s contract (this function's).
        unsafe { may::coroutine::Builder::new().spawn(f) }
    }));
    match spawned {
        Ok(Ok(handle)) => Ok(handle),
        Ok(Err(e)) => Err(format!("may: cannot spawn a coroutine: {e}")),
        Err(p) => Err(format!(
            "may: spawning a coroutine panicked: {}",
            goro::panic_message(p.as_ref())
        )),
    }
}

/// Joins `h`, turning a panicked coroutine into an error.
fn join<T>(h: JoinHandle<T>) -> Result<T, String> {
    h.join().map_err(|p| {
        format!(
            "may: a coroutine panicked: {}",
            goro::panic_message(p.as_ref())
        )
    })
}

/// Refuses a workload that keeps up to `live` coroutines alive at once when their
/// stacks (two mappings each: the stack and its guard page) would not fit under
/// `vm.max_map_count` (see the module docs).
fn check_map_room(live: usize, what: &str) -> Result<(), String> {
    let Some((now, max)) = procfs::map_counts() else {
        return Ok(()); // cannot tell: try it
    };
    let need = now + 2 * live;
    if need > max {
        return Err(format!(
            "may: {what}; each coroutine stack is its own mmap plus a PROT_NONE guard page \
             (2 memory mappings), so {live} live coroutines need ~{need} mappings \
             ({now} in use) > vm.max_map_count {max} (room for ~{} more coroutines); \
             past it may panics in spawn (\"failed to alloc sys stack\": ENOMEM)",
            max.saturating_sub(now) / 2
        ));
    }
    Ok(())
}

/// may.
pub struct May;

impl Contender for May {
    fn name(&self) -> &'static str {
        "may"
    }
    fn note(&self, w: &Workload) -> Option<&'static str> {
        match w.name() {
            "chain" | "chainbuf" | "pingpong" => {
                Some("no bounded channel: unbounded may::sync::mpsc (one token in flight)")
            }
            "sieve" => Some("no bounded channel: unbounded mpsc + a one-permit semaphore"),
            _ => None,
        }
    }
    fn run(&self, w: &Workload) -> common::Outcome {
        configure();
        // Start the scheduler (its coroutine pool is allocated then) before counting maps.
        // SAFETY: an empty coroutine: no thread-local access, no stack use.
        join(unsafe { go(|| ()) }?)?;
        let name = w.name();
        if name == "spawn_join" {
            check_map_room(
                common::SPAWN_TASKS,
                "spawn_join spawns 100 000 coroutines before joining any, and may keeps up \
                 to all of them alive at once (measured with 2 workers: spawn #65 474 failed)",
            )?;
        }
        if let Some(n) = common::park_tasks(name) {
            check_map_room(n, &format!("{name} keeps {n} coroutines parked at once"))?;
        }
        // SAFETY: the workload bodies below use no thread-locals (only may's channels,
        // mutex and semaphore, atomics, `Instant` and `common::spin`) and keep small
        // frames (no large arrays, no recursion), well within the default stack.
        let driver = unsafe { go(move || workload(name)) }?;
        join(driver)?
    }
    fn serve(&self, addr: std::net::SocketAddr) -> std::io::Result<()> {
        configure();
        let listener = TcpListener::bind(addr)?;
        super::listening(listener.local_addr()?)?;
        loop {
            match listener.accept() {
                Ok((conn, _)) => {
                    // SAFETY: socket I/O on a heap buffer only; a small frame.
                    if let Err(e) = unsafe { go(move || echo(conn)) } {
                        eprintln!("may echo: {e}");
                    }
                }
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    eprintln!("may echo: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

fn workload(name: &'static str) -> common::Outcome {
    let figure = match name {
        "chain" | "chainbuf" => chain(),
        "sieve" => sieve(),
        "pingpong" => ping_pong(),
        "spawn_join" => spawn_join(),
        "yield" => yields(),
        "sleep_lateness" => sleep_lateness(),
        _ => match (common::mutex_tasks(name), common::park_tasks(name)) {
            (Some(tasks), _) => mutex(tasks),
            (_, Some(n)) => return spawn_park(name, n),
            _ => Err(format!("no may workload {name}")),
        },
    };
    figure.map(Measurement::value)
}

/// `Chain` and `ChainBuf` (the same here, over may's unbounded mpsc: see the module docs).
fn chain() -> Figure {
    const HOPS: usize = common::CHAIN_HOPS;
    // may has no rendezvous or bounded channel; with one token in flight no channel
    // ever holds more than one value, so the unbounded mpsc behaves as capacity 0/1.
    let (head, mut rx) = mpsc::channel::<u64>();
    let started = Arc::new(AtomicUsize::new(0));
    for _ in 0..HOPS {
        let (tx, next) = mpsc::channel::<u64>();
        let left = rx;
        let started = started.clone();
        // SAFETY: channel operations and an atomic only; a tiny frame.
        unsafe {
            go(move || {
                started.fetch_add(1, Ordering::Relaxed);
                drop(started);
                for v in left.iter() {
                    if tx.send(v + 1).is_err() {
                        break;
                    }
                }
            })
        }?;
        rx = next;
    }
    let tail = rx;
    // Construction (not timed) ends when every coroutine has run up to its first receive.
    // (Sleeping, not yielding: may runs a worker's local queue, where a yielding
    // coroutine goes, before the global queues that new coroutines go to, so with one
    // worker a yield loop here would never let them start.)
    while started.load(Ordering::Relaxed) < HOPS {
        may::coroutine::sleep(Duration::from_millis(1));
    }

    let start = Instant::now();
    for token in 0..common::CHAIN_TOKENS as u64 {
        head.send(token)
            .map_err(|_| "chain: the head coroutine is gone".to_string())?;
        let out = tail
            .recv()
            .map_err(|_| "chain: the tail closed before the token came out".to_string())?;
        common::check_token(token, out)?;
    }
    let elapsed = start.elapsed();
    // Dropping the head closes the chain, one coroutine after the other.
    drop(head);
    Ok(common::per(elapsed, common::CHAIN_TOKENS * HOPS))
}

/// The sending half of a capacity-1 channel: may's unbounded mpsc plus one credit.
struct BoundedTx<T> {
    tx: mpsc::Sender<T>,
    credit: Arc<Semphore>,
}

/// The receiving half of [`BoundedTx`].
struct BoundedRx<T> {
    rx: mpsc::Receiver<T>,
    credit: Arc<Semphore>,
}

/// A capacity-1 channel (may 0.3 has none): a send takes the one credit (waiting,
/// parked, while the previous value has not been received), a receive gives it back.
///
/// A sender waiting for the credit is not woken when the receiver is dropped; the
/// sieve, its only user, leaves its coroutines parked at the end (they go with the
/// process).
fn bounded<T>() -> (BoundedTx<T>, BoundedRx<T>) {
    let (tx, rx) = mpsc::channel();
    let credit = Arc::new(Semphore::new(1));
    (
        BoundedTx {
            tx,
            credit: credit.clone(),
        },
        BoundedRx { rx, credit },
    )
}

impl<T> BoundedTx<T> {
    fn send(&self, v: T) -> Result<(), T> {
        self.credit.wait();
        self.tx.send(v).map_err(|e| e.0)
    }
}

impl<T> BoundedRx<T> {
    fn recv(&self) -> Option<T> {
        let v = self.rx.recv().ok()?;
        self.credit.post();
        Some(v)
    }
}

/// Go's concurrent prime sieve, over capacity-1 channels ([`bounded`]).
fn sieve() -> Figure {
    let start = Instant::now();
    let (gen_tx, mut ch) = bounded::<u64>();
    // SAFETY: channel and semaphore operations only; a tiny frame.
    unsafe {
        go(move || {
            let mut i = 2u64;
            while gen_tx.send(i).is_ok() {
                i += 1;
            }
        })
    }?;
    let mut last = 0;
    for _ in 0..common::SIEVE_PRIMES {
        let prime = ch.recv().ok_or("sieve: a filter closed its channel")?;
        last = prime;
        let (tx, next) = bounded::<u64>();
        let input = ch;
        // SAFETY: channel and semaphore operations only; a tiny frame.
        unsafe {
            go(move || {
                while let Some(v) = input.recv() {
                    if v % prime != 0 && tx.send(v).is_err() {
                        break;
                    }
                }
            })
        }?;
        ch = next;
    }
    let elapsed = start.elapsed();
    common::check_last_prime(last)?;
    Ok(elapsed.as_secs_f64() * 1e3)
}

/// Two coroutines (this one and an echo coroutine) bounce a token over two channels.
fn ping_pong() -> Figure {
    // may has no rendezvous channel; one token in flight: the unbounded mpsc behaves
    // as capacity 0/1 here.
    let (ping_tx, ping_rx) = mpsc::channel::<u64>();
    let (pong_tx, pong_rx) = mpsc::channel::<u64>();
    // SAFETY: channel operations only; a tiny frame.
    let echo = unsafe {
        go(move || {
            for v in ping_rx.iter() {
                if pong_tx.send(v + 1).is_err() {
                    break;
                }
            }
        })
    }?;
    let start = Instant::now();
    for i in 0..common::PINGPONG_ROUNDS as u64 {
        ping_tx
            .send(i)
            .map_err(|_| "pingpong: the echo coroutine is gone".to_string())?;
        let back = pong_rx
            .recv()
            .map_err(|_| "pingpong: the echo coroutine is gone".to_string())?;
        if back != i + 1 {
            return Err(format!("pingpong: sent {i}, got {back} back"));
        }
    }
    let elapsed = start.elapsed();
    drop(ping_tx);
    join(echo)?;
    Ok(common::per(elapsed, common::PINGPONG_ROUNDS))
}

/// Spawn SPAWN_TASKS coroutines returning their index, join them in order, check the sum.
fn spawn_join() -> Figure {
    const N: usize = common::SPAWN_TASKS;
    let mut handles = Vec::with_capacity(N);
    let start = Instant::now();
    for i in 0..N as u64 {
        // SAFETY: returns a number; no thread-locals, a tiny frame.
        handles.push(unsafe { go(move || i) }?);
    }
    let mut sum = 0u64;
    for h in handles {
        sum += join(h)?;
    }
    let elapsed = start.elapsed();
    common::check_sum(sum)?;
    Ok(common::per(elapsed, N))
}

/// YIELD_TASKS_PER_WORKER coroutines per worker thread, each yielding YIELD_COUNT times.
fn yields() -> Figure {
    let tasks = common::YIELD_TASKS_PER_WORKER * common::procs();
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        // SAFETY: only yields; a tiny frame.
        handles.push(unsafe {
            go(|| {
                for _ in 0..common::YIELD_COUNT {
                    yield_now();
                }
            })
        }?);
    }
    for h in handles {
        join(h)?;
    }
    let elapsed = start.elapsed();
    Ok(common::per(elapsed, tasks * common::YIELD_COUNT))
}

/// `tasks` coroutines share MUTEX_OPS lock/increment/unlock rounds of a `may::sync::Mutex`.
fn mutex(tasks: usize) -> Figure {
    let per_task = common::ops_per_task(tasks)?;
    let counter = Arc::new(Mutex::new(0u64));
    let start = Instant::now();
    let mut handles = Vec::with_capacity(tasks);
    for _ in 0..tasks {
        let counter = counter.clone();
        // SAFETY: may's mutex only (no guard is held across a blocking point other
        // than the mutex's own wait); a tiny frame.
        handles.push(unsafe {
            go(move || -> Result<(), String> {
                for _ in 0..per_task {
                    *counter.lock().map_err(|_| "mutex: poisoned".to_string())? += 1;
                }
                Ok(())
            })
        }?);
    }
    for h in handles {
        join(h)??;
    }
    let elapsed = start.elapsed();
    let count = *counter.lock().map_err(|_| "mutex: poisoned".to_string())?;
    common::check_count(count)?;
    Ok(common::per(elapsed, common::MUTEX_OPS))
}

/// SLEEP_COUNT sleeps of 1 ms (by this coroutine) while 2 load coroutines per worker
/// spin 50 µs and yield, over and over; the mean lateness in µs.
fn sleep_lateness() -> Figure {
    const SLEEP: Duration = Duration::from_millis(1);
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..2 * common::procs() {
        let stop = stop.clone();
        // SAFETY: an atomic, the clock and yields; a tiny frame.
        load.push(unsafe {
            go(move || {
                while !stop.load(Ordering::Relaxed) {
                    common::spin(Duration::from_micros(50));
                    yield_now();
                }
            })
        }?);
    }
    let mut slept = Duration::ZERO;
    for _ in 0..common::SLEEP_COUNT {
        let t = Instant::now();
        may::coroutine::sleep(SLEEP);
        slept += t.elapsed();
    }
    stop.store(true, Ordering::Relaxed);
    for h in load {
        join(h)?;
    }
    let mean = slept.as_secs_f64() / common::SLEEP_COUNT as f64;
    Ok((mean - SLEEP.as_secs_f64()) * 1e6)
}

/// Spawn-and-park: `n` coroutines each parked on its own channel receive (may has
/// no rendezvous channel: an unbounded mpsc), then released in spawn order and joined.
fn spawn_park(name: &str, n: usize) -> common::Outcome {
    let parked = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let before = procfs::rss_bytes();
    let t = Instant::now();
    for _ in 0..n {
        let (tx, rx) = mpsc::channel::<u64>();
        let parked = parked.clone();
        // SAFETY: an atomic and a channel receive; a tiny frame.
        handles.push(unsafe {
            go(move || {
                parked.fetch_add(1, Ordering::Relaxed);
                drop(parked);
                rx.recv().map(|v| v + 1).ok()
            })
        }?);
        senders.push(tx);
    }
    let spawn = t.elapsed();
    while parked.load(Ordering::Relaxed) < n {
        may::coroutine::sleep(Duration::from_millis(1));
    }
    // The last ones to count themselves may not have reached their receive yet.
    may::coroutine::sleep(Duration::from_millis(10));
    let after = procfs::rss_bytes();
    let t = Instant::now();
    for (i, tx) in senders.into_iter().enumerate() {
        tx.send(i as u64)
            .map_err(|_| format!("spawn_park: coroutine {i} is gone"))?;
    }
    for (i, h) in handles.into_iter().enumerate() {
        match join(h)? {
            Some(v) if v == i as u64 + 1 => {}
            other => return Err(format!("spawn_park: coroutine {i} returned {other:?}")),
        }
    }
    Ok(common::parked(name, n, spawn, t.elapsed(), [before, after]))
}

/// Echoes one connection until EOF or an error.
fn echo(mut conn: TcpStream) {
    if conn.set_nodelay(true).is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 * 1024]; // on the heap, not the coroutine's stack
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}
