//! `park` / [`Unparker`]: the only blocking API the rest of goro uses.
//!
//! Every blocking thing above the scheduler (the sema table, channels, sleep, sockets,
//! `JoinHandle::join`) is built on these three calls, which is why all of them work from
//! coroutines and from plain OS threads alike, in any mix:
//!
//! ```text
//! let unparker = park::prepare();          // start a wait; get its wake-up handle
//! publish(unparker) under some lock;       // e.g. push it on a waiter list
//! park::park_commit(reason, || unlock());  // sleep; the unlock runs after the switch
//! ```
//!
//! The park/ready handshake itself (the `WaitCell` every waiter has) is in `wait.rs`.
//!
//! # Parking commits after the switch
//!
//! A G that parks suspends to its M's scheduler loop with a request that carries the
//! commit action (a closure living on the G's stack). The M runs it once the G is off
//! its stack, then does the CAS above. That is what makes "unlock the channel, then
//! sleep" race-free: a waker that takes the lock after the unlock can already ready the
//! G, and the G cannot be resumed on another M while its own M is still inside it
//! (Go: `gopark`'s unlock function).

use std::fmt;
use std::sync::Arc;
use std::task::Waker;
use std::thread::{self, Thread};
use std::time::Instant;

use crate::loom::Ordering;
use crate::sched::{self, g::GRef, sysmon, timers as sched_timers};
use crate::timers::{when_of_instant, TimerInner};
pub use crate::wait::WaitReason;
// The handshake word itself, for goro-sync's waiters (another crate, so not
// `pub(crate)`). Hidden: an interface between goro's own crates.
#[doc(hidden)]
pub use crate::wait::{WaitCell, Wake};

/// A plain OS thread's waiter: its handshake cell and the handle to unpark it.
pub(crate) struct ThreadWaiter {
    cell: WaitCell,
    thread: Thread,
    /// Whether this thread counts in the deadlock check (it is not an M).
    counted: bool,
    /// What it waits on, for the dump (counted threads only).
    wait: Option<Arc<crate::wait::ThreadWait>>,
}

impl ThreadWaiter {
    fn new() -> ThreadWaiter {
        // A thread that waits on the runtime is one the deadlock check counts, except
        // an M (waiting inside `blocking`): its coroutine's `Syscall` status already
        // holds the check off, and the M outlives the wait.
        let counted = !crate::sched::on_m();
        if counted {
            // Release: see `sysmon::KNOWN_THREADS` (the deadlock check's counts).
            sysmon::KNOWN_THREADS.fetch_add(1, Ordering::Release);
        }
        ThreadWaiter {
            cell: WaitCell::new(),
            thread: thread::current(),
            counted,
            wait: counted.then(crate::wait::ThreadWait::register),
        }
    }
}

impl Drop for ThreadWaiter {
    fn drop(&mut self) {
        if self.counted {
            // Release: as in `new`.
            sysmon::KNOWN_THREADS.fetch_sub(1, Ordering::Release);
        }
    }
}

/// Counts the calling thread as waiting on the runtime while it blocks, and records
/// why for the dump.
struct Waiting<'a>(&'a ThreadWaiter);

impl<'a> Waiting<'a> {
    fn new(t: &'a ThreadWaiter, reason: WaitReason) -> Waiting<'a> {
        if let Some(w) = &t.wait {
            w.set(Some((reason, crate::timers::nanotime())));
        }
        if t.counted {
            // Release: the deadlock check that counts us as waiting sees what we did
            // before (its Acquire load pairs with this; see `sysmon::KNOWN_THREADS`).
            sysmon::WAITING_THREADS.fetch_add(1, Ordering::Release);
            // The check runs in sysmon, which a program that waits on goro before it
            // spawns any coroutine has not started yet (Go's first lesson: a `main`
            // blocked for ever on a channel is a deadlock). Once started, a load.
            sysmon::start();
            // A sysmon that found every P idle before this count went up sleeps with
            // no deadline: wake it to check again (the thread's half of a Dekker pair:
            // the RMW above, then `should_poke`'s fence and load; sysmon's half is in
            // its deep sleep, after `announce`). Without it, a thread that began to
            // wait a moment after the Ps went idle left a deadlock unreported.
            sysmon::wake_if_asleep();
        }
        Waiting(t)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(w) = &self.0.wait {
            w.set(None);
        }
        if self.0.counted {
            // Release: as in `new`.
            sysmon::WAITING_THREADS.fetch_sub(1, Ordering::Release);
        }
    }
}

thread_local! {
    static THREAD_WAITER: Arc<ThreadWaiter> = Arc::new(ThreadWaiter::new());
}

#[derive(Clone)]
enum Target {
    G(GRef),
    Thread(Arc<ThreadWaiter>),
    /// An async task: the wait is a future's, and waking it wakes the task, which polls
    /// the future again (see [`Unparker::from_waker`]). In an `Arc`, as the other
    /// variants' targets are: `Target` stays two words and its drop three alike
    /// reference-count decrements, which the channel paths inline (a `Waker` here, or a
    /// `Box` of one, made the drop an out-of-line call in every sudog's life: pingpong
    /// +5% instructions). An async wait pays one allocation.
    Waker(Arc<Waker>),
}

/// The wake-up handle of one wait, made by [`prepare`].
///
/// It wakes exactly that wait, at most once: after the waiter has been woken (by this
/// unparker or a clone of it) or has moved on to a later wait, [`Unparker::unpark`] does
/// nothing and returns `false`.
#[derive(Clone)]
pub struct Unparker {
    target: Target,
    seq: u64,
}

impl Unparker {
    /// The id of the coroutine this unparker wakes; None for a thread or a task.
    #[inline]
    pub(crate) fn coroutine_id(&self) -> Option<u64> {
        match &self.target {
            Target::G(g) => Some(g.id),
            _ => None,
        }
    }

    /// Wakes the wait this unparker was made for. Returns true if this call woke it,
    /// false if it had already been woken or the waiter has moved on.
    ///
    /// Called from a running coroutine, the woken coroutine goes to this P's `runnext`
    /// slot and runs next; from anywhere else, to the global run queue.
    pub fn unpark(self) -> bool {
        self.wake(WaitCell::unpark)
    }

    /// Like [`Unparker::unpark`], except that a coroutine to ready is pushed on `batch`
    /// instead of being queued: the caller queues the batch (the poller's, through its
    /// caller: see `netpoll.rs`). A thread is unparked at once.
    pub(crate) fn unpark_into(self, batch: &mut Vec<GRef>) -> bool {
        match self.target {
            Target::G(g) => {
                let wake = g.wait.unpark(self.seq);
                if wake == Wake::MustReady {
                    batch.push(g);
                }
                wake.woke()
            }
            Target::Thread(_) | Target::Waker(_) => self.unpark(),
        }
    }

    /// `unpark` for the wait's own deadline (see `park_commit_timeout`).
    fn unpark_by_deadline(self) -> bool {
        self.wake(WaitCell::unpark_by_deadline)
    }

    fn wake(self, notify: fn(&WaitCell, u64) -> Wake) -> bool {
        match self.target {
            Target::G(g) => {
                let wake = notify(&g.wait, self.seq);
                if wake == Wake::MustReady {
                    sched::ready(g);
                }
                wake.woke()
            }
            Target::Thread(t) => {
                let wake = notify(&t.cell, self.seq);
                if wake == Wake::MustReady {
                    t.thread.unpark();
                }
                wake.woke()
            }
            Target::Waker(w) => {
                w.wake_by_ref();
                true
            }
        }
    }

    /// An unparker that wakes an async task: `unpark` calls [`Waker::wake`]. This is
    /// how a future waits in goro's waiter lists (a channel's queue, a join): it puts
    /// one of these where a coroutine would put its [`prepare`]d unparker, returns
    /// `Pending`, and checks again when polled. Unlike a coroutine's, it is not tied to
    /// one wait: every `unpark` wakes the task and returns true.
    pub fn from_waker(waker: Waker) -> Unparker {
        Unparker {
            target: Target::Waker(Arc::new(waker)),
            seq: 0,
        }
    }

    /// Whether this unparker wakes the task `waker` wakes ([`Waker::will_wake`]), so a
    /// future polled again with the same waker need not replace it.
    pub fn will_wake(&self, waker: &Waker) -> bool {
        matches!(&self.target, Target::Waker(w) if w.will_wake(waker))
    }

    /// Whether this unparker and `other` wake the same waiter (any wait of it).
    pub fn same_waiter(&self, other: &Unparker) -> bool {
        match (&self.target, &other.target) {
            (Target::G(a), Target::G(b)) => Arc::ptr_eq(a, b),
            (Target::Thread(a), Target::Thread(b)) => Arc::ptr_eq(a, b),
            (Target::Waker(a), Target::Waker(b)) => a.will_wake(b),
            _ => false,
        }
    }
}

impl fmt::Debug for Unparker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::G(g) => write!(f, "Unparker(coroutine {}, wait {})", g.id, self.seq),
            Target::Thread(t) => {
                write!(f, "Unparker(thread {:?}, wait {})", t.thread.id(), self.seq)
            }
            Target::Waker(_) => f.write_str("Unparker(async task)"),
        }
    }
}

/// Starts a wait of the current coroutine or thread and returns its wake-up handle.
///
/// Must be followed by [`park`] or [`park_commit`] on the same coroutine or thread; a
/// second `prepare` before that makes the first unparker stale.
pub fn prepare() -> Unparker {
    match sched::current_g_arc() {
        Some(g) => {
            let seq = g.wait.prepare();
            Unparker {
                target: Target::G(g),
                seq,
            }
        }
        None => THREAD_WAITER.with(|t| Unparker {
            seq: t.cell.prepare(),
            target: Target::Thread(t.clone()),
        }),
    }
}

/// A plain thread's short wait before it sleeps, for a wake likely to come within
/// microseconds (a joined coroutine that runs or waits in a queue, a channel's peer):
/// spins, then yields the CPU, a few rounds each, testing `done` between them
/// (parking_lot's `SpinWait` takes the same rounds: 3 of spinning, 7 of yielding). True
/// if `done` came true. False at once on an M's thread: a coroutine's park is a
/// switch, and an M must not hold its P spinning.
///
/// A thread's sleep is a futex wait, and its wake a futex wake on the waker's side: a
/// plain thread joining a million short coroutines in turn slept on one in twenty and
/// cost the Ms 13% of their time in those wakes; with these rounds the process makes
/// 60% fewer futex calls and the wake-up phase takes 15% less (docs/benchmarks.md).
fn spin_before_sleep(done: impl Fn() -> bool) -> bool {
    if sched::m::current_m().is_some() {
        return false;
    }
    for round in 0..SPIN_ROUNDS + YIELD_ROUNDS {
        if done() {
            return true;
        }
        if round < SPIN_ROUNDS {
            for _ in 0..(2 << round) {
                std::hint::spin_loop();
            }
        } else {
            thread::yield_now();
        }
    }
    done()
}

/// [`spin_before_sleep`]'s rounds: of spinning (2, 4, 8 pauses), then of yielding.
const SPIN_ROUNDS: u32 = 3;
const YIELD_ROUNDS: u32 = 7;

/// Sleeps until the wait begun by the last [`prepare`] is woken. Returns at once if it
/// already was.
#[inline]
pub fn park(reason: WaitReason) {
    park_commit(reason, || {});
}

/// Like [`park`], but runs `commit` first — on a coroutine, once the coroutine is off
/// its stack, which is what makes "publish the unparker under a lock, then unlock in
/// `commit`" free of lost wake-ups.
///
/// `commit` runs on the scheduler's stack: it must be short, must not park, and must
/// not panic (a panic there aborts the process with a message).
#[inline]
pub fn park_commit<F: FnOnce()>(reason: WaitReason, commit: F) {
    if let Err(commit) = sched::park_current_g(reason, commit) {
        // A plain thread: no switch to wait for, so the commit runs right here. In a
        // forked child, nobody would ever wake it.
        sched::not_in_forked_child();
        commit();
        THREAD_WAITER.with(|t| {
            // A wake due within microseconds then costs no futex call on either side.
            if spin_before_sleep(|| t.cell.is_notified()) {
                return;
            }
            if t.cell.try_park() {
                let _w = Waiting::new(t, reason);
                while !t.cell.is_notified() {
                    thread::park();
                }
            }
        });
    }
}

/// Parks like [`park_commit`], but no later than `deadline`. Returns true if it was the
/// deadline that woke the wait; false if an unparker did (or had, before the park).
pub fn park_commit_timeout<F: FnOnce()>(reason: WaitReason, deadline: Instant, commit: F) -> bool {
    let Some(g) = sched::current_g_arc() else {
        return park_thread_timeout(deadline, commit);
    };
    // The deadline wakes the wait through its own unparker, which marks the wake as
    // the deadline's: whoever woke us, the cell says which, and nobody waits for the
    // timer's function to finish (it may be running on a descheduled thread).
    let cell = g.clone();
    let u = Unparker {
        seq: g.wait.seq(),
        target: Target::G(g),
    };
    let t = TimerInner::new(Box::new(move || {
        u.clone().unpark_by_deadline();
    }));
    sched_timers::reset(&t, when_of_instant(deadline), 0);
    park_commit(reason, commit);
    // Woken (park_commit returns only then): the timer is no longer needed either way.
    sched_timers::stop(&t);
    cell.wait.woken_by_deadline()
}

/// [`park_commit_timeout`] without a commit action.
pub fn park_timeout(reason: WaitReason, deadline: Instant) -> bool {
    park_commit_timeout(reason, deadline, || {})
}

/// A plain thread's timed park: sleeps in `thread::park_timeout` until woken or the
/// deadline, when it wakes its own wait (and so wins unless an unparker got there).
///
/// The thread does not count as waiting for the deadlock check: its deadline is a
/// wake-up on its way, as a coroutine's pending timer is, and the thread may go on to
/// wake everyone else.
fn park_thread_timeout<F: FnOnce()>(deadline: Instant, commit: F) -> bool {
    sched::not_in_forked_child();
    commit();
    THREAD_WAITER.with(|t| {
        if !t.cell.try_park() {
            return false;
        }
        let seq = t.cell.seq();
        loop {
            if t.cell.is_notified() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                // Race the unparkers for our own wait.
                return t.cell.unpark(seq).woke();
            }
            thread::park_timeout(deadline - now);
        }
    })
}
