//! One switch for the atomics of the lock-free protocols.
//!
//! The protocol types (`park::WaitCell`, `sched::runq::RunNext`, `spawn::JoinState`,
//! `sched::idle::Spinning`) take their atomics from here, so the loom models in
//! `tests/loom_*.rs`, built with `RUSTFLAGS="--cfg loom"`, check the very code the
//! runtime runs. Everything else uses `std` directly: loom cannot model a stack switch,
//! so the models drive these types from plain threads standing in for Ms.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};

pub(crate) use std::sync::atomic::Ordering;

/// `Arc`, for the protocols that hand out references (`arc_slot`).
#[cfg(loom)]
pub(crate) use loom::sync::Arc;
#[cfg(all(not(loom), feature = "hooks"))]
pub(crate) use std::sync::Arc;

/// Where a Dekker pair is made of SeqCst accesses only (a store or read-modify-write,
/// then a load of the other side's word), C++'s single total order of SeqCst operations
/// already forbids both loads from missing the other side's write, and on x86 the
/// store or RMW is a full barrier: no fence is needed. loom models SeqCst accesses as
/// AcqRel, and would report the pair broken, so under loom (only) this is a SeqCst
/// fence. The sema releaser follows the same rule (`goro-sync`'s `sema.rs`).
#[inline(always)]
pub(crate) fn seqcst_pair_fence() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

/// A busy-wait's pause: under loom a yield, so the model lets the awaited thread run.
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
