//! sysmon and what it makes possible: blocking calls that do not stall a P, preemption
//! points, pinned coroutines, deadlock detection, the coroutine dump, the scheduler
//! trace and the M pool shrinking back after a burst of blocking calls.
//!
//! Whole-process behaviour (deadlock exit, SIGQUIT, GORO_SCHEDTRACE, GORO_IDLE_M_EXIT_MS)
//! runs in child processes: this binary re-executes itself with `SCENARIO_ENV` naming
//! the scenario, and `scenario_child` runs it.

mod common;

use std::collections::HashSet;
use std::io::{Read, Write};
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{with_timeout, Lost};

const T: Duration = Duration::from_secs(120);
const SCENARIO_ENV: &str = "GORO_TEST_SCENARIO";

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs(
        "under_maxprocs_1_and_2",
        &["deadlock_", "sigquit_", "schedtrace_", "idle_ms_"],
    );
}

fn tid() -> i64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// A coroutine in a 200 ms blocking call does not stop another from running, even with
/// one P: sysmon hands the P to another M.
#[test]
fn blocking_call_does_not_stall_its_p() {
    with_timeout(T, || {
        let entered = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let (e, d) = (entered.clone(), done.clone());
        let blocker = goro::go!(move || {
            goro::blocking(|| {
                e.store(true, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(200));
            });
            d.store(true, Ordering::SeqCst);
        });
        let (e, d) = (entered.clone(), done.clone());
        let worker = goro::go!(move || {
            let start = Instant::now();
            while !e.load(Ordering::SeqCst) {
                assert!(
                    start.elapsed() < Duration::from_secs(10),
                    "blocker never ran"
                );
                goro::yield_now();
            }
            // 100 scheduling rounds, each a yield and a short sleep (timers too).
            for _ in 0..100 {
                goro::yield_now();
            }
            for _ in 0..5 {
                goro::time::sleep(Duration::from_millis(1));
            }
            d.load(Ordering::SeqCst)
        });
        let blocker_was_done = worker.join().unwrap();
        assert!(
            !blocker_was_done,
            "the worker only ran after the 200 ms blocking call ended"
        );
        blocker.join().unwrap();
    });
}

/// 100 concurrent 50 ms blocking calls overlap: each gets a thread.
#[test]
fn concurrent_blocking_calls_overlap() {
    with_timeout(T, || {
        let lost0 = Lost::now();
        let start = Instant::now();
        let hs: Vec<_> = (0..100)
            .map(|_| goro::go!(|| goro::blocking(|| std::thread::sleep(Duration::from_millis(50)))))
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        let took = start.elapsed();
        let lost = lost0.since();
        // Serialised they would take 5 s; thread start-up makes them not quite 50 ms.
        assert!(
            took < Duration::from_millis(1500) + lost,
            "100 x 50 ms blocking calls took {took:?} (lost to the machine: {lost:?})"
        );
    });
}

/// A blocking call that returns quickly keeps its P (the fast path) and its result.
#[test]
fn blocking_returns_value_and_propagates_panics() {
    with_timeout(T, || {
        let h = goro::go!(|| {
            let v: u64 = (0..1000).map(|_| goro::blocking(|| 1u64)).sum();
            let p = std::panic::catch_unwind(|| goro::blocking(|| panic!("inside blocking")));
            (v, p.is_err())
        });
        assert_eq!(h.join().unwrap(), (1000, true));
        // After the panic the coroutine ran on: the runtime is intact.
        assert_eq!(goro::go!(|| goro::blocking(|| 7)).join().unwrap(), 7);
        // On a plain thread it is a plain call.
        assert_eq!(goro::blocking(|| 5), 5);
        // Inside `blocking` the coroutine is a plain thread: goro calls block the
        // thread (here until another coroutine sends), nested calls are plain calls.
        let (tx, rx) = goro::chan::channel::<u32>(0);
        let waiter =
            goro::go!(move || goro::blocking(|| rx.recv().unwrap() + goro::blocking(|| 1)));
        goro::go!(move || {
            goro::time::sleep(Duration::from_millis(20));
            tx.send(41).unwrap();
        });
        assert_eq!(waiter.join().unwrap(), 42);
    });
}

/// A coroutine that loops over `preempt_point` for 1 s does not keep a sleeping one
/// from waking close to its deadline: sysmon flags it after 10 ms.
#[test]
fn preempt_point_lets_sleepers_wake() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spinner = goro::go!(move || {
            let start = Instant::now();
            let mut n = 0u64;
            while start.elapsed() < Duration::from_secs(1) && !s.load(Ordering::Relaxed) {
                goro::preempt_point();
                n += 1;
            }
            n
        });
        let sleeper = goro::go!(|| {
            let mut worst = Duration::ZERO;
            let mut worst_lost = Duration::ZERO;
            for _ in 0..5 {
                let lost0 = Lost::now();
                let t = Instant::now();
                goro::time::sleep(Duration::from_millis(30));
                let late = t.elapsed().saturating_sub(Duration::from_millis(30));
                let lost = lost0.since();
                if late.saturating_sub(lost) > worst.saturating_sub(worst_lost) {
                    worst = late;
                    worst_lost = lost;
                }
            }
            (worst, worst_lost)
        });
        let (late, lost) = sleeper.join().unwrap();
        stop.store(true, Ordering::Relaxed);
        assert!(spinner.join().unwrap() > 0);
        assert!(
            late < Duration::from_millis(25) + lost,
            "a sleeper woke {late:?} late next to a preempt_point loop (lost: {lost:?})"
        );
    });
}

/// A timer at the end of time (`after(Duration::MAX)`, `at` a far instant: the
/// runtime's `MAX_WHEN`), pending while every P is idle, does not overflow sysmon's
/// idle backstop (before issue 18 `earliest + IDLE_BACKSTOP_NS` did, and a debug build's
/// sysmon died of it). Alone: a fresh runtime whose only timer is that one.
#[test]
fn a_timer_at_the_end_of_time_does_not_stop_sysmon() {
    if common::alone("a_timer_at_the_end_of_time_does_not_stop_sysmon", &[]) {
        return;
    }
    with_timeout(T, || {
        let _never = goro::time::after_func(Duration::MAX, || {});
        // Every P idle and one timer pending: sysmon runs its idle backstop.
        goro::go!(|| ()).join().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let names = common::thread_names();
        assert!(names.contains("goro-sysmon"), "sysmon is gone: {names}");
        // And it still works: a coroutine in a blocking call has its P handed on.
        blocking_call_does_not_stall_its_p();
    });
}

/// A pinned coroutine sees one OS thread across 1 000 parks, blocking calls included;
/// an unpinned one doing the same migrates.
#[test]
fn pinned_coroutine_keeps_its_thread() {
    with_timeout(T, || {
        let pinned = threads_seen(true);
        assert_eq!(
            pinned.len(),
            1,
            "pinned coroutine ran on threads {pinned:?}"
        );
        let unpinned = threads_seen(false);
        assert!(
            unpinned.len() > 1,
            "unpinned coroutine never migrated: {unpinned:?}"
        );
    });
}

/// Runs a coroutine that parks 1 000 times on a channel (every 100th round also a
/// blocking call while a busy coroutine holds the P) and returns the thread ids it ran on.
fn threads_seen(pinned: bool) -> HashSet<i64> {
    let (tx, rx) = goro::chan::channel::<u32>(0);
    let busy_until = Arc::new(AtomicUsize::new(0));
    let b = busy_until.clone();
    let h = goro::Builder::new()
        .pinned(pinned)
        .name("subject")
        .spawn(move || {
            let mut seen = HashSet::new();
            thread_local!(static MARK: std::cell::Cell<i64> = const { std::cell::Cell::new(0) });
            for i in 0..1000u32 {
                seen.insert(tid());
                if pinned {
                    // Thread-locals survive parks on a pinned coroutine.
                    let me = tid();
                    let prev = MARK.with(|m| m.replace(me));
                    assert!(
                        i == 0 || prev == me,
                        "thread-local changed under a pinned coroutine"
                    );
                }
                assert_eq!(rx.recv().unwrap(), i);
                if i % 100 == 99 {
                    b.store(i as usize + 1, Ordering::SeqCst);
                    goro::blocking(|| std::thread::sleep(Duration::from_millis(2)));
                }
            }
            seen.insert(tid());
            seen
        })
        .unwrap();
    let sender = goro::go!(move || {
        for i in 0..1000u32 {
            tx.send(i).unwrap();
            if i % 100 == 99 {
                // Keep the P busy while the subject is in its blocking call, so that it
                // comes back to a P someone else holds.
                let want = i as usize + 1;
                let start = Instant::now();
                while busy_until.load(Ordering::SeqCst) < want
                    && start.elapsed() < Duration::from_secs(5)
                {
                    goro::yield_now();
                }
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(3) {
                    goro::yield_now();
                }
            }
        }
    });
    sender.join().unwrap();
    h.join().unwrap()
}

/// Many pinned coroutines exchanging messages with unpinned ones all finish.
#[test]
fn pinned_coroutines_ping_pong() {
    with_timeout(T, || {
        let hs: Vec<_> = (0..8)
            .map(|k| {
                let (tx, rx) = goro::chan::channel::<u32>(0);
                let (back_tx, back_rx) = goro::chan::channel::<u32>(0);
                let p = goro::Builder::new()
                    .pinned(k % 2 == 0)
                    .spawn(move || {
                        let me = tid();
                        for v in rx.iter() {
                            back_tx.send(v + 1).unwrap();
                            if k % 2 == 0 {
                                assert_eq!(tid(), me);
                            }
                        }
                    })
                    .unwrap();
                let q = goro::go!(move || {
                    for i in 0..200 {
                        tx.send(i).unwrap();
                        assert_eq!(back_rx.recv().unwrap(), i + 1);
                    }
                });
                (p, q)
            })
            .collect();
        for (p, q) in hs {
            q.join().unwrap();
            p.join().unwrap();
        }
    });
}

/// The dump names each kind of wait.
#[test]
fn dump_names_wait_reasons() {
    with_timeout(T, || {
        use goro::sync::{Cond, Mutex, RwLock, Semaphore, WaitGroup};
        let release = Arc::new(AtomicBool::new(false));
        let mut hs = Vec::new();
        // chan receive
        let (recv_tx, recv_rx) = goro::chan::channel::<()>(0);
        hs.push(
            goro::Builder::new()
                .name("w-recv")
                .spawn(move || {
                    let _ = recv_rx.recv();
                })
                .unwrap(),
        );
        // chan send
        let (send_tx, send_rx) = goro::chan::channel::<()>(0);
        hs.push(
            goro::Builder::new()
                .name("w-send")
                .spawn(move || {
                    let _ = send_tx.send(());
                })
                .unwrap(),
        );
        // select
        let (sel_tx, sel_rx) = goro::chan::channel::<()>(0);
        let (_sel2_tx, sel2_rx) = goro::chan::channel::<()>(0);
        hs.push(
            goro::Builder::new()
                .name("w-select")
                .spawn(move || {
                    goro::select! {
                        recv(sel_rx) -> _ => {},
                        recv(sel2_rx) -> _ => {},
                    }
                })
                .unwrap(),
        );
        // mutex, rwlock, cond: the main thread holds the locks.
        let m = Arc::new(Mutex::new(()));
        let rw = Arc::new(RwLock::new(()));
        let guard = m.lock();
        let wguard = rw.write();
        let m2 = m.clone();
        hs.push(
            goro::Builder::new()
                .name("w-mutex")
                .spawn(move || drop(m2.lock()))
                .unwrap(),
        );
        let rw2 = rw.clone();
        hs.push(
            goro::Builder::new()
                .name("w-rwlock")
                .spawn(move || drop(rw2.read()))
                .unwrap(),
        );
        let cm = Arc::new((Mutex::new(false), Cond::new()));
        let cm2 = cm.clone();
        hs.push(
            goro::Builder::new()
                .name("w-cond")
                .spawn(move || {
                    let mut g = cm2.0.lock();
                    while !*g {
                        g = cm2.1.wait(g);
                    }
                })
                .unwrap(),
        );
        // sema, waitgroup
        let sem = Arc::new(Semaphore::new(0));
        let sem2 = sem.clone();
        hs.push(
            goro::Builder::new()
                .name("w-sema")
                .spawn(move || sem2.acquire())
                .unwrap(),
        );
        let wg = Arc::new(WaitGroup::new());
        wg.add(1);
        let wg2 = wg.clone();
        hs.push(
            goro::Builder::new()
                .name("w-waitgroup")
                .spawn(move || wg2.wait())
                .unwrap(),
        );
        // sleep
        let napping = |r: Arc<AtomicBool>| {
            move || {
                let start = Instant::now();
                while !r.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
                    goro::time::sleep(Duration::from_millis(50));
                }
            }
        };
        hs.push(
            goro::Builder::new()
                .name("w-sleep")
                .spawn(napping(release.clone()))
                .unwrap(),
        );
        // io read, io write: on `b`, of a connected pair where `a` neither reads nor
        // writes.
        let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let a = goro::net::TcpStream::connect(addr).unwrap();
        let (b, _) = l.accept().unwrap();
        let b1 = b.try_clone().unwrap();
        hs.push(
            goro::Builder::new()
                .name("w-ioread")
                .spawn(move || {
                    let mut buf = [0u8; 16];
                    let _ = (&b1).read(&mut buf);
                })
                .unwrap(),
        );
        let b2 = b.try_clone().unwrap();
        hs.push(
            goro::Builder::new()
                .name("w-iowrite")
                .spawn(move || {
                    let chunk = vec![0u8; 1 << 16];
                    // Fills the socket buffers, then parks until `b` is closed.
                    while (&b2).write_all(&chunk).is_ok() {}
                })
                .unwrap(),
        );
        // blocking call
        let r = release.clone();
        hs.push(
            goro::Builder::new()
                .name("w-blocking")
                .spawn(move || {
                    goro::blocking(|| {
                        let start = Instant::now();
                        while !r.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30)
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    })
                })
                .unwrap(),
        );
        // join
        let target = goro::spawn(napping(release.clone()));
        hs.push(
            goro::Builder::new()
                .name("w-join")
                .spawn(move || target.join().unwrap())
                .unwrap(),
        );

        let want = [
            ("w-recv", "chan receive"),
            ("w-send", "chan send"),
            ("w-select", "select"),
            ("w-mutex", "mutex"),
            ("w-rwlock", "rwlock"),
            ("w-cond", "cond"),
            ("w-sema", "sema"),
            ("w-waitgroup", "waitgroup"),
            ("w-sleep", "sleep"),
            ("w-ioread", "io read"),
            ("w-iowrite", "io write"),
            ("w-blocking", "blocking call"),
            ("w-join", "join"),
        ];
        // Poll until every coroutine is in its wait (bounded).
        let start = Instant::now();
        let dump = loop {
            let d = goro::debug::dump_each();
            let all = want.iter().all(|(name, reason)| {
                d.lines()
                    .any(|l| l.contains(&format!("('{name}') [{reason}")))
            });
            if all || start.elapsed() > Duration::from_secs(10) {
                break d;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        for (name, reason) in want {
            let line = dump
                .lines()
                .find(|l| l.contains(&format!("('{name}')")))
                .unwrap_or_else(|| panic!("{name} missing from the dump:\n{dump}"));
            assert!(
                line.contains(&format!("[{reason}, ")),
                "{name} should wait on {reason} with a duration: {line}\n{dump}"
            );
        }
        assert!(dump.starts_with("coroutine dump: "), "{dump}");

        // Release everything.
        drop(recv_tx);
        drop(send_rx);
        drop(sel_tx);
        drop(guard);
        drop(wguard);
        *cm.0.lock() = true;
        cm.1.notify_all();
        sem.release(1);
        wg.done();
        a.close();
        b.close();
        release.store(true, Ordering::SeqCst);
        for h in hs {
            h.join().unwrap();
        }
    });
}

// ---- whole-process scenarios -------------------------------------------------------

/// The deadlock scenario's stuck coroutine: parks here for ever.
#[inline(never)]
fn stuck_receiving(rx: goro::chan::Receiver<()>) {
    let _ = rx.recv();
    std::hint::black_box(());
}

/// The SIGQUIT scenario's coroutine: sleeps here.
#[inline(never)]
fn napping() {
    goro::time::sleep(Duration::from_secs(10));
    std::hint::black_box(());
}

/// The panic scenario's coroutine.
#[inline(never)]
fn panicking_parser() {
    let n = std::hint::black_box(7);
    panic!("bad input {n}");
}

/// Runs this binary's `scenario_child` with `scenario` and extra environment, and kills
/// it if it has not ended after `limit` (then its status has no code). The limit is
/// kept here, not in a watchdog thread of the child: a thread that sleeps with a
/// deadline may wake someone, so the deadlock check would rightly never fire beside
/// one.
fn run_scenario_for(scenario: &str, env: &[(&str, &str)], limit: Duration) -> Output {
    common::run_scenario_child(
        SCENARIO_ENV,
        scenario,
        env,
        &["GORO_SCHEDTRACE", "GORO_DEADLOCK"],
        limit,
    )
}

/// [`run_scenario_for`] with a limit no scenario should come near.
fn run_scenario(scenario: &str, env: &[(&str, &str)]) -> Output {
    run_scenario_for(scenario, env, Duration::from_secs(30))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn deadlock_is_reported_with_dump_and_exit_2() {
    let o = run_scenario("deadlock", &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
    assert!(
        err.contains("fatal error: all coroutines are asleep - deadlock!"),
        "{err}"
    );
    assert!(err.contains("coroutine dump: "), "{err}");
    assert!(err.contains("('stuck-recv') [chan receive, "), "{err}");
    assert!(err.contains("('stuck-mutex') [mutex, "), "{err}");
    assert!(
        err.contains("sysmon::stuck_receiving"),
        "the stuck function:\n{err}"
    );
}

#[test]
fn deadlock_detection_can_be_turned_off() {
    let o = run_scenario_for(
        "deadlock",
        &[("GORO_DEADLOCK", "ignore")],
        Duration::from_millis(1500),
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), None, "the test should kill it:\n{err}");
    assert!(!err.contains("deadlock!"), "{err}");
}

/// Go's first lesson: a `main` that blocks for ever with no coroutine at all is a
/// deadlock, reported at once (before, the check started with the first coroutine,
/// and this hung).
#[test]
fn deadlock_reported_with_no_coroutine_at_all() {
    let o = run_scenario("main_alone", &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
    assert!(
        err.contains("fatal error: all coroutines are asleep - deadlock!"),
        "{err}"
    );
    // Not "0 coroutines" alone: the report names the thread and what it waits on.
    assert!(err.contains("1 threads waiting on goro:"), "{err}");
    assert!(err.contains(" [chan send, "), "{err}");
}

/// A `Chan` (Go's `chan T`) is never closed by a drop: coroutines left waiting on
/// one that nobody else holds, beside a main that waits for them, are a deadlock the
/// check reports, as Go's runtime does (with Rust's ends, the last drop would have
/// closed the channel and woken them).
#[test]
fn deadlock_reported_on_a_chan_nobody_else_holds() {
    for procs in ["1", "2"] {
        let o = run_scenario("chan_nobody_holds", &[("GORO_MAXPROCS", procs)]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
        assert!(
            err.contains("all coroutines are asleep - deadlock!"),
            "{err}"
        );
    }
}

/// With `#[goro::main]`, main is a coroutine named "main": the deadlock report lists
/// it with what it waits on and its stack, as Go's report lists goroutine 1.
#[test]
fn deadlock_report_shows_the_main_coroutine() {
    for procs in ["1", "2"] {
        let o = run_scenario("goro_main_deadlock", &[("GORO_MAXPROCS", procs)]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
        assert!(
            err.contains("all coroutines are asleep - deadlock!"),
            "{err}"
        );
        assert!(err.contains("('main') [chan receive"), "{err}");
        assert!(err.contains("main_waits_for_ever"), "main's stack: {err}");
    }
}

/// The program `#[goro::main]` is tested on (in a module: the test binary's own main
/// is the test harness's).
mod goro_main_program {
    #[goro::main]
    pub fn main() {
        main_waits_for_ever();
    }

    #[inline(never)]
    fn main_waits_for_ever() {
        let ch = goro::chan::Chan::<u8>::new(0);
        let _ = ch.recv();
    }
}

/// A plain thread goro has never seen may still wake the main thread: while it
/// computes, sleeps or reads, there is no deadlock, coroutine or not.
#[test]
fn deadlock_not_reported_while_an_unknown_thread_may_send() {
    let o = run_scenario("unknown_thread_sends", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

/// A plain thread in a timed wait, before any coroutine exists: no deadlock.
#[test]
fn deadlock_not_reported_while_main_alone_waits_with_a_timeout() {
    let o = run_scenario("main_alone_timed_wait", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

#[test]
fn deadlock_not_reported_while_a_timer_is_pending() {
    let o = run_scenario("timer", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

#[test]
fn deadlock_not_reported_while_a_socket_waits() {
    let o = run_scenario("socket", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

#[test]
fn deadlock_not_reported_during_a_blocking_call() {
    let o = run_scenario("blocking", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

/// A plain thread in a timed wait will wake up: it is not a deadlock, even when every
/// coroutine is parked or gone (issue 13: this exited 2).
#[test]
fn deadlock_not_reported_while_a_thread_waits_with_a_timeout() {
    let o = run_scenario("thread_timed_wait", &[]);
    assert!(o.status.success(), "stderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("deadlock"));
}

#[test]
fn sigquit_prints_the_dump_and_exits_2() {
    let o = run_scenario("sigquit", &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "stderr:\n{err}");
    assert!(err.contains("SIGQUIT"), "{err}");
    assert!(err.contains("('napper') [sleep, "), "{err}");
    assert!(
        err.contains("sysmon::napping"),
        "the napper's function:\n{err}"
    );
}

/// A coroutine's panic names the coroutine and where it was spawned, not the M's
/// thread, in std's format.
#[test]
fn a_coroutines_panic_names_it() {
    let o = run_scenario("panic_named", &[("RUST_BACKTRACE", "1")]);
    let err = stderr(&o);
    assert!(o.status.success(), "stderr:\n{err}");
    assert!(
        err.contains("('parser') panicked at tests/sysmon.rs:"),
        "{err}"
    );
    assert!(err.contains("bad input 7"), "{err}");
    assert!(err.contains("(created at tests/sysmon.rs:"), "{err}");
    assert!(
        err.contains("sysmon::panicking_parser"),
        "its stack:\n{err}"
    );
    assert!(!err.contains("thread 'goro-m"), "no M thread named:\n{err}");
}

/// A panic hook the program installed before goro started still runs for a
/// coroutine's panic, after a line naming the coroutine; panics off coroutines reach it
/// unchanged.
#[test]
fn a_programs_panic_hook_keeps_working() {
    let o = run_scenario("panic_user_hook", &[]);
    let err = stderr(&o);
    assert!(o.status.success(), "stderr:\n{err}");
    assert!(
        err.contains("('parser') panicked (created at tests/sysmon.rs:"),
        "{err}"
    );
    assert_eq!(err.matches("USER HOOK:").count(), 2, "{err}");
    assert!(err.contains("USER HOOK: on a thread"), "{err}");
}

#[test]
fn schedtrace_prints_a_line_per_tick() {
    let o = run_scenario(
        "trace",
        &[("GORO_SCHEDTRACE", "50"), ("GORO_MAXPROCS", "2")],
    );
    let err = stderr(&o);
    assert!(o.status.success(), "stderr:\n{err}");
    let lines: Vec<_> = err.lines().filter(|l| l.starts_with("SCHED ")).collect();
    assert!(
        lines.len() >= 3,
        "expected a trace line every 50 ms over 400 ms:\n{err}"
    );
    for l in &lines {
        for field in [
            "gomaxprocs=2",
            "idleprocs=",
            "threads=",
            "spinningthreads=",
            "idlethreads=",
            "runqueue=",
            "coroutines=",
            "[P0: ",
            "[P1: ",
            "next=",
        ] {
            assert!(l.contains(field), "{field} missing from {l}");
        }
    }
}

/// Past `GORO_MAX_THREADS` Ms the process stops with a message that names the cause
/// and the setting (Go: "program exceeds 10000-thread limit").
#[test]
fn thread_limit_stops_the_process_with_a_message() {
    let o = run_scenario(
        "max_threads",
        &[("GORO_MAX_THREADS", "8"), ("GORO_MAXPROCS", "2")],
    );
    let err = stderr(&o);
    assert!(!o.status.success(), "stderr:\n{err}");
    assert_ne!(o.status.code(), Some(7), "the watchdog ended it:\n{err}");
    assert!(
        err.contains("more than 8 threads") && err.contains("GORO_MAX_THREADS"),
        "{err}"
    );
}

#[test]
fn idle_ms_leave_the_pool() {
    let o = run_scenario(
        "mpool",
        &[("GORO_IDLE_M_EXIT_MS", "100"), ("GORO_MAXPROCS", "2")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "stdout:\n{out}\nstderr:\n{}",
        stderr(&o)
    );
    assert!(out.contains("pool shrank"), "{out}");
}

/// The child side of the scenarios above; does nothing in a normal test run.
#[test]
fn scenario_child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    // Never hang: the parent kills the child after its limit (`run_scenario_for`).
    match scenario.as_str() {
        "main_alone" => {
            let (tx, _rx) = goro::chan::channel::<i32>(0);
            tx.send(1).unwrap(); // nobody will ever receive
            unreachable!("a rendezvous send with no receiver completed");
        }
        "goro_main_deadlock" => {
            let _ = goro_main_program::main();
            unreachable!("main waits for ever");
        }
        "chan_nobody_holds" => {
            let ch = goro::chan::Chan::<u32>::new(0);
            let workers: Vec<_> = (0..3)
                .map(|_| {
                    let ch = ch.clone();
                    goro::go!(move || ch.recv())
                })
                .collect();
            drop(ch); // only the waiting workers hold it now
            for w in workers {
                let _ = w.join();
            }
            unreachable!("nobody sends or closes");
        }
        "main_alone_timed_wait" => {
            let (_tx, rx) = goro::chan::channel::<()>(0);
            for _ in 0..2 {
                let r = rx.recv_timeout(Duration::from_millis(300));
                assert_eq!(r, Err(goro::chan::RecvTimeoutError::Timeout));
            }
        }
        "unknown_thread_sends" => {
            // The feeder never touches goro before its send: it computes, sleeps and
            // reads a file first, each for longer than the check's grace period.
            let (tx, rx) = goro::chan::channel::<u64>(0);
            std::thread::spawn(move || {
                let t = Instant::now();
                let mut spins = 0u64;
                while t.elapsed() < Duration::from_millis(300) {
                    spins += 1;
                    std::hint::spin_loop();
                }
                std::thread::sleep(Duration::from_millis(300));
                let (mut r, mut w) = std::os::unix::net::UnixStream::pair().unwrap();
                let reader = std::thread::spawn(move || {
                    let mut b = [0u8; 1];
                    r.read_exact(&mut b).map(|()| b[0])
                });
                std::thread::sleep(Duration::from_millis(300));
                w.write_all(&[5]).unwrap();
                let byte = reader.join().unwrap().unwrap();
                tx.send(spins.min(1) + u64::from(byte)).unwrap();
            });
            assert_eq!(rx.recv().unwrap(), 6);
            // And with a coroutine in the mix, parked until the thread sends again.
            let (tx, rx) = goro::chan::channel::<u64>(0);
            let parked = goro::go!(move || rx.recv().unwrap());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(300));
                tx.send(9).unwrap();
            });
            assert_eq!(parked.join().unwrap(), 9);
        }
        "deadlock" => {
            // Timer channels nobody can receive from any more: their timers stop with
            // them (Go 1.23), so they do not keep the check off either.
            drop(goro::chan::after(Duration::from_secs(3600)));
            drop(goro::chan::tick(Duration::from_secs(3600)));
            // First an M waits on the runtime inside a blocking call: that must not
            // keep the check off later.
            let (tx, rx) = goro::chan::channel::<()>(0);
            goro::go!(move || tx.send(()).unwrap());
            goro::go!(move || goro::blocking(|| rx.recv().unwrap()))
                .join()
                .unwrap();
            let (_tx, rx) = goro::chan::channel::<()>(0);
            let m = Arc::new(goro::sync::Mutex::new(()));
            let held = m.clone();
            let stuck = goro::Builder::new()
                .name("stuck-recv")
                .spawn(move || {
                    let _g = held.lock();
                    stuck_receiving(rx);
                })
                .unwrap();
            let m2 = m.clone();
            let _b = goro::Builder::new()
                .name("stuck-mutex")
                .spawn(move || {
                    goro::time::sleep(Duration::from_millis(20));
                    drop(m2.lock());
                })
                .unwrap();
            stuck.join().unwrap();
            unreachable!("the receive can never complete");
        }
        "timer" => {
            goro::go!(|| goro::time::sleep(Duration::from_millis(600)))
                .join()
                .unwrap();
        }
        "socket" => {
            let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(600));
                std::net::TcpStream::connect(addr).unwrap();
            });
            goro::go!(move || drop(l.accept().unwrap())).join().unwrap();
        }
        "blocking" => {
            goro::go!(|| goro::blocking(|| std::thread::sleep(Duration::from_millis(600))))
                .join()
                .unwrap();
        }
        "thread_timed_wait" => {
            // The only coroutine has finished; the main thread waits with a deadline.
            goro::go!(|| ()).join().unwrap();
            let (_tx, rx) = goro::chan::channel::<()>(0);
            let r = rx.recv_timeout(Duration::from_millis(400));
            assert_eq!(r, Err(goro::chan::RecvTimeoutError::Timeout));
            // A coroutine parked with no deadline, woken by the thread after its own
            // timed wait ends: no deadlock in between either.
            let (wake, parked) = goro::chan::channel::<u32>(0);
            let h = goro::go!(move || parked.recv().unwrap());
            let (_tx2, rx2) = goro::chan::channel::<()>(0);
            let r = rx2.recv_timeout(Duration::from_millis(400));
            assert_eq!(r, Err(goro::chan::RecvTimeoutError::Timeout));
            wake.send(7).unwrap();
            assert_eq!(h.join().unwrap(), 7);
        }
        "panic_named" => {
            let h = goro::Builder::new()
                .name("parser")
                .spawn(panicking_parser)
                .unwrap();
            assert!(h.join().is_err());
        }
        "panic_user_hook" => {
            std::panic::set_hook(Box::new(|info| {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .copied()
                    .unwrap_or("?");
                eprintln!("USER HOOK: {msg}");
            }));
            let h = goro::Builder::new()
                .name("parser")
                .spawn(|| panic!("in a coroutine"))
                .unwrap();
            assert!(h.join().is_err());
            assert!(std::panic::catch_unwind(|| panic!("on a thread")).is_err());
        }
        "sigquit" => {
            // A shell's background job starts with SIGQUIT ignored, and goro leaves an
            // inherited disposition alone: restore the default before the runtime
            // starts, so the test does not depend on how it was launched.
            // SAFETY: setting a signal's disposition to its default; no handler runs.
            unsafe { libc::signal(libc::SIGQUIT, libc::SIG_DFL) };
            let _n = goro::Builder::new().name("napper").spawn(napping).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: raising a signal has no preconditions.
            unsafe { libc::raise(libc::SIGQUIT) };
            std::thread::sleep(Duration::from_secs(5));
        }
        "trace" => {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    goro::go!(|| {
                        let start = Instant::now();
                        while start.elapsed() < Duration::from_millis(400) {
                            goro::time::sleep(Duration::from_millis(1));
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
        }
        "max_threads" => {
            // Blocking calls that outlast the retake each cost a thread.
            let hs: Vec<_> = (0..40)
                .map(|_| {
                    goro::go!(|| goro::blocking(|| std::thread::sleep(Duration::from_secs(3))))
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
            unreachable!("40 blocked calls fit in 8 threads");
        }
        "mpool" => {
            let ms = || {
                std::fs::read_dir("/proc/self/task")
                    .unwrap()
                    .flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.starts_with("goro-m"))
                    })
                    .count()
            };
            let hs: Vec<_> = (0..30)
                .map(|_| {
                    goro::go!(|| goro::blocking(|| std::thread::sleep(Duration::from_millis(300))))
                })
                .collect();
            std::thread::sleep(Duration::from_millis(150));
            let peak = ms();
            for h in hs {
                h.join().unwrap();
            }
            assert!(
                peak >= 10,
                "the pool did not grow for 30 blocking calls: {peak} Ms"
            );
            let start = Instant::now();
            let mut now = ms();
            while now > goro::maxprocs() + 1 && start.elapsed() < Duration::from_millis(1000) {
                std::thread::sleep(Duration::from_millis(20));
                now = ms();
            }
            assert!(now <= goro::maxprocs() + 1, "still {now} Ms (peak {peak})");
            println!("pool shrank from {peak} to {now} Ms");
            // The runtime still works after its Ms left.
            assert_eq!(goro::go!(|| goro::blocking(|| 3)).join().unwrap(), 3);
        }
        other => panic!("unknown scenario {other}"),
    }
}
