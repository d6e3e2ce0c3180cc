//! Scheduling behaviour: yields, runnext, stealing across Ps, park/unpark under load,
//! and the bounded time-slice inheritance.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{busy, with_timeout, Baton};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Two coroutines that yield in a loop on one P alternate strictly.
#[test]
fn yield_alternation_on_one_p() {
    with_timeout(T, || {
        if goro::maxprocs() != 1 {
            // With more Ps the two may run in parallel; alternation is a 1-P property.
            return;
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        // Spawned from a coroutine so both land on the same P's queue, in order.
        let l = log.clone();
        goro::go!(move || {
            let hs: Vec<_> = (0..2)
                .map(|who| {
                    let l = l.clone();
                    goro::go!(move || {
                        for _ in 0..100 {
                            l.lock().unwrap().push(who);
                            goro::yield_now();
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        })
        .join()
        .unwrap();
        let log = log.lock().unwrap();
        assert_eq!(log.len(), 200);
        for w in log.windows(2) {
            assert_ne!(w[0], w[1], "yields did not alternate: {log:?}");
        }
    });
}

/// A coroutine readied by the running coroutine goes to runnext and runs before the
/// rest of the queue, on the same P.
#[test]
fn readied_coroutine_runs_next_on_same_p() {
    with_timeout(T, || {
        if goro::maxprocs() != 1 {
            // With an idle second P, a thief may legitimately take queued work.
            return;
        }
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        goro::go!(move || {
            let baton = Arc::new(Baton::default());
            // B waits for the baton.
            let (b, lb) = (baton.clone(), l.clone());
            let hb = goro::go!(move || {
                b.wait_turn(1);
                lb.lock().unwrap().push(("B", std::thread::current().id()));
            });
            goro::yield_now(); // let B park
                               // C is queued (tail) before A readies B.
            let lc = l.clone();
            let hc = goro::go!(move || lc.lock().unwrap().push(("C", std::thread::current().id())));
            l.lock().unwrap().push(("A", std::thread::current().id()));
            baton.pass(0); // readies B into runnext; C was displaced to the tail
            goro::yield_now();
            hb.join().unwrap();
            hc.join().unwrap();
        })
        .join()
        .unwrap();
        let log = log.lock().unwrap();
        let order: Vec<_> = log.iter().map(|e| e.0).collect();
        assert_eq!(order, ["A", "B", "C"]);
        assert_eq!(log[0].1, log[1].1, "B did not run on A's P");
    });
}

/// With two Ps, a burst of CPU-bound coroutines spreads over two OS threads.
#[test]
fn cpu_bound_burst_uses_two_threads() {
    with_timeout(T, || {
        if goro::maxprocs() < 2 {
            return;
        }
        let threads = Arc::new(Mutex::new(HashSet::new()));
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let threads = threads.clone();
                goro::go!(move || {
                    let start = Instant::now();
                    while start.elapsed() < Duration::from_millis(30) {
                        threads.lock().unwrap().insert(std::thread::current().id());
                        busy(Duration::from_micros(200));
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert!(
            threads.lock().unwrap().len() >= 2,
            "only one M ran the burst"
        );
    });
}

/// 1 000 000 park/unpark hand-offs in total, between coroutines and plain threads in
/// every combination, with no lost wake-up (a lost one hangs and the watchdog fails
/// the test).
#[test]
fn million_park_unpark_pairs() {
    with_timeout(T, || {
        // (party 0 is a thread?, party 1 is a thread?, rounds)
        let mixes = [
            (false, false, 700_000u32),
            (true, false, 100_000),
            (false, true, 100_000),
            (true, true, 100_000),
        ];
        let mut total = 0;
        for (t0, t1, rounds) in mixes {
            let baton = Arc::new(Baton::default());
            let run = move |b: Arc<Baton>, me: usize| {
                for _ in 0..rounds {
                    b.wait_turn(me);
                    b.pass(me);
                }
            };
            let spawn = |as_thread: bool, me: usize| -> Box<dyn FnOnce() + Send> {
                let b = baton.clone();
                if as_thread {
                    let h = std::thread::spawn(move || run(b, me));
                    Box::new(move || h.join().unwrap())
                } else {
                    let h = goro::go!(move || run(b, me));
                    Box::new(move || h.join().unwrap())
                }
            };
            let j0 = spawn(t0, 0);
            let j1 = spawn(t1, 1);
            j0();
            j1();
            total += 2 * rounds as u64;
        }
        assert_eq!(total, 2_000_000);
    });
}

/// A pair ping-ponging through runnext cannot starve the rest of its P's queue: the
/// time-slice inheritance is bounded.
#[test]
fn no_starvation_by_runnext_ping_pong() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let (s, r) = (stop.clone(), rounds.clone());
        goro::go!(move || {
            let baton = Arc::new(Baton::default());
            let pair: Vec<_> = (0..2)
                .map(|me| {
                    let (b, s, r) = (baton.clone(), s.clone(), r.clone());
                    goro::go!(move || loop {
                        b.wait_turn(me);
                        r.fetch_add(1, Ordering::Relaxed);
                        let done = s.load(Ordering::Relaxed);
                        b.pass(me);
                        if done {
                            return;
                        }
                    })
                })
                .collect();
            // Queued behind the pair on this P: must get to run.
            let s2 = s.clone();
            let starved = goro::go!(move || s2.store(true, Ordering::Relaxed));
            starved.join().unwrap();
            pair.into_iter().for_each(|h| h.join().unwrap());
        })
        .join()
        .unwrap();
        assert!(stop.load(Ordering::Relaxed));
    });
}

/// Work queued from plain threads (global queue) is not starved by a busy P either.
#[test]
fn no_starvation_of_global_queue() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spinner = goro::go!(move || {
            // A coroutine that keeps its P busy but yields.
            while !s.load(Ordering::Relaxed) {
                goro::yield_now();
            }
        });
        // From this plain thread: goes to the global queue.
        let s = stop.clone();
        goro::go!(move || s.store(true, Ordering::Relaxed))
            .join()
            .unwrap();
        spinner.join().unwrap();
    });
}
