//! One switch for the atomics of the lock-free protocols (see goro-runtime's
//! `loom.rs`): the sema table's count/`nwait` pair and its root lock are checked by
//! `tests/loom_sema.rs` with `RUSTFLAGS="--cfg loom"`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64};

pub(crate) use std::sync::atomic::Ordering;

/// A spin-wait step: a pause instruction, or under loom a yield so the model can run
/// the other threads.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}
