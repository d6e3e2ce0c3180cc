//! The std-shaped spawning API (issue 18): `scope`, `JoinSet`, names,
//! `JoinHandle::join_timeout` and `coroutine_local!`, from coroutines and plain threads.

mod common;

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
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

// ---- scope ----

#[test]
fn scope_borrows_a_stack_vec_and_mutates_disjoint_parts() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let mut v: Vec<u64> = (0..1000).collect();
            let seven = 7u64;
            let offset = &seven; // borrowed by every coroutine
            let sum = goro::scope(|s| {
                for chunk in v.chunks_mut(100) {
                    s.spawn(move || {
                        for x in chunk.iter_mut() {
                            *x = *x * 2 + *offset;
                            if *x % 10 == 0 {
                                goro::yield_now();
                            }
                        }
                    });
                }
                // A handle returning a borrow of the caller's data.
                let h = s.spawn(|| offset);
                *h.join().unwrap()
            });
            assert_eq!(sum, 7);
            for (i, x) in v.iter().enumerate() {
                assert_eq!(*x, i as u64 * 2 + 7, "element {i}");
            }
        });
    });
}

#[test]
fn scope_joins_every_coroutine_when_its_closure_panics() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let finished = AtomicUsize::new(0);
            let r = catch_unwind(AssertUnwindSafe(|| {
                goro::scope(|s| {
                    for i in 0..10 {
                        let finished = &finished;
                        s.spawn(move || {
                            sleep_ms(5 + i * 3);
                            finished.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                    panic!("the scope's own panic");
                })
            }));
            let payload = r.expect_err("scope did not resume the closure's panic");
            assert_eq!(goro::panic_message(&*payload), "the scope's own panic");
            assert_eq!(finished.load(Ordering::SeqCst), 10);
        });
    });
}

#[test]
fn scope_panics_after_joining_all_if_an_unjoined_coroutine_panicked() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let finished = AtomicUsize::new(0);
            let r = catch_unwind(AssertUnwindSafe(|| {
                goro::scope(|s| {
                    s.spawn(|| panic!("scoped boom"));
                    for _ in 0..5 {
                        s.spawn(|| {
                            sleep_ms(20);
                            finished.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                })
            }));
            let payload = r.expect_err("an unjoined panic did not propagate");
            assert_eq!(goro::panic_message(&*payload), "a scoped thread panicked");
            assert_eq!(finished.load(Ordering::SeqCst), 5);
        });
    });
}

#[test]
fn scope_does_not_panic_for_a_joined_panic() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let r = goro::scope(|s| {
                let h = s.spawn(|| -> u32 { panic!("joined boom") });
                let payload = h.join().expect_err("panic not delivered");
                assert_eq!(goro::panic_message(&*payload), "joined boom");
                // A dropped handle of a coroutine that succeeds is no panic either.
                drop(s.spawn(|| 1));
                5
            });
            assert_eq!(r, 5);
        });
    });
}

#[test]
fn scope_waits_for_a_forgotten_handle() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let mut done = false;
            let start = Instant::now();
            goro::scope(|s| {
                let h = s.spawn(|| {
                    sleep_ms(30);
                    done = true;
                });
                std::mem::forget(h);
            });
            assert!(
                done,
                "scope returned before the coroutine of a forgotten handle"
            );
            assert!(start.elapsed() >= Duration::from_millis(30));
        });
    });
}

#[test]
fn nested_scopes() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let mut grid = vec![vec![0u32; 8]; 8];
            let base = 100u32;
            goro::scope(|outer| {
                for (r, row) in grid.iter_mut().enumerate() {
                    outer.spawn(move || {
                        goro::scope(|inner| {
                            for (c, cell) in row.iter_mut().enumerate() {
                                inner.spawn(move || {
                                    goro::yield_now();
                                    *cell = base + (r * 8 + c) as u32;
                                });
                            }
                        });
                        // The inner scope has ended: the row is filled.
                        assert!(row.iter().all(|&x| x >= base));
                    });
                }
            });
            for (r, row) in grid.iter().enumerate() {
                for (c, &x) in row.iter().enumerate() {
                    assert_eq!(x, base + (r * 8 + c) as u32);
                }
            }
        });
    });
}

#[test]
fn scoped_handles_report_finished_and_spawn_from_scoped_coroutines() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let counter = AtomicUsize::new(0);
            goro::scope(|s| {
                let h = s.spawn(|| 3);
                for _ in 0..10_000 {
                    if h.is_finished() {
                        break;
                    }
                    goro::yield_now();
                    std::thread::sleep(Duration::from_micros(100));
                }
                assert!(h.is_finished());
                assert_eq!(h.join().unwrap(), 3);
                // A scoped coroutine spawns more into the same scope.
                s.spawn(|| {
                    for _ in 0..10 {
                        s.spawn(|| counter.fetch_add(1, Ordering::SeqCst));
                    }
                });
            });
            assert_eq!(counter.load(Ordering::SeqCst), 10);
        });
    });
}

#[test]
fn spawn_scoped_errors_leave_the_scope_consistent() {
    with_timeout(T, || {
        goro::scope(|s| {
            let err = goro::Builder::new()
                .stack_size(1)
                .spawn_scoped(s, || ())
                .unwrap_err();
            assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        });
        // Had the failed spawn stayed counted, the scope would never have returned.
    });
}

// ---- JoinSet ----

#[test]
fn join_set_returns_results_in_completion_order() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let mut set = goro::JoinSet::new();
            // Spawned out of order; 60 ms apart, far more than timer slack.
            for ms in [180u64, 0, 120, 60] {
                set.spawn(move || {
                    sleep_ms(ms);
                    ms
                });
            }
            let mut order = Vec::new();
            while let Some(r) = set.join_next() {
                order.push(r.unwrap());
            }
            assert_eq!(order, [0, 60, 120, 180]);
            assert!(set.join_next().is_none());
        });
    });
}

#[test]
fn join_set_len_is_empty_ids_and_panics() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let mut set = goro::JoinSet::new();
            assert!(set.is_empty());
            assert_eq!(set.len(), 0);
            assert!(set.join_next().is_none());
            assert!(set.try_join_next().is_none());
            let mut ids = Vec::new();
            for i in 0..50u32 {
                ids.push(set.spawn(move || {
                    if i == 7 {
                        panic!("set member 7");
                    }
                    assert!(goro::current_id().is_some());
                    i
                }));
            }
            let named = set
                .spawn_with(goro::Builder::new().name("member"), || {
                    assert_eq!(goro::current_name().as_deref(), Some("member"));
                    1000
                })
                .unwrap();
            ids.push(named);
            assert_eq!(set.len(), 51);
            let mut seen = Vec::new();
            let mut panics = 0;
            while let Some((id, r)) = set.join_next_with_id() {
                assert!(ids.contains(&id));
                seen.push(id);
                match r {
                    Ok(_) => {}
                    Err(p) => {
                        assert_eq!(goro::panic_message(&*p), "set member 7");
                        panics += 1;
                    }
                }
                assert_eq!(set.len(), 51 - seen.len());
            }
            assert_eq!(panics, 1);
            seen.sort_unstable();
            ids.sort_unstable();
            assert_eq!(seen, ids);
            assert!(set.is_empty());
        });
    });
}

/// A result whose drop is counted.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Spawns `n` coroutines into `set` that wait for `go` to close, count themselves in
/// `ran`, and return a `Counted` on `dropped`.
fn spawn_waiting(
    set: &mut goro::JoinSet<Counted>,
    n: usize,
    go: &goro::chan::Receiver<()>,
    ran: &Arc<AtomicUsize>,
    dropped: &Arc<AtomicUsize>,
) {
    for _ in 0..n {
        let (go, ran, dropped) = (go.clone(), ran.clone(), dropped.clone());
        set.spawn(move || {
            let _ = go.recv(); // closed: Err
            ran.fetch_add(1, Ordering::SeqCst);
            Counted(dropped)
        });
    }
}

/// Polls `cond` every millisecond, for at most 10 s.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        if start.elapsed() > Duration::from_secs(10) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("{what}: not within 10 s");
}

#[test]
fn join_set_detach_all_and_drop_let_coroutines_run_on() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
            let (tx, rx) = channel::<()>(0);
            let mut set = goro::JoinSet::new();
            spawn_waiting(&mut set, 10, &rx, &ran, &dropped);
            set.detach_all();
            assert!(set.is_empty());
            assert!(set.join_next().is_none());
            // The set is usable again.
            set.spawn(|| Counted(Arc::new(AtomicUsize::new(0))));
            assert!(set.join_next().unwrap().is_ok());

            spawn_waiting(&mut set, 10, &rx, &ran, &dropped);
            drop(set);
            assert_eq!(ran.load(Ordering::SeqCst), 0);
            tx.close();
            eventually("detached coroutines finish", || {
                ran.load(Ordering::SeqCst) == 20 && dropped.load(Ordering::SeqCst) == 20
            });
        });
    });
}

#[test]
fn join_set_drops_finished_results_on_detach() {
    with_timeout(T, || {
        let (ran, dropped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (tx, rx) = channel::<()>(0);
        tx.close();
        let mut set = goro::JoinSet::new();
        spawn_waiting(&mut set, 5, &rx, &ran, &dropped);
        eventually("all finished", || ran.load(Ordering::SeqCst) == 5);
        // Finished, queued, not taken: dropped by the drop of the set.
        drop(set);
        assert_eq!(dropped.load(Ordering::SeqCst), 5);
    });
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

        goro::scope(|s| {
            let h = goro::Builder::new()
                .name("scoped")
                .spawn_scoped(s, goro::current_name)
                .unwrap();
            assert_eq!(h.name(), Some("scoped"));
            assert_eq!(h.join().unwrap().as_deref(), Some("scoped"));
        });
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

// ---- coroutine_local! ----

goro::coroutine_local! {
    static INDEX: Cell<usize> = Cell::new(usize::MAX);
    static LOG: RefCell<Vec<usize>> = RefCell::new(Vec::new());
}

#[test]
fn coroutine_locals_are_isolated_between_1000_migrating_coroutines() {
    with_timeout(T, || {
        let threads = Arc::new(Mutex::new(std::collections::HashSet::new()));
        let hs: Vec<_> = (0..1000usize)
            .map(|i| {
                let threads = threads.clone();
                goro::go!(move || {
                    assert_eq!(INDEX.with(|c| c.get()), usize::MAX, "fresh value");
                    INDEX.with(|c| c.set(i));
                    for round in 0..5 {
                        LOG.with(|l| l.borrow_mut().push(i * 10 + round));
                        if round % 2 == 0 {
                            goro::yield_now();
                        } else {
                            goro::time::sleep(Duration::from_micros(100));
                        }
                        threads.lock().unwrap().insert(std::thread::current().id());
                        assert_eq!(INDEX.with(|c| c.get()), i, "coroutine {i}, round {round}");
                    }
                    // A `with` closure may itself park and resume elsewhere.
                    LOG.with(|l| {
                        goro::yield_now();
                        l.borrow().clone()
                    })
                })
            })
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            let log = h.join().unwrap();
            assert_eq!(log, (0..5).map(|r| i * 10 + r).collect::<Vec<_>>());
        }
        // This plain thread never set its own.
        assert_eq!(INDEX.with(|c| c.get()), usize::MAX);
        if goro::maxprocs() >= 2 {
            eprintln!(
                "coroutine locals: the coroutines ran on {} threads",
                threads.lock().unwrap().len()
            );
        }
    });
}

/// Sets its flag when dropped, and counts itself in `LIVE` while alive.
struct Tracked {
    dropped: Option<Arc<AtomicBool>>,
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static INITS: AtomicUsize = AtomicUsize::new(0);

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Some(d) = &self.dropped {
            d.store(true, Ordering::SeqCst);
        }
        LIVE.fetch_sub(1, Ordering::SeqCst);
    }
}

goro::coroutine_local! {
    static TRACKED: RefCell<Tracked> = {
        INITS.fetch_add(1, Ordering::SeqCst);
        LIVE.fetch_add(1, Ordering::SeqCst);
        RefCell::new(Tracked { dropped: None })
    };
}

#[test]
fn coroutine_local_destructors_run_at_exit_before_join_returns() {
    with_timeout(T, || {
        for i in 0..100 {
            let flag = Arc::new(AtomicBool::new(false));
            let f = flag.clone();
            let h = goro::go!(move || {
                TRACKED.with(|t| t.borrow_mut().dropped = Some(f));
                if i % 2 == 0 {
                    goro::yield_now();
                }
                i
            });
            assert_eq!(h.join().unwrap(), i);
            assert!(
                flag.load(Ordering::SeqCst),
                "coroutine {i}: dropped after join"
            );
        }
        // The same with is_finished and a JoinSet.
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        let h = goro::go!(move || TRACKED.with(|t| t.borrow_mut().dropped = Some(f)));
        eventually("finished", || h.is_finished());
        assert!(flag.load(Ordering::SeqCst), "dropped after is_finished");
        let mut set = goro::JoinSet::new();
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        set.spawn(move || TRACKED.with(|t| t.borrow_mut().dropped = Some(f)));
        set.join_next().unwrap().unwrap();
        assert!(flag.load(Ordering::SeqCst), "dropped after join_next");
    });
}

#[test]
fn coroutine_local_is_made_lazily_and_dropped_once() {
    with_timeout(T, || {
        // Only the coroutines that use the key make a value (other tests may use
        // TRACKED concurrently, so count this test's own).
        let before_inits = INITS.load(Ordering::SeqCst);
        let hs: Vec<_> = (0..200)
            .map(|i| {
                goro::go!(move || {
                    if i % 4 == 0 {
                        TRACKED.with(|_| ());
                        TRACKED.with(|_| ()); // made once
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert!(INITS.load(Ordering::SeqCst) - before_inits >= 50);
        // Every value made by a coroutine is dropped by its end: none of ours is live.
        // (LIVE counts this test's and other tests' values; ours are all joined.)
        let live = LIVE.load(Ordering::SeqCst);
        assert!(live < 50, "{live} values still alive");
    });
}

/// Logs its name into a shared log when dropped, after parking once.
struct Logs(&'static str, Arc<Mutex<Vec<&'static str>>>);

impl Drop for Logs {
    fn drop(&mut self) {
        goro::yield_now(); // a destructor may park
        self.1.lock().unwrap().push(self.0);
        if self.0 == "first" {
            // A destructor may use a key not used before: it is made, then dropped.
            LATE.with(|l| *l.borrow_mut() = Some(Logs("late", self.1.clone())));
        }
    }
}

goro::coroutine_local! {
    static FIRST: RefCell<Option<Logs>> = RefCell::new(None);
    static SECOND: RefCell<Option<Logs>> = RefCell::new(None);
    static LATE: RefCell<Option<Logs>> = RefCell::new(None);
}

#[test]
fn coroutine_locals_drop_last_made_first_and_may_park() {
    with_timeout(T, || {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        goro::go!(move || {
            FIRST.with(|f| *f.borrow_mut() = Some(Logs("first", l.clone())));
            SECOND.with(|s| *s.borrow_mut() = Some(Logs("second", l.clone())));
        })
        .join()
        .unwrap();
        assert_eq!(*log.lock().unwrap(), ["second", "first", "late"]);
    });
}

goro::coroutine_local! {
    static FLAKY: u32 = {
        if !FLAKY_FAILED.swap(true, Ordering::SeqCst) {
            panic!("first init fails");
        }
        5
    };
    static SELF_REF: u32 = SELF_REF.with(|v| *v);
    static BAD_DROP: RefCell<Option<PanicsOnDrop>> = RefCell::new(None);
}

static FLAKY_FAILED: AtomicBool = AtomicBool::new(false);

struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("local destructor boom");
    }
}

#[test]
fn coroutine_local_misuse_is_reported() {
    with_timeout(T, || {
        // A panicking initialiser stores nothing; the next use tries again.
        let h = goro::Builder::new()
            .spawn(|| {
                let first = catch_unwind(|| FLAKY.with(|v| *v));
                assert!(first.is_err());
                FLAKY.with(|v| *v)
            })
            .unwrap();
        assert_eq!(h.join().unwrap(), 5);

        // An initialiser that uses its own key.
        let payload = goro::go!(|| SELF_REF.with(|v| *v)).join().unwrap_err();
        let msg = goro::panic_message(&*payload);
        assert!(
            msg.contains("SELF_REF") && msg.contains("own initialiser"),
            "{msg}"
        );

        // A panicking destructor becomes the coroutine's panic.
        let payload = goro::go!(|| {
            BAD_DROP.with(|b| *b.borrow_mut() = Some(PanicsOnDrop));
            17
        })
        .join()
        .unwrap_err();
        assert_eq!(goro::panic_message(&*payload), "local destructor boom");
    });
}

#[test]
fn coroutine_local_inside_blocking_is_the_coroutines() {
    with_timeout(T, || {
        let v = goro::go!(|| {
            INDEX.with(|c| c.set(31));
            goro::blocking(|| INDEX.with(|c| c.get()))
        })
        .join()
        .unwrap();
        assert_eq!(v, 31);
    });
}

#[test]
fn coroutine_local_on_plain_threads_is_per_thread() {
    with_timeout(T, || {
        let flag = Arc::new(AtomicBool::new(false));
        let f = flag.clone();
        std::thread::spawn(move || {
            INDEX.with(|c| c.set(1));
            TRACKED.with(|t| t.borrow_mut().dropped = Some(f));
            let other = std::thread::spawn(|| INDEX.with(|c| c.get()))
                .join()
                .unwrap();
            assert_eq!(other, usize::MAX, "another thread has its own");
            assert_eq!(INDEX.with(|c| c.get()), 1);
        })
        .join()
        .unwrap();
        // Dropped as the thread exited.
        assert!(flag.load(Ordering::SeqCst));
    });
}
