//! Loom model of the join handshake (`JoinState`, see `spawn.rs`): the coroutine's
//! result and the joiner's wake-up are never lost, whichever side goes first, and a
//! timed join that gives up withdraws its wait cleanly.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_join`
#![cfg(loom)]

use goro_runtime::__loom::{Finished, JoinState};
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;

#[test]
fn result_and_wakeup_are_never_lost() {
    loom::model(|| {
        let state = Arc::new(JoinState::new());
        // Relaxed payloads: the handshake's Release/Acquire must order them.
        let result = Arc::new(AtomicU64::new(0));
        let joiner_registered = Arc::new(AtomicU64::new(0));
        let woken = Arc::new(AtomicBool::new(false));
        let co = {
            let (state, result, reg, woken) = (
                state.clone(),
                result.clone(),
                joiner_registered.clone(),
                woken.clone(),
            );
            thread::spawn(move || {
                result.store(42, Ordering::Relaxed);
                if state.finish() == Finished::Joiner {
                    assert_eq!(
                        reg.load(Ordering::Relaxed),
                        1,
                        "joiner's unparker not visible"
                    );
                    woken.store(true, Ordering::Release);
                }
            })
        };
        if !state.is_done() {
            joiner_registered.store(1, Ordering::Relaxed);
            if state.begin_wait() {
                while !woken.load(Ordering::Acquire) {
                    thread::yield_now();
                }
            }
        }
        assert!(state.is_done());
        assert_eq!(
            result.load(Ordering::Relaxed),
            42,
            "result not visible to the joiner"
        );
        co.join().unwrap();
    });
}

/// A timed join whose deadline fires (`withdraw_wait`), then a second join, racing the
/// coroutine's `finish`: the unparker slot (a loom `UnsafeCell`, so loom reports any
/// unsynchronised access) is only read by the coroutine for a wait it saw, only
/// rewritten by the joiner once the wait is withdrawn, and the result is always seen.
#[test]
fn timed_out_wait_withdraws_cleanly() {
    loom::model(|| {
        let state = Arc::new(JoinState::new());
        // Relaxed payload: the handshake's Release/Acquire must order it.
        let result = Arc::new(AtomicU64::new(0));
        // The joiner's unparker: the number of the wait it belongs to (0: none).
        let slot = Arc::new(UnsafeCell::new(0u64));
        // Which wait the coroutine woke (0: none).
        let woken = Arc::new(AtomicU64::new(0));
        let co = {
            let (state, result, slot, woken) =
                (state.clone(), result.clone(), slot.clone(), woken.clone());
            thread::spawn(move || {
                result.store(42, Ordering::Relaxed);
                if state.finish() == Finished::Joiner {
                    // SAFETY: `finish` saw WAITING: the joiner published the slot with
                    // its begin_wait and leaves it alone until the wake (or a failed
                    // withdrawal, which does not touch it).
                    let wait = slot.with(|p| unsafe { *p });
                    assert_ne!(wait, 0, "joiner's unparker not visible");
                    woken.store(wait, Ordering::Release);
                }
            })
        };
        // Wait 1: its deadline fires before any wake-up is looked at.
        // SAFETY: RUNNING: the joiner owns the slot.
        slot.with_mut(|p| unsafe { *p = 1 });
        let mut done = !state.begin_wait();
        let mut withdrawn = false;
        if !done {
            if state.withdraw_wait() {
                withdrawn = true;
                // SAFETY: withdrawn: the coroutine never saw wait 1.
                slot.with_mut(|p| unsafe { *p = 0 });
            } else {
                done = true; // finished as the deadline fired
            }
        }
        // Wait 2: an untimed join, unless the first one already ended it.
        if !done && !state.is_done() {
            // SAFETY: RUNNING (not DONE, wait 1 withdrawn): the joiner owns the slot.
            slot.with_mut(|p| unsafe { *p = 2 });
            if state.begin_wait() {
                while woken.load(Ordering::Acquire) != 2 {
                    thread::yield_now();
                }
            }
        }
        assert!(state.is_done());
        assert_eq!(
            result.load(Ordering::Relaxed),
            42,
            "result not visible to the joiner"
        );
        co.join().unwrap();
        // A wake-up never goes to a withdrawn wait.
        if withdrawn {
            assert_ne!(woken.load(Ordering::Relaxed), 1, "withdrawn wait was woken");
        }
    });
}

/// A handle dropped without a join (`detach`) and the coroutine's `finish`, in either
/// order: exactly one of them owns the result ("a panic is never lost"), and a handle
/// that owns it sees it.
#[test]
fn detach_and_finish_agree_on_one_owner() {
    loom::model(|| {
        let state = Arc::new(JoinState::new());
        // Relaxed payload: `finish`'s Release and `detach`'s Acquire must order it.
        let result = Arc::new(AtomicU64::new(0));
        let co = {
            let (state, result) = (state.clone(), result.clone());
            thread::spawn(move || {
                result.store(42, Ordering::Relaxed);
                state.finish() == Finished::Detached
            })
        };
        let handle_owns = state.detach();
        if handle_owns {
            assert_eq!(result.load(Ordering::Relaxed), 42, "result not visible");
        }
        let co_owns = co.join().unwrap();
        assert!(
            handle_owns != co_owns,
            "handle {handle_owns}, coroutine {co_owns}"
        );
    });
}
