//! The plain-threads contender: the comparison's workloads on OS threads.
//!
//! One `std::thread` per task, `std::sync::mpsc::sync_channel(0)` for the rendezvous
//! channels (`sync_channel(1)` for capacity 1), `std::sync::Mutex`,
//! `std::thread::sleep`, `std::thread::yield_now` (`sched_yield`), and an echo server
//! with one thread per connection on std's blocking sockets. The measured part runs on
//! the main thread. Threads have no parallelism knob: `GORO_MAXPROCS` only sets how
//! many yielders and load threads the `yield` and `sleep_lateness` workloads start.
//!
//! Workloads that keep many threads alive at once (`chain`: 10 000, `sieve`: 5 000,
//! `spawn_park`: up to 1 000 000) first check the system's limits (`kernel.pid_max` and
//! `kernel.threads-max` against the tasks that exist, `RLIMIT_NPROC`,
//! `vm.max_map_count`: four mappings per running thread) and skip, saying which limit,
//! rather than starve the whole machine of PIDs or abort (std aborts the process when
//! a new thread cannot map its signal stack); a spawn that fails anyway is also a
//! skip, after the threads created so far are released and joined. `spawn_join` keeps
//! the unjoined threads' stacks (two mappings each) until its join phase, so it checks
//! `vm.max_map_count` the same way (100 000 threads need 200 000 mappings: the
//! default limit, 65 530, says no).
//!
//! `chain`, `chainbuf`, `sieve` and `pingpong` make hundreds of thousands to tens of
//! millions of thread hand-offs (microseconds each): past a `BUDGET` of measured
//! time they stop and skip, the reason giving the rate reached and the time the whole
//! run would take. The workload is never shrunk: a figure in the table is always the
//! full workload.

use std::io;
use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use super::{Contender, Figure};
use crate::harness::procfs;
use crate::workloads::sync::{mutex_ops, Impl, Runner};
use crate::workloads::{self as common, per, Measurement, Workload};

/// Thread stacks in `spawn_park` (the contract's figure).
const RSS_STACK: usize = 64 << 10;
/// PIDs (and mappings, and threads) left free for the rest of the machine.
const HEADROOM: usize = 2048;
/// The measured time `chain`, `chainbuf`, `sieve` and `pingpong` may take before they
/// give up (a skip whose reason gives the rate reached): a thread hand-off costs
/// microseconds (tens of them on a loaded machine), these workloads make 400 000
/// (pingpong) to tens of millions (sieve) of them, and the whole comparison must fit
/// in minutes.
const BUDGET: Duration = Duration::from_secs(4);

/// Plain threads.
pub struct Threads;

impl Contender for Threads {
    fn name(&self) -> &'static str {
        "threads"
    }
    fn supports(&self, w: &Workload) -> bool {
        super::in_comparison(w)
            || common::sync::Bench::from_name(w.name())
                .is_some_and(|b| b.contenders().contains(&Impl::Std))
    }
    fn note(&self, w: &Workload) -> Option<&'static str> {
        match w.name() {
            "chain" | "pingpong" | "sieve" => Some("std::sync::mpsc::sync_channel(0)"),
            n if common::sync::Bench::from_name(n).is_some() => Some("std::sync::Mutex"),
            _ => None,
        }
    }
    fn run(&self, w: &Workload) -> common::Outcome {
        let procs = common::procs();
        let name = w.name();
        let figure = match name {
            "chain" => chain(0),
            "chainbuf" => chain(1),
            "sieve" => sieve(),
            "pingpong" => ping_pong(),
            "spawn_join" => spawn_join(),
            "yield" => Ok(common::proc::yields::<Threads>(procs)),
            "sleep_lateness" => Ok(common::proc::sleep_lateness::<Threads>(procs)),
            _ => {
                if let Some(m) = common::sync::measure(name, Impl::Std) {
                    return m;
                }
                match (common::mutex_tasks(name), common::park_tasks(name)) {
                    (Some(tasks), _) => Ok(mutex_ops::<Mutex<u64>>(Runner::Threads, tasks)),
                    (_, Some(n)) => return spawn_park(name, n),
                    _ => Err(format!("no threads workload {name}")),
                }
            }
        };
        figure.map(Measurement::value)
    }
    fn serve(&self, addr: std::net::SocketAddr) -> io::Result<()> {
        serve(addr)
    }
}

/// Mappings of a running thread: its stack and guard page, and the signal stack and
/// guard page std gives every thread it starts.
const MAPS_PER_LIVE_THREAD: usize = 4;
/// Mappings of a thread that has exited but is not joined yet: its stack and guard.
const MAPS_PER_UNJOINED_THREAD: usize = 2;

/// Whether `n` threads of `per` mappings each fit under `vm.max_map_count` with this
/// process's current mappings. Near the limit, std aborts the process when a new
/// thread cannot map its signal stack, so this is checked before, not found out.
fn map_budget(n: usize, per: usize) -> Result<(), String> {
    let Some((maps, max_maps)) = procfs::map_counts() else {
        return Ok(());
    };
    if maps + per * n > max_maps {
        return Err(format!(
            "vm.max_map_count is {max_maps} ({maps} in use) and each thread takes {per} \
             mappings ({})",
            if per == MAPS_PER_UNJOINED_THREAD {
                "its stack and guard page, kept until it is joined"
            } else {
                "stack and guard page, signal stack and guard page"
            }
        ));
    }
    Ok(())
}

/// Whether `n` more threads, alive at once, fit in the system's limits with
/// [`HEADROOM`] to spare; if not, which limit says no.
fn thread_budget(n: usize) -> Result<(), String> {
    let need = n + HEADROOM;
    // Tasks (threads) that exist now: the denominator of /proc/loadavg's 4th field.
    let tasks = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| {
            let f = s.split_whitespace().nth(3)?.to_string();
            f.split_once('/')?.1.parse::<usize>().ok()
        })
        .unwrap_or(0);
    let mut refusals = Vec::new();
    if let Some(pid_max) = procfs::number("/proc/sys/kernel/pid_max") {
        if tasks + need > pid_max {
            refusals.push(format!(
                "kernel.pid_max is {pid_max} with {tasks} tasks running"
            ));
        }
    }
    if let Some(max) = procfs::number("/proc/sys/kernel/threads-max") {
        if tasks + need > max {
            refusals.push(format!(
                "kernel.threads-max is {max} with {tasks} tasks running"
            ));
        }
    }
    if let Ok((soft, _)) = getrlimit(Resource::RLIMIT_NPROC) {
        if soft != RLIM_INFINITY && (need as u64).saturating_add(tasks as u64) > soft {
            refusals.push(format!(
                "RLIMIT_NPROC is {soft} with up to {tasks} tasks counted against it"
            ));
        }
    }
    if let Err(why) = map_budget(need, MAPS_PER_LIVE_THREAD) {
        refusals.push(why);
    }
    if refusals.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{n} threads alive at once do not fit: {}",
            refusals.join("; ")
        ))
    }
}

/// `n` threads, spawned by `make(i)`; if the OS refuses one, `on_fail` releases the
/// ones created, they are joined, and the error says how far it got.
fn spawn_all<T: Send + 'static>(
    n: usize,
    stack: Option<usize>,
    mut make: impl FnMut(usize) -> Box<dyn FnOnce() -> T + Send + 'static>,
    on_fail: impl FnOnce(),
) -> Result<Vec<JoinHandle<T>>, String> {
    let mut handles = Vec::with_capacity(n);
    for i in 0..n {
        let mut b = thread::Builder::new();
        if let Some(s) = stack {
            b = b.stack_size(s);
        }
        match b.spawn(make(i)) {
            Ok(h) => handles.push(h),
            Err(e) => {
                let created = handles.len();
                let maps = map_hint();
                on_fail();
                for h in handles {
                    let _ = h.join();
                }
                return Err(format!(
                    "the OS refused thread {} of {n} ({e}{maps}); the {created} created \
                     before were released and joined",
                    i + 1
                ));
            }
        }
    }
    Ok(handles)
}

/// This process's mappings against `vm.max_map_count` (every thread stack not yet
/// joined takes two: the stack and its guard page), as `"; N of M mappings in use"`.
fn map_hint() -> String {
    match procfs::map_counts() {
        Some((n, max)) => format!("; {n} of vm.max_map_count = {max} mappings in use"),
        None => String::new(),
    }
}

/// `CHAIN_HOPS` threads linked by `sync_channel(cap)`; ns per hop.
fn chain(cap: usize) -> Figure {
    thread_budget(common::CHAIN_HOPS)?;
    let (first, mut tail) = sync_channel::<u64>(cap);
    // The head goes if a spawn fails: dropping it ends the links created so far.
    let head = std::cell::RefCell::new(Some(first));
    let links = spawn_all(
        common::CHAIN_HOPS,
        None,
        |_| {
            let (tx, next) = sync_channel(cap);
            let input = std::mem::replace(&mut tail, next);
            Box::new(move || {
                for v in input.iter() {
                    if tx.send(v + 1).is_err() {
                        return;
                    }
                }
            })
        },
        || drop(head.borrow_mut().take()),
    )?;
    let first = head.into_inner().expect("no spawn failed");
    let t = Instant::now();
    let mut over = None;
    for k in 1..=common::CHAIN_TOKENS {
        first.send(0).expect("the chain's head is alive");
        let v = tail.recv().expect("the chain's tail is alive");
        assert_eq!(v, common::CHAIN_HOPS as u64, "a token lost hops");
        if k < common::CHAIN_TOKENS && t.elapsed() > BUDGET {
            over = Some(k);
            break;
        }
    }
    let elapsed = t.elapsed();
    drop(first);
    for h in links {
        h.join().expect("a link does not panic");
    }
    if let Some(k) = over {
        let hops = k * common::CHAIN_HOPS;
        return Err(format!(
            "over the {} s budget: {k} of {} tokens ({hops} hops) took {:.1} s, {:.1} us per \
             hop (one futex wake-up each); all {} would take about {:.0} s",
            BUDGET.as_secs(),
            common::CHAIN_TOKENS,
            elapsed.as_secs_f64(),
            per(elapsed, hops) / 1e3,
            common::CHAIN_TOKENS,
            elapsed.as_secs_f64() * common::CHAIN_TOKENS as f64 / k as f64
        ));
    }
    Ok(per(elapsed, common::CHAIN_TOKENS * common::CHAIN_HOPS))
}

/// Go's concurrent prime sieve, a thread per filter, over `sync_channel(0)`; ms for
/// the whole run.
fn sieve() -> Figure {
    thread_budget(common::SIEVE_PRIMES + 1)?;
    let t = Instant::now();
    let (gen, mut ch) = sync_channel::<u64>(0);
    thread::spawn(move || {
        let mut i = 2;
        while gen.send(i).is_ok() {
            i += 1;
        }
    });
    let mut prime = 0;
    for k in 0..common::SIEVE_PRIMES {
        prime = ch.recv().expect("the sieve's tail is alive");
        let (out, next) = sync_channel(0);
        let input = ch;
        let spawned = thread::Builder::new().spawn(move || {
            for i in input.iter() {
                if i % prime != 0 && out.send(i).is_err() {
                    return;
                }
            }
        });
        if let Err(e) = spawned {
            // The filters unwind as their outputs close; the process exits next.
            return Err(format!(
                "the OS refused filter thread {} of {} ({e})",
                k + 1,
                common::SIEVE_PRIMES
            ));
        }
        ch = next;
        if k + 1 < common::SIEVE_PRIMES && t.elapsed() > BUDGET {
            let found = k + 1;
            // The work (channel hops) grows about as the square of the primes found.
            let whole =
                t.elapsed().as_secs_f64() * (common::SIEVE_PRIMES as f64 / found as f64).powi(2);
            return Err(format!(
                "over the {} s budget: {found} of {} primes (the last {prime}) in {:.1} s; \
                 the hops grow with the square of the primes found: the whole run would \
                 take roughly {whole:.0} s",
                BUDGET.as_secs(),
                common::SIEVE_PRIMES,
                t.elapsed().as_secs_f64()
            ));
        }
    }
    let elapsed = t.elapsed();
    assert_eq!(prime, common::SIEVE_LAST_PRIME, "the sieve's last prime");
    // The filters are left blocked (as in Go's program): the process exits next.
    Ok(elapsed.as_secs_f64() * 1e3)
}

/// The main thread and one other bounce a token over two `sync_channel(0)`s; ns per
/// round trip.
fn ping_pong() -> Figure {
    let (ping, ping_rx) = sync_channel::<usize>(0);
    let (pong_tx, pong) = sync_channel::<usize>(0);
    let echo = thread::spawn(move || {
        for v in ping_rx.iter() {
            if pong_tx.send(v).is_err() {
                return;
            }
        }
    });
    let t = Instant::now();
    let mut over = None;
    for i in 0..common::PINGPONG_ROUNDS {
        ping.send(i).expect("the echo thread is alive");
        assert_eq!(pong.recv().expect("the echo thread is alive"), i);
        if i % 1024 == 1023 && i + 1 < common::PINGPONG_ROUNDS && t.elapsed() > BUDGET {
            over = Some(i + 1);
            break;
        }
    }
    let elapsed = t.elapsed();
    drop(ping);
    echo.join().expect("the echo thread does not panic");
    if let Some(k) = over {
        return Err(format!(
            "over the {} s budget: {k} of {} round trips took {:.1} s, {:.1} us each (two \
             futex wake-ups); all would take about {:.0} s",
            BUDGET.as_secs(),
            common::PINGPONG_ROUNDS,
            elapsed.as_secs_f64(),
            per(elapsed, k) / 1e3,
            elapsed.as_secs_f64() * common::PINGPONG_ROUNDS as f64 / k as f64
        ));
    }
    Ok(per(elapsed, common::PINGPONG_ROUNDS))
}

/// Spawn `SPAWN_TASKS` threads, then join them in order; ns per thread.
fn spawn_join() -> Figure {
    let n = common::SPAWN_TASKS;
    map_budget(n + HEADROOM, MAPS_PER_UNJOINED_THREAD)
        .map_err(|why| format!("{n} threads not yet joined do not fit: {why}"))?;
    let t = Instant::now();
    let handles = spawn_all(n, None, |i| Box::new(move || i), || {})?;
    let mut sum = 0usize;
    for (i, h) in handles.into_iter().enumerate() {
        let v = h.join().expect("a thread does not panic");
        assert_eq!(v, i, "thread {i} returned {v}");
        sum += v;
    }
    let elapsed = t.elapsed();
    assert_eq!(sum, n * (n - 1) / 2);
    Ok(per(elapsed, n))
}

impl common::proc::Tasks for Threads {
    type Handle<T> = JoinHandle<T>;
    fn spawn<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> JoinHandle<T> {
        thread::spawn(f)
    }
    fn join<T>(h: JoinHandle<T>) -> T {
        h.join().expect("a thread does not panic")
    }
    fn yield_now() {
        thread::yield_now() // sched_yield
    }
    fn sleep(d: Duration) {
        thread::sleep(d)
    }
}

/// Spawn-and-park: `n` threads with 64 KiB stacks, each blocked on its own
/// rendezvous receive, then released in spawn order and joined.
fn spawn_park(name: &str, n: usize) -> common::Outcome {
    thread_budget(n)?;
    let started = Arc::new(AtomicUsize::new(0));
    let before = procfs::rss_bytes();
    let t = Instant::now();
    let release: Arc<Mutex<Vec<SyncSender<()>>>> = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let handles = {
        let release_on_fail = release.clone();
        spawn_all(
            n,
            Some(RSS_STACK),
            |_| {
                let (tx, rx): (SyncSender<()>, Receiver<()>) = sync_channel(0);
                release.lock().expect("not poisoned").push(tx);
                let started = started.clone();
                Box::new(move || {
                    // Relaxed: a count the main thread polls; the receive below does
                    // not depend on it.
                    started.fetch_add(1, Ordering::Relaxed);
                    rx.recv().is_ok()
                })
            },
            // Dropping the senders wakes every blocked receiver (with an error).
            move || release_on_fail.lock().expect("not poisoned").clear(),
        )?
    };
    let spawn = t.elapsed();
    // Every thread counts itself just before it blocks: once all have counted, the
    // few between the count and the block get a short sleep to get there.
    let deadline = Instant::now() + Duration::from_secs(30);
    // Relaxed: see above.
    while started.load(Ordering::Relaxed) < n {
        assert!(Instant::now() < deadline, "threads did not start in 30 s");
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(10));
    let after = procfs::rss_bytes();
    let t = Instant::now();
    for tx in std::mem::take(&mut *release.lock().expect("not poisoned")) {
        tx.send(()).expect("a parked thread is waiting");
    }
    for h in handles {
        assert!(h.join().expect("a parked thread does not panic"));
    }
    Ok(common::parked(name, n, spawn, t.elapsed(), [before, after]))
}

/// The echo server: binds `addr`, prints `LISTENING <addr>`, then one thread per
/// connection on blocking sockets, until the process exits.
fn serve(addr: std::net::SocketAddr) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    super::listening(listener.local_addr()?)?;
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                if let Err(e) = thread::Builder::new().spawn(move || {
                    if conn.set_nodelay(true).is_ok() {
                        common::echo::echo(&conn);
                    }
                }) {
                    eprintln!("compare serve threads: spawn: {e}");
                }
            }
            Err(e) => {
                eprintln!("compare serve threads: accept: {e}");
                thread::sleep(Duration::from_millis(10));
            }
        }
    }
}
