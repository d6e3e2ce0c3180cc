//! Loom model of the park/ready handshake (`WaitCell`, see `park.rs`), with plain
//! threads standing in for the parking G and its wakers.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_park`
#![cfg(loom)]

use goro_runtime::__loom::{WaitCell, Wake};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// Parks the calling thread the way an M parks a G: commit, CAS, and if parked, wait
/// until whoever got `MustReady` readies it.
fn park(cell: &WaitCell, readied: &AtomicBool) {
    if cell.try_park() {
        while !readied.load(Ordering::Acquire) {
            thread::yield_now();
        }
        assert!(cell.is_notified(), "readied but the cell is not notified");
    }
}

fn wake(cell: &WaitCell, seq: u64, readied: &AtomicBool, wakes: &AtomicUsize) {
    let w = cell.unpark(seq);
    if w.woke() {
        wakes.fetch_add(1, Ordering::Relaxed);
    }
    if w == Wake::MustReady {
        readied.store(true, Ordering::Release);
    }
}

/// Two wakers race with the park: the waiter always wakes, exactly one waker wins,
/// and the waiter is readied at most once.
#[test]
fn no_lost_or_double_wakeup() {
    loom::model(|| {
        let cell = Arc::new(WaitCell::new());
        let readied = Arc::new(AtomicBool::new(false));
        let wakes = Arc::new(AtomicUsize::new(0));
        let seq = cell.prepare();
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (cell, readied, wakes) = (cell.clone(), readied.clone(), wakes.clone());
                thread::spawn(move || wake(&cell, seq, &readied, &wakes))
            })
            .collect();
        park(&cell, &readied);
        for w in wakers {
            w.join().unwrap();
        }
        assert_eq!(wakes.load(Ordering::Relaxed), 1);
        assert!(cell.is_notified());
    });
}

/// A waker of an old wait never wakes the next one: after wait 1 completes and wait
/// 2 begins, a late unpark(seq1) is stale and the waiter parks until unpark(seq2).
#[test]
fn stale_unparker_cannot_wake_a_later_wait() {
    loom::model(|| {
        let cell = Arc::new(WaitCell::new());
        let readied = Arc::new(AtomicBool::new(false));
        let seq1 = cell.prepare();
        // Wait 1 is woken before it parks.
        assert_eq!(cell.unpark(seq1), Wake::Notified);
        assert!(!cell.try_park());
        // Wait 2: a late waker of wait 1 races with the real waker of wait 2.
        let seq2 = cell.prepare();
        let late = {
            let cell = cell.clone();
            thread::spawn(move || cell.unpark(seq1))
        };
        let real = {
            let (cell, readied) = (cell.clone(), readied.clone());
            thread::spawn(move || {
                if cell.unpark(seq2) == Wake::MustReady {
                    readied.store(true, Ordering::Release);
                }
            })
        };
        park(&cell, &readied);
        assert_eq!(late.join().unwrap(), Wake::Stale);
        real.join().unwrap();
    });
}

/// A timed wait: an unparker races the wait's own deadline (which wakes through
/// `unpark_by_deadline`). Exactly one wins, and the waiter learns which from its cell
/// alone, without waiting for the loser (issue 14: it used to spin for the timer's
/// verdict).
#[test]
fn deadline_or_unparker_and_the_waiter_knows_which() {
    loom::model(|| {
        let cell = Arc::new(WaitCell::new());
        let readied = Arc::new(AtomicBool::new(false));
        let seq = cell.prepare();
        let unparker = {
            let (cell, readied) = (cell.clone(), readied.clone());
            thread::spawn(move || {
                let w = cell.unpark(seq);
                if w == Wake::MustReady {
                    readied.store(true, Ordering::Release);
                }
                w.woke()
            })
        };
        let deadline = {
            let (cell, readied) = (cell.clone(), readied.clone());
            thread::spawn(move || {
                let w = cell.unpark_by_deadline(seq);
                if w == Wake::MustReady {
                    readied.store(true, Ordering::Release);
                }
                w.woke()
            })
        };
        park(&cell, &readied);
        let by_deadline = cell.woken_by_deadline();
        let (u, d) = (unparker.join().unwrap(), deadline.join().unwrap());
        assert!(u ^ d, "exactly one of them wakes the wait");
        assert_eq!(by_deadline, d, "the waiter misreads who woke it");
    });
}
