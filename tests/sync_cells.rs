//! std's shapes in goro::sync: OnceLock, LazyLock, Barrier, Notify, and Cond's timed
//! and predicate waits. Each from coroutines and plain threads alike.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{wait_until, with_timeout};
use goro::sync::{Barrier, Cond, LazyLock, Mutex, Notify, OnceLock};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// The case: an initialiser that parks, with other callers arriving meanwhile.
/// std's OnceLock would block the M of every waiting coroutine; at one P the
/// initialiser could then never be resumed. Here the waiters park.
#[test]
fn oncelock_initialiser_that_parks_does_not_hang_the_runtime() {
    with_timeout(T, || {
        static CELL: OnceLock<u64> = OnceLock::new();
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let init = || {
            RUNS.fetch_add(1, Ordering::SeqCst);
            goro::time::sleep(Duration::from_millis(20)); // parks while others arrive
            let (tx, rx) = goro::chan::channel(0);
            drop(goro::go!(move || tx.send(41u64).unwrap()));
            rx.recv().unwrap() + 1
        };
        let hs: Vec<_> = (0..50)
            .map(|_| goro::go!(move || *CELL.get_or_init(init)))
            .collect();
        // A plain thread among the callers.
        let t = std::thread::spawn(move || *CELL.get_or_init(init));
        for h in hs {
            assert_eq!(h.join().unwrap(), 42);
        }
        assert_eq!(t.join().unwrap(), 42);
        assert_eq!(RUNS.load(Ordering::SeqCst), 1, "the initialiser ran once");
        assert_eq!(CELL.get(), Some(&42));
    });
}

#[test]
fn oncelock_set_get_take_and_a_panicking_initialiser() {
    with_timeout(T, || {
        let cell: OnceLock<String> = OnceLock::new();
        assert_eq!(cell.get(), None);
        // An initialiser that panics leaves the cell empty; the next one runs.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            cell.get_or_init(|| panic!("first initialiser fails"));
        }));
        assert!(r.is_err());
        assert_eq!(cell.get(), None);
        assert_eq!(cell.set("a".into()), Ok(()));
        assert_eq!(cell.set("b".into()), Err("b".to_string()));
        assert_eq!(cell.get_or_init(|| "c".into()), "a");
        let mut cell = cell;
        cell.get_mut().unwrap().push('!');
        assert_eq!(cell.clone().into_inner().as_deref(), Some("a!"));
        assert_eq!(cell.take().as_deref(), Some("a!"));
        assert_eq!(cell.get(), None);
        assert_eq!(OnceLock::from(5), OnceLock::from(5));
        assert_eq!(format!("{:?}", OnceLock::<u8>::new()), "OnceLock(<uninit>)");
    });
}

#[test]
fn oncelock_drops_its_value_once() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let cell = OnceLock::new();
    assert!(cell.set(Counted(drops.clone())).is_ok());
    let refused = cell.set(Counted(drops.clone())).unwrap_err();
    drop(refused);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(cell);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
}

/// std's `LazyLock` hangs a one-P program whose initialiser parks (the issue's
/// report); goro's does not.
#[test]
fn lazylock_from_many_coroutines_and_a_thread() {
    with_timeout(T, || {
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        static TABLE: LazyLock<Vec<u32>> = LazyLock::new(|| {
            RUNS.fetch_add(1, Ordering::SeqCst);
            goro::time::sleep(Duration::from_millis(10));
            (0..100).collect()
        });
        let hs: Vec<_> = (0..20).map(|i| goro::go!(move || TABLE[i * 5])).collect();
        let t = std::thread::spawn(|| TABLE.len());
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), (i * 5) as u32);
        }
        assert_eq!(t.join().unwrap(), 100);
        assert_eq!(RUNS.load(Ordering::SeqCst), 1);
        assert!(LazyLock::get(&TABLE).is_some());
    });
}

#[test]
fn lazylock_poisoned_by_a_panicking_initialiser() {
    let lazy: LazyLock<u32> = LazyLock::new(|| panic!("cannot make it"));
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *lazy));
    assert!(first.is_err());
    let second = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| *lazy));
    let msg = goro::panic_message(&*second.unwrap_err()).to_string();
    assert_eq!(msg, "LazyLock instance has previously been poisoned"); // std's words
                                                                       // into_inner of one never forced gives the function back.
    let unforced = LazyLock::new(|| 7u8);
    let f = LazyLock::into_inner(unforced).unwrap_err();
    assert_eq!(f(), 7);
}

/// Rounds of a barrier across coroutines and a thread: nobody leaves a round before
/// everybody arrived, and each round has exactly one leader.
#[test]
fn barrier_rounds_with_one_leader_each() {
    with_timeout(T, || {
        const N: usize = 8; // 7 coroutines and a thread
        const ROUNDS: usize = 50;
        let barrier = Arc::new(Barrier::new(N));
        let arrived = Arc::new(AtomicUsize::new(0));
        let leaders = Arc::new(AtomicUsize::new(0));
        let body = {
            let (barrier, arrived, leaders) = (barrier.clone(), arrived.clone(), leaders.clone());
            move || {
                for round in 0..ROUNDS {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    if barrier.wait().is_leader() {
                        leaders.fetch_add(1, Ordering::SeqCst);
                    }
                    // Everyone of this round has arrived before anyone leaves it.
                    assert!(arrived.load(Ordering::SeqCst) >= (round + 1) * N);
                    // And nobody runs past the next round's barrier before we arrive:
                    // the second wait keeps the count from racing ahead.
                    barrier.wait();
                }
            }
        };
        let hs: Vec<_> = (0..N - 1)
            .map(|_| {
                let b = body.clone();
                goro::go!(b)
            })
            .collect();
        let t = std::thread::spawn(body);
        hs.into_iter().for_each(|h| h.join().unwrap());
        t.join().unwrap();
        assert_eq!(leaders.load(Ordering::SeqCst), ROUNDS);
        // Barrier::new(0) and new(1) never wait.
        assert!(Barrier::new(0).wait().is_leader());
        assert!(Barrier::new(1).wait().is_leader());
    });
}

#[test]
fn notify_one_stores_one_permit_and_wakes_in_order() {
    with_timeout(T, || {
        let n = Notify::new();
        // A permit stored before anyone waits is taken by the next wait, at once.
        n.notify_one();
        n.notify_one(); // does not add up
        n.notified();
        let n = Arc::new(n);
        let woken = Arc::new(Mutex::new(Vec::new()));
        let waiters: Vec<_> = (0..5)
            .map(|i| {
                let (n2, woken) = (n.clone(), woken.clone());
                let h = goro::go!(move || {
                    n2.notified();
                    woken.lock().push(i);
                });
                // Each waiter queued before the next one starts.
                wait_until("the test condition", || {
                    format!("{n:?}").contains(&format!("waiters: {}", i + 1))
                });
                h
            })
            .collect();
        for i in 0..5 {
            n.notify_one();
            wait_until("the test condition", || woken.lock().len() == i + 1);
        }
        waiters.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(
            *woken.lock(),
            vec![0, 1, 2, 3, 4],
            "woken in the order they waited"
        );
        // No permit left over: a wait now needs a new notify (from a thread).
        let n2 = n.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            n2.notify_one();
        });
        let start = Instant::now();
        n.notified();
        assert!(start.elapsed() >= Duration::from_millis(10));
        t.join().unwrap();
    });
}

#[test]
fn notify_waiters_wakes_all_present_and_stores_nothing() {
    with_timeout(T, || {
        let n = Arc::new(Notify::new());
        let hs: Vec<_> = (0..20)
            .map(|_| {
                let n = n.clone();
                goro::go!(move || n.notified())
            })
            .collect();
        let thread_waiter = {
            let n = n.clone();
            std::thread::spawn(move || n.notified())
        };
        wait_until("the test condition", || {
            format!("{n:?}").contains("waiters: 21")
        });
        n.notify_waiters();
        hs.into_iter().for_each(|h| h.join().unwrap());
        thread_waiter.join().unwrap();
        assert!(format!("{n:?}").contains("permit: false"));
        // With nobody waiting, notify_waiters leaves no permit behind.
        n.notify_waiters();
        assert!(format!("{n:?}").contains("permit: false"));
    });
}

#[test]
fn cond_wait_while_and_wait_timeout() {
    with_timeout(T, || {
        let pair = Arc::new((Mutex::new(0u32), Cond::new()));
        // wait_while: a coroutine and a thread wait for the count to reach 10.
        let waiters: Vec<Box<dyn FnOnce() + Send>> = vec![
            {
                let p = pair.clone();
                let h = goro::go!(move || *p.1.wait_while(p.0.lock(), |n| *n < 10));
                Box::new(move || assert_eq!(h.join().unwrap(), 10))
            },
            {
                let p = pair.clone();
                let h = std::thread::spawn(move || *p.1.wait_while(p.0.lock(), |n| *n < 10));
                Box::new(move || assert_eq!(h.join().unwrap(), 10))
            },
        ];
        for _ in 0..10 {
            *pair.0.lock() += 1;
            pair.1.notify_all();
            goro::time::sleep(Duration::from_millis(1));
        }
        waiters.into_iter().for_each(|check| check());

        // wait_timeout with nobody notifying: times out, not early.
        let (lock, cond) = &*pair;
        let start = Instant::now();
        let (g, r) = cond.wait_timeout(lock.lock(), Duration::from_millis(20));
        drop(g);
        assert!(r.timed_out());
        assert!(start.elapsed() >= Duration::from_millis(20));

        // wait_timeout notified in time: not timed out. The waiter marks itself under
        // the mutex; once we hold the mutex after that, it has its ticket.
        *pair.0.lock() = 0;
        let p = pair.clone();
        let h = goro::go!(move || {
            let mut g = p.0.lock();
            *g = 1; // waiting
            let (g, r) = p.1.wait_timeout(g, Duration::from_secs(30));
            (*g, r.timed_out())
        });
        wait_until("the test condition", || *pair.0.lock() == 1);
        *pair.0.lock() = 99;
        pair.1.notify_one();
        assert_eq!(h.join().unwrap(), (99, false));

        // wait_timeout_while: the condition never turns: times out with it still true.
        let start = Instant::now();
        let (g, r) = cond.wait_timeout_while(lock.lock(), Duration::from_millis(15), |n| *n != 0);
        assert!(r.timed_out() && *g == 99 && start.elapsed() >= Duration::from_millis(15));
    });
}

/// A notify_one that reaches the ticket of a timed wait that gave up goes to the next
/// waiter: with timed waiters timing out all around, every notify_one sent to the
/// untimed waiters wakes one of them.
#[test]
fn cond_notify_one_skips_timed_out_waits() {
    with_timeout(T, || {
        let pair = Arc::new((Mutex::new(0usize), Cond::new()));
        // Timed waiters queue first (their tickets come first), and give up.
        let timed: Vec<_> = (0..10)
            .map(|_| {
                let p = pair.clone();
                goro::go!(move || p.1.wait_timeout(p.0.lock(), Duration::from_millis(5)).1)
            })
            .collect();
        goro::time::sleep(Duration::from_millis(2));
        let woken = Arc::new(AtomicUsize::new(0));
        let untimed: Vec<_> = (0..10)
            .map(|_| {
                let (p, w) = (pair.clone(), woken.clone());
                goro::go!(move || {
                    let mut g = p.0.lock();
                    *g += 1; // queued (its ticket is taken before the unlock)
                    drop(p.1.wait(g));
                    w.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        for h in timed {
            assert!(h.join().unwrap().timed_out());
        }
        wait_until("the test condition", || *pair.0.lock() == 10); // every untimed waiter has its ticket
        for i in 0..10 {
            pair.1.notify_one();
            wait_until("the test condition", || {
                woken.load(Ordering::SeqCst) == i + 1
            });
        }
        untimed.into_iter().for_each(|h| h.join().unwrap());
    });
}

/// Races of timeouts against notifies: every notify_one is either taken by a waiter
/// (which then reports not timed out) or finds nobody; none is lost while a waiter
/// waits, so the final notify_all count matches.
#[test]
fn cond_timeouts_racing_notifies_lose_nothing() {
    with_timeout(T, || {
        const WAITERS: usize = 200;
        let pair = Arc::new((Mutex::new(0usize), Cond::new()));
        let notified = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..WAITERS)
            .map(|i| {
                let (p, n) = (pair.clone(), notified.clone());
                goro::go!(move || {
                    let d = Duration::from_micros(100 + (i as u64 * 37) % 900);
                    let (_g, r) = p.1.wait_timeout(p.0.lock(), d);
                    if !r.timed_out() {
                        n.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let start = Instant::now();
        while hs.iter().any(|h| !h.is_finished()) {
            assert!(start.elapsed() < Duration::from_secs(60), "waiters stuck");
            pair.1.notify_one();
            std::thread::yield_now();
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
        // Nobody waits now: a notify_one wakes nobody and leaves nothing behind.
        pair.1.notify_one();
        let (lock, cond) = &*pair;
        let (_g, r) = cond.wait_timeout(lock.lock(), Duration::from_millis(5));
        assert!(r.timed_out(), "a notification outlived its waiters");
        assert!(notified.load(Ordering::SeqCst) <= WAITERS);
    });
}
