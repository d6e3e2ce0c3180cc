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
//! # The park/ready handshake
//!
//! Each waiter (a G, or a plain thread) has one [`WaitCell`]: a 64-bit word holding a
//! wait *sequence number* and a two-bit state, `WAITING`, `PARKED`, `NOTIFIED`, or
//! `NOTIFIED_BY_DEADLINE` (woken by its own deadline: see `park_commit_timeout`).
//!
//! - `prepare` starts wait number `seq + 1` in state `WAITING` and returns an
//!   [`Unparker`] for exactly that wait. An unparker of an older wait is *stale*: it can
//!   never wake a later one, so a wake-up that arrives late (a timer that fired while the
//!   value was already delivered, say) cannot leak into the next wait as a spurious one.
//! - `unpark` moves `WAITING` or `PARKED` to `NOTIFIED` (or `NOTIFIED_BY_DEADLINE`),
//!   once. Only the call that moves
//!   `PARKED` away readies the waiter (puts the G on a run queue, or unparks the thread);
//!   a call that finds `WAITING` leaves the readying to the parker, below.
//! - The parker commits with one CAS `WAITING -> PARKED`, after its commit action ran
//!   and, for a G, after it is fully off its stack. If the CAS fails the wait was already
//!   notified: the G is resumed at once (or the thread returns) without sleeping.
//!
//! So a wake-up racing with a park is never lost and never doubled: exactly one side sees
//! the other's transition. `tests/loom_park.rs` checks this with plain threads.
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
use std::thread::{self, Thread};
use std::time::Instant;

use crate::loom::{AtomicU64, Ordering};
use crate::sched::{self, g::GRef, sysmon, timers as sched_timers};
use crate::timers::{when_of_instant, TimerInner};

const STATE_MASK: u64 = 0b11;
/// The wait is prepared; its owner has not committed to sleeping yet.
const WAITING: u64 = 0;
/// The owner is asleep (a G off its stack, a thread in `thread::park`); whoever moves
/// the cell away from this state must ready it.
const PARKED: u64 = 1;
/// The wait was woken. Terminal for its sequence number.
const NOTIFIED: u64 = 2;
/// The wait was woken by its own deadline (`WaitCell::unpark_by_deadline`). Terminal.
const NOTIFIED_BY_DEADLINE: u64 = 3;
const SEQ_SHIFT: u32 = 2;

/// What [`WaitCell::unpark`] did.
#[must_use]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The unparker belongs to an older wait: nothing happened.
    Stale,
    /// Another unparker of this wait got there first: nothing happened.
    AlreadyWoken,
    /// The owner had not parked yet; its commit CAS will fail and it will not sleep.
    Notified,
    /// The owner was parked: the caller must ready it now.
    MustReady,
}

impl Wake {
    /// Whether this call is the one that woke the wait.
    pub fn woke(self) -> bool {
        matches!(self, Wake::Notified | Wake::MustReady)
    }
}

/// The park/ready handshake word of one waiter (see the module doc).
///
/// Written by: the owner (`prepare`, `try_park`) and by any unparker (`unpark`).
pub struct WaitCell {
    word: AtomicU64,
}

impl Default for WaitCell {
    fn default() -> Self {
        Self::new()
    }
}

impl WaitCell {
    /// A cell with no wait in progress.
    pub fn new() -> Self {
        // Sequence 0 is never handed out (prepare starts at 1); its state is NOTIFIED
        // so that a park without a prepare returns at once instead of sleeping forever.
        WaitCell {
            word: AtomicU64::new(NOTIFIED),
        }
    }

    /// Owner only: starts the next wait and returns its sequence number.
    pub fn prepare(&self) -> u64 {
        // Relaxed load: only the owner ever changes the sequence number, so this thread
        // already has the latest one.
        let seq = (self.word.load(Ordering::Relaxed) >> SEQ_SHIFT) + 1;
        // Release: nothing to publish strictly (the unparker reaches the waiter through
        // a lock or a queue that orders it after this store), but it keeps the new
        // sequence visible no later than the unparker that carries it. A stale unparker
        // whose CAS lands before this store just loses its wake-up, which is its fate.
        self.word
            .store((seq << SEQ_SHIFT) | WAITING, Ordering::Release);
        seq
    }

    /// Owner only: commits to sleeping. Returns true if the owner is now parked (an
    /// unparker will ready it) and false if the wait was already notified.
    pub fn try_park(&self) -> bool {
        let cur = self.word.load(Ordering::Relaxed);
        let seq = cur >> SEQ_SHIFT;
        // Success is Release: everything the owner wrote before sleeping (for a G, its
        // suspended stack) is published to the unparker that moves PARKED away, whose
        // Acquire pairs with it and who then hands the G on through a run queue.
        // Failure is Acquire: pairs with the unparker's Release so the owner sees what
        // the waker wrote before waking it.
        self.word
            .compare_exchange(
                (seq << SEQ_SHIFT) | WAITING,
                (seq << SEQ_SHIFT) | PARKED,
                Ordering::Release,
                Ordering::Acquire,
            )
            .is_ok()
    }

    /// Owner only: the sequence number of the current wait.
    pub fn seq(&self) -> u64 {
        self.word.load(Ordering::Relaxed) >> SEQ_SHIFT
    }

    /// Owner only: whether the current wait has been woken.
    pub fn is_notified(&self) -> bool {
        // Acquire: pairs with the Release of the unparker's CAS.
        self.word.load(Ordering::Acquire) & STATE_MASK >= NOTIFIED
    }

    /// Owner only, once the current wait has been woken: whether its deadline woke it
    /// (rather than an unparker).
    pub fn woken_by_deadline(&self) -> bool {
        // Relaxed: the owner read the notification with Acquire (or failed its park
        // CAS with Acquire) before asking; only the state bits matter here.
        self.word.load(Ordering::Relaxed) & STATE_MASK == NOTIFIED_BY_DEADLINE
    }

    /// Anyone: wakes wait `seq` if it is still the current one.
    pub fn unpark(&self, seq: u64) -> Wake {
        self.notify(seq, NOTIFIED)
    }

    /// The deadline of wait `seq` fired: wakes it like `unpark`, marking that the
    /// deadline did it, so the owner can tell without asking the timer.
    pub fn unpark_by_deadline(&self, seq: u64) -> Wake {
        self.notify(seq, NOTIFIED_BY_DEADLINE)
    }

    fn notify(&self, seq: u64, notified: u64) -> Wake {
        // Acquire so that a MustReady caller sees the owner's parked state.
        let mut cur = self.word.load(Ordering::Acquire);
        loop {
            if cur >> SEQ_SHIFT != seq {
                return Wake::Stale;
            }
            let state = cur & STATE_MASK;
            if state >= NOTIFIED {
                return Wake::AlreadyWoken;
            }
            // AcqRel: Acquire pairs with the owner's Release in try_park; Release
            // publishes what the waker wrote (a value handed over, say) to the owner.
            match self.word.compare_exchange_weak(
                cur,
                (seq << SEQ_SHIFT) | notified,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) if state == PARKED => return Wake::MustReady,
                Ok(_) => return Wake::Notified,
                Err(now) => cur = now,
            }
        }
    }
}

/// Why a coroutine is parked; shown by the coroutine dump.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WaitReason {
    /// Not waiting, or waiting for a reason nobody named.
    None = 0,
    /// A bare `park` call.
    Park,
    /// `JoinHandle::join`.
    Join,
    /// A channel receive.
    ChanReceive,
    /// A channel send.
    ChanSend,
    /// A `select!` with no ready arm.
    Select,
    /// `Mutex::lock`.
    Mutex,
    /// `RwLock::read` or `write`.
    RwLock,
    /// A semaphore acquire.
    Sema,
    /// `Cond::wait`.
    Cond,
    /// `WaitGroup::wait`.
    WaitGroup,
    /// `time::sleep`.
    Sleep,
    /// Waiting for a socket to become readable.
    IoRead,
    /// Waiting for a socket to become writable.
    IoWrite,
    /// In a blocking call.
    BlockingCall,
}

impl WaitReason {
    pub(crate) fn from_u8(v: u8) -> WaitReason {
        use WaitReason::*;
        const ALL: [WaitReason; 15] = [
            None,
            Park,
            Join,
            ChanReceive,
            ChanSend,
            Select,
            Mutex,
            RwLock,
            Sema,
            Cond,
            WaitGroup,
            Sleep,
            IoRead,
            IoWrite,
            BlockingCall,
        ];
        ALL.get(v as usize).copied().unwrap_or(None)
    }

    /// The name Go's goroutine dump would print for this wait.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::None => "running",
            WaitReason::Park => "park",
            WaitReason::Join => "join",
            WaitReason::ChanReceive => "chan receive",
            WaitReason::ChanSend => "chan send",
            WaitReason::Select => "select",
            WaitReason::Mutex => "mutex",
            WaitReason::RwLock => "rwlock",
            WaitReason::Sema => "sema",
            WaitReason::Cond => "cond",
            WaitReason::WaitGroup => "waitgroup",
            WaitReason::Sleep => "sleep",
            WaitReason::IoRead => "io read",
            WaitReason::IoWrite => "io write",
            WaitReason::BlockingCall => "blocking call",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plain OS thread's waiter: its handshake cell and the handle to unpark it.
pub(crate) struct ThreadWaiter {
    cell: WaitCell,
    thread: Thread,
    /// Whether this thread counts in the deadlock check (it is not an M).
    counted: bool,
}

impl ThreadWaiter {
    fn new() -> ThreadWaiter {
        // A thread that waits on the runtime is one the deadlock check counts, except
        // an M (waiting inside `blocking`): its coroutine's `Syscall` status already
        // holds the check off, and the M outlives the wait.
        let counted = !crate::sched::on_m();
        if counted {
            sysmon::KNOWN_THREADS.fetch_add(1, Ordering::SeqCst);
        }
        ThreadWaiter {
            cell: WaitCell::new(),
            thread: thread::current(),
            counted,
        }
    }
}

impl Drop for ThreadWaiter {
    fn drop(&mut self) {
        if self.counted {
            sysmon::KNOWN_THREADS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Counts the calling thread as waiting on the runtime while it blocks.
struct Waiting(bool);

impl Waiting {
    fn new(t: &ThreadWaiter) -> Waiting {
        if t.counted {
            sysmon::WAITING_THREADS.fetch_add(1, Ordering::SeqCst);
        }
        Waiting(t.counted)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if self.0 {
            sysmon::WAITING_THREADS.fetch_sub(1, Ordering::SeqCst);
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
    /// Wakes the wait this unparker was made for. Returns true if this call woke it,
    /// false if it had already been woken or the waiter has moved on.
    ///
    /// Called from a running coroutine, the woken coroutine goes to this P's `runnext`
    /// slot and runs next; from anywhere else, to the global run queue.
    pub fn unpark(self) -> bool {
        self.wake(WaitCell::unpark)
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
        }
    }

    /// Whether this unparker and `other` wake the same waiter (any wait of it).
    pub fn same_waiter(&self, other: &Unparker) -> bool {
        match (&self.target, &other.target) {
            (Target::G(a), Target::G(b)) => Arc::ptr_eq(a, b),
            (Target::Thread(a), Target::Thread(b)) => Arc::ptr_eq(a, b),
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
        // A plain thread: no switch to wait for, so the commit runs right here.
        commit();
        THREAD_WAITER.with(|t| {
            if t.cell.try_park() {
                let _w = Waiting::new(t);
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
