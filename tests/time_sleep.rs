//! Sleeping: lateness, ordering, overflow, and sleeping from plain threads.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::{busy, with_timeout};
use goro::sync::WaitGroup;

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// xorshift, so the test needs no rand crate.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn zero_and_past_deadlines_return_at_once() {
    with_timeout(T, || {
        goro::go!(|| {
            let t = Instant::now();
            goro::time::sleep(Duration::ZERO);
            goro::time::sleep_until(Instant::now() - Duration::from_secs(1));
            assert!(t.elapsed() < Duration::from_millis(50));
        })
        .join()
        .unwrap();
        let t = Instant::now();
        goro::time::sleep(Duration::ZERO);
        goro::time::sleep_until(t);
        assert!(t.elapsed() < Duration::from_millis(50));
    });
}

/// Sleepers under CPU load all wake, none early.
#[test]
fn sleep_lateness_is_sane_under_load() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        // CPU load that yields (a non-yielding load is the sysmon issue's).
        let load: Vec<_> = (0..2)
            .map(|_| {
                let stop = stop.clone();
                goro::go!(move || {
                    while !stop.load(Ordering::Relaxed) {
                        busy(Duration::from_micros(50));
                        goro::yield_now();
                    }
                })
            })
            .collect();
        let mut seed = 0x1234_5678_9abc_def1u64;
        let sleepers: Vec<_> = (0..500)
            .map(|_| {
                let d = Duration::from_micros(500 + rng(&mut seed) % 20_000);
                goro::go!(move || {
                    let t = Instant::now();
                    goro::time::sleep(d);
                    (d, t.elapsed())
                })
            })
            .collect();
        let mut worst = Duration::ZERO;
        for h in sleepers {
            let (d, took) = h.join().unwrap();
            assert!(took >= d, "woke early: slept {took:?} for {d:?}");
            worst = worst.max(took - d);
        }
        stop.store(true, Ordering::Relaxed);
        load.into_iter().for_each(|h| h.join().unwrap());
        // Sane: far below the seconds a lost timer would take. The benchmarks measure
        // the real figures.
        assert!(
            worst < Duration::from_secs(2),
            "a sleeper was {worst:?} late"
        );
    });
}

/// 10 000 sleepers with random durations wake in deadline order, within a tolerance.
#[test]
fn ten_thousand_sleepers_wake_in_deadline_order() {
    with_timeout(T, || {
        let lost0 = common::Lost::now();
        let wakes = goro::go!(|| {
            // All sleepers are created first and held at a gate; their deadlines count
            // from a base set when the gate opens, so a slow (debug, loaded) spawn loop
            // neither makes them start late nor holds a P while timers are due. Each
            // returns its reading through its handle: a shared std Mutex would block
            // the Ms a retake hands the P to, and a woken waiter that loses the
            // lock to others sleeps in the kernel, out of reach of `Lost`.
            let gate = WaitGroup::new();
            gate.add(1);
            let base: Arc<OnceLock<Instant>> = Arc::default();
            let mut seed = 42u64;
            let hs: Vec<_> = (0..10_000)
                .map(|_| {
                    let offset = Duration::from_micros(rng(&mut seed) % 1_500_000);
                    let (gate, base) = (gate.clone(), base.clone());
                    goro::go!(move || {
                        gate.wait();
                        let deadline =
                            *base.get().expect("base set before the gate opens") + offset;
                        let started = Instant::now();
                        goro::time::sleep_until(deadline);
                        (deadline, Instant::now(), started < deadline)
                    })
                })
                .collect();
            base.set(Instant::now() + Duration::from_millis(100))
                .unwrap();
            gate.done();
            hs.into_iter()
                .map(|h| h.join().unwrap())
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        assert_eq!(wakes.len(), 10_000);
        assert!(wakes.iter().all(|(d, w, _)| w >= d), "a sleeper woke early");
        let late_starters = wakes.iter().filter(|(_, _, asleep)| !asleep).count();
        assert!(
            late_starters < 500,
            "{late_starters} sleepers started after their deadline"
        );
        // In wake order, no sleeper's deadline is more than the tolerance after that of
        // one woken before it.
        let mut wakes: Vec<_> = wakes.into_iter().filter(|(_, _, asleep)| *asleep).collect();
        wakes.sort_by_key(|&(_, w, _)| w);
        let tolerance = Duration::from_millis(30) + lost0.since();
        let mut latest = wakes[0].0;
        for (d, _, _) in &wakes {
            assert!(
                *d + tolerance >= latest,
                "woke {:?} out of deadline order (tolerance {tolerance:?}, with the time the machine did not run us)",
                latest - *d
            );
            latest = latest.max(*d);
        }
    });
}

/// Go's TestOverflowSleep: a sleep so long it would overflow neither fires early nor
/// delays other timers.
#[test]
fn huge_sleep_does_not_fire_or_delay_others() {
    with_timeout(T, || {
        let woke = Arc::new(AtomicBool::new(false));
        let w = woke.clone();
        drop(goro::go!(move || {
            goro::time::sleep(Duration::MAX);
            w.store(true, Ordering::SeqCst); // never reached
        }));
        let fired = Arc::new(AtomicBool::new(false));
        let f = fired.clone();
        let _never = goro::time::after_func(Duration::MAX, move || f.store(true, Ordering::SeqCst));
        let took = goro::go!(|| {
            let t = Instant::now();
            goro::time::sleep(Duration::from_millis(25));
            t.elapsed()
        })
        .join()
        .unwrap();
        assert!(took >= Duration::from_millis(25));
        assert!(took < Duration::from_secs(2), "a 25 ms sleep took {took:?}");
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !woke.load(Ordering::SeqCst),
            "sleep(Duration::MAX) returned"
        );
        assert!(
            !fired.load(Ordering::SeqCst),
            "after_func(Duration::MAX) fired"
        );
    });
}

/// Sleeping from plain threads works (std::thread::sleep), and coroutines sleeping
/// alongside are unaffected.
#[test]
fn sleep_from_plain_threads() {
    with_timeout(T, || {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    let d = Duration::from_millis(5 + i);
                    let t = Instant::now();
                    goro::time::sleep(d);
                    assert!(t.elapsed() >= d);
                })
            })
            .collect();
        let g = goro::go!(|| goro::time::sleep(Duration::from_millis(5)));
        hs.into_iter().for_each(|h| h.join().unwrap());
        g.join().unwrap();
    });
}

/// park_timeout: the deadline wakes a wait nobody else wakes; an unpark before the
/// deadline wins; both on coroutines and on plain threads.
#[test]
fn park_timeout_on_coroutines_and_threads() {
    use goro::park::{self, WaitReason};
    let check = || {
        // Nobody wakes it: the deadline does.
        let _u = park::prepare();
        let t = Instant::now();
        assert!(park::park_timeout(
            WaitReason::Park,
            t + Duration::from_millis(10)
        ));
        assert!(t.elapsed() >= Duration::from_millis(10));
        // Woken first.
        let u = park::prepare();
        let woken = Arc::new(AtomicUsize::new(0));
        let w2 = woken.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            w2.store(u.unpark() as usize, Ordering::SeqCst);
        });
        let t = Instant::now();
        let timed_out = park::park_timeout(WaitReason::Park, t + Duration::from_secs(30));
        assert!(!timed_out && t.elapsed() < Duration::from_secs(20));
        waker.join().unwrap();
        assert_eq!(woken.load(Ordering::SeqCst), 1);
    };
    with_timeout(T, move || {
        check();
        goro::go!(check).join().unwrap();
    });
}
