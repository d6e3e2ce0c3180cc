//! The park/ready handshake, the scheduler's half: the word itself is `wait.rs`
//! (`WaitCell`), the blocking API built on it `park.rs`. Here are the two halves that
//! run on a coroutine's M, in order:
//!
//! 1. `park_current_g` (on the G): record why it waits, suspend to the M with the
//!    commit action.
//! 2. `commit_park` (on the M, off the G's stack): run the commit action (an unlock;
//!    its closure lives in the G's frame), go `Running -> Waiting` (only once nothing
//!    of the M's touches the G's stack any more, so that a dump that sees `Waiting` may
//!    walk it: the scan handshake), then the park CAS `WAITING -> PARKED`. If it
//!    succeeds, the M's reference keeps the parked G alive (`G::on_adopt`, see
//!    `G`'s doc) and the unparker that moves it away from PARKED readies it; if it
//!    fails, the wait was already woken and the M runs the G again at once (`Waiting
//!    -> Running`).
//! 3. `adopt` (on whichever M next runs the G): drops the reference the parked G kept
//!    to itself.
//!
//! Nothing else touches `G::on_adopt`'s self-reference or makes the park CAS on a G.

use std::sync::atomic::Ordering;

use super::g::{GRef, GStatus, Request};
use super::m::current_g_ptr;
use crate::wait::WaitReason;

/// Parks the running G (see `park::park_commit`). Gives `commit` back when called on a
/// plain thread.
#[inline]
pub(crate) fn park_current_g<F: FnOnce()>(reason: WaitReason, commit: F) -> Result<(), F> {
    let g = current_g_ptr();
    if g.is_null() {
        return Err(commit);
    }
    // SAFETY: the running G is alive for as long as it runs and while it is parked
    // (a parked G keeps a reference to itself), so this reference stays valid across
    // the suspend below.
    let g = unsafe { &*g };
    g.set_wait_reason(reason);
    // Relaxed: an informational timestamp for the dump (see `G::wait_since`).
    g.wait_since.store(
        super::rt().coarse_now.load(Ordering::Relaxed),
        Ordering::Relaxed,
    );
    let mut commit = Some(commit);
    let mut call = || {
        if let Some(c) = commit.take() {
            c();
        }
    };
    let call: *mut (dyn FnMut() + '_) = &mut call;
    // SAFETY: only the lifetime is erased. The M calls this pointer only while this
    // frame is suspended inside `suspend` below, i.e. while `call` is alive.
    let call: *mut (dyn FnMut() + 'static) = unsafe { std::mem::transmute(call) };
    // SAFETY: we are the running G, on our own stack.
    unsafe { g.suspend(Request::Park(call)) };
    g.set_wait_reason(WaitReason::None);
    Ok(())
}

/// Step 2 (see the module doc). Returns true if the G is now parked (the caller must
/// forget its reference, which keeps the G alive), false if the wait was woken already
/// and the G must run again at once.
///
/// # Safety
///
/// The caller owns `g` (it just suspended with `Request::Park(commit)`), runs on the
/// M's own stack, and `commit` is that request's pointer.
#[inline]
pub(crate) unsafe fn commit_park(g: &GRef, commit: *mut (dyn FnMut() + 'static)) -> bool {
    // SAFETY: `commit` points into park_current_g's frame on the suspended G's stack,
    // which stays valid until the G is resumed; that cannot happen before the try_park
    // below publishes it as parked.
    unsafe { (*commit)() };
    // Only now off `Running`: the commit action ran on the G's frame (its closure and
    // captures live there), and a dump that sees `Waiting` may walk that frame. The
    // move's Release publishes the action's writes to the dump with the rest of the
    // stack (the scan handshake, `scan.rs`). A readier cannot come between: it takes
    // the G only once the park CAS below has succeeded.
    g.transition(GStatus::Running, GStatus::Waiting);
    // SAFETY: still the owner until try_park succeeds.
    unsafe { g.set_parked_self_ref(true) };
    if g.wait.try_park() {
        return true;
    }
    // SAFETY: try_park failed, so nobody else can have taken the G.
    unsafe { g.set_parked_self_ref(false) };
    g.transition(GStatus::Waiting, GStatus::Running);
    false
}

/// Step 3 (see the module doc): an M that took `g` from a run queue to run it drops
/// the reference `g` kept to itself while parked, if it did. Returns whether `g` is a
/// plain thread's spawn whose coroutine is still to be made (`G::make`).
///
/// # Safety
///
/// The caller owns `g` and holds another strong reference to it (`g` itself).
#[inline]
pub(crate) unsafe fn adopt(g: &GRef) -> bool {
    // SAFETY: the caller's contract.
    unsafe { super::g::G::adopt(g) }
}
