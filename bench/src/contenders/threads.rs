//! The plain-threads contender: the comparison's workloads ([`tasks`]) on OS threads (64 KiB
//! stacks) with `std::sync::mpsc::sync_channel`, `std::sync::Mutex`, `thread::sleep` and
//! `thread::yield_now` (`sched_yield`); echo: a thread per connection on std's sockets.
//! `GORO_MAXPROCS` only sets how many yielders and load threads `yield` and `sleep_lateness`
//! start.
//!
//! Workloads that keep many threads alive (`chain`: 10 000, `sieve`: 5 000, `spawn_park`: up
//! to 1 000 000, `spawn_join`: 100 000 unjoined) first check PIDs, threads, `RLIMIT_NPROC`
//! and `vm.max_map_count` ([`Blocking::room`]) and skip, naming the limit, rather than starve
//! the machine of PIDs or abort (std aborts when a thread cannot map its signal stack). The
//! long hand-off workloads skip past [`Blocking::BUDGET`] of measured time, with the rate.

use std::io;
use std::net::TcpListener;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};

use crate::harness::procfs;
use crate::workloads::sync::Impl;
use crate::workloads::tasks::{self, now, Alive, Blocking};
use crate::workloads::{self as common, Workload};

/// A thread's stack (the contract's figure for `spawn_park`).
const STACK: usize = 64 << 10;
/// PIDs (and mappings, and threads) left free for the rest of the machine.
const HEADROOM: usize = 2048;

/// Plain threads.
pub struct Threads;

impl super::Contender for Threads {
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
        common::sync::measure(w.name(), Impl::Std)
            .or_else(|| now(tasks::run::<Threads>(w.name())))
            .unwrap_or_else(|| Err(format!("no threads workload {}", w.name())))
    }
    fn serve(&self, addr: std::net::SocketAddr) -> io::Result<()> {
        let listener = TcpListener::bind(addr)?;
        super::listening(listener.local_addr()?)?;
        common::echo::accept_loop(
            "compare serve threads",
            || listener.accept(),
            |c| c.set_nodelay(true),
            |task| thread::Builder::new().spawn(task).map(drop),
            thread::sleep,
        )
    }
}

impl Blocking for Threads {
    type Handle<T: Send + 'static> = JoinHandle<T>;
    type Tx<T: Send + 'static> = SyncSender<T>;
    type Rx<T: Send + 'static> = Receiver<T>;
    type Mutex = std::sync::Mutex<u64>;
    /// A hand-off costs microseconds; these workloads make 400 000 (pingpong) to tens
    /// of millions (sieve) of them, and the whole comparison must fit in minutes.
    const BUDGET: Option<Duration> = Some(Duration::from_secs(4));
    fn spawn<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<JoinHandle<T>, String> {
        thread::Builder::new()
            .stack_size(STACK)
            .spawn(f)
            .map_err(|e| {
                let maps = procfs::map_counts().map_or(String::new(), |(n, max)| {
                    format!("; {n} of vm.max_map_count = {max} mappings in use")
                });
                format!("the OS refused a thread: {e}{maps}")
            })
    }
    fn join<T: Send + 'static>(h: JoinHandle<T>) -> Result<T, String> {
        h.join()
            .map_err(|p| format!("a thread panicked: {}", goro::panic_message(&*p)))
    }
    fn channel<T: Send + 'static>(cap: usize) -> (SyncSender<T>, Receiver<T>) {
        sync_channel(cap)
    }
    fn send<T: Send + 'static>(tx: &SyncSender<T>, v: T) -> bool {
        tx.send(v).is_ok()
    }
    fn recv<T: Send + 'static>(rx: &Receiver<T>) -> Option<T> {
        rx.recv().ok()
    }
    fn yield_now() {
        thread::yield_now() // sched_yield
    }
    fn sleep(d: Duration) {
        thread::sleep(d)
    }
    fn room(n: usize, alive: Alive) -> Result<(), String> {
        match alive {
            Alive::Running => thread_budget(n),
            Alive::Unjoined => map_budget(n + HEADROOM, UNJOINED)
                .map_err(|why| format!("{n} threads not yet joined do not fit: {why}")),
        }
    }
}

/// A thread's memory mappings: how many, and which.
type Maps = (usize, &'static str);
/// A running thread's: std gives every thread it starts a signal stack.
const RUNNING: Maps = (4, "stack and guard page, signal stack and guard page");
/// A thread that has exited but is not joined yet.
const UNJOINED: Maps = (2, "its stack and guard page, kept until it is joined");

/// Whether `n` threads of `per` mappings each fit under `vm.max_map_count` with this
/// process's current mappings.
fn map_budget(n: usize, (per, which): Maps) -> Result<(), String> {
    match procfs::map_counts() {
        Some((maps, max)) if maps + per * n > max => Err(format!(
            "vm.max_map_count is {max} ({maps} in use) and each thread takes {per} mappings \
             ({which})"
        )),
        _ => Ok(()),
    }
}

/// Whether `n` more threads, alive at once, fit in the system's limits with
/// [`HEADROOM`] to spare; if not, which limits say no.
fn thread_budget(n: usize) -> Result<(), String> {
    let need = n + HEADROOM;
    // Tasks (threads) that exist now: the denominator of /proc/loadavg's 4th field.
    let tasks: usize = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(3)?.split_once('/')?.1.parse().ok())
        .unwrap_or(0);
    let kernel = |name| procfs::number(&format!("/proc/sys/kernel/{name}")).map(|v| v as u64);
    let nproc = match getrlimit(Resource::RLIMIT_NPROC) {
        Ok((soft, _)) if soft != RLIM_INFINITY => Some(soft),
        _ => None,
    };
    let limits = [
        ("kernel.pid_max", kernel("pid_max"), "running"),
        ("kernel.threads-max", kernel("threads-max"), "running"),
        ("RLIMIT_NPROC", nproc, "at most counted against it"),
    ];
    let mut refusals: Vec<String> = (limits.into_iter())
        .filter_map(|(limit, max, how)| {
            let max = max.filter(|&max| (tasks + need) as u64 > max)?;
            Some(format!("{limit} is {max} with {tasks} tasks {how}"))
        })
        .collect();
    refusals.extend(map_budget(need, RUNNING).err());
    match refusals.join("; ") {
        none if none.is_empty() => Ok(()),
        why => Err(format!("{n} threads alive at once do not fit: {why}")),
    }
}
