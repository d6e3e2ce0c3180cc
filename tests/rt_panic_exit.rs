//! A panic is never lost: a coroutine's panic reaches a join, or ends the program with
//! status 2 after its report, as an unrecovered panic does in Go. Each scenario runs
//! in a child process (it ends the process), at 1 and 2 Ps.

mod common;

use std::process::Output;
use std::time::Duration;

use common::output_text as text;

const SCENARIO_ENV: &str = "GORO_TEST_PANIC_SCENARIO";

fn run(scenario: &str, procs: &str, env: &[(&str, &str)]) -> Output {
    let mut all = vec![("GORO_MAXPROCS", procs)];
    all.extend_from_slice(env);
    common::run_scenario_child(
        SCENARIO_ENV,
        scenario,
        &all,
        &["GORO_DETACHED_PANIC"],
        Duration::from_secs(30),
    )
}

/// The scenario ends the program: status 2, the panic's message, the line that says
/// why, and nothing the program would have printed after it.
fn assert_ends(scenario: &str, message: &str) {
    for procs in ["1", "2"] {
        let o = run(scenario, procs, &[]);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{scenario} at {procs} Ps: {t}");
        assert!(t.contains(message), "{scenario} at {procs} Ps: {t}");
        assert!(
            t.contains("nobody can take its panic"),
            "{scenario} at {procs} Ps: {t}"
        );
        assert!(!t.contains("all done"), "{scenario} at {procs} Ps: {t}");
    }
}

/// The scenario runs to its end: status 0, "all done".
fn assert_goes_on(scenario: &str, env: &[(&str, &str)]) {
    for procs in ["1", "2"] {
        let o = run(scenario, procs, env);
        let t = text(&o);
        assert!(o.status.success(), "{scenario} at {procs} Ps: {t}");
        assert!(t.contains("all done"), "{scenario} at {procs} Ps: {t}");
    }
}

#[test]
fn a_detached_coroutines_panic_ends_the_program() {
    assert_ends("detached", "worker failed");
}

/// Go 1.25's `wg.Go` crashes too: `wg.go(f)` is a detached coroutine.
#[test]
fn a_wait_group_tasks_panic_ends_the_program() {
    assert_ends("wait_group_go", "task 3 failed");
}

/// The handle was held while the coroutine panicked, then dropped without a join.
#[test]
fn dropping_the_handle_of_a_panicked_coroutine_ends_the_program() {
    assert_ends("dropped_after_panic", "late failure");
}

/// goro's own spawns on the program's behalf: an `after_func`'s function.
#[test]
fn a_timer_functions_panic_ends_the_program() {
    assert_ends("after_func", "timer function failed");
}

/// An awaited handle whose future is dropped is a dropped handle.
#[test]
fn a_dropped_join_future_of_a_panicked_coroutine_ends_the_program() {
    assert_ends("dropped_future", "awaited failure");
}

/// A held handle keeps std's rule: `join` gives `Err`, the program goes on; so do
/// `JoinSet`, `scope` and `ErrGroup`, which take their coroutines' panics.
#[test]
fn joined_panics_do_not_end_the_program() {
    assert_goes_on("joined", &[]);
}

/// The opt-out: std's rule for detached threads.
#[test]
fn the_opt_out_keeps_stds_rule() {
    assert_goes_on("detached", &[("GORO_DETACHED_PANIC", "ignore")]);
    // A panicking `wg.go` task still counts down: `wait` returns.
    assert_goes_on("wait_group_go", &[("GORO_DETACHED_PANIC", "ignore")]);
    let o = run("detached", "1", &[("GORO_DETACHED_PANIC", "sometimes")]);
    assert!(!o.status.success());
    assert!(text(&o).contains("GORO_DETACHED_PANIC"), "{}", text(&o));
}

/// The child side; does nothing in a normal test run.
#[test]
fn scenario_child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    match scenario.as_str() {
        "detached" => {
            goro::go!(|| panic!("worker failed"));
            goro::time::sleep(Duration::from_millis(300));
            println!("all done");
        }
        "wait_group_go" => {
            let wg = goro::sync::WaitGroup::new();
            for i in 0..5 {
                wg.go(move || {
                    if i == 3 {
                        panic!("task {i} failed");
                    }
                });
            }
            wg.wait();
            goro::time::sleep(Duration::from_millis(300));
            println!("all done");
        }
        "dropped_after_panic" => {
            let h = goro::go!(|| -> u32 { panic!("late failure") });
            while !h.is_finished() {
                goro::time::sleep(Duration::from_millis(1));
            }
            drop(h);
            println!("all done");
        }
        "after_func" => {
            let _t = goro::time::after_func(Duration::from_millis(1), || {
                panic!("timer function failed")
            });
            goro::time::sleep(Duration::from_millis(300));
            println!("all done");
        }
        "dropped_future" => {
            use std::future::{Future, IntoFuture};
            // The first poll must find it running (a finished one would hand the
            // panic to that poll, which is a join).
            let (tx, rx) = goro::chan::channel::<()>(0);
            let h = goro::go!(move || -> u32 {
                rx.recv().unwrap();
                panic!("awaited failure")
            });
            let mut fut = Box::pin(h.into_future());
            struct Nothing;
            impl std::task::Wake for Nothing {
                fn wake(self: std::sync::Arc<Self>) {}
            }
            let waker = std::task::Waker::from(std::sync::Arc::new(Nothing));
            let first = fut
                .as_mut()
                .poll(&mut std::task::Context::from_waker(&waker));
            assert!(first.is_pending());
            tx.send(()).unwrap();
            goro::time::sleep(Duration::from_millis(50));
            drop(fut);
            goro::time::sleep(Duration::from_millis(300));
            println!("all done");
        }
        "joined" => {
            let e = goro::go!(|| -> u32 { panic!("held") }).join().unwrap_err();
            assert_eq!(goro::panic_message(&*e), "held");
            let h = goro::go!(|| -> u32 { panic!("held, timed") });
            let h = match h.join_timeout(Duration::from_secs(10)) {
                Ok(r) => r,
                Err(_) => panic!("not finished in 10 s"),
            };
            assert!(h.is_err());
            let mut set = goro::JoinSet::new();
            set.spawn(|| -> u32 { panic!("in a set") });
            assert!(set.join_next().unwrap().is_err());
            let r = std::panic::catch_unwind(|| {
                goro::scope(|s| {
                    s.spawn(|| panic!("in a scope"));
                })
            });
            assert!(r.is_err());
            let g = goro::sync::ErrGroup::<()>::new();
            g.go(|| panic!("in a group"));
            assert!(std::panic::catch_unwind(|| g.wait()).is_err());
            goro::time::sleep(Duration::from_millis(100));
            println!("all done");
        }
        other => panic!("unknown scenario {other}"),
    }
}
