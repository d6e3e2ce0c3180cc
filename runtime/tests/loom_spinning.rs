//! Loom model of the spinning protocol (`Spinning`, see the module doc of `sched`):
//! a submitter publishes work then asks whether to wake an M; a spinning M gives up
//! its P, stops spinning, then re-checks for work. Either the M sees the work or the
//! submitter wakes someone: work is never stranded while every M sleeps.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_spinning`
#![cfg(loom)]

use goro_runtime::__loom::Spinning;
use loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

fn model(publish: fn(&AtomicUsize)) {
    loom::model(move || {
        let sp = Arc::new(Spinning::new());
        let queue = Arc::new(AtomicUsize::new(0));
        // One P, held by the spinning M; it spins already.
        sp.start_spinning();
        let submitter = {
            let (sp, queue) = (sp.clone(), queue.clone());
            thread::spawn(move || {
                publish(&queue);
                sp.should_wake()
            })
        };
        // The M: gives its P back, stops spinning, re-checks.
        sp.pidle_inc();
        sp.stop_spinning();
        let saw_work = queue.load(Ordering::SeqCst) != 0;
        let woke = submitter.join().unwrap();
        assert!(
            saw_work || woke,
            "work published while the last spinning M left"
        );
    });
}

/// A tail push is a Release store: `publish` adds a SeqCst fence.
#[test]
fn tail_push_then_fence() {
    model(|q| {
        q.store(1, Ordering::Release);
        fence(Ordering::SeqCst);
    });
}

/// A `runnext` put is a swap, followed by the same fence.
#[test]
fn runnext_swap_then_fence() {
    model(|q| {
        q.swap(1, Ordering::AcqRel);
        fence(Ordering::SeqCst);
    });
}

/// The fence is what makes it work: without one on the submitter side the model finds
/// the interleaving where the work is stranded (documents why `publish` fences).
#[test]
#[should_panic(expected = "work published while the last spinning M left")]
fn without_the_fence_work_is_stranded() {
    model(|q| {
        q.store(1, Ordering::Release);
    });
}

/// Only one submitter reserves the spinning slot when nobody spins.
#[test]
fn one_waker_per_idle_period() {
    loom::model(|| {
        let sp = Arc::new(Spinning::new());
        sp.pidle_inc();
        let woke = Arc::new(AtomicBool::new(false));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (sp, woke) = (sp.clone(), woke.clone());
                thread::spawn(move || {
                    if sp.should_wake() {
                        assert!(
                            !woke.swap(true, Ordering::Relaxed),
                            "two wakers reserved the slot"
                        );
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert!(woke.load(Ordering::Relaxed));
        assert_eq!(sp.nmspinning(), 1);
    });
}
