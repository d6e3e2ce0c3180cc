//! Lock convoys (issue 37, item 8): coroutines that queue on one std `Mutex` must not
//! cost a thread each, and a bound on threads must never stop a lock's holder from
//! getting a P back.
//!
//! A waiter on a std lock blocks its thread in a futex, which the hooks do not park
//! (docs/decisions/0002-hooks.md), so sysmon takes its P after ~20 µs. While the lock
//! moves, sysmon stops starting threads for such waiters once `convoy::BUDGET` (32)
//! have lost their P (runtime/src/sched/convoy.rs). Each scenario runs alone in a
//! child process (its thread count is the process's) at `GORO_MAXPROCS` 1 and 2.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{alone, os_threads, thread_names, with_timeout, BUDGET_MISS};

/// The runtime's budget of Ms out in futex waits (`convoy::BUDGET`).
const CONVOY_BUDGET: usize = 32;
/// Threads allowed beyond `maxprocs() + CONVOY_BUDGET`: the harness's threads, the
/// watchdog and the sampler, sysmon, spare and idle Ms, and a stall or two that a
/// loaded machine can cause (a holder the kernel keeps off the CPUs past the stall
/// limit lets sysmon take its waiters' Ps).
const EXTRA_THREADS: usize = 40;

/// Spins for `d` (holding a lock: the waiters must block in the kernel meanwhile).
fn spin(d: Duration) {
    let until = Instant::now() + d;
    // Bounded by the clock.
    while Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// Samples the process's threads every millisecond on a plain thread until `stop`.
fn sample_threads(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<(usize, String)> {
    std::thread::spawn(move || {
        let (mut most, mut names) = (0, String::new());
        // Bounded: the watchdog ends the test within its limit.
        for _ in 0..120_000 {
            if stop.load(Ordering::Acquire) {
                break;
            }
            let n = os_threads();
            if n > most {
                most = n;
                names = thread_names();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (most, names)
    })
}

/// Every M whose P sysmon took in a futex wait comes back to goro: the last ones as
/// their coroutines end, which can be just after the joins return (a coroutine's
/// result is handed over before it leaves its user code).
fn all_back() {
    common::wait_until("the Ms out in futex waits to come back", || {
        goro::debug::stats().futex_waiters_without_p == 0
    });
}

/// 600 coroutines take one std `Mutex` 3 times each and hold it 150 µs, long enough
/// for every waiter's P to be taken: one thread per waiter before the convoy bound.
fn moving_lock() {
    with_timeout(Duration::from_secs(120), || {
        const N: usize = 600;
        const ROUNDS: usize = 3;
        let lock = Arc::new(Mutex::new(0usize));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = sample_threads(stop.clone());
        let start = Instant::now();
        let hs: Vec<_> = (0..N)
            .map(|_| {
                let lock = lock.clone();
                goro::go!(move || {
                    for _ in 0..ROUNDS {
                        let mut g = lock.lock().unwrap();
                        spin(Duration::from_micros(150));
                        *g += 1;
                        drop(g);
                        goro::yield_now();
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("a contender panicked");
        }
        let took = start.elapsed();
        stop.store(true, Ordering::Release);
        let (most, names) = sampler.join().unwrap();
        assert_eq!(*lock.lock().unwrap(), N * ROUNDS, "lost updates");
        let st = goro::debug::stats();
        let procs = goro::maxprocs();
        println!(
            "moving lock: {N} x {ROUNDS} in {took:?}, at most {most} threads (maxprocs \
             {procs}), {} convoy deferrals",
            st.convoy_deferrals
        );
        assert!(
            most <= procs + CONVOY_BUDGET + EXTRA_THREADS,
            "{BUDGET_MISS} {most} OS threads at once for a lock convoy with maxprocs {procs} \
             (bound {}): threads then: {names}",
            procs + CONVOY_BUDGET + EXTRA_THREADS
        );
        all_back();
    });
}

/// A lock whose holders park on goro (a timer, as a `Mutex<TcpStream>` read under its
/// lock parks on the netpoller) while 300 coroutines queue on it: after the lock has
/// moved (so that sysmon counts it as a convoy), each parked holder must still get a
/// P back, or nothing ends.
fn parked_holder() {
    with_timeout(Duration::from_secs(120), || {
        const N: usize = 300;
        const PARKERS: usize = 10;
        let lock = Arc::new(Mutex::new(0usize));
        let parked = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let (lock, parked) = (lock.clone(), parked.clone());
                goro::go!(move || {
                    for round in 0..2 {
                        let mut g = lock.lock().unwrap();
                        if round == 1 && i % (N / PARKERS) == 0 {
                            // Holds the lock across a park: its M runs other coroutines,
                            // which queue on the lock and block their threads.
                            goro::time::sleep(Duration::from_millis(5));
                            parked.fetch_add(1, Ordering::Relaxed);
                        } else {
                            spin(Duration::from_micros(100));
                        }
                        *g += 1;
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("a contender panicked");
        }
        let took = start.elapsed();
        assert_eq!(*lock.lock().unwrap(), 2 * N, "lost updates");
        assert_eq!(parked.load(Ordering::Relaxed), PARKERS);
        let st = goro::debug::stats();
        println!(
            "parked holders: {N} contenders, {PARKERS} holders parked, in {took:?}; \
             {} convoy deferrals, at most {} threads now",
            st.convoy_deferrals,
            os_threads()
        );
        all_back();
    });
}

#[test]
fn moving_lock_at_1p() {
    if alone("moving_lock_at_1p", &[("GORO_MAXPROCS", "1")]) {
        return;
    }
    moving_lock();
}

#[test]
fn moving_lock_at_2p() {
    if alone("moving_lock_at_2p", &[("GORO_MAXPROCS", "2")]) {
        return;
    }
    moving_lock();
}

#[test]
fn parked_holder_at_1p() {
    if alone("parked_holder_at_1p", &[("GORO_MAXPROCS", "1")]) {
        return;
    }
    parked_holder();
}

#[test]
fn parked_holder_at_2p() {
    if alone("parked_holder_at_2p", &[("GORO_MAXPROCS", "2")]) {
        return;
    }
    parked_holder();
}
