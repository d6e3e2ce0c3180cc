//! `goro::lock_os_thread`, the scoped thread lock (Go's LockOSThread around a call):
//! inside the scope a coroutine keeps its thread across parks and shares it with no
//! other coroutine; outside it migrates as before.

mod common;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{join, on_coroutine, with_timeout};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn tid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

thread_local! {
    /// Which coroutine (by number) claims this thread now: 0 for none.
    static CLAIM: Cell<usize> = const { Cell::new(0) };
}

/// Coroutines that park inside the scope (sleeps, channel receives, yields) come back
/// to their thread every time, and no other coroutine runs on it meanwhile: each
/// claims its thread in a thread-local on entry and finds its claim intact after every
/// wait, while 100 others churn on every P.
#[test]
fn parks_inside_the_scope_keep_the_thread_to_themselves() {
    on_coroutine(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let churn: Vec<_> = (0..100)
            .map(|_| {
                let stop = stop.clone();
                goro::go!(move || {
                    for _ in 0..100_000 {
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        // Any coroutine run on a claimed thread would see the claim.
                        assert_eq!(CLAIM.with(|c| c.get()), 0, "ran on a locked thread");
                        goro::yield_now();
                    }
                })
            })
            .collect();
        let (tx, rx) = goro::chan::channel::<u32>(0);
        let lockers: Vec<_> = (1..=4)
            .map(|me| {
                let rx = rx.clone();
                goro::go!(move || {
                    for round in 0..20 {
                        goro::lock_os_thread(|| {
                            let t = tid();
                            CLAIM.with(|c| c.set(me));
                            goro::time::sleep(Duration::from_micros(200));
                            assert_eq!((tid(), CLAIM.with(|c| c.get())), (t, me), "round {round}");
                            goro::yield_now();
                            assert_eq!((tid(), CLAIM.with(|c| c.get())), (t, me), "round {round}");
                            let v = rx.recv().unwrap();
                            assert_eq!((tid(), CLAIM.with(|c| c.get())), (t, me), "round {round}");
                            CLAIM.with(|c| c.set(0));
                            v
                        });
                    }
                })
            })
            .collect();
        for v in 0..80 {
            tx.send(v).unwrap();
        }
        lockers.into_iter().for_each(join);
        stop.store(true, Ordering::Relaxed);
        churn.into_iter().for_each(join);
    });
}

/// Scopes nest: the outer one still holds the thread after an inner one ends; a panic
/// in the closure reaches the caller. (That unwinding releases the lock is not
/// observable from here: a leaked lock only costs thread hand-offs.)
#[test]
fn nested_scopes_hold_and_a_panic_reaches_the_caller() {
    on_coroutine(T, || {
        let t = tid();
        let inner = goro::lock_os_thread(|| {
            goro::lock_os_thread(|| goro::time::sleep(Duration::from_millis(1)));
            goro::time::sleep(Duration::from_millis(1)); // still locked after the inner
            tid()
        });
        assert_eq!(inner, t, "the outer scope held the thread");
        let r = std::panic::catch_unwind(|| {
            goro::lock_os_thread(|| -> () { panic!("inside the scope") })
        });
        assert!(r.is_err());
    });
}

/// On a plain thread the scope just runs the closure; on a pinned coroutine too, and
/// the coroutine stays pinned after it.
#[test]
fn plain_threads_and_pinned_coroutines() {
    with_timeout(T, || {
        assert_eq!(goro::lock_os_thread(|| 5), 5);
        let h = goro::Builder::new()
            .pinned(true)
            .spawn(|| {
                let t = tid();
                goro::lock_os_thread(|| goro::time::sleep(Duration::from_millis(1)));
                for _ in 0..20 {
                    goro::time::sleep(Duration::from_micros(100));
                    assert_eq!(tid(), t, "still pinned after the scope");
                }
            })
            .unwrap();
        join(h);
    });
}

/// A coroutine parked in a scope holds a thread, not a processor: with one P, other
/// coroutines keep running while it waits.
#[test]
fn a_parked_locked_coroutine_does_not_hold_its_processor() {
    on_coroutine(T, || {
        let (tx, rx) = goro::chan::channel::<()>(0);
        let locked = goro::go!(move || goro::lock_os_thread(|| rx.recv().unwrap()));
        let ran = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..10)
            .map(|_| {
                let ran = ran.clone();
                goro::go!(move || {
                    goro::time::sleep(Duration::from_millis(1));
                    ran.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        workers.into_iter().for_each(join);
        assert_eq!(ran.load(Ordering::Relaxed), 10);
        tx.send(()).unwrap();
        join(locked);
    });
}
