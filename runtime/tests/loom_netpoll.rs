//! Loom model of "someone watches the sockets" (`Watch`, in `netpoll.rs`): a caller
//! about to park on a socket, and an idle M deciding whether to block in the poller.
//! Either the M commits to the poller (and its wait covers the socket), or the caller
//! learns nobody is there and wakes an M: a parked socket waiter is never left with no
//! M that will ever poll.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_netpoll`
#![cfg(loom)]

use goro_runtime::__loom::Watch;
use loom::sync::Arc;
use loom::thread;

/// The first waiter races an M with no timer to wait for.
#[test]
fn waiter_or_poller_watches() {
    loom::model(|| {
        let w = Arc::new(Watch::new());
        let waiter = {
            let w = w.clone();
            thread::spawn(move || w.waiter_arrived())
        };
        let blocked = w.commit(0).is_some();
        let woke = waiter.join().unwrap();
        assert!(woke || blocked, "a socket waiter with nobody watching");
    });
}

/// The waiter arrives while an M leaves the poller: if the waiter saw the departing
/// M's deadline (and woke nobody), the M's next decision sees the waiter.
#[test]
fn waiter_during_the_pollers_exit() {
    loom::model(|| {
        let w = Arc::new(Watch::new());
        assert_eq!(w.commit(1_000), Some(1_000)); // an M in the poller, with a timer
        let waiter = {
            let w = w.clone();
            thread::spawn(move || w.waiter_arrived())
        };
        w.release(); // it wakes up and leaves
        let blocked_again = w.commit(0).is_some(); // idle again, no timer
        let woke = waiter.join().unwrap();
        assert!(
            woke || blocked_again,
            "a socket waiter with nobody watching"
        );
    });
}

/// With no waiter the M does not block (nothing to wait for), and a waiter that has
/// gone does not keep it there.
#[test]
fn nothing_to_watch() {
    loom::model(|| {
        let w = Watch::new();
        assert_eq!(w.commit(0), None);
        assert!(w.waiter_arrived());
        w.waiter_left();
        assert_eq!(w.commit(0), None);
        assert!(!w.has_waiters());
    });
}

/// The timers' Dekker pair: a timer earlier than the poller's deadline is added while
/// the M commits. Either the M's re-read sees it, or the adder sees the M's deadline
/// (and breaks its wait): never both missed. `when0` stands for the P's published
/// earliest deadline (`PTimers::when0`, a SeqCst store), and the adder's side is
/// `Netpoll::timer_added`'s fence and load.
#[test]
fn new_timer_seen_by_poller_or_adder() {
    use loom::sync::atomic::{fence, AtomicI64, Ordering};
    loom::model(|| {
        let w = Arc::new(Watch::new());
        let when0 = Arc::new(AtomicI64::new(5_000)); // the timer the M will sleep for
        let adder = {
            let (w, when0) = (w.clone(), when0.clone());
            thread::spawn(move || {
                when0.store(1_000, Ordering::SeqCst); // an earlier timer
                fence(Ordering::SeqCst);
                w.until() // 0: wakep; else notify if 1 000 < it
            })
        };
        let mut deadline = w.commit(when0.load(Ordering::SeqCst)).unwrap();
        let again = when0.load(Ordering::SeqCst);
        if again != 0 && again < deadline {
            deadline = again;
            w.shorten(deadline);
        }
        let seen_until = adder.join().unwrap();
        let m_sees_it = deadline <= 1_000;
        let adder_breaks_the_wait = seen_until != 0 && 1_000 < seen_until;
        assert!(
            m_sees_it || adder_breaks_the_wait,
            "the poller sleeps past a new timer (until {deadline}, adder saw {seen_until})"
        );
    });
}
