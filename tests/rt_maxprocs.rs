//! `set_maxprocs` / `maxprocs` and `num_goroutines`, in their own binary: changing the
//! number of Ps affects the whole process, so no other test file shares it.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{busy, with_timeout};

/// Runs `n` CPU-bound coroutines and returns how many ran at the same time at most.
fn max_parallelism(n: usize) -> usize {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let (running, peak) = (running.clone(), peak.clone());
            goro::go!(move || {
                for _ in 0..20 {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    busy(Duration::from_micros(500));
                    running.fetch_sub(1, Ordering::SeqCst);
                    goro::yield_now();
                }
            })
        })
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    peak.load(Ordering::SeqCst)
}

#[test]
fn set_maxprocs_changes_parallelism() {
    with_timeout(Duration::from_secs(120), || {
        let initial = goro::maxprocs();
        assert!(initial >= 1);
        // 0 only reports.
        assert_eq!(goro::set_maxprocs(0), initial);
        assert_eq!(goro::maxprocs(), initial);

        assert_eq!(goro::set_maxprocs(1), initial);
        assert_eq!(goro::maxprocs(), 1);
        // Ps above the count retire at their next scheduling point; after one round of
        // work at most one coroutine runs at a time.
        max_parallelism(4);
        assert_eq!(
            max_parallelism(4),
            1,
            "more than one P still runs coroutines"
        );

        assert_eq!(goro::set_maxprocs(2), 1);
        if std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            >= 2
        {
            // Until two ran at once: on a loaded machine the kernel may not give the
            // second M a CPU at the same time as the first for a few rounds (5 rounds
            // were not always enough with two builds beside the test).
            let mut peak = 0;
            for _ in 0..50 {
                peak = peak.max(max_parallelism(4));
                if peak == 2 {
                    break;
                }
            }
            assert_eq!(peak, 2, "a second P never ran in 50 rounds");
        }

        // Shrinking while work is queued loses nothing.
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..1000)
            .map(|i| {
                let done = done.clone();
                goro::go!(move || {
                    if i == 500 {
                        goro::set_maxprocs(1);
                    }
                    goro::yield_now();
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(done.load(Ordering::SeqCst), 1000);

        // Timers set on a P that is then retired still fire (they move to P 0).
        goro::set_maxprocs(2);
        let fired = Arc::new(AtomicUsize::new(0));
        let timers: Vec<_> = (0..100)
            .map(|_| {
                let fired = fired.clone();
                goro::go!(move || {
                    goro::time::after_func(Duration::from_millis(30), move || {
                        fired.fetch_add(1, Ordering::SeqCst);
                    })
                })
            })
            .map(|h| h.join().unwrap())
            .collect();
        goro::set_maxprocs(1);
        max_parallelism(2); // scheduling points: the second P retires
        let t = std::time::Instant::now();
        while fired.load(Ordering::SeqCst) < 100 {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "timers of a retired P were lost"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(timers);

        // Out-of-range values are clamped.
        goro::set_maxprocs(usize::MAX);
        assert_eq!(goro::maxprocs(), goro::MAX_PROCS);
        assert!(max_parallelism(2) <= 2);
        goro::set_maxprocs(initial);
        assert_eq!(goro::maxprocs(), initial);
    });
}

#[test]
fn num_goroutines_counts_live_ones() {
    with_timeout(Duration::from_secs(60), || {
        let gates: Arc<Mutex<Vec<goro::park::Unparker>>> = Arc::default();
        let parked = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..100)
            .map(|_| {
                let (gates, parked) = (gates.clone(), parked.clone());
                goro::go!(move || {
                    gates.lock().unwrap().push(goro::park::prepare());
                    parked.fetch_add(1, Ordering::SeqCst);
                    goro::park::park(goro::park::WaitReason::Park);
                })
            })
            .collect();
        while parked.load(Ordering::SeqCst) < 100 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // The other test of this binary may have coroutines of its own alive.
        assert!(goro::num_goroutines() >= 100);
        for u in gates.lock().unwrap().drain(..) {
            u.unpark();
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
}
