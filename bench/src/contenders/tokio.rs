//! The tokio contender: the comparison's workloads on tokio's multi-thread runtime
//! (`worker_threads` = [`common::procs`]), with tokio's own primitives.
//!
//! How each workload maps onto tokio (see `workloads` for what is measured):
//!
//! - tasks are `tokio::spawn`ed futures. The body of every workload runs in a task of its
//!   own (as Go's main goroutine is a goroutine), not on the thread blocked in
//!   `Runtime::block_on`, so the driver is scheduled like the tasks it talks to.
//! - channels: tokio has no rendezvous (capacity-0) channel, so `Chain`, `ChainBuf`,
//!   `Sieve` and `PingPong` all use `tokio::sync::mpsc::channel(1)`, its smallest bound
//!   (`Chain` and `ChainBuf` are therefore the same program here).
//! - the mutex is `tokio::sync::Mutex` (the async mutex: the peer of a coroutine mutex,
//!   a task waiting for it is parked, not its thread).
//! - yield: `tokio::task::yield_now().await`; sleep: `tokio::time::sleep`, whose timer
//!   wheel has a 1 ms resolution (a deadline is rounded up to the next millisecond
//!   tick): `SleepLateness` measures that as it is.
//! - `SpawnPark`: each task awaits its own `tokio::sync::oneshot` receiver.
//! - echo: `tokio::net`, one task per connection (read, then `write_all`), as in
//!   the other contenders' servers.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio::task::{yield_now, JoinHandle};

use super::Contender;
use crate::harness::procfs;
use crate::workloads::{self as common, Measurement, Workload};

/// A figure, or why there is none.
type Figure = Result<f64, String>;

/// The runtime every workload runs on.
fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(common::procs())
        .enable_all()
        .build()
}

/// tokio.
pub struct Tokio;

impl Contender for Tokio {
    fn name(&self) -> &'static str {
        "tokio"
    }
    fn note(&self, w: &Workload) -> Option<&'static str> {
        matches!(w.name(), "chain" | "chainbuf" | "sieve" | "pingpong")
            .then_some("no rendezvous channel: tokio::sync::mpsc::channel(1)")
    }
    fn run(&self, w: &Workload) -> common::Outcome {
        let rt = runtime().map_err(|e| format!("tokio: cannot build the runtime: {e}"))?;
        let name = w.name();
        let outcome = rt.block_on(async move {
            match tokio::spawn(workload(name)).await {
                Ok(outcome) => outcome,
                Err(e) => Err(format!("tokio: the workload task failed: {e}")),
            }
        });
        // Tasks still parked (the sieve's generator and filters) are dropped, not awaited.
        rt.shutdown_background();
        outcome
    }
    fn serve(&self, addr: std::net::SocketAddr) -> std::io::Result<()> {
        serve(addr)
    }
}

async fn workload(name: &'static str) -> common::Outcome {
    let figure = match name {
        "chain" | "chainbuf" => chain().await,
        "sieve" => sieve().await,
        "pingpong" => ping_pong().await,
        "spawn_join" => spawn_join().await,
        "yield" => yields().await,
        "sleep_lateness" => sleep_lateness().await,
        _ => match (common::mutex_tasks(name), common::park_tasks(name)) {
            (Some(tasks), _) => mutex(tasks).await,
            (_, Some(n)) => return spawn_park(name, n).await,
            _ => Err(format!("no tokio workload {name}")),
        },
    };
    figure.map(Measurement::value)
}

/// Joins `h`, turning a panicked or cancelled task into an error.
async fn join<T>(h: JoinHandle<T>) -> Result<T, String> {
    h.await.map_err(|e| format!("tokio: a task failed: {e}"))
}

/// `Chain` and `ChainBuf` (the same here: tokio's smallest channel holds one value).
async fn chain() -> Figure {
    const HOPS: usize = common::CHAIN_HOPS;
    // tokio has no rendezvous channel: capacity 1 (its smallest bound) stands in for
    // capacity 0 (Chain) and is exactly ChainBuf's capacity.
    let (head, mut rx) = mpsc::channel::<u64>(1);
    let started = Arc::new(AtomicUsize::new(0));
    for _ in 0..HOPS {
        let (tx, next) = mpsc::channel::<u64>(1);
        let mut left = rx;
        let started = started.clone();
        tokio::spawn(async move {
            started.fetch_add(1, Ordering::Relaxed);
            drop(started);
            while let Some(v) = left.recv().await {
                if tx.send(v + 1).await.is_err() {
                    break;
                }
            }
        });
        rx = next;
    }
    let mut tail = rx;
    // Construction (not timed) ends when every task has run up to its first receive.
    while started.load(Ordering::Relaxed) < HOPS {
        yield_now().await;
    }

    let start = Instant::now();
    for token in 0..common::CHAIN_TOKENS as u64 {
        head.send(token)
            .await
            .map_err(|_| "chain: the head task is gone".to_string())?;
        let out = tail
            .recv()
            .await
            .ok_or("chain: the tail closed before the token came out")?;
        common::expect_eq(
            format_args!("chain: token {token} out"),
            out,
            token + HOPS as u64,
        )?;
    }
    let elapsed = start.elapsed();
    // Dropping the head closes the chain: each task's receive ends, it returns and
    // drops its sender, and so on down the chain.
    drop(head);
    Ok(common::per(elapsed, common::CHAIN_TOKENS * HOPS))
}

/// Go's concurrent prime sieve, over capacity-1 channels (tokio has no capacity 0).
async fn sieve() -> Figure {
    let start = Instant::now();
    let (gen_tx, mut ch) = mpsc::channel::<u64>(1);
    tokio::spawn(async move {
        let mut i = 2u64;
        // Stops when the first filter is gone.
        while gen_tx.send(i).await.is_ok() {
            i += 1;
        }
    });
    let mut last = 0;
    for _ in 0..common::SIEVE_PRIMES {
        let prime = ch
            .recv()
            .await
            .ok_or("sieve: a filter closed its channel")?;
        last = prime;
        let (tx, next) = mpsc::channel::<u64>(1);
        let mut input = ch;
        tokio::spawn(async move {
            while let Some(v) = input.recv().await {
                if v % prime != 0 && tx.send(v).await.is_err() {
                    break;
                }
            }
        });
        ch = next;
    }
    let elapsed = start.elapsed();
    common::expect_eq("sieve: the last prime", last, common::SIEVE_LAST_PRIME)?;
    Ok(elapsed.as_secs_f64() * 1e3)
}

/// Two tasks (this one and an echo task) bounce a token over two capacity-1 channels.
async fn ping_pong() -> Figure {
    // tokio has no rendezvous channel: capacity 1, its smallest bound.
    let (ping_tx, mut ping_rx) = mpsc::channel::<u64>(1);
    let (pong_tx, mut pong_rx) = mpsc::channel::<u64>(1);
    let echo = tokio::spawn(async move {
        while let Some(v) = ping_rx.recv().await {
            if pong_tx.send(v + 1).await.is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    for i in 0..common::PINGPONG_ROUNDS as u64 {
        ping_tx
            .send(i)
            .await
            .map_err(|_| "pingpong: the echo task is gone".to_string())?;
        let back = pong_rx
            .recv()
            .await
            .ok_or("pingpong: the echo task is gone")?;
        if back != i + 1 {
            return Err(format!("pingpong: sent {i}, got {back} back"));
        }
    }
    let elapsed = start.elapsed();
    drop(ping_tx);
    join(echo).await?;
    Ok(common::per(elapsed, common::PINGPONG_ROUNDS))
}

/// Spawn SPAWN_TASKS tasks returning their index, join them in order, check the sum.
async fn spawn_join() -> Figure {
    const N: usize = common::SPAWN_TASKS;
    let mut handles = Vec::with_capacity(N);
    let start = Instant::now();
    for i in 0..N as u64 {
        handles.push(tokio::spawn(async move { i }));
    }
    let mut sum = 0u64;
    for h in handles {
        sum += join(h).await?;
    }
    let elapsed = start.elapsed();
    common::expect_eq("spawn_join: the sum of the results", sum, common::SPAWN_SUM)?;
    Ok(common::per(elapsed, N))
}

/// YIELD_TASKS_PER_WORKER tasks per worker thread, each yielding YIELD_COUNT times.
async fn yields() -> Figure {
    let tasks = common::YIELD_TASKS_PER_WORKER * common::procs();
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            tokio::spawn(async {
                for _ in 0..common::YIELD_COUNT {
                    yield_now().await;
                }
            })
        })
        .collect();
    for h in handles {
        join(h).await?;
    }
    let elapsed = start.elapsed();
    Ok(common::per(elapsed, tasks * common::YIELD_COUNT))
}

/// `tasks` tasks share MUTEX_OPS lock/increment/unlock rounds of a `tokio::sync::Mutex`.
async fn mutex(tasks: usize) -> Figure {
    let per_task = common::ops_per_task(tasks)?;
    let counter = Arc::new(Mutex::new(0u64));
    let start = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let counter = counter.clone();
            tokio::spawn(async move {
                for _ in 0..per_task {
                    *counter.lock().await += 1;
                }
            })
        })
        .collect();
    for h in handles {
        join(h).await?;
    }
    let elapsed = start.elapsed();
    let count = *counter.lock().await;
    common::expect_eq("mutex: the count", count, common::MUTEX_OPS as u64)?;
    Ok(common::per(elapsed, common::MUTEX_OPS))
}

/// SLEEP_COUNT sleeps of 1 ms (by this task) while 2 load tasks per worker spin 50 µs
/// and yield, over and over; the mean lateness in µs.
async fn sleep_lateness() -> Figure {
    const SLEEP: Duration = Duration::from_millis(1);
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2 * common::procs())
        .map(|_| {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    common::spin(Duration::from_micros(50));
                    yield_now().await;
                }
            })
        })
        .collect();
    let mut slept = Duration::ZERO;
    for _ in 0..common::SLEEP_COUNT {
        let t = Instant::now();
        tokio::time::sleep(SLEEP).await;
        slept += t.elapsed();
    }
    stop.store(true, Ordering::Relaxed);
    for h in load {
        join(h).await?;
    }
    let mean = slept.as_secs_f64() / common::SLEEP_COUNT as f64;
    Ok((mean - SLEEP.as_secs_f64()) * 1e6)
}

/// Spawn-and-park: `n` tasks each parked on its own oneshot receive (tokio has no
/// rendezvous channel), then released in spawn order and joined.
async fn spawn_park(name: &str, n: usize) -> common::Outcome {
    let parked = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let before = procfs::rss_bytes();
    let t = Instant::now();
    for _ in 0..n {
        let (tx, rx) = oneshot::channel::<u64>();
        let parked = parked.clone();
        handles.push(tokio::spawn(async move {
            parked.fetch_add(1, Ordering::Relaxed);
            drop(parked);
            rx.await.map(|v| v + 1)
        }));
        senders.push(tx);
    }
    let spawn = t.elapsed();
    // A task counts itself in the same poll that registers it on its receiver.
    while parked.load(Ordering::Relaxed) < n {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let after = procfs::rss_bytes();
    let t = Instant::now();
    for (i, tx) in senders.into_iter().enumerate() {
        tx.send(i as u64)
            .map_err(|_| format!("spawn_park: task {i} is gone"))?;
    }
    for (i, h) in handles.into_iter().enumerate() {
        match join(h).await? {
            Ok(v) if v == i as u64 + 1 => {}
            other => return Err(format!("spawn_park: task {i} returned {other:?}")),
        }
    }
    Ok(common::parked(name, n, spawn, t.elapsed(), [before, after]))
}

/// Echoes one connection (TCP_NODELAY, a 16 KiB buffer) until EOF or an error (errors
/// end it silently: the load generator reports what went wrong on its side).
async fn echo(mut conn: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if conn.set_nodelay(true).is_err() {
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n @ 1..) = conn.read(&mut buf).await {
        if conn.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The echo server: binds `addr`, prints `LISTENING <addr>`, echoes (one task per
/// connection) until the process exits.
fn serve(addr: std::net::SocketAddr) -> std::io::Result<()> {
    runtime()?.block_on(async {
        let listener = TcpListener::bind(addr).await?;
        super::listening(listener.local_addr()?)?;
        loop {
            match listener.accept().await {
                Ok((conn, _)) => drop(tokio::spawn(echo(conn))),
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    eprintln!("tokio echo: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    })
}
