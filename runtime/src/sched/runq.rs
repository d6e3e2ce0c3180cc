//! Run queues: the local queue and `runnext` of a P, stealing, and the work summary.
//!
//! Only the P's owner pushes to its local queue and `runnext`; readying from anywhere
//! else goes to the global queue. So the owner is the only one who can make its queue
//! non-empty, which is what lets it clear its work-summary bit without a race.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_deque::Steal;

use super::g::GRef;
use super::p::{HeldP, PStatus, P};
use super::{rt_started, BACKOFF_CHECK_NS, RUNNEXT_BACKOFF_NS};
use crate::loom::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

/// One slot beside a P's queue, holding an owned `Arc<T>` as a raw pointer.
///
/// The owner puts and takes with `swap`; a thief takes with a CAS from the pointer it
/// saw, so each G that enters the slot leaves it exactly once. The pointer is only
/// dereferenced by whoever took it out. `tests/loom_runnext.rs` checks this.
pub struct RunNext<T> {
    /// Written by the owner (`put`, `take`) and by a thief's CAS (`steal`); peeked at
    /// by thieves, sysmon and `runq_empty`.
    slot: AtomicPtr<T>,
    /// Puts so far (wrapping). Written only by the owner (load + store, no RMW); read
    /// by a backing-off thief to tell "the victim is making progress" from "the slot
    /// still holds the same G", which the pointer alone cannot: a freed G's address is
    /// often reused by the next one.
    puts: AtomicU32,
}

impl<T> RunNext<T> {
    /// An empty slot.
    pub fn new() -> Self {
        RunNext {
            slot: AtomicPtr::new(std::ptr::null_mut()),
            puts: AtomicU32::new(0),
        }
    }

    /// Owner: puts `t` in the slot and returns the one it displaced.
    pub fn put(&self, t: Arc<T>) -> Option<Arc<T>> {
        // Relaxed: a progress hint for thieves, not a synchronisation point.
        self.puts.store(
            self.puts.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        // AcqRel: Release publishes the G to whoever takes it; Acquire takes ownership
        // of the displaced one, published by the put that stored it.
        let old = self
            .slot
            .swap(Arc::into_raw(t).cast_mut(), Ordering::AcqRel);
        // SAFETY: a non-null slot value is always an Arc::into_raw that nobody else
        // took (swap gave it to us alone).
        (!old.is_null()).then(|| unsafe { Arc::from_raw(old) })
    }

    /// Owner: takes the slot's value.
    pub fn take(&self) -> Option<Arc<T>> {
        // Relaxed fast path: an empty slot stays empty unless the owner (us) fills it.
        if self.slot.load(Ordering::Relaxed).is_null() {
            return None;
        }
        // Acquire: pairs with the Release of `put`.
        let old = self.slot.swap(std::ptr::null_mut(), Ordering::Acquire);
        // SAFETY: as in `put`.
        (!old.is_null()).then(|| unsafe { Arc::from_raw(old) })
    }

    /// Anyone: the pointer in the slot now (never dereferenced by the caller).
    pub fn peek(&self) -> *mut T {
        // Acquire: nothing is dereferenced; it keeps the reads that follow (the queue's,
        // a second peek in `runq_empty`) after this one, as Go's runqempty wants.
        self.slot.load(Ordering::Acquire)
    }

    /// Anyone: the number of puts so far (see `puts`).
    pub fn puts(&self) -> u32 {
        // Relaxed: a progress hint (see the field).
        self.puts.load(Ordering::Relaxed)
    }

    /// Thief: takes the slot's value if it is still `seen`.
    pub fn steal(&self, seen: *mut T) -> Option<Arc<T>> {
        if seen.is_null() {
            return None;
        }
        // Acquire on success: pairs with the Release of `put`.
        self.slot
            .compare_exchange(
                seen,
                std::ptr::null_mut(),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .ok()
            // SAFETY: the CAS moved the owned Arc out of the slot to us alone.
            .map(|p| unsafe { Arc::from_raw(p) })
    }
}

impl<T> Drop for RunNext<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}

/// One bit per P that may have queued work (local queue or `runnext`).
///
/// Set by the owner when it queues work (a load first, so the shared line is written
/// only on a transition); cleared only by the owner when it finds its queue empty.
/// Thieves and idle Ms read it before any scan. A set bit may be stale (the queue was
/// stolen empty); a clear bit is never wrong about a queue its owner has filled: the
/// owner's clear comes before its next mark in the word's modification order (one
/// thread's RMWs on one word), and a reader bound to see that mark (the spinning pair's
/// fences) sees it or a later value, where only the owner clears the bit again.
pub(crate) struct WorkSummary {
    words: [AtomicU64; super::MAX_PROCS / 64],
}

impl WorkSummary {
    pub(crate) fn new() -> Self {
        WorkSummary {
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn mark(&self, id: usize) {
        let (w, bit) = (&self.words[id / 64], 1u64 << (id % 64));
        // Relaxed load: a stale "set" is harmless because only the owner clears (and
        // we are the owner); the fetch_or is SeqCst as part of the spinning protocol.
        if w.load(Ordering::Relaxed) & bit == 0 {
            w.fetch_or(bit, Ordering::SeqCst);
        }
    }

    pub(crate) fn clear(&self, id: usize) {
        let (w, bit) = (&self.words[id / 64], 1u64 << (id % 64));
        // Relaxed load and RMW: only the owner (us) changes this bit, so the load reads
        // our own last write to it, and coherence orders the clear before our next mark
        // (see the struct doc). It must stay an RMW: that keeps the other Ps' bits, and
        // the release sequences of their marks, through which `snapshot`'s Acquire sees
        // their queued Gs.
        if w.load(Ordering::Relaxed) & bit != 0 {
            w.fetch_and(!bit, Ordering::Relaxed);
        }
    }

    /// The bits of Ps `[0, n)`, one word at a time.
    pub(crate) fn snapshot(&self, n: usize) -> [u64; super::MAX_PROCS / 64] {
        let mut out = [0u64; super::MAX_PROCS / 64];
        for (i, w) in self.words.iter().enumerate().take(n.div_ceil(64)) {
            // SeqCst: the re-check half of the spinning protocol (after its fence). The
            // Acquire in it pairs with `mark`'s RMW, so a set bit's queue shows its Gs.
            out[i] = w.load(Ordering::SeqCst);
        }
        out
    }
}

/// Puts `g` on `p`'s queue: in `runnext` if `next` (the displaced G goes to the tail),
/// else at the tail. Owner only (Go: runqput). Callers that go on to `wakep` fence
/// first (`schedule::publish`).
#[inline]
pub(crate) fn runq_put(p: &HeldP<'_>, g: GRef, next: bool) {
    if next {
        if let Some(old) = p.runnext.put(g) {
            p.local().runq.push(old);
        }
    } else {
        p.local().runq.push(g);
    }
    rt_started().summary.mark(p.id);
}

/// Takes the next G of `p`: `runnext` first (it inherits the time slice, so the bool is
/// true), then the queue head. Owner only (Go: runqget).
pub(crate) fn runq_get(p: &HeldP<'_>) -> Option<(GRef, bool)> {
    if let Some(g) = p.runnext.take() {
        return Some((g, true));
    }
    p.local().runq.pop().map(|g| (g, false))
}

/// Whether `p` has no queued G, read so that a G moving from `runnext` to the queue
/// cannot make both reads miss it (Go: runqempty).
pub(crate) fn runq_empty(p: &P) -> bool {
    loop {
        let next = p.runnext.peek();
        let empty = p.stealer.is_empty();
        if p.runnext.peek() == next {
            return empty && next.is_null();
        }
    }
}

/// Steals half of `victim`'s queue into `p`'s and returns one G; if the queue is empty
/// and `steal_runnext`, takes the victim's `runnext` instead, after the back-off when
/// the victim is running (Go: runqsteal / runqgrab).
pub(crate) fn runq_steal(p: &HeldP<'_>, victim: &P, steal_runnext: bool) -> Option<GRef> {
    loop {
        match victim.stealer.steal_batch_and_pop(&p.local().runq) {
            Steal::Success(g) => {
                if !p.local().runq.is_empty() {
                    rt_started().summary.mark(p.id);
                }
                return Some(g);
            }
            Steal::Retry => continue,
            Steal::Empty => break,
        }
    }
    if !steal_runnext {
        return None;
    }
    let puts = victim.runnext.puts();
    let seen = victim.runnext.peek();
    if seen.is_null() {
        return None;
    }
    if victim.status() == PStatus::Running {
        // The victim is likely about to block and run this G itself: give it the
        // chance, spinning and watching the slot rather than sleeping. Any put or take
        // meanwhile means the victim is scheduling: leave its runnext alone.
        let deadline = Instant::now() + Duration::from_nanos(RUNNEXT_BACKOFF_NS);
        loop {
            spin_pause(BACKOFF_CHECK_NS);
            if victim.runnext.peek() != seen || victim.runnext.puts() != puts {
                return None;
            }
            if Instant::now() >= deadline {
                break;
            }
        }
    }
    victim.runnext.steal(seen)
}

/// Spins for about `ns` nanoseconds with pause instructions, touching no shared memory
/// (the clock is read through the vDSO).
pub(crate) fn spin_pause(ns: u64) {
    let until = Instant::now() + Duration::from_nanos(ns);
    while Instant::now() < until {
        for _ in 0..16 {
            std::hint::spin_loop();
        }
    }
}
