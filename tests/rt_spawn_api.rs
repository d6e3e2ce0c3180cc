//! The std-shaped spawning API (issue 18): names and `JoinHandle::join_timeout`, from
//! coroutines and plain threads.

mod common;

use std::time::{Duration, Instant};

use common::with_timeout;
use goro::chan::channel;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Runs `f` on the calling plain thread, then on a coroutine.
fn on_thread_and_coroutine(f: fn()) {
    f();
    goro::go!(f).join().unwrap();
}

fn sleep_ms(ms: u64) {
    goro::time::sleep(Duration::from_millis(ms));
}

// ---- names ----

#[test]
fn names_of_handles_and_current_name() {
    with_timeout(T, || {
        let h = goro::Builder::new()
            .name("parser")
            .spawn(|| {
                let outside = goro::current_name();
                let inside = goro::blocking(goro::current_name);
                (outside, inside)
            })
            .unwrap();
        assert_eq!(h.name(), Some("parser"));
        let (outside, inside) = h.join().unwrap();
        assert_eq!(outside.as_deref(), Some("parser"));
        assert_eq!(inside.as_deref(), Some("parser"), "inside blocking");

        let h = goro::go!(goro::current_name);
        assert_eq!(h.name(), None);
        assert_eq!(h.join().unwrap(), None);

        // A plain thread: the thread's name.
        let t = std::thread::Builder::new()
            .name("probe".into())
            .spawn(goro::current_name)
            .unwrap();
        assert_eq!(t.join().unwrap().as_deref(), Some("probe"));
        let t = std::thread::Builder::new()
            .spawn(goro::current_name)
            .unwrap();
        assert_eq!(t.join().unwrap(), None);
    });
}

// ---- join_timeout ----

#[test]
fn join_timeout_times_out_then_joins_later() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (tx, rx) = channel::<u32>(0);
            let h = goro::go!(move || rx.recv().unwrap() + 1);
            let start = Instant::now();
            let h = h
                .join_timeout(Duration::from_millis(20))
                .expect_err("joined a coroutine that cannot have finished");
            assert!(start.elapsed() >= Duration::from_millis(20));
            // Again, and with no time at all: still waiting, handle intact.
            let h = h.join_timeout(Duration::from_millis(5)).unwrap_err();
            let h = h.join_timeout(Duration::ZERO).unwrap_err();
            assert!(!h.is_finished());
            tx.send(41).unwrap();
            assert_eq!(h.join().unwrap(), 42);

            // A timed-out handle joined with join_timeout later.
            let (tx, rx) = channel::<u32>(0);
            let h = goro::go!(move || rx.recv().unwrap());
            let h = h.join_timeout(Duration::from_millis(5)).unwrap_err();
            tx.send(9).unwrap();
            assert_eq!(h.join_timeout(T).unwrap().unwrap(), 9);
        });
    });
}

#[test]
fn join_timeout_succeeds_in_time() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let h = goro::go!(|| {
                sleep_ms(10);
                "done"
            });
            let start = Instant::now();
            let r = h.join_timeout(Duration::from_secs(30)).unwrap();
            assert_eq!(r.unwrap(), "done");
            assert!(start.elapsed() < Duration::from_secs(20));
            // A panic comes back as Ok(Err(payload)).
            let h = goro::go!(|| -> u32 { panic!("timed boom") });
            let payload = h.join_timeout(T).unwrap().unwrap_err();
            assert_eq!(goro::panic_message(&*payload), "timed boom");
            // Duration::MAX does not overflow: it waits for ever.
            assert_eq!(
                goro::go!(|| 1)
                    .join_timeout(Duration::MAX)
                    .unwrap()
                    .unwrap(),
                1
            );
        });
    });
}

/// Timed waits whose deadlines land right around the coroutines' ends: each wait
/// either withdraws (and a later one joins) or takes the result, never both or
/// neither.
#[test]
fn stress_join_timeout_races_finish() {
    with_timeout(T, || {
        let hs: Vec<_> = (0..500u64)
            .map(|i| {
                goro::go!(move || {
                    for _ in 0..(i % 7) {
                        goro::yield_now();
                    }
                    if i % 5 == 0 {
                        goro::time::sleep(Duration::from_micros(50 * (i % 11)));
                    }
                    i
                })
            })
            .collect();
        let joiner = goro::go!(move || {
            let mut sum = 0;
            for mut h in hs {
                let mut tries = 0u32;
                loop {
                    tries += 1;
                    assert!(tries < 1_000_000, "join_timeout never succeeded");
                    match h.join_timeout(Duration::from_micros(20)) {
                        Ok(r) => {
                            sum += r.unwrap();
                            break;
                        }
                        Err(back) => h = back,
                    }
                }
            }
            sum
        });
        assert_eq!(joiner.join().unwrap(), 499 * 500 / 2);
    });
}
