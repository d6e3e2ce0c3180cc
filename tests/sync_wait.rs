//! WaitGroup, Once, Cond and Semaphore.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::sync::{Cond, Mutex, Once, Semaphore, WaitGroup};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[test]
fn waitgroup_across_ten_thousand_coroutines() {
    with_timeout(T, || {
        let wg = WaitGroup::new();
        let n = Arc::new(AtomicUsize::new(0));
        wg.add(10_000);
        for _ in 0..10_000 {
            let (wg, n) = (wg.clone(), n.clone());
            drop(goro::go!(move || {
                goro::yield_now();
                n.fetch_add(1, Ordering::SeqCst);
                wg.done();
            }));
        }
        // Waiters: the test thread, and coroutines.
        let waiters: Vec<_> = (0..10)
            .map(|_| {
                let (wg, n) = (wg.clone(), n.clone());
                goro::go!(move || {
                    wg.wait();
                    assert_eq!(n.load(Ordering::SeqCst), 10_000);
                })
            })
            .collect();
        wg.wait();
        assert_eq!(n.load(Ordering::SeqCst), 10_000);
        waiters.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(wg.count(), 0);
        // Reusable once the round is over.
        wg.add(1);
        let w2 = wg.clone();
        goro::go!(move || w2.done()).join().unwrap();
        wg.wait();
    });
}

#[test]
fn waitgroup_negative_counter_panics() {
    let r = std::panic::catch_unwind(|| WaitGroup::new().add(-1));
    let msg = r
        .unwrap_err()
        .downcast::<&str>()
        .map(|s| s.to_string())
        .unwrap();
    assert_eq!(msg, "negative WaitGroup counter");
    let wg = WaitGroup::new();
    wg.add(2);
    wg.done();
    wg.done();
    assert!(std::panic::catch_unwind(|| wg.done()).is_err());
}

#[test]
fn once_under_a_race() {
    with_timeout(T, || {
        for _ in 0..50 {
            let once = Arc::new(Once::new());
            let runs = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..16)
                .map(|_| {
                    let (once, runs) = (once.clone(), runs.clone());
                    goro::go!(move || {
                        once.call_once(|| {
                            goro::yield_now(); // others arrive meanwhile and wait
                            runs.fetch_add(1, Ordering::SeqCst);
                        });
                        // When call_once returns, the function has run.
                        assert_eq!(runs.load(Ordering::SeqCst), 1);
                    })
                })
                .collect();
            let (o, r) = (once.clone(), runs.clone());
            let t = std::thread::spawn(move || {
                o.call_once(|| {
                    r.fetch_add(1, Ordering::SeqCst);
                })
            });
            hs.into_iter().for_each(|h| h.join().unwrap());
            t.join().unwrap();
            assert_eq!(runs.load(Ordering::SeqCst), 1);
            assert!(once.is_completed());
        }
    });
}

#[test]
fn once_counts_a_panic_as_done() {
    let once = Once::new();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        once.call_once(|| panic!("in once"))
    }));
    assert!(r.is_err());
    assert!(once.is_completed());
    once.call_once(|| unreachable!("must not run again"));
}

/// Many waiters, notify_all wakes every one; notify_one wakes exactly one.
#[test]
fn cond_notify_all_and_one() {
    with_timeout(T, || {
        let state = Arc::new((Mutex::new((0u32, 0usize)), Cond::new()));
        let waiters: Vec<_> = (0..200)
            .map(|i| {
                let state = state.clone();
                let body = move || {
                    let (m, c) = &*state;
                    let mut g = m.lock();
                    g.1 += 1; // arrived
                    while g.0 == 0 {
                        g = c.wait(g);
                    }
                };
                if i % 20 == 0 {
                    let h = std::thread::spawn(body);
                    Box::new(move || h.join().unwrap()) as Box<dyn FnOnce()>
                } else {
                    let h = goro::go!(body);
                    Box::new(move || h.join().unwrap()) as Box<dyn FnOnce()>
                }
            })
            .collect();
        let (m, c) = &*state;
        let t = Instant::now();
        while m.lock().1 < 200 {
            assert!(t.elapsed() < Duration::from_secs(60));
            std::thread::sleep(Duration::from_millis(1));
        }
        m.lock().0 = 1;
        c.notify_all();
        waiters.into_iter().for_each(|j| j());

        // notify_one: each call lets exactly one of the waiters through.
        let gate = Arc::new((Mutex::new((0u32, 0u32)), Cond::new())); // (permits, passed)
        let hs: Vec<_> = (0..10)
            .map(|_| {
                let gate = gate.clone();
                goro::go!(move || {
                    let (m, c) = &*gate;
                    let mut g = m.lock();
                    while g.0 == 0 {
                        g = c.wait(g);
                    }
                    g.0 -= 1;
                    g.1 += 1;
                })
            })
            .collect();
        let (m, c) = &*gate;
        for i in 1..=10 {
            m.lock().0 += 1;
            c.notify_one();
            let t = Instant::now();
            while m.lock().1 < i {
                assert!(
                    t.elapsed() < Duration::from_secs(20),
                    "notify_one woke nobody"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
        // Notifying with nobody waiting is a no-op, and is not remembered.
        c.notify_one();
        c.notify_all();
    });
}

#[test]
fn semaphore_bounds_concurrency() {
    with_timeout(T, || {
        let sem = Arc::new(Semaphore::new(3));
        let inside = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..50)
            .map(|_| {
                let (sem, inside, peak) = (sem.clone(), inside.clone(), peak.clone());
                goro::go!(move || {
                    for _ in 0..20 {
                        sem.acquire();
                        let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(n, Ordering::SeqCst);
                        goro::yield_now();
                        inside.fetch_sub(1, Ordering::SeqCst);
                        sem.release(1);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert!(peak.load(Ordering::SeqCst) <= 3);
        assert_eq!(sem.available_permits(), 3);
        assert!(sem.try_acquire() && sem.try_acquire() && sem.try_acquire());
        assert!(!sem.try_acquire());
        sem.release(3);
        assert_eq!(sem.available_permits(), 3);
        assert!(std::panic::catch_unwind(|| Semaphore::new(usize::MAX)).is_err());
        assert!(std::panic::catch_unwind(|| Semaphore::new(1).release(u32::MAX as usize)).is_err());
    });
}

/// `WaitGroup::go` (Go 1.25's `WaitGroup.Go`): counts one per task and down when the
/// task returns, from a coroutine and from a plain thread; the tasks can start more
/// tasks in the same group. (A task's panic ends the program, as in Go, or with
/// `GORO_DETACHED_PANIC=ignore` counts down too: tests/rt_panic_exit.rs.)
#[test]
fn waitgroup_go_counts_down() {
    common::on_thread_and_coroutine(T, || {
        let wg = WaitGroup::new();
        let n = Arc::new(AtomicUsize::new(0));
        for i in 0..100 {
            let (n, inner) = (n.clone(), wg.clone());
            wg.go(move || {
                n.fetch_add(1, Ordering::SeqCst);
                if i % 10 == 0 {
                    let n = n.clone();
                    inner.go(move || {
                        n.fetch_add(1, Ordering::SeqCst);
                    });
                }
            });
        }
        wg.wait();
        assert_eq!(n.load(Ordering::SeqCst), 110);
        assert_eq!(wg.count(), 0);
    });
}
