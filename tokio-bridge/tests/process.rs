//! What changes a process for good, each in a child process of its own: the program's
//! own runtime (`set_handle`), the worker count (`GORO_TOKIO_WORKERS`), and deadlock
//! detection beside the tokio runtime goro starts (still reported when nothing is in
//! flight on it; held back while a task or a `block_on` may still wake someone).

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Output;
use std::time::{Duration, Instant};

const SCENARIO_ENV: &str = "GORO_TOKIO_TEST_SCENARIO";

/// Runs this binary's `scenario_child` with `scenario`, killing it after `limit`.
fn run(scenario: &str, env: &[(&str, &str)], limit: Duration) -> Output {
    common::run_scenario_child(SCENARIO_ENV, scenario, env, &["GORO_DEADLOCK"], limit)
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn set_handle_before_first_use() {
    for procs in ["1", "2"] {
        let o = run(
            "set_handle",
            &[("GORO_MAXPROCS", procs)],
            Duration::from_secs(60),
        );
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("ran on my-runtime"),
            "{}",
            text(&o)
        );
    }
}

#[test]
fn worker_count_setting() {
    let o = run(
        "count_workers",
        &[("GORO_TOKIO_WORKERS", "3")],
        Duration::from_secs(60),
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("goro-tokio threads: 3"),
        "{}",
        text(&o)
    );
    let o = run(
        "count_workers",
        &[("GORO_TOKIO_WORKERS", "lots")],
        Duration::from_secs(60),
    );
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("GORO_TOKIO_WORKERS"),
        "{}",
        text(&o)
    );
}

/// The runtime goro started is idle (nothing in flight): a main blocked for ever on a
/// channel is reported, as without tokio.
#[test]
fn deadlock_reported_beside_an_idle_tokio_runtime() {
    for procs in ["1", "2"] {
        let o = run(
            "idle_runtime_deadlock",
            &[("GORO_MAXPROCS", procs)],
            Duration::from_secs(30),
        );
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{t}");
        assert!(t.contains("all coroutines are asleep - deadlock!"), "{t}");
    }
}

/// A task alive on that runtime (which sends after 1.5 s, past the check's grace
/// period), or a coroutine in `block_on` waiting on tokio's timer: no report, and the
/// program finishes.
#[test]
fn no_report_while_tokio_may_wake_someone() {
    for scenario in ["task_will_send", "block_on_in_flight"] {
        for procs in ["1", "2"] {
            let o = run(
                scenario,
                &[("GORO_MAXPROCS", procs)],
                Duration::from_secs(30),
            );
            let t = text(&o);
            assert!(o.status.success(), "{scenario}: {t}");
            assert!(!t.contains("deadlock"), "{scenario}: {t}");
        }
    }
}

/// The child side of the tests above; does nothing in a normal test run.
#[test]
fn scenario_child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    match scenario.as_str() {
        "set_handle" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("my-runtime")
                .enable_all()
                .build()
                .unwrap();
            goro::tokio::set_handle(rt.handle().clone()).unwrap();
            let name = goro::go!(|| {
                goro::block_on(
                    goro::tokio::handle()
                        .spawn(async { std::thread::current().name().unwrap_or("").to_owned() }),
                )
                .unwrap()
            })
            .join()
            .unwrap();
            println!("ran on {name}");
            // In use now: a second runtime is given back.
            let other = tokio::runtime::Runtime::new().unwrap();
            assert!(goro::tokio::set_handle(other.handle().clone()).is_err());
            assert_eq!(goro::tokio::block_on(async { 3 }), 3);
        }
        "count_workers" => {
            let _ = goro::tokio::handle();
            let deadline = Instant::now() + Duration::from_secs(10);
            let count = || {
                std::fs::read_dir("/proc/self/task")
                    .unwrap()
                    .flatten()
                    .filter(|t| {
                        std::fs::read_to_string(t.path().join("comm"))
                            .is_ok_and(|c| c.trim() == "goro-tokio")
                    })
                    .count()
            };
            while count() < 3 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            println!("goro-tokio threads: {}", count());
        }
        "idle_runtime_deadlock" => {
            // Use the runtime (a timer, a task), let everything finish, then block.
            // (Built inside the call: tokio's sleep needs the context to be made.)
            goro::go!(|| goro::tokio::block_on(async {
                tokio::time::sleep(Duration::from_millis(5)).await
            }))
            .join()
            .unwrap();
            goro::block_on(goro::tokio::handle().spawn(async { 1 })).unwrap();
            let (tx, rx) = goro::chan::channel::<()>(0);
            let _keep = tx;
            rx.recv().unwrap();
            unreachable!("nobody sends");
        }
        "task_will_send" => {
            let (tx, rx) = goro::chan::channel::<u32>(0);
            goro::tokio::handle().spawn(async move {
                tokio::time::sleep(Duration::from_millis(1_500)).await;
                tx.send_async(9).await.unwrap();
            });
            assert_eq!(rx.recv(), Ok(9));
        }
        "block_on_in_flight" => {
            let h = goro::go!(|| {
                goro::tokio::block_on(async {
                    tokio::time::sleep(Duration::from_millis(1_500)).await;
                    4
                })
            });
            assert_eq!(h.join().unwrap(), 4);
        }
        other => panic!("unknown scenario {other}"),
    }
}
