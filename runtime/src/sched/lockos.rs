//! The scoped thread lock: [`lock_os_thread`] (Go: `LockOSThread` / `UnlockOSThread`
//! around a call).
//!
//! # The thread lock
//!
//! A locked G runs only on its M, and that M runs nothing else (`G::lock_depth`,
//! `G::locked_m`, `M::locked_g`): the machinery `Builder::pinned` has always used.
//! When a locked G parks, its M hands its P off and sleeps in `stoplockedm`; whoever
//! later picks the readied G off a queue hands it, with that P, back to its M
//! (`startlockedm`). So between lock and unlock the coroutine sees one thread, and no
//! other coroutine touches that thread's thread-locals.
//!
//! Taking and releasing the lock are plain writes by the running G to fields it owns
//! (its own, and its M's `locked_g`, which only that M reads, between runs): no other
//! thread can look while the G runs. The depth counts, so scopes nest, and a
//! `Builder::pinned` coroutine (depth 1 from the start) stays pinned after a scope
//! ends.

use super::m::{current_g_ptr, current_m};

/// Runs `f` with the calling coroutine locked to its OS thread (Go: `LockOSThread`,
/// then `UnlockOSThread` when `f` returns or unwinds): for the span of `f`, the
/// coroutine does not change threads, and no other coroutine runs on its thread. A
/// wait inside `f` (a channel, a lock, a sleep) then blocks the thread, with its
/// processor handed to another thread meanwhile, and the coroutine resumes on the
/// same thread.
///
/// This is what code needs that puts something in a thread-local for a while and may
/// block before taking it out: another runtime's "current context" (what
/// `goro::tokio::block_on` does for each poll), a C library's per-thread state.
/// Outside the scope the coroutine migrates as usual. A parked coroutine inside the
/// scope holds a thread, so keep scopes short.
///
/// On a plain thread (or inside [`blocking`](crate::blocking), where a coroutine runs
/// as one) it just calls `f`. Scopes nest; on a [`pinned`](crate::Builder::pinned)
/// coroutine, which never changes threads anyway, it just calls `f` too.
///
/// ```
/// use std::cell::Cell;
/// use std::time::Duration;
///
/// thread_local! { static SLOT: Cell<u32> = const { Cell::new(0) }; }
///
/// let h = goro::go!(|| {
///     goro::lock_os_thread(|| {
///         SLOT.with(|s| s.set(7));
///         goro::time::sleep(Duration::from_millis(5)); // parks: the thread waits
///         SLOT.with(|s| s.replace(0)) // same thread: still 7
///     })
/// });
/// assert_eq!(h.join().unwrap(), 7);
/// ```
pub fn lock_os_thread<R>(f: impl FnOnce() -> R) -> R {
    let g = current_g_ptr();
    let Some(m) = current_m().filter(|_| !g.is_null()) else {
        return f(); // a plain thread is its own thread
    };
    // SAFETY: `g` is the running G: alive (its M holds it) and owned by us, running on
    // it. Its lock fields are owner-only.
    let depth = unsafe { (*g).add_lock_depth(1) };
    if depth == 1 {
        // SAFETY: as above; first lock: bind the G to this M and the M to it.
        unsafe { (*g).set_locked_m(m) };
        m.set_locked_g(g);
    }
    /// Releases the lock when `f` returns or unwinds.
    struct Unlock(*const super::g::G);
    impl Drop for Unlock {
        fn drop(&mut self) {
            let g = self.0;
            // SAFETY: the G is still the running one, on the same M (it was locked to
            // it), so it is alive and ours.
            if unsafe { (*g).add_lock_depth(-1) } == 0 {
                // SAFETY: as above.
                let m = unsafe { (*g).locked_m() };
                // SAFETY: as above.
                unsafe { (*g).set_locked_m(std::ptr::null()) };
                // SAFETY: `m` is this thread's M (the G was locked to it), alive while
                // its thread runs.
                unsafe { (*m).set_locked_g(std::ptr::null()) };
            }
        }
    }
    let _unlock = Unlock(g);
    f()
}
