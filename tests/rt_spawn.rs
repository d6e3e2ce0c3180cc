//! Spawning and joining: what `go!`, `spawn`, `Builder` and `JoinHandle` promise.

mod common;

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::with_timeout;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[test]
fn smoke() {
    with_timeout(T, || {
        let h = goro::go!(|| 6 * 7);
        assert_eq!(h.join().unwrap(), 42);
    });
}

#[test]
fn spawn_and_join_100_000() {
    with_timeout(T, || {
        let hs: Vec<_> = (0..100_000u64).map(|i| goro::go!(move || i * 3)).collect();
        let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(sum, 3 * (100_000 * 99_999 / 2));
    });
}

/// A body of any size spawns, from a thread and from a coroutine, and arrives whole:
/// corosensei refuses to move more than 1 KiB onto a new stack (it panicked "type is
/// too big to transfer", and on an M that made a plain thread's coroutine, aborted
/// the process); goro boxes a larger body, as a Go closure's captures live in the heap
/// whatever their size.
#[test]
fn bodies_larger_than_a_kilobyte_spawn() {
    fn sized<const N: usize>(seed: u8) -> goro::JoinHandle<usize> {
        let body = [seed; N];
        goro::go!(move || body.iter().map(|&b| b as usize).sum())
    }
    common::on_thread_and_coroutine(T, || {
        // Near the edge (the spawn adds captures of its own to the body, so which of
        // these is boxed is the compiler's layout), and well past it.
        let hs = [
            sized::<1000>(1),
            sized::<1024>(1),
            sized::<1100>(1),
            sized::<{ 16 * 1024 }>(2),
        ];
        let sums: Vec<usize> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(sums, [1000, 1024, 1100, 32 * 1024]);
    });
}

#[test]
fn nested_spawns() {
    with_timeout(T, || {
        // A tree of depth 4 and fan-out 8, each leaf returns 1.
        fn tree(depth: u32) -> u64 {
            if depth == 0 {
                return 1;
            }
            let kids: Vec<_> = (0..8).map(|_| goro::go!(move || tree(depth - 1))).collect();
            kids.into_iter().map(|h| h.join().unwrap()).sum()
        }
        assert_eq!(goro::go!(|| tree(4)).join().unwrap(), 8u64.pow(4));
    });
}

#[test]
fn join_from_thread_and_from_coroutine() {
    with_timeout(T, || {
        // From the test thread.
        assert_eq!(goro::go!(|| "thread").join().unwrap(), "thread");
        // From a coroutine, joining a coroutine that parks first.
        let outer = goro::go!(|| {
            let inner = goro::go!(|| {
                goro::yield_now();
                "coroutine"
            });
            inner.join().unwrap()
        });
        assert_eq!(outer.join().unwrap(), "coroutine");
        // From a plain thread other than the test thread.
        let h = goro::go!(|| 5);
        let t = std::thread::spawn(move || h.join().unwrap());
        assert_eq!(t.join().unwrap(), 5);
    });
}

#[test]
fn join_after_finish_does_not_park() {
    with_timeout(T, || {
        let h = goro::go!(|| 9);
        while !h.is_finished() {
            std::thread::yield_now();
        }
        assert_eq!(h.join().unwrap(), 9);
    });
}

#[test]
fn panic_is_delivered_to_join() {
    with_timeout(T, || {
        let err = goro::go!(|| -> u32 {
            let n = std::hint::black_box(7);
            panic!("boom {n}")
        })
        .join()
        .unwrap_err();
        assert_eq!(
            err.downcast_ref::<String>().map(String::as_str),
            Some("boom 7")
        );
        let err = goro::go!(|| std::panic::panic_any(13u8))
            .join()
            .unwrap_err();
        assert_eq!(err.downcast_ref::<u8>(), Some(&13));
    });
}

/// A panicking coroutine (its panic taken by a join later) does not stop the others,
/// which run and join meanwhile. (A panic nobody joins ends the program:
/// tests/rt_panic_exit.rs.)
#[test]
fn a_panic_does_not_stop_others() {
    with_timeout(T, || {
        let done = Arc::new(AtomicUsize::new(0));
        let panicking: Vec<_> = (0..100)
            .map(|i| {
                let done = done.clone();
                goro::go!(move || {
                    if i % 2 == 0 {
                        panic!("panic {i}");
                    }
                    done.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        // The runtime keeps running: later coroutines still run and join.
        let hs: Vec<_> = (0..100).map(|i| goro::go!(move || i)).collect();
        assert_eq!(hs.into_iter().map(|h| h.join().unwrap()).sum::<i32>(), 4950);
        let failed = panicking.into_iter().map(|h| h.join().is_err());
        assert_eq!(failed.filter(|&e| e).count(), 50);
        assert_eq!(done.load(Ordering::SeqCst), 50);
    });
}

#[test]
fn ids_are_unique_and_match() {
    with_timeout(T, || {
        assert_eq!(goro::current_id(), None);
        let hs: Vec<_> = (0..1000).map(|_| goro::go!(goro::current_id)).collect();
        let mut ids: Vec<u64> = hs
            .into_iter()
            .map(|h| {
                let id = h.id();
                let inside = h.join().unwrap().expect("a coroutine has an id");
                assert_eq!(inside, id);
                id
            })
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 1000);
    });
}

#[test]
fn builder_names_and_sizes() {
    with_timeout(T, || {
        // A bigger stack holds a frame the default could not.
        let h = goro::Builder::new()
            .name("big")
            .stack_size(4 << 20)
            .spawn(|| {
                let buf = [7u8; 1 << 20];
                std::hint::black_box(&buf)[12345] as u32
            })
            .unwrap();
        assert_eq!(h.join().unwrap(), 7);
        // Odd sizes are rounded to pages and work.
        let h = goro::Builder::new()
            .stack_size(100_000)
            .spawn(|| 1)
            .unwrap();
        assert_eq!(h.join().unwrap(), 1);
    });
}

#[test]
fn bad_stack_sizes_are_typed_errors() {
    for size in [
        0,
        1,
        goro::MIN_STACK_SIZE - 1,
        goro::MAX_STACK_SIZE + 1,
        usize::MAX,
    ] {
        let err = goro::Builder::new()
            .stack_size(size)
            .spawn(|| ())
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput, "size {size}");
        assert!(err.to_string().contains("stack size"), "{err}");
    }
}

#[test]
fn many_spawners_at_once() {
    with_timeout(T, || {
        // Plain threads and coroutines spawning concurrently.
        let total = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let total = total.clone();
                std::thread::spawn(move || {
                    let hs: Vec<_> = (0..2000)
                        .map(|_| {
                            let total = total.clone();
                            goro::go!(move || {
                                let inner = goro::go!(|| 1u64);
                                total.fetch_add(inner.join().unwrap(), Ordering::Relaxed);
                            })
                        })
                        .collect();
                    hs.into_iter().for_each(|h| h.join().unwrap());
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(total.load(Ordering::Relaxed), 8000);
    });
}

/// A coroutine spawning in a long loop yields when sysmon asks (a spawn is a
/// preemption point, as Go's `newproc` is a function call that checks for one), so it
/// keeps its P. Before, it ran on past the 12 ms retake bound, lost its P to a new
/// thread and spawned the rest through the global queue, where sysmon's deadlock scan
/// of all live coroutines ran against every spawn: 1 M spawns from a coroutine took
/// 17-26 µs each instead of 4.7 (docs/benchmark-journal.md, issue 17).
#[test]
fn a_long_spawning_loop_yields_and_keeps_its_p() {
    if common::alone(
        "a_long_spawning_loop_yields_and_keeps_its_p",
        &[("GORO_MAXPROCS", "1")],
    ) {
        return;
    }
    with_timeout(T, || {
        goro::go!(|| ()).join().unwrap(); // the runtime's threads are up
        let before = common::os_threads();
        let (spawned, yielded_at) = goro::go!(|| {
            // Another coroutine on the only P: it runs once the spawner yields.
            let ran = Arc::new(AtomicUsize::new(0));
            let r = ran.clone();
            drop(goro::go!(move || r.store(1, Ordering::SeqCst)));
            let t = std::time::Instant::now();
            let mut n = 0usize;
            let mut yielded_at = None;
            // Until well past the retake bound, at most 200 000 spawns.
            while t.elapsed() < Duration::from_millis(60) && n < 200_000 {
                drop(goro::go!(|| ()));
                n += 1;
                if yielded_at.is_none() && ran.load(Ordering::SeqCst) == 1 {
                    yielded_at = Some(t.elapsed());
                }
            }
            (n, yielded_at)
        })
        .join()
        .unwrap();
        let after = common::os_threads();
        assert!(
            yielded_at.is_some(),
            "a coroutine queued behind a spawning loop of {spawned} spawns never ran"
        );
        assert!(
            after <= before,
            "{} {after} threads after a spawning loop, {before} before: its P was \
             retaken ({})",
            common::BUDGET_MISS,
            common::thread_names()
        );
    });
}
