//! goro-runtime: the G/M/P scheduler behind goro.
//!
//! Stackful coroutines ("goroutines", G) on pooled mmap'd stacks, multiplexed over OS
//! threads (M) by processors (P) that each own a run queue, the way Go's runtime does
//! it. This crate holds the scheduler, stacks, the park/ready primitive every blocking
//! operation is built on, timers, the netpoller, sysmon and sockets. Users normally
//! reach it through the `goro` facade.
//!
//! Module map, by layer (each calls only the layers below it, except inside `sched/`;
//! `tests/layers.rs` checks it; docs/architecture.md has the whole map):
//! - layer 0: `wait` (the park/ready handshake word, wait reasons), `lockrank` (the
//!   lock order), `loom`, `config` (the `GORO_*` variables), `epoll`, `stack`, `sys`
//!   (system calls that never reach a hook), `arc_slot` (the hooks' lock-free slot),
//!   `local_table` (one coroutine's coroutine-local values).
//! - layer 1: `timers` (per-P timer heaps and the firing rule), `netpoll` (the poller,
//!   which returns what it readied).
//! - layer 2: `sched` (private): G, M, P, run queues, the scheduler loop, sysmon. Its
//!   module doc is the design comment: glossary, protocols.
//! - layer 3: [`park`] (`prepare` / `park` / [`park::Unparker`], for coroutines and
//!   threads), `spawn` ([`Builder`], [`spawn`], [`JoinHandle`]), `scope` ([`scope`],
//!   [`Scope`], [`ScopedJoinHandle`]), `join_set` ([`JoinSet`]), `local` ([`LocalKey`],
//!   [`coroutine_local!`]), [`time`], `block_on` ([`block_on`]: a `Future` on a
//!   coroutine or thread).
//! - layer 4: [`net`] (poll descriptors and sockets), [`io`] (any descriptor on the
//!   poller), [`process`], [`fs`], [`debug`], `hooks` (the libc hooks of the `hooks` feature).

#![warn(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "goro supports Linux only: its scheduler and sockets need epoll, eventfd, timerfd \
     and Linux's memory calls (membarrier, MADV_GUARD_INSTALL), which this target lacks"
);

#[cfg(any(feature = "hooks", loom))]
mod arc_slot;
mod block_on;
#[doc(hidden)]
pub mod bridge_support;
mod config;
pub mod debug;
mod epoll;
pub mod fs;
#[cfg(all(feature = "hooks", not(loom)))]
mod hooks;
pub mod io;
mod join_set;
mod local;
mod local_table;
mod lockrank;
mod loom;
mod membarrier;
pub mod net;
mod netpoll;
pub mod park;
pub mod process;
mod sched;
mod scope;
mod spawn;
mod stack;
// What goro-sync (another crate, so not `pub(crate)`) needs from the scheduler: spin
// tuning and the runtime clock. Hidden: an interface between goro's own crates, with
// no stability promise.
#[doc(hidden)]
pub mod sync_support;
mod sys;
pub mod time;
mod timers;
mod wait;

pub use block_on::block_on;
pub use config::{Config, ConfigError, DEFAULT_STACK_SIZE};
pub use join_set::JoinSet;
pub use local::LocalKey;
pub use sched::{current_id, current_name, maxprocs, num_goroutines, set_maxprocs, MAX_PROCS};
pub use scope::{scope, Scope, ScopedJoinHandle};
pub use spawn::{__main, panic_message, spawn, Builder, JoinFuture, JoinHandle};
pub use stack::{MAX_STACK_SIZE, MIN_STACK_SIZE};

pub use sched::lockos::lock_os_thread;
pub use sched::syscall::blocking;
pub use sched::sysmon::preempt_point;

/// Yields the processor to other coroutines (Go: `runtime.Gosched`): the caller goes
/// behind whatever waits in the global run queue, or to the back of its P's own queue
/// if nothing does. On a plain thread, `std::thread::yield_now`.
#[inline]
pub fn yield_now() {
    sched::yield_now();
}

/// The lock-free protocol types, for the loom models in `tests/loom_*.rs`. Only built
/// with `RUSTFLAGS="--cfg loom"`; not an API.
#[cfg(loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::arc_slot::{ArcSlot, Got};
    pub use crate::netpoll::Watch;
    pub use crate::sched::idle::{DeepSleep, Spinning};
    pub use crate::sched::p::{
        enter_goro, leave_goro, try_retake, PStatus, RetakeWord, StatusWord,
    };
    pub use crate::sched::runq::RunNext;
    pub use crate::sched::scan::ScanWord;
    pub use crate::spawn::{Finished, JoinState};
    pub use crate::wait::{WaitCell, Wake};
}
