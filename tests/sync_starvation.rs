//! Mutex starvation mode: while a coroutine re-locks in a tight loop, a waiter still
//! gets the lock within a bound. In its own binary: the coroutine waiter's wake-up sits
//! in the hog's P's `runnext` (the hog never parks), and only an idle P steals it;
//! other tests running alongside would keep every P busy (without preemption, which is
//! the sysmon issue's, a never-yielding coroutine keeps its P: docs/caveats.md).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::sync::Mutex;

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[test]
fn no_starvation_of_a_waiter() {
    with_timeout(Duration::from_secs(120), || {
        let m = Arc::new(Mutex::new(0u64));
        let stop = Arc::new(AtomicBool::new(false));
        let started = Arc::new(AtomicBool::new(false));
        let (m2, s2, st2) = (m.clone(), stop.clone(), started.clone());
        let hog = goro::go!(move || {
            let mut n = 0u64;
            let start = Instant::now();
            while !s2.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(20) {
                let mut g = m2.lock();
                *g += 1;
                n += 1;
                st2.store(true, Ordering::Relaxed);
                drop(g);
            }
            n
        });
        while !started.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(1));
        }
        let lost0 = common::Lost::now();
        // Wait for the lock from a plain thread (which can contend at any
        // GORO_MAXPROCS) and, with 2 Ps, from a coroutine.
        let waited = {
            let t = Instant::now();
            drop(m.lock());
            t.elapsed()
        };
        let waited_co = if goro::maxprocs() >= 2 {
            let m3 = m.clone();
            goro::go!(move || {
                let t = Instant::now();
                drop(m3.lock());
                t.elapsed()
            })
            .join()
            .unwrap()
        } else {
            Duration::ZERO
        };
        stop.store(true, Ordering::Relaxed);
        assert!(hog.join().unwrap() > 0);
        let bound = Duration::from_millis(500) + lost0.since();
        assert!(waited < bound, "thread waiter starved for {waited:?}");
        assert!(
            waited_co < bound,
            "coroutine waiter starved for {waited_co:?}"
        );
    });
}
