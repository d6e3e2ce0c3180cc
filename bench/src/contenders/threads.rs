//! The plain-threads contender: the comparison's workloads ([`tasks`]) on OS threads.
//!
//! One `std::thread` (64 KiB of stack) per task, `std::sync::mpsc::sync_channel(0)` for
//! the rendezvous channels (`sync_channel(1)` for capacity 1), `std::sync::Mutex`,
//! `std::thread::sleep`, `std::thread::yield_now` (`sched_yield`), and an echo server
//! with one thread per connection on std's blocking sockets. The measured part runs on
//! the main thread. Threads have no parallelism knob: `GORO_MAXPROCS` only sets how
//! many yielders and load threads the `yield` and `sleep_lateness` workloads start.
//!
//! Workloads that keep many threads alive at once (`chain`: 10 000, `sieve`: 5 000,
//! `spawn_park`: up to 1 000 000, `spawn_join`: 100 000 unjoined) first check the
//! system's limits ([`Blocking::room`]: PIDs, threads, `RLIMIT_NPROC`, `vm.max_map_count`)
//! and skip, saying which limit, rather than starve the machine of PIDs or abort (std
//! aborts the process when a new thread cannot map its signal stack). The long
//! hand-off workloads stop and skip past a budget of measured time
//! ([`Blocking::BUDGET`]), the reason giving the rate reached.

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
        serve(addr)
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
            .map_err(|e| format!("the OS refused a thread: {e}{}", map_hint()))
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
            Alive::Unjoined => map_budget(n + HEADROOM, MAPS_PER_UNJOINED_THREAD)
                .map_err(|why| format!("{n} threads not yet joined do not fit: {why}")),
        }
    }
}

/// Mappings of a running thread: its stack and guard page, and the signal stack and
/// guard page std gives every thread it starts.
const MAPS_PER_LIVE_THREAD: usize = 4;
/// Mappings of a thread that has exited but is not joined yet: its stack and guard.
const MAPS_PER_UNJOINED_THREAD: usize = 2;

/// Whether `n` threads of `per` mappings each fit under `vm.max_map_count` with this
/// process's current mappings.
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

/// This process's mappings against `vm.max_map_count` (every thread stack not yet
/// joined takes two: the stack and its guard page), as `"; N of M mappings in use"`.
fn map_hint() -> String {
    match procfs::map_counts() {
        Some((n, max)) => format!("; {n} of vm.max_map_count = {max} mappings in use"),
        None => String::new(),
    }
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
