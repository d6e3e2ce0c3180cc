//! The scan handshake: a dump reads a coroutine's stack only while no M runs it.
//!
//! A dump shows the stack of every coroutine that is not running. To walk a stack it
//! resumes the coroutine in an inspection mode (`traceback.rs`), so for that moment it
//! is the coroutine's only runner: a coroutine that a ready puts in a run queue meanwhile
//! must not be resumed by an M until the dump is done with it (Go CASes a goroutine to
//! `_Gscan` for its traceback). Two words of the G make a Dekker pair:
//!
//! - its status (`G::transition`), which says it is on a CPU (`Running`, `Syscall`) or
//!   off (`Waiting`, `Runnable`). The M moves it off `Running` only after the coroutine
//!   suspended and after whatever the M does on its frame (a park's commit action:
//!   `execute`, `commit_park`), with a Release store, and onto `Running` before it
//!   resumes it;
//! - `scan` (here), written by a dump: true while it holds the G (a CAS from false, so
//!   two dumps never hold one G), false (Release) when it is done.
//!
//! The M's side (`begin_run`, before every resume; the status is `Running` already):
//! the M-side fence, load `scan`; while it is true, wait. The dump's side (`claim`, the
//! barrier for a whole batch of claims, then `G::status_off_cpu`): store `scan = true`,
//! the barrier (`membarrier::sysmon_side`, as the retake handshake's), load the status;
//! only if it is off a CPU does it touch the stack, and it lets go with `release`. Either
//! the dump sees `Running` (and leaves the G alone), or the M sees `scan = true` (and
//! waits until the dump lets go). The Release/Acquire pairs carry the stack's contents:
//! the M's last writes before the suspension to the dump (the status store to its
//! load), the dump's inspection to the M that resumes the G next (`release` to
//! `begin_run`). `tests/loom_scan.rs` checks it with the stack as a loom cell, and fails
//! without the M-side fence (or with the commit action after the move off `Running`).
//! What is not the dump's meanwhile: data a park shares from its frame with other
//! threads (a channel's `Sudog`, which a sender fills), bytes the walk never reads
//! (docs/decisions/0003-coroutine-stacks.md).
//!
//! The M side costs a compiler fence (with the expedited membarrier) and a load per
//! resume; the dump pays the barrier once per batch of coroutines.

use crate::loom::{AtomicBool, Ordering};

/// The dump's word of one G (see the module doc).
pub struct ScanWord {
    /// A dump holds the G. Written by the dump; read by the M about to resume it.
    scan: AtomicBool,
}

impl Default for ScanWord {
    fn default() -> Self {
        Self::new()
    }
}

impl ScanWord {
    /// No dump holds the G.
    pub fn new() -> ScanWord {
        ScanWord {
            scan: AtomicBool::new(false),
        }
    }

    /// The M, before it resumes the G, whose status it has made `Running`: waits while a
    /// dump holds it. `expedited` is `membarrier::expedited()`, as the M has it.
    #[inline(always)]
    pub fn begin_run(&self, expedited: bool) {
        crate::membarrier::m_side(expedited);
        // Acquire: pairs with `release`, so the dump's inspection (which ran on the
        // G's stack) happens before we resume it.
        if self.scan.load(Ordering::Acquire) {
            self.wait_for_dump();
        }
    }

    #[cold]
    fn wait_for_dump(&self) {
        let mut spins = 0u32;
        // Acquire: as in `begin_run`.
        while self.scan.load(Ordering::Acquire) {
            spins += 1;
            if spins < 64 {
                crate::loom::spin_loop();
            } else {
                // A dump walks a batch of coroutines at a time: give it the CPU.
                #[cfg(not(loom))]
                std::thread::yield_now();
                #[cfg(loom)]
                loom::thread::yield_now();
            }
        }
    }

    /// The dump: takes the G, or returns false if another dump holds it. Then the
    /// barrier (once for a batch), then the status (`G::status_off_cpu`), then
    /// `release`.
    pub fn claim(&self) -> bool {
        // Relaxed: the Dekker pair's order comes from the barrier that follows, and
        // what the claim protects is published by `release`.
        self.scan
            .compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// The dump lets go of the G.
    pub fn release(&self) {
        // Release: the inspection's writes to the G's stack; pairs with `begin_run`.
        self.scan.store(false, Ordering::Release);
    }
}
