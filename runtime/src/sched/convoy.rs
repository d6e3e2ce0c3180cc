//! Lock convoys: when sysmon leaves a P with an M that waits on a futex.
//!
//! The hooks park what std's sockets and sleeps block on, but not futexes (std's and
//! parking_lot's locks, condition variables, `thread::park`: parking those is unsound,
//! see decisions/0002-hooks.md), so retake gives the P of an M in a futex wait to
//! another M, as for any call that blocks. For a lock that many coroutines take in
//! turn, that multiplies threads: each new M runs a coroutine that reaches the same
//! lock and waits in its turn, its P is taken in turn, and so on. 10 000 coroutines
//! returning connections to one `ureq` Agent's pool (a std `Mutex` whose critical
//! section closes sockets and frees buffers) made hundreds to thousands of threads,
//! each waiting for the lock (issue 37; docs/benchmark-journal.md has the trace).
//!
//! A new thread for such a P does not help: the lock is moving, so the M that waits
//! gets it soon, and the new M would only join the queue. So past a budget of Ms that
//! lost their P in a futex wait ([`BUDGET`], not yet back in goro), sysmon starts no
//! thread for the P of an M that waits on a futex *while waiters on that futex get
//! through* (a retaken waiter came back from it, or an M whose P was left came out of
//! it, within the last [`STALL_NS`]): it hands the P to an idle M if there is one
//! (the waiters that came back without a P), else leaves it with its M, which gets the
//! lock in its turn. Progress is kept per bucket of futex addresses (the address is
//! in the thread's `/proc/self/task/TID/syscall` line, which sysmon reads where it
//! read the thread's state).
//!
//! **Never a deadlock.** A lock whose holder is a coroutine parked in a hooked call
//! (a `Mutex<TcpStream>` read under its lock) needs a P for the holder to come back
//! and release it. Its waiters make no progress, so after [`STALL_NS`] of none
//! sysmon takes their Ps as it always did, however many Ms are out. A moving lock
//! that shares a bucket with a stalled one holds that off only until one of its
//! waiters comes back to goro: that M finds no P and parks idle, and the next look
//! hands a stalled waiter's P to it, which then runs what is queued (the parked
//! holder, once readied, among it).
//! Event waits (a condition variable, a channel of std's, `thread::park`) are futex
//! waits too: each waits on an address of its own that nobody gets through, so
//! their Ps are taken at once, as before.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

/// Ms that lost their P in a futex wait past which sysmon leaves Ps with waiters on
/// a moving lock. The process then runs about `maxprocs + BUDGET` threads for a
/// convoy, where it ran one per waiter.
pub(crate) const BUDGET: usize = 32;

/// A futex bucket with no waiter through for this long is stalled: its waiters' Ps
/// are taken at once, as before. Go's preemption slice: long enough for a lock whose
/// critical section walks 10 000 pooled connections on a machine whose CPUs are
/// oversubscribed (gaps of 1-5 ms between two waiters through were common in
/// `storm ureq 10000 2 50 10000`, and thresholds of 1 and 2 ms let sysmon take Ps in
/// hundreds of false stalls: 450-1 500 threads); short, as the delay a stalled
/// lock's waiters pay before their Ps go, once per stall.
pub(crate) const STALL_NS: i64 = 10_000_000;

/// How soon sysmon looks again at a P it left with a waiter.
pub(crate) const LOOK_AGAIN_NS: i64 = 100_000;

const BUCKETS: usize = 256;

/// Ms that lost their P while they waited on a futex and are not back in goro.
/// Relaxed: a count compared with a budget; the increment comes before the retake's
/// commit and the decrement after the M learns of it (see `mark`), so it never goes
/// below zero.
static OUT: AtomicUsize = AtomicUsize::new(0);

/// Per bucket of futex words, when a waiter last got through (the runtime clock, 0:
/// never). Relaxed: a time compared with another; a stale one only shifts one
/// decision by a round.
static MOVED_AT: [AtomicI64; BUCKETS] = [const { AtomicI64::new(0) }; BUCKETS];

/// Times sysmon left a P with a waiter on a moving lock (`debug::stats`). Relaxed: a
/// counter.
static DEFERRED: AtomicU64 = AtomicU64::new(0);

fn bucket(addr: usize) -> &'static AtomicI64 {
    // Futex words are 4-byte aligned; mix the higher bits in (Fibonacci hashing).
    let h = (addr as u64 >> 2).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56;
    &MOVED_AT[h as usize % BUCKETS]
}

/// sysmon: whether to leave the P of an M waiting on the futex at `addr` with it:
/// enough Ms are out, none is idle to take the P over, and the futex moves.
pub(crate) fn defer(addr: usize, now: i64) -> bool {
    if OUT.load(Ordering::Relaxed) < BUDGET {
        return false;
    }
    let at = bucket(addr).load(Ordering::Relaxed);
    if at == 0 || now - at >= STALL_NS || super::schedule::idle_m_ready() {
        return false;
    }
    DEFERRED.fetch_add(1, Ordering::Relaxed);
    true
}

/// A waiter on `addr` got through (it came back from its wait).
pub(crate) fn moved(addr: usize, now: i64) {
    bucket(addr).store(now.max(1), Ordering::Relaxed);
}

/// sysmon, about to commit a retake of `m`'s P while `m` waits on the futex at
/// `addr`: counts it out. Called before the commit, so that `m`, which learns of the
/// commit at its next goro call, finds the mark (see `M::lost_p`); undone by
/// [`unmark`] if the commit fails.
pub(crate) fn mark(m: &super::m::MShared, addr: usize) {
    OUT.fetch_add(1, Ordering::Relaxed);
    // Relaxed: the commit's Release CAS publishes it to the M, whose Acquire fence
    // after it learnt of the commit reads it (`M::lost_p`).
    m.futex_wait.store(addr, Ordering::Relaxed);
}

/// The retake of a marked M's P did not commit.
pub(crate) fn unmark(m: &super::m::MShared) {
    // Relaxed: the M never reads the mark of a retake that did not commit.
    if m.futex_wait.swap(0, Ordering::Relaxed) != 0 {
        OUT.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An M that learnt its P was taken, back in goro: if it had waited on a futex, that
/// waiter got through.
pub(crate) fn back(m: &super::m::MShared) {
    // Relaxed: ordered after sysmon's mark by the caller's Acquire fence.
    let addr = m.futex_wait.swap(0, Ordering::Relaxed);
    if addr != 0 {
        OUT.fetch_sub(1, Ordering::Relaxed);
        moved(addr, crate::timers::nanotime());
    }
}

/// Ms out of goro that lost their P in a futex wait, and the Ps left with waiters on
/// a moving lock so far.
pub(crate) fn counts() -> (usize, u64) {
    (
        OUT.load(Ordering::Relaxed),
        DEFERRED.load(Ordering::Relaxed),
    )
}
