//! The asymmetric fence of the retake handshake (see "the retake handshake" in
//! `sched/p.rs`): the M's side is on every goro call, sysmon's side is rare, so the M
//! pays a compiler fence and sysmon a `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`,
//! which runs a full memory barrier on every CPU running a thread of this process
//! before it returns (Linux ≥ 4.14, after a registration at start-up). A thread that
//! is not on a CPU has passed through the kernel's context switch, a full barrier too.
//!
//! If the registration is refused (an old kernel, a seccomp filter), the M's side
//! becomes a SeqCst fence and sysmon's side a plain one: correct, and slower on the
//! fast path. `debug::dump()` says which is in use. Under loom both sides are SeqCst
//! fences (loom cannot model the kernel's barrier; a fence on each side is what it
//! stands for).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` and its registration (not in the libc crate).
#[cfg_attr(loom, allow(dead_code))]
const CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// Whether the expedited barrier is registered: set once, by `init`, before the
/// runtime starts its first M (a plain flag, read on every goro call: a `OnceLock`'s
/// state check cost the yield path ten instructions).
static EXPEDITED: AtomicBool = AtomicBool::new(false);
static INIT: Once = Once::new();

/// Registers this process for expedited barriers, once, unless `register` is false
/// (`GORO_MEMBARRIER=off`). Returns whether the expedited barrier is in use.
pub(crate) fn init(register: bool) -> bool {
    INIT.call_once(|| {
        if !register {
            return;
        }
        // SAFETY: membarrier takes a command and flags; registration has no other
        // effect on the process.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                CMD_REGISTER_PRIVATE_EXPEDITED,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        // Relaxed: published to the Ms by the spawn of their threads, which happens
        // after `init` (the runtime's initialisation), and to sysmon the same way.
        EXPEDITED.store(r == 0, Ordering::Relaxed);
    });
    expedited()
}

/// Whether the fast path pays only a compiler fence (for the dump).
#[cfg_attr(loom, allow(dead_code))]
#[inline(always)]
pub(crate) fn expedited() -> bool {
    // Relaxed: see the store in `init`.
    EXPEDITED.load(Ordering::Relaxed)
}

/// The M's side, between its store and its load; `expedited` is [`expedited`], read
/// by the caller where it is cheapest.
#[inline(always)]
pub(crate) fn m_side(expedited: bool) {
    #[cfg(loom)]
    {
        let _ = expedited;
        crate::loom::fence(Ordering::SeqCst);
    }
    #[cfg(not(loom))]
    if expedited {
        // The kernel's barrier (sysmon's side) orders our store and load when it
        // matters; only the compiler must not reorder them.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
    } else {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

/// sysmon's side, between its store and its load: a full barrier on every CPU that
/// runs one of our threads.
pub(crate) fn sysmon_side() {
    #[cfg(loom)]
    crate::loom::fence(Ordering::SeqCst);
    #[cfg(not(loom))]
    if expedited() {
        // SAFETY: a membarrier command with no arguments; registered in `init`.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                CMD_PRIVATE_EXPEDITED,
                0 as libc::c_long,
                0 as libc::c_long,
            )
        };
        if r != 0 {
            // Cannot fail once registered; if it ever does, a fence on our side is
            // not enough for the handshake: stop rather than run unsoundly.
            eprintln!(
                "goro: fatal error: membarrier: the expedited barrier failed after registration"
            );
            std::process::abort();
        }
    } else {
        std::sync::atomic::fence(Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    #[test]
    fn registers_and_barriers() {
        // On this project's kernels registration works; elsewhere the fallback is used.
        let ok = super::init(true);
        assert_eq!(super::expedited(), ok);
        super::m_side(super::expedited());
        super::sysmon_side();
    }
}
