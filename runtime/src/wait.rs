//! The park/ready handshake word and the wait reasons: the bottom of every blocking
//! operation, below the scheduler (which parks and readies Gs with it) and `park.rs`
//! (which builds the blocking API on it).
//!
//! # The park/ready handshake
//!
//! Each waiter (a G, or a plain thread) has one [`WaitCell`]: a 64-bit word holding a
//! wait *sequence number* and a two-bit state, `WAITING`, `PARKED`, `NOTIFIED`, or
//! `NOTIFIED_BY_DEADLINE` (woken by its own deadline: see `park_commit_timeout`).
//!
//! - `prepare` starts wait number `seq + 1` in state `WAITING` and returns an
//!   `Unparker` (`park.rs`) for exactly that wait. An unparker of an older wait is
//!   *stale*: it can never wake a later one, so a wake-up that arrives late (a timer
//!   that fired while the value was already delivered, say) cannot leak into the next
//!   wait as a spurious one.
//! - `unpark` moves `WAITING` or `PARKED` to `NOTIFIED` (or `NOTIFIED_BY_DEADLINE`),
//!   once. Only the call that moves `PARKED` away readies the waiter (puts the G on a
//!   run queue, or unparks the thread); a call that finds `WAITING` leaves the readying
//!   to the parker, below.
//! - The parker commits with one CAS `WAITING -> PARKED`, after its commit action ran
//!   and, for a G, after it is fully off its stack. If the CAS fails the wait was already
//!   notified: the G is resumed at once (or the thread returns) without sleeping.
//!
//! So a wake-up racing with a park is never lost and never doubled: exactly one side sees
//! the other's transition. `tests/loom_park.rs` checks this with plain threads.

use std::fmt;

use crate::loom::{AtomicU64, Ordering};

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
/// Written by: the owner (`prepare`, `try_park`) and by any unparker (`unpark`); read by
/// both.
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
    #[inline]
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
    #[inline]
    pub fn try_park(&self) -> bool {
        // Relaxed: only the sequence number is used, which only the owner (us) changes;
        // the CAS below checks the state.
        let cur = self.word.load(Ordering::Relaxed);
        let seq = cur >> SEQ_SHIFT;
        // Success is Release: everything the owner wrote before sleeping (for a G, its
        // suspended stack) is published to the unparker that moves PARKED away (its
        // Acquire pairs with this), who then hands the G on through a run queue.
        // Failure is Acquire: the owner sees what the waker wrote before its Release.
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
    #[inline]
    pub fn seq(&self) -> u64 {
        // Relaxed: only the owner (us) changes the sequence number.
        self.word.load(Ordering::Relaxed) >> SEQ_SHIFT
    }

    /// Owner only: whether the current wait has been woken.
    #[inline]
    pub fn is_notified(&self) -> bool {
        // Acquire: pairs with the Release of the unparker's CAS.
        self.word.load(Ordering::Acquire) & STATE_MASK >= NOTIFIED
    }

    /// Owner only, once the current wait has been woken: whether its deadline woke it
    /// (rather than an unparker).
    #[inline]
    pub fn woken_by_deadline(&self) -> bool {
        // Relaxed: the owner read the notification with Acquire (or failed its park
        // CAS with Acquire) before asking; only the state bits matter here.
        self.word.load(Ordering::Relaxed) & STATE_MASK == NOTIFIED_BY_DEADLINE
    }

    /// Anyone: wakes wait `seq` if it is still the current one.
    #[inline]
    pub fn unpark(&self, seq: u64) -> Wake {
        self.notify(seq, NOTIFIED)
    }

    /// The deadline of wait `seq` fired: wakes it like `unpark`, marking that the
    /// deadline did it, so the owner can tell without asking the timer.
    #[inline]
    pub fn unpark_by_deadline(&self, seq: u64) -> Wake {
        self.notify(seq, NOTIFIED_BY_DEADLINE)
    }

    #[inline]
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
    /// `Notify::notified`.
    Notify,
    /// `block_on`, waiting for the future's waker.
    Future,
}

impl WaitReason {
    pub(crate) fn from_u8(v: u8) -> WaitReason {
        use WaitReason::*;
        const ALL: [WaitReason; 17] = [
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
            Notify,
            Future,
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
            WaitReason::Notify => "notify",
            WaitReason::Future => "future",
        }
    }
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A plain thread's current wait on goro (a channel receive on `main`, a
/// `WaitGroup::wait`), for the dump and the deadlock report, which would otherwise see
/// only coroutines ("0 coroutines" for a main thread blocked on a channel). Written by
/// the thread as it starts and ends a wait (`park.rs`), read by the dump; Relaxed
/// throughout: informational, a stale reason or time only skews a printed line.
pub(crate) struct ThreadWait {
    /// The thread's name (`std::thread::current().name()`), or its id.
    pub(crate) name: String,
    /// A `WaitReason` as u8, `WaitReason::None` while the thread is not waiting.
    reason: std::sync::atomic::AtomicU8,
    /// When the wait began (the runtime's clock).
    since: std::sync::atomic::AtomicI64,
}

static THREAD_WAITS: std::sync::Mutex<Vec<std::sync::Weak<ThreadWait>>> =
    std::sync::Mutex::new(Vec::new());

impl ThreadWait {
    /// The calling thread's record, registered for the dump (dropped with the thread's
    /// waiter, and then skipped).
    pub(crate) fn register() -> std::sync::Arc<ThreadWait> {
        let t = std::thread::current();
        let name = match t.name() {
            Some(n) => format!("'{n}'"),
            None => format!("{:?}", t.id()),
        };
        let w = std::sync::Arc::new(ThreadWait {
            name,
            reason: std::sync::atomic::AtomicU8::new(WaitReason::None as u8),
            since: std::sync::atomic::AtomicI64::new(0),
        });
        let mut all = THREAD_WAITS.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|w| w.strong_count() > 0);
        all.push(std::sync::Arc::downgrade(&w));
        w
    }

    /// The thread begins (`Some`) or ends (`None`) a wait.
    pub(crate) fn set(&self, wait: Option<(WaitReason, i64)>) {
        use std::sync::atomic::Ordering::Relaxed;
        let (reason, since) = wait.unwrap_or((WaitReason::None, 0));
        self.since.store(since, Relaxed);
        self.reason.store(reason as u8, Relaxed);
    }

    /// Every registered thread waiting now: its name, why, since when.
    pub(crate) fn waiting() -> Vec<(String, WaitReason, i64)> {
        use std::sync::atomic::Ordering::Relaxed;
        let all = THREAD_WAITS.lock().unwrap_or_else(|e| e.into_inner());
        all.iter()
            .filter_map(|w| w.upgrade())
            .filter_map(|w| {
                let reason = WaitReason::from_u8(w.reason.load(Relaxed));
                (reason != WaitReason::None)
                    .then(|| (w.name.clone(), reason, w.since.load(Relaxed)))
            })
            .collect()
    }
}
