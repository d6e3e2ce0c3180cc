//! goro's contender: every workload of `common.rs` on goro's coroutines.
//!
//! The measured part runs in a coroutine (the "driver", spawned with `go!` and joined
//! from `main`), where a Go program runs it in a goroutine. Channels are
//! `goro::chan::channel(0)` (rendezvous) or `channel(1)`, the lock is
//! `goro::sync::Mutex`, sleeping is `goro::time::sleep`, yielding `goro::yield_now`,
//! and the echo server is one coroutine per connection on `goro::net`.
//!
//! A wrong result (a token that comes back with the wrong count, a wrong sum) panics:
//! the worker exits non-zero and the orchestrator reports a failure.

use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::channel;
use goro::net::{TcpListener, TcpStream};

use crate::common::{self, Outcome, Workload};

/// Runs `w` once; the figure in `w`'s unit.
pub fn run(w: Workload) -> Outcome {
    // The orchestrator always sets GORO_MAXPROCS; this keeps a worker run by hand at
    // the contract's default (2) rather than at the number of CPUs.
    let procs = common::procs();
    if goro::maxprocs() != procs {
        goro::set_maxprocs(procs);
    }
    let driver = goro::go!(move || match w {
        Workload::Chain => chain(0),
        Workload::ChainBuf => chain(1),
        Workload::Sieve => sieve(),
        Workload::PingPong => ping_pong(),
        Workload::SpawnJoin => spawn_join(),
        Workload::Yield => yields(procs),
        Workload::Mutex2 | Workload::Mutex8 | Workload::Mutex64 => {
            mutex(w.mutex_tasks().expect("a mutex workload"))
        }
        Workload::SleepLateness => sleep_lateness(procs),
        Workload::SpawnPark { n, .. } => common::parked_outcome(n, spawn_park(n)),
        Workload::Echo => Err("echo is measured with `compare --serve goro`".into()),
    });
    match driver.join() {
        Ok(outcome) => outcome,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

fn per(elapsed: Duration, n: usize) -> f64 {
    elapsed.as_nanos() as f64 / n as f64
}

/// `CHAIN_HOPS` coroutines linked by channels of capacity `cap`; ns per hop.
fn chain(cap: usize) -> Outcome {
    let (first, mut rx) = channel::<u64>(cap);
    for _ in 0..common::CHAIN_HOPS {
        let (tx, next) = channel(cap);
        goro::go!(move || {
            for v in rx.iter() {
                if tx.send(v + 1).is_err() {
                    return;
                }
            }
        });
        rx = next;
    }
    let t = Instant::now();
    for _ in 0..common::CHAIN_TOKENS {
        first.send(0).expect("the chain's head is alive");
        let v = rx.recv().expect("the chain's tail is alive");
        assert_eq!(v, common::CHAIN_HOPS as u64, "a token lost hops");
    }
    let elapsed = t.elapsed();
    // Tear down: each link sees its input closed, returns and closes its output.
    drop(first);
    assert!(rx.recv().is_err(), "the chain's tail closes last");
    Ok(per(elapsed, common::CHAIN_TOKENS * common::CHAIN_HOPS))
}

/// Go's concurrent prime sieve over rendezvous channels; ms for the whole run.
fn sieve() -> Outcome {
    let t = Instant::now();
    let (gen, mut ch) = channel::<u64>(0);
    goro::go!(move || {
        let mut i = 2;
        while gen.send(i).is_ok() {
            i += 1;
        }
    });
    let mut prime = 0;
    for _ in 0..common::SIEVE_PRIMES {
        prime = ch.recv().expect("the sieve's tail is alive");
        let (out, next) = channel(0);
        let input = ch;
        goro::go!(move || {
            for i in input.iter() {
                if i % prime != 0 && out.send(i).is_err() {
                    return;
                }
            }
        });
        ch = next;
    }
    let elapsed = t.elapsed();
    assert_eq!(prime, common::SIEVE_LAST_PRIME, "the sieve's last prime");
    // The filters are left parked (as in Go's program): the process exits next.
    Ok(elapsed.as_secs_f64() * 1e3)
}

/// Two coroutines bounce a token over two rendezvous channels; ns per round trip.
fn ping_pong() -> Outcome {
    let (ping, ping_rx) = channel::<usize>(0);
    let (pong_tx, pong) = channel::<usize>(0);
    let echo = goro::go!(move || {
        for v in ping_rx.iter() {
            if pong_tx.send(v).is_err() {
                return;
            }
        }
    });
    let t = Instant::now();
    for i in 0..common::PINGPONG_ROUNDS {
        ping.send(i).expect("the echo coroutine is alive");
        assert_eq!(pong.recv().expect("the echo coroutine is alive"), i);
    }
    let elapsed = t.elapsed();
    drop(ping);
    echo.join().expect("the echo coroutine does not panic");
    Ok(per(elapsed, common::PINGPONG_ROUNDS))
}

/// Spawn `SPAWN_TASKS` coroutines, then join them in order; ns per task.
fn spawn_join() -> Outcome {
    let n = common::SPAWN_TASKS;
    let t = Instant::now();
    let handles: Vec<_> = (0..n).map(|i| goro::go!(move || i)).collect();
    let mut sum = 0usize;
    for (i, h) in handles.into_iter().enumerate() {
        let v = h.join().expect("a task does not panic");
        assert_eq!(v, i, "task {i} returned {v}");
        sum += v;
    }
    let elapsed = t.elapsed();
    assert_eq!(sum, n * (n - 1) / 2);
    Ok(per(elapsed, n))
}

/// `YIELD_TASKS_PER_WORKER` coroutines per P each yield `YIELD_COUNT` times; ns per
/// yield.
fn yields(procs: usize) -> Outcome {
    let tasks = common::YIELD_TASKS_PER_WORKER * procs;
    let t = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            goro::go!(|| {
                for _ in 0..common::YIELD_COUNT {
                    goro::yield_now();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a yielder does not panic");
    }
    Ok(per(t.elapsed(), tasks * common::YIELD_COUNT))
}

/// `tasks` coroutines share `MUTEX_OPS` lock/increment/unlock; ns per operation.
fn mutex(tasks: usize) -> Outcome {
    let each = common::MUTEX_OPS / tasks;
    assert_eq!(each * tasks, common::MUTEX_OPS, "MUTEX_OPS divides evenly");
    let counter = Arc::new(goro::sync::Mutex::new(0usize));
    let t = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|_| {
            let counter = counter.clone();
            goro::go!(move || {
                for _ in 0..each {
                    *counter.lock() += 1;
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a locker does not panic");
    }
    let elapsed = t.elapsed();
    assert_eq!(*counter.lock(), common::MUTEX_OPS, "the final count");
    Ok(per(elapsed, common::MUTEX_OPS))
}

/// 1 ms sleeps (this coroutine) under 2 spin-and-yield coroutines per P; mean µs late.
fn sleep_lateness(procs: usize) -> Outcome {
    let stop = Arc::new(AtomicBool::new(false));
    let load: Vec<_> = (0..2 * procs)
        .map(|_| {
            let stop = stop.clone();
            goro::go!(move || {
                // Relaxed: a stop flag publishes no data; seeing it one loop late is
                // harmless.
                while !stop.load(Ordering::Relaxed) {
                    common::spin(Duration::from_micros(50));
                    goro::yield_now();
                }
            })
        })
        .collect();
    let nap = Duration::from_millis(1);
    let mut late_us = 0.0;
    for _ in 0..common::SLEEP_COUNT {
        let t = Instant::now();
        goro::time::sleep(nap);
        late_us += t.elapsed().as_secs_f64() * 1e6 - 1e3;
    }
    // Relaxed: see the load loop.
    stop.store(true, Ordering::Relaxed);
    for h in load {
        h.join().expect("a load coroutine does not panic");
    }
    Ok(late_us / common::SLEEP_COUNT as f64)
}

/// Spawn-and-park: `n` coroutines each parked on its own rendezvous receive, then
/// released in spawn order and joined.
fn spawn_park(n: usize) -> Result<common::Parked, String> {
    let started = Arc::new(AtomicUsize::new(0));
    let before = common::rss_bytes();
    let mut release = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    let t = Instant::now();
    for i in 0..n {
        let (tx, rx) = channel::<()>(0);
        let started = started.clone();
        let spawned = goro::Builder::new().spawn(move || {
            // Relaxed: a count the driver polls; the receive below does not depend on it.
            started.fetch_add(1, Ordering::Relaxed);
            rx.recv().is_ok()
        });
        match spawned {
            Ok(h) => {
                release.push(tx);
                handles.push(h);
            }
            Err(e) => {
                let created = handles.len();
                drop(release);
                for h in handles {
                    let _ = h.join();
                }
                return Err(format!(
                    "coroutine {} of {n} could not be spawned ({e}); the {created} spawned \
                     were released and joined",
                    i + 1
                ));
            }
        }
    }
    let spawn = t.elapsed();
    // Every coroutine counts itself just before it parks: once all have counted, at
    // most one per P is between the count and the park; a short sleep covers those.
    let deadline = Instant::now() + Duration::from_secs(30);
    // Relaxed: see above.
    while started.load(Ordering::Relaxed) < n {
        assert!(
            Instant::now() < deadline,
            "coroutines did not start in 30 s"
        );
        goro::time::sleep(Duration::from_millis(1));
    }
    goro::time::sleep(Duration::from_millis(10));
    let after = common::rss_bytes();
    let t = Instant::now();
    for tx in release {
        tx.send(()).expect("a parked coroutine is waiting");
    }
    for h in handles {
        assert!(h.join().expect("a parked coroutine does not panic"));
    }
    Ok(common::Parked::new(n, spawn, t.elapsed(), before, after))
}

/// The echo server: binds 127.0.0.1:0, prints `LISTENING <addr>`, then one coroutine
/// per connection, forever (`main` exits the process when stdin closes).
pub fn serve() -> io::Result<()> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    {
        let mut out = io::stdout().lock();
        writeln!(out, "LISTENING {addr}")?;
        out.flush()?;
    }
    let acceptor = goro::go!(move || loop {
        match listener.accept() {
            Ok((conn, _)) => drop(goro::go!(move || echo(conn))),
            Err(e) => {
                eprintln!("compare --serve goro: accept: {e}");
                goro::time::sleep(Duration::from_millis(10));
            }
        }
    });
    acceptor
        .join()
        .map_err(|_| io::Error::other("the acceptor panicked"))
}

/// Echoes one connection: read, then write it all back, until EOF or an error.
fn echo(conn: TcpStream) {
    if conn.set_nodelay(true).is_err() {
        return;
    }
    let mut buf = [0u8; 4096];
    let (mut r, mut w) = (&conn, &conn);
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if w.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
