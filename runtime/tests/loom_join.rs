//! Loom model of the join handshake (`JoinState`, see `spawn.rs`): the coroutine's
//! result and the joiner's wake-up are never lost, whichever side goes first.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_join`
#![cfg(loom)]

use goro_runtime::__loom::JoinState;
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
                if state.finish() {
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
