//! `after_func`: firing, stop/reset return values in every state, timers from
//! plain threads, and timers of a P that is busy computing.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{busy, with_timeout};
use goro::time::{after_func, AfterFunc};

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn counter() -> (Arc<AtomicUsize>, impl FnMut() + Send + 'static) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (n, move || {
        n2.fetch_add(1, Ordering::SeqCst);
    })
}

fn wait_for(n: &AtomicUsize, want: usize) {
    let t = Instant::now();
    while n.load(Ordering::SeqCst) < want {
        assert!(t.elapsed() < Duration::from_secs(20), "timer never fired");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn after_func_fires_on_a_coroutine() {
    with_timeout(T, || {
        let on = Arc::new(Mutex::new(None));
        let o = on.clone();
        let t0 = Instant::now();
        let _t = after_func(Duration::from_millis(5), move || {
            *o.lock().unwrap() = Some((goro::current_id(), t0.elapsed()));
        });
        let start = Instant::now();
        while on.lock().unwrap().is_none() {
            assert!(start.elapsed() < Duration::from_secs(20));
            std::thread::sleep(Duration::from_millis(1));
        }
        let (id, after) = on.lock().unwrap().unwrap();
        assert!(id.is_some(), "the function must run on a coroutine");
        assert!(after >= Duration::from_millis(5));
    });
}

#[test]
fn stop_and_reset_report_the_state() {
    with_timeout(T, || {
        // Pending.
        let (n, f) = counter();
        let t = after_func(Duration::from_secs(3600), f);
        assert!(
            t.reset(Duration::from_secs(3600)),
            "reset of a pending timer"
        );
        assert!(t.stop(), "stop of a pending timer");
        // Stopped.
        assert!(!t.stop(), "stop of a stopped timer");
        assert!(
            !t.reset(Duration::from_millis(1)),
            "reset of a stopped timer"
        );
        // Fired (the reset above re-armed it).
        wait_for(&n, 1);
        assert!(!t.stop(), "stop of a fired timer");
        assert!(!t.reset(Duration::from_millis(1)), "reset of a fired timer");
        wait_for(&n, 2);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(n.load(Ordering::SeqCst), 2, "fired more often than armed");
        // Stopped before it fired: never fires.
        let (n2, f2) = counter();
        let t2 = after_func(Duration::from_millis(10), f2);
        assert!(t2.stop());
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(n2.load(Ordering::SeqCst), 0);
    });
}

#[test]
fn stop_and_reset_from_coroutines_race_cleanly() {
    with_timeout(T, || {
        // Many timers stopped or reset right around their deadline: each fires at most
        // once per arming, and exactly once when nobody stopped it.
        let fired = Arc::new(AtomicUsize::new(0));
        let stopped = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..200)
            .map(|i| {
                let (fired, stopped) = (fired.clone(), stopped.clone());
                goro::go!(move || {
                    let f = fired.clone();
                    let t = after_func(Duration::from_micros(200), move || {
                        f.fetch_add(1, Ordering::SeqCst);
                    });
                    busy(Duration::from_micros(150 + (i % 5) * 25));
                    if t.stop() {
                        stopped.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        let t = Instant::now();
        while fired.load(Ordering::SeqCst) + stopped.load(Ordering::SeqCst) < 200 {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "a timer neither fired nor was stopped"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            fired.load(Ordering::SeqCst) + stopped.load(Ordering::SeqCst),
            200
        );
    });
}

#[test]
fn timers_set_from_plain_threads_fire() {
    with_timeout(T, || {
        let (n, _) = counter();
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let n = n.clone();
                std::thread::spawn(move || {
                    after_func(Duration::from_millis(1 + i), move || {
                        n.fetch_add(1, Ordering::SeqCst);
                    })
                })
            })
            .collect();
        let timers: Vec<AfterFunc> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        wait_for(&n, 8);
        drop(timers);
    });
}

/// A timer set by a coroutine that then computes for 200 ms without yielding still
/// fires on time on the other P (Go CL 232298).
#[test]
fn timer_of_a_busy_p_fires_on_another_p() {
    with_timeout(T, || {
        if goro::maxprocs() < 2 {
            return;
        }
        let late = Arc::new(Mutex::new(None));
        let l = late.clone();
        let lost0 = common::Lost::now();
        goro::go!(move || {
            let d = Duration::from_millis(10);
            let deadline = Instant::now() + d;
            let _t = after_func(d, move || {
                *l.lock().unwrap() = Some(Instant::now() - deadline);
            });
            busy(Duration::from_millis(200)); // holds this P, no yield
        })
        .join()
        .unwrap();
        let late = late
            .lock()
            .unwrap()
            .expect("timer did not fire during the busy loop");
        assert!(
            late < Duration::from_millis(100) + lost0.since(),
            "timer fired {late:?} late: after the busy loop (bound: 100 ms plus the time the machine did not run us)"
        );
    });
}

/// Dropping the handle does not stop the timer (as in Go).
#[test]
fn dropped_timer_still_fires() {
    with_timeout(T, || {
        let (n, f) = counter();
        drop(after_func(Duration::from_millis(2), f));
        wait_for(&n, 1);
    });
}

/// `goro::time` is Go's `time` package: its channel timers are `goro::chan`'s very
/// items (re-exports, not copies), and `after_func` makes an `AfterFunc`.
#[test]
fn time_is_gos_time_package() {
    use std::any::TypeId;
    with_timeout(Duration::from_secs(60), || {
        assert_eq!(
            TypeId::of::<goro::time::Timer>(),
            TypeId::of::<goro::chan::Timer>()
        );
        let t: goro::chan::Timer = goro::time::Timer::new(Duration::ZERO);
        t.recv();
        let _: Instant = goro::time::after(Duration::ZERO).recv().unwrap();
        let _: Instant = goro::time::tick(Duration::from_millis(1)).recv().unwrap();
        let f: AfterFunc = goro::time::after_func(Duration::from_secs(60), || {});
        assert!(f.stop());
    });
}
