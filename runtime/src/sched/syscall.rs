//! Blocking calls (Go: entersyscall / exitsyscall): [`blocking`] runs a function that
//! may block its OS thread without stranding the coroutines queued on its P.
//!
//! # The syscall hand-off
//!
//! On entry the M marks its P `Syscall` and lets go of it, remembering it as `oldp`;
//! the function then runs on the coroutine's own stack, no switch. If it returns
//! quickly, the M takes `oldp` back with one CAS `Syscall -> Running` (the fast path:
//! two atomic operations in all). If it blocks for more than ~20 µs, sysmon wins the
//! P instead with its own CAS `Syscall -> Idle` and hands it to another M (starting one
//! if needed), so the other coroutines keep running. On return the coroutine then
//! takes any idle P; if there is none, it switches to its M's scheduler loop, which
//! queues it on the global queue and parks the M until it is given a P. The two CASes
//! decide exactly once who owns the P.

use std::sync::atomic::Ordering;

use super::g::{GStatus, Request, G};
use super::idle::pidleget_locked;
use super::m::{current_g_ptr, current_m, M};
use super::p::PStatus;
use super::rt;
use crate::wait::WaitReason;

/// Runs `f`, which may block its OS thread (a blocking system call, a long computation
/// in foreign code, a std lock), so that other coroutines keep running meanwhile: if
/// `f` takes more than ~20 µs, the coroutine's P is handed to another thread. On a plain
/// thread it just calls `f`.
///
/// Inside `f` the coroutine is treated as a plain thread: goro operations it makes
/// there (a channel receive, a lock) block the thread rather than park the coroutine,
/// and a nested `blocking` is a plain call. It is still itself, though: its
/// `coroutine_local!` values and `current_name` are the coroutine's, not the thread's.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    let g = current_g_ptr();
    let Some(m) = current_m() else { return f() };
    if g.is_null() {
        return f();
    }
    // SAFETY: the running G is alive while it runs.
    let g = unsafe { &*g };
    // Entering goro here (M::p) also settles a retake sysmon may be attempting: the
    // P is ours, or lost and we run `f` without one.
    let Some(p) = m.p() else { return f() };
    // Relaxed: written only by the holder; sysmon compares successive values.
    p.syscall_tick.store(
        p.syscall_tick.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
    g.set_wait_reason(WaitReason::BlockingCall);
    g.transition(GStatus::Running, GStatus::Syscall);
    // Relaxed: an informational timestamp for the dump (see `G::wait_since`).
    g.wait_since
        .store(rt().coarse_now.load(Ordering::Relaxed), Ordering::Relaxed);
    // No switch happens inside `f` (it runs as a plain thread: see above), so `m` and
    // `g` are still this thread's M and G when it returns.
    m.set_curg(std::ptr::null());
    m.set_blocking_g(g);
    m.enter_syscall(p);
    super::sysmon::note_blocking();

    struct Exit {
        m: &'static M,
        g: *const G,
    }
    impl Drop for Exit {
        fn drop(&mut self) {
            // SAFETY: `g` is the G that entered, still running on this thread.
            exit_syscall(self.m, unsafe { &*self.g });
        }
    }
    let guard = Exit { m, g };
    let r = f();
    drop(guard);
    r
}

/// The way back (Go: exitsyscall). Also runs when `f` panics, so the coroutine always
/// returns holding a P.
fn exit_syscall(m: &'static M, g: &G) {
    m.set_blocking_g(std::ptr::null());
    m.set_curg(g);
    g.transition(GStatus::Syscall, GStatus::Running);
    g.set_wait_reason(WaitReason::None);
    let oldp = m.leave_syscall();
    // Fast path: our P is still ours. Back to user code: leave goro.
    if oldp.cas_status(PStatus::Syscall, PStatus::Running) {
        m.reacquirep(oldp);
        m.leave(g.id);
        return;
    }
    // Sysmon took it: any idle P will do.
    let rt = rt();
    let p = {
        let mut s = rt.sched.lock();
        pidleget_locked(&mut s, &rt.spinning)
    };
    if let Some(p) = p {
        m.acquirep(p);
        m.leave(g.id);
        return;
    }
    // None: queue ourselves and park this M (on its scheduler stack).
    // SAFETY: we are the running G, on its own stack.
    unsafe { g.suspend(Request::ExitSyscall) };
}
