//! Mutex and RwLock: mutual exclusion across coroutines and threads, starvation mode,
//! try_lock, writer preference.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::sync::{Mutex, RwLock};

const T: Duration = Duration::from_secs(240);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// 64 coroutines and 4 plain threads each add 1 a hundred thousand times under the
/// lock: not one increment is lost.
#[test]
fn mutual_exclusion_coroutines_and_threads() {
    with_timeout(T, || {
        const N: usize = 100_000;
        let m = Arc::new(Mutex::new(0usize));
        let coroutines: Vec<_> = (0..64)
            .map(|_| {
                let m = m.clone();
                goro::go!(move || {
                    for _ in 0..N {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for _ in 0..N {
                        *m.lock() += 1;
                    }
                })
            })
            .collect();
        coroutines.into_iter().for_each(|h| h.join().unwrap());
        threads.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*m.lock(), 68 * N);
    });
}

#[test]
fn try_lock_into_inner_get_mut() {
    let mut m = Mutex::new(vec![1]);
    {
        let g = m.try_lock().expect("free");
        assert!(m.try_lock().is_none(), "try_lock of a held mutex");
        drop(g);
    }
    m.get_mut().push(2);
    m.lock().push(3);
    assert_eq!(format!("{m:?}"), "Mutex { data: [1, 2, 3] }");
    assert_eq!(m.into_inner(), vec![1, 2, 3]);
}

/// A panic while holding the guard releases the lock (no poisoning).
#[test]
fn panic_while_locked_releases() {
    with_timeout(T, || {
        let m = Arc::new(Mutex::new(1));
        let m2 = m.clone();
        let r = goro::go!(move || {
            let _g = m2.lock();
            panic!("holding the lock");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn rwlock_readers_share_writers_exclude() {
    with_timeout(T, || {
        let l = Arc::new(RwLock::new(0u64));
        let readers_in = Arc::new(AtomicUsize::new(0));
        let max_readers = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..32)
            .map(|i| {
                let (l, rin, rmax) = (l.clone(), readers_in.clone(), max_readers.clone());
                goro::go!(move || {
                    for _ in 0..500 {
                        if i % 4 == 0 {
                            let mut w = l.write();
                            assert_eq!(
                                rin.load(Ordering::SeqCst),
                                0,
                                "a reader inside with a writer"
                            );
                            *w += 1;
                        } else {
                            let r = l.read();
                            let n = rin.fetch_add(1, Ordering::SeqCst) + 1;
                            rmax.fetch_max(n, Ordering::SeqCst);
                            let _ = *r;
                            goro::yield_now();
                            rin.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(*l.read(), 8 * 500);
        assert!(
            max_readers.load(Ordering::SeqCst) >= 2,
            "readers never overlapped"
        );
    });
}

/// A pending writer stops new readers (Go's writer preference).
#[test]
fn rwlock_pending_writer_blocks_new_readers() {
    with_timeout(T, || {
        let l = Arc::new(RwLock::new(()));
        let r1 = l.read();
        let l2 = l.clone();
        let writer = std::thread::spawn(move || drop(l2.write()));
        // Wait until the writer is pending: then try_read must fail.
        let t = Instant::now();
        while l.try_read().is_some() {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "writer never became pending"
            );
            std::thread::yield_now();
        }
        assert!(l.try_write().is_none());
        drop(r1);
        writer.join().unwrap();
        assert!(l.try_write().is_some());
        assert!(l.try_read().is_some());
    });
}
