//! One switch for the atomics of the lock-free protocols.
//!
//! The protocol types (`park::WaitCell`, `sched::runq::RunNext`, `spawn::JoinState`,
//! `sched::idle::Spinning`) take their atomics from here, so the loom models in
//! `tests/loom_*.rs`, built with `RUSTFLAGS="--cfg loom"`, check the very code the
//! runtime runs. Everything else uses `std` directly: loom cannot model a stack switch,
//! so the models drive these types from plain threads standing in for Ms.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize,
};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize};

pub(crate) use std::sync::atomic::Ordering;
