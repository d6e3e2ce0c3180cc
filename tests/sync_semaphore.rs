//! Semaphore: single and multi-permit acquires across coroutines and threads, the
//! all-or-nothing try, timed acquires (timing out, succeeding, and racing releases
//! without losing a permit or a wake-up), the RAII permit, and the release overflow
//! check.

mod common;

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::sync::{Semaphore, SemaphorePermit};

const T: Duration = Duration::from_secs(240);

/// How much later than its timeout a timed-out acquire may return (on top of what the
/// machine did not give this process meanwhile, [`common::Lost`]).
const TIMING_SLACK: Duration = Duration::from_secs(1);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Runs `f(i)` for `i` in `0..coroutines + threads`, the first ones on coroutines and
/// the rest on plain threads, and returns their results in that order.
fn on_both<R: Send + 'static>(
    coroutines: usize,
    threads: usize,
    f: impl Fn(usize) -> R + Send + Sync + 'static,
) -> Vec<R> {
    let f = Arc::new(f);
    let cs: Vec<_> = (0..coroutines)
        .map(|i| {
            let f = f.clone();
            goro::go!(move || f(i))
        })
        .collect();
    let ts: Vec<_> = (coroutines..coroutines + threads)
        .map(|i| {
            let f = f.clone();
            std::thread::spawn(move || f(i))
        })
        .collect();
    let mut out: Vec<R> = cs.into_iter().map(|h| h.join().unwrap()).collect();
    out.extend(ts.into_iter().map(|h| h.join().unwrap()));
    out
}

/// The message of a caught panic.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p
            .downcast::<&str>()
            .map(|s| s.to_string())
            .unwrap_or_default(),
    }
}

/// Single permits, coroutines and threads mixed, through `acquire`/`release` and the
/// RAII permit: never more holders than permits, and every permit comes back.
#[test]
fn bounds_holders_coroutines_and_threads() {
    with_timeout(T, || {
        let sem = Arc::new(Semaphore::new(3));
        let inside = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (s, i, p) = (sem.clone(), inside.clone(), peak.clone());
        on_both(24, 4, move |k| {
            for round in 0..300 {
                let permit = (k + round) % 2 == 0;
                let guard = if permit {
                    Some(s.acquire_permit())
                } else {
                    s.acquire();
                    None
                };
                let n = i.fetch_add(1, Ordering::SeqCst) + 1;
                p.fetch_max(n, Ordering::SeqCst);
                goro::yield_now();
                i.fetch_sub(1, Ordering::SeqCst);
                match guard {
                    Some(g) => drop(g),
                    None => s.release(1),
                }
            }
        });
        assert!(
            peak.load(Ordering::SeqCst) <= 3,
            "more holders than permits"
        );
        assert_eq!(sem.available_permits(), 3);
    });
}

/// The deadlock `acquire_many` must not have: 4 permits, two callers (a coroutine and
/// a thread) wanting 3 each, the permits released one at a time while both wait. If
/// partial holdings were unordered, the releases would go to both in turn and each
/// would sit on 2 for ever (the runtime's deadlock report ends the process, or the
/// watchdog panics). Here one collects its 3 while the other waits for its turn.
#[test]
fn acquire_many_callers_do_not_split_the_permits() {
    with_timeout(Duration::from_secs(60), || {
        for _ in 0..20 {
            let sem = Arc::new(Semaphore::new(0));
            let done = Arc::new(AtomicUsize::new(0));
            let body = {
                let (sem, done) = (sem.clone(), done.clone());
                move || {
                    sem.acquire_many(3);
                    done.fetch_add(1, Ordering::SeqCst);
                    sem.release(3);
                }
            };
            let a = goro::go!(body.clone());
            let b = std::thread::spawn(body);
            // Let both queue (any order must work; this one is the one that splits).
            std::thread::sleep(Duration::from_millis(2));
            for _ in 0..4 {
                sem.release(1);
                std::thread::sleep(Duration::from_micros(200));
            }
            a.join().unwrap();
            b.join().unwrap();
            assert_eq!(done.load(Ordering::SeqCst), 2);
            assert_eq!(sem.available_permits(), 4);
        }
    });
}

/// Callers of every size (1 to all 4 permits) on coroutines and threads, with single
/// acquirers among them: never more permits out than exist, no deadlock (the watchdog
/// panics), and all permits back at the end.
#[test]
fn stress_acquire_many_mixed_sizes() {
    with_timeout(Duration::from_secs(120), || {
        const PERMITS: usize = 4;
        let sem = Arc::new(Semaphore::new(PERMITS));
        let out = Arc::new(AtomicUsize::new(0));
        let (s, o) = (sem.clone(), out.clone());
        let started = Instant::now();
        on_both(12, 4, move |k| {
            let mut seed = 0x9e37_79b9_7f4a_7c15 ^ (k as u64 + 1);
            for _ in 0..300 {
                if started.elapsed() > Duration::from_secs(60) {
                    break; // bounded in time as well as in rounds
                }
                let n = 1 + (rng(&mut seed) % PERMITS as u64) as usize;
                if n == 1 && k % 3 == 0 {
                    s.acquire();
                } else {
                    s.acquire_many(n);
                }
                let now = o.fetch_add(n, Ordering::SeqCst) + n;
                assert!(now <= PERMITS, "{now} permits out of {PERMITS}");
                goro::yield_now();
                o.fetch_sub(n, Ordering::SeqCst);
                s.release(n);
            }
        });
        assert_eq!(sem.available_permits(), PERMITS);
    });
}

/// `acquire_many(0)` returns at once; more than a semaphore can count panics, naming
/// the rule, instead of waiting for ever.
#[test]
fn acquire_many_edge_cases() {
    let sem = Semaphore::new(0);
    sem.acquire_many(0);
    if usize::BITS > 32 {
        let e = panic::catch_unwind(AssertUnwindSafe(|| sem.acquire_many(u32::MAX as usize + 1)))
            .expect_err("an impossible acquire_many must panic");
        let msg = panic_text(e);
        assert!(
            msg.contains("Semaphore::acquire_many") && msg.contains("more than"),
            "unclear message: {msg}"
        );
    }
    assert_eq!(sem.available_permits(), 0);
}

/// `try_acquire_many` takes all or nothing, never waits, and under contention never
/// hands out more than there is.
#[test]
fn try_acquire_many_all_or_nothing() {
    with_timeout(T, || {
        let sem = Semaphore::new(3);
        assert!(!sem.try_acquire_many(4));
        assert_eq!(sem.available_permits(), 3, "a failed try took some");
        assert!(sem.try_acquire_many(2));
        assert!(!sem.try_acquire_many(2));
        assert_eq!(sem.available_permits(), 1);
        assert!(sem.try_acquire_many(0));
        assert!(!sem.try_acquire_many(usize::MAX));
        assert!(sem.try_acquire_many(1));
        assert!(!sem.try_acquire_many(1) && !sem.try_acquire());
        sem.release(3);

        // Contended: a failed try never leaves a partial take behind.
        const PERMITS: usize = 5;
        let sem = Arc::new(Semaphore::new(PERMITS));
        let out = Arc::new(AtomicUsize::new(0));
        let (s, o) = (sem.clone(), out.clone());
        let took = on_both(6, 2, move |k| {
            let mut seed = 0x2545_f491_4f6c_dd1d ^ (k as u64 + 1);
            let mut took = 0usize;
            for _ in 0..5_000 {
                let n = 1 + (rng(&mut seed) % 3) as usize;
                if s.try_acquire_many(n) {
                    let now = o.fetch_add(n, Ordering::SeqCst) + n;
                    assert!(now <= PERMITS, "{now} permits out of {PERMITS}");
                    took += 1;
                    o.fetch_sub(n, Ordering::SeqCst);
                    s.release(n);
                }
                if k % 2 == 0 {
                    goro::yield_now();
                }
            }
            took
        });
        assert!(took.iter().sum::<usize>() > 0, "no try ever succeeded");
        assert_eq!(sem.available_permits(), PERMITS);
    });
}

/// With nobody releasing, `acquire_timeout` waits its whole timeout and not much more,
/// on a coroutine and on a thread.
#[test]
fn acquire_timeout_times_out() {
    with_timeout(T, || {
        const D: Duration = Duration::from_millis(50);
        let sem = Arc::new(Semaphore::new(0));
        let lost = Arc::new(common::Lost::now());
        let (s, l) = (sem.clone(), lost.clone());
        let waited = on_both(1, 1, move |_| {
            let t = Instant::now();
            let got = s.acquire_timeout(D);
            (got, t.elapsed(), l.since())
        });
        for (got, waited, lost) in waited {
            assert!(!got, "acquired a permit nobody released");
            assert!(
                waited >= D,
                "returned after {waited:?}, before its {D:?} timeout"
            );
            let bound = D + TIMING_SLACK + lost;
            assert!(waited < bound, "waited {waited:?} for a {D:?} timeout");
        }
        assert_eq!(sem.available_permits(), 0);
        // A zero timeout is a try.
        assert!(!sem.acquire_timeout(Duration::ZERO));
        sem.release(1);
        assert!(sem.acquire_timeout(Duration::ZERO));
    });
}

/// A release before the deadline wakes the timed waiter, which takes the permit; and
/// a timeout too large for a deadline waits as `acquire` does.
#[test]
fn acquire_timeout_succeeds_when_released_in_time() {
    with_timeout(T, || {
        const D: Duration = Duration::from_secs(60);
        let sem = Arc::new(Semaphore::new(0));
        let s = sem.clone();
        let waiters = std::thread::spawn(move || {
            on_both(2, 2, move |k| {
                let t = Instant::now();
                let got = if k == 0 {
                    s.acquire_timeout(Duration::MAX)
                } else {
                    s.acquire_timeout(D)
                };
                (got, t.elapsed())
            })
        });
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..4 {
            sem.release(1);
            std::thread::sleep(Duration::from_millis(2));
        }
        for (got, took) in waiters.join().unwrap() {
            assert!(got, "timed out although released");
            assert!(took < D / 2, "woken only after {took:?}");
        }
        assert_eq!(sem.available_permits(), 0);
    });
}

/// Timed acquirers with short, random timeouts race releases of one and of several
/// permits: every permit released is either taken by exactly one acquirer that
/// returned true or still in the count at the end. No permit is lost, none doubled.
#[test]
fn stress_timed_acquirers_racing_releases_balance() {
    with_timeout(T, || {
        let sem = Arc::new(Semaphore::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (sem.clone(), stop.clone());
        let acquirers = std::thread::spawn(move || {
            on_both(12, 4, move |k| {
                let mut seed = 0x1234_5678 ^ (k as u64 + 1);
                let mut got = 0usize;
                let started = Instant::now();
                for _ in 0..20_000 {
                    if st.load(Ordering::SeqCst) || started.elapsed() > Duration::from_secs(60) {
                        break;
                    }
                    let d = Duration::from_micros(rng(&mut seed) % 300);
                    if s.acquire_timeout(d) {
                        got += 1;
                    }
                }
                got
            })
        });
        let mut released = 0usize;
        let mut seed = 77u64;
        let started = Instant::now();
        for i in 0..4_000 {
            if started.elapsed() > Duration::from_secs(30) {
                break;
            }
            let n = if i % 4 == 0 {
                1 + (rng(&mut seed) % 4) as usize
            } else {
                1
            };
            sem.release(n);
            released += n;
            if i % 8 == 0 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::SeqCst);
        let got: usize = acquirers.join().unwrap().iter().sum();
        assert_eq!(
            got + sem.available_permits(),
            released,
            "taken ({got}) and left ({}) do not add up to released ({released})",
            sem.available_permits()
        );
    });
}

/// No lost wake-up: patient waiters (coroutines and threads, with a deadline far past
/// the test) sit in the queue among timed waiters that keep timing out, and permits
/// come one at a time. Each release that dequeues a waiter whose deadline just fired
/// must hand its wake-up on; if one were dropped, a permit would stay in the count
/// with a patient waiter parked behind it, and the check below would find it.
#[test]
fn no_lost_wakeup_timed_waiters_beside_patient_ones() {
    with_timeout(T, || {
        const PATIENT: usize = 16;
        let sem = Arc::new(Semaphore::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (sem.clone(), stop.clone());
        // Churners: short timeouts; whatever they get they give back at once.
        let churners = std::thread::spawn(move || {
            on_both(6, 2, move |k| {
                let mut seed = 0xdead_beef ^ (k as u64 + 1);
                let mut rounds = 0usize;
                while !st.load(Ordering::SeqCst) && rounds < 200_000 {
                    rounds += 1;
                    if s.acquire_timeout(Duration::from_micros(rng(&mut seed) % 200)) {
                        s.release(1);
                    }
                }
            })
        });
        let s = sem.clone();
        let patient = std::thread::spawn(move || {
            on_both(PATIENT / 2, PATIENT / 2, move |_| {
                s.acquire_timeout(Duration::from_secs(600))
            })
        });
        std::thread::sleep(Duration::from_millis(10));
        for _ in 0..PATIENT {
            sem.release(1);
            std::thread::sleep(Duration::from_millis(1));
        }
        // Let the churners race the last releases a little longer, then stop them.
        std::thread::sleep(Duration::from_millis(50));
        stop.store(true, Ordering::SeqCst);
        churners.join().unwrap();
        // Now nobody takes or gives but the patient waiters: each must get a permit.
        let deadline = Instant::now() + Duration::from_secs(30);
        while !patient.is_finished() {
            assert!(
                Instant::now() < deadline,
                "lost wake-up: patient waiters still parked with {} permits available",
                sem.available_permits()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let got = patient.join().unwrap();
        assert!(got.iter().all(|&g| g), "a patient waiter timed out");
        assert_eq!(sem.available_permits(), 0);
    });
}

/// The RAII permit releases on drop (waking a waiter), also when its holder panics;
/// `forget` keeps it taken.
#[test]
fn permit_releases_on_drop_and_forget_keeps_it() {
    with_timeout(T, || {
        let sem = Arc::new(Semaphore::new(1));
        let p: SemaphorePermit<'_> = sem.acquire_permit();
        assert_eq!(sem.available_permits(), 0);
        let s = sem.clone();
        let waiter = goro::go!(move || {
            let _p = s.acquire_permit();
            7
        });
        std::thread::sleep(Duration::from_millis(5));
        drop(p);
        assert_eq!(waiter.join().unwrap(), 7);
        assert_eq!(sem.available_permits(), 1);

        let s = sem.clone();
        let r = std::thread::spawn(move || {
            let _p = s.acquire_permit();
            panic!("holding a permit");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(sem.available_permits(), 1, "the unwinding drop released it");

        sem.acquire_permit().forget();
        assert_eq!(sem.available_permits(), 0);
        assert!(!sem.try_acquire());
        sem.release(1);
        assert_eq!(sem.available_permits(), 1);
        assert_eq!(
            format!("{:?}", sem.acquire_permit()),
            "SemaphorePermit { permits: 1 }"
        );
    });
}

/// A release that would overflow the count panics with the rule it broke and leaves
/// the count as it was; concurrent releases cannot overflow it together.
#[test]
fn release_overflow_panics_and_changes_nothing() {
    with_timeout(T, || {
        let max = u32::MAX as usize;
        let sem = Semaphore::new(5);
        let e = panic::catch_unwind(AssertUnwindSafe(|| sem.release(max)))
            .expect_err("an overflowing release must panic");
        let msg = panic_text(e);
        assert!(
            msg.contains("Semaphore::release") && msg.contains("overflow"),
            "unclear message: {msg}"
        );
        assert_eq!(
            sem.available_permits(),
            5,
            "a failed release changed the count"
        );
        sem.release(max - 5);
        assert_eq!(sem.available_permits(), max);
        assert!(panic::catch_unwind(AssertUnwindSafe(|| sem.release(1))).is_err());
        assert!(panic::catch_unwind(AssertUnwindSafe(|| sem.release(usize::MAX))).is_err());
        assert_eq!(sem.available_permits(), max);
        sem.release(0);
        assert_eq!(sem.available_permits(), max);

        // Eight concurrent releases of 2^30: exactly three fit in 32 bits.
        for _ in 0..10 {
            let sem = Arc::new(Semaphore::new(0));
            let s = sem.clone();
            let ok = on_both(4, 4, move |_| {
                panic::catch_unwind(AssertUnwindSafe(|| s.release(1 << 30))).is_ok()
            });
            assert_eq!(ok.iter().filter(|&&ok| ok).count(), 3);
            assert_eq!(sem.available_permits(), 3 << 30);
        }
    });
}

/// The sema timeout rule, aimed at: timed waiters whose deadlines fire just as a
/// release arrives, with a patient waiter queued behind them. A release that dequeues
/// a timed waiter after its deadline fired (and before it re-locked to leave) must
/// not drop its wake-up, or the patient waiter stays parked with the permit in the
/// count.
#[test]
fn no_lost_wakeup_release_at_the_deadline() {
    with_timeout(T, || {
        const D: Duration = Duration::from_millis(2);
        let started = Instant::now();
        let mut seed = 5u64;
        for round in 0..300 {
            if started.elapsed() > Duration::from_secs(60) {
                break;
            }
            let sem = Arc::new(Semaphore::new(0));
            let t0 = Instant::now();
            let s = sem.clone();
            let timed = std::thread::spawn(move || {
                on_both(3, 1, move |_| {
                    if s.acquire_timeout(D) {
                        s.release(1);
                    }
                })
            });
            std::thread::sleep(Duration::from_micros(300));
            let s = sem.clone();
            let patient = goro::go!(move || s.acquire_timeout(Duration::from_secs(30)));
            // Release around the timed waiters' deadlines.
            let at = D + Duration::from_micros(rng(&mut seed) % 400) - Duration::from_micros(200);
            if let Some(left) = at.checked_sub(t0.elapsed()) {
                std::thread::sleep(left);
            }
            sem.release(1);
            timed.join().unwrap();
            let deadline = Instant::now() + Duration::from_secs(10);
            while !patient.is_finished() {
                assert!(
                    Instant::now() < deadline,
                    "round {round}: lost wake-up: the patient waiter is parked with {} \
                     permits available",
                    sem.available_permits()
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(
                patient.join().unwrap(),
                "round {round}: the patient waiter timed out"
            );
            assert_eq!(sem.available_permits(), 0);
        }
    });
}

/// `acquire_owned` / `try_acquire_owned`: the permit is `Send + 'static`, moves into
/// the coroutine that uses it, and releases on drop; `forget` keeps it taken.
#[test]
fn owned_permits_move_into_coroutines_and_release_on_drop() {
    fn send_static<T: Send + 'static>(_: &T) {}
    common::on_thread_and_coroutine(T, || {
        let sem = Arc::new(Semaphore::new(3));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let mut hs = Vec::new();
        for _ in 0..30 {
            let permit = sem.clone().acquire_owned();
            send_static(&permit);
            let (running, most) = (running.clone(), most.clone());
            hs.push(goro::go!(move || {
                let _permit = permit;
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                goro::yield_now();
                running.fetch_sub(1, Ordering::SeqCst);
            }));
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert!(most.load(Ordering::SeqCst) <= 3);
        assert_eq!(sem.available_permits(), 3);
        let a = sem.clone().try_acquire_owned().unwrap();
        let b = sem.clone().try_acquire_owned().unwrap();
        let c = sem.clone().try_acquire_owned().unwrap();
        assert!(sem.clone().try_acquire_owned().is_none());
        assert!(Arc::ptr_eq(a.semaphore(), &sem));
        drop(a);
        assert_eq!(sem.available_permits(), 1);
        b.forget();
        drop(c);
        assert_eq!(sem.available_permits(), 2, "a forgotten permit stays taken");
    });
}
