//! The may contender: the comparison's workloads ([`tasks`]) on may 0.3's stackful
//! coroutines (`set_workers(procs)`, may's default 32 KiB stacks), each workload's body in a
//! coroutine of its own, with `may::sync::Mutex`, `may::coroutine::{yield_now, sleep}` and,
//! for echo, `may::net` (a coroutine per connection). may's channels are all unbounded:
//! plain `mpsc` where one never holds more than one value ([`Blocking::pipe`]: chain,
//! chainbuf, pingpong, spawn_park), and the sieve's add a one-credit `Semphore` (`Tx`) so
//! that its generator cannot run away (~13 million hand-offs, ~20 s on 2 cores).
//!
//! Its limit: every coroutine stack is an `mmap` plus a guard page, two of the
//! `vm.max_map_count` mappings (65 530 by default: ~32 700 coroutines). Past it may panics in
//! `spawn` (with `RUST_BACKTRACE=1` it deadlocks), so `spawn_join` (100 000 before the first
//! join) and `spawn_park` (up to 1 000 000) are refused up front ([`Blocking::room`]).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use may::coroutine::JoinHandle;
use may::net::TcpListener;
use may::sync::{mpsc, Semphore};

use super::Contender;
use crate::harness::procfs;
use crate::workloads::tasks::{self, now, Alive, Blocking};
use crate::workloads::{self as common, Workload};

/// Sets may's worker count; must run before may's scheduler starts (its first use).
fn configure() {
    may::config().set_workers(common::procs());
}

/// Spawns a coroutine with may's default stack; may's panic on a failed stack allocation
/// becomes an error.
///
/// # Safety
///
/// `may::coroutine::Builder::spawn`'s contract: `f` must not hold a thread-local across a
/// point where it may block or yield (it can resume on another worker thread), and must fit
/// in 32 KiB of stack (overflowing it hits the guard page and kills the process).
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
        MayTasks::join(MayTasks::spawn(|| ())?)?;
        let name = w.name();
        MayTasks::join(MayTasks::spawn(move || now(tasks::run::<MayTasks>(name)))?)?
            .unwrap_or_else(|| Err(format!("no may workload {name}")))
    }
    fn serve(&self, addr: std::net::SocketAddr) -> std::io::Result<()> {
        configure();
        let listener = TcpListener::bind(addr)?;
        super::listening(listener.local_addr()?)?;
        common::echo::accept_loop(
            "compare serve may",
            || listener.accept(),
            |c| c.set_nodelay(true),
            // SAFETY: an echo task does socket I/O on a heap buffer only: no thread-locals,
            // a small frame.
            |task| unsafe { go(task) }.map(drop),
            std::thread::sleep,
        )
    }
}

/// may's coroutines and primitives, for the workloads of [`tasks`] only (private: its
/// `spawn` relies on what those bodies are).
struct MayTasks;

/// The sending half of a may channel: `mpsc` with, for a bounded one, a semaphore of
/// credits that a send takes and a receive gives back.
struct Tx<T> {
    tx: mpsc::Sender<T>,
    credit: Option<Arc<Semphore>>,
}

/// The receiving half of [`Tx`].
struct Rx<T> {
    rx: mpsc::Receiver<T>,
    credit: Option<Arc<Semphore>>,
}

impl<T> Drop for Rx<T> {
    fn drop(&mut self) {
        // A sender waiting for a credit is not woken by the receiver's drop: give it
        // one, so that it sends, fails and returns (the sieve's tear-down).
        if let Some(c) = &self.credit {
            c.post();
        }
    }
}

fn may_channel<T>(credit: Option<usize>) -> (Tx<T>, Rx<T>) {
    let (tx, rx) = mpsc::channel();
    let credit = credit.map(|n| Arc::new(Semphore::new(n)));
    (
        Tx {
            tx,
            credit: credit.clone(),
        },
        Rx { rx, credit },
    )
}

impl Blocking for MayTasks {
    type Handle<T: Send + 'static> = JoinHandle<T>;
    type Tx<T: Send + 'static> = Tx<T>;
    type Rx<T: Send + 'static> = Rx<T>;
    type Mutex = may::sync::Mutex<u64>;
    fn spawn<T: Send + 'static>(
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<JoinHandle<T>, String> {
        // SAFETY: the only callers are the workloads of `tasks` (this type is private),
        // whose bodies use no thread-locals (only these operations, atomics, `Instant`
        // and `common::spin`) and keep small frames (no large arrays, no recursion),
        // well within may's default stack.
        unsafe { go(f) }
    }
    fn join<T: Send + 'static>(h: JoinHandle<T>) -> Result<T, String> {
        h.join()
            .map_err(|p| format!("may: a coroutine panicked: {}", goro::panic_message(&*p)))
    }
    /// No bounded channel in may: capacity `cap.max(1)` from credits (no rendezvous).
    fn channel<T: Send + 'static>(cap: usize) -> (Tx<T>, Rx<T>) {
        may_channel(Some(cap.max(1)))
    }
    fn pipe<T: Send + 'static>(_cap: usize) -> (Tx<T>, Rx<T>) {
        may_channel(None)
    }
    fn send<T: Send + 'static>(tx: &Tx<T>, v: T) -> bool {
        if let Some(c) = &tx.credit {
            c.wait();
        }
        tx.tx.send(v).is_ok()
    }
    fn recv<T: Send + 'static>(rx: &Rx<T>) -> Option<T> {
        let v = rx.rx.recv().ok()?;
        if let Some(c) = &rx.credit {
            c.post();
        }
        Some(v)
    }
    fn yield_now() {
        may::coroutine::yield_now()
    }
    /// Sleeping, not yielding, is what a poll loop needs here: may runs a worker's
    /// local queue, where a yielding coroutine goes, before the global queues that new
    /// coroutines go to, so with one worker a yield loop would never let them start.
    fn sleep(d: Duration) {
        may::coroutine::sleep(d)
    }
    /// Each coroutine stack is its own mmap plus a guard page (see the module docs).
    fn room(live: usize, _alive: Alive) -> Result<(), String> {
        let Some((now, max)) = procfs::map_counts() else {
            return Ok(()); // cannot tell: try it
        };
        let need = now + 2 * live;
        if need > max {
            return Err(format!(
                "may: {live} live coroutines need ~{need} memory mappings ({now} in use; \
                 each stack is its own mmap plus a PROT_NONE guard page) > \
                 vm.max_map_count {max} (room for ~{} more coroutines); past it may panics \
                 in spawn (\"failed to alloc sys stack\": ENOMEM)",
                max.saturating_sub(now) / 2
            ));
        }
        Ok(())
    }
}
