//! golang.org/x/sync's errgroup tests, ported to `goro::sync::ErrGroup`, and the
//! rules goro adds (panics, `set_limit(0)`, the context's end).
//!
//! Ported from <https://github.com/golang/sync>, `errgroup/errgroup_test.go`
//! (Copyright The Go Authors, BSD-style licence, <https://go.dev/LICENSE>): each
//! `Test*` and `Example*` below names the Go one it follows. The code is our own,
//! written against goro's API from the behaviour each Go test checks.
//!
//! How the translation goes:
//!
//! - Every test body runs on a coroutine under a watchdog (`run`).
//! - Go's `Wait` returns the first error every time it is called; goro's `wait`
//!   hands it over once (`E` need not be `Clone`) and then starts afresh. Where Go
//!   calls `Wait` again after an error, the port expects `Ok(())` until a new one.
//! - Go's `SetLimit(0)` makes `Go` block forever; goro's `go` panics instead (and
//!   `try_go` refuses, as Go's `TryGo` does).
//
// Not ported:
// - TestCancelCause — missing API: no `context.Cause` (a context's error is one of
//   two kinds); that the context is cancelled at the first error and at `wait` is
//   checked by `with_context`.
// - ExampleGroup_justErrors — it fetches URLs from the internet; the tests use
//   127.0.0.1 only. Its shape is `zero_group`'s.
// - BenchmarkGo — a benchmark.

mod common;

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use goro::chan::channel;
use goro::context::{background, Context, Error};
use goro::sync::ErrGroup;
use goro::{go, select};

const LIMIT: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Runs `f` on a coroutine under the watchdog; a panic in `f` fails the test.
fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    common::on_coroutine(LIMIT, f)
}

/// Go: TestZeroGroup (a later `wait` returns `Ok` once the error was handed over).
#[test]
fn zero_group() {
    run(|| {
        let cases: [&[Option<&str>]; 5] = [
            &[],
            &[None],
            &[Some("errgroup_test: 1")],
            &[Some("errgroup_test: 1"), None],
            &[Some("errgroup_test: 1"), None, Some("errgroup_test: 2")],
        ];
        for errs in cases {
            let g = ErrGroup::<&str>::new();
            for (i, &err) in errs.iter().enumerate() {
                g.go(move || err.map_or(Ok(()), Err));
                let want = err.map_or(Ok(()), Err);
                assert_eq!(
                    g.wait(),
                    want,
                    "after go() for errs[..={i}] = {:?}",
                    &errs[..=i]
                );
            }
        }
    });
}

/// Go: TestWithContext.
#[test]
fn with_context() {
    run(|| {
        const DOOM: &str = "group_test: doomed";
        type Case = (&'static [Option<&'static str>], Result<(), &'static str>);
        let cases: [Case; 4] = [
            (&[], Ok(())),
            (&[None], Ok(())),
            (&[Some(DOOM)], Err(DOOM)),
            (&[Some(DOOM), None], Err(DOOM)),
        ];
        for (errs, want) in cases {
            let (g, ctx) = ErrGroup::<&str>::with_context(&background());
            for &err in errs {
                g.go(move || err.map_or(Ok(()), Err));
            }
            assert_eq!(g.wait(), want, "errs {errs:?}");
            assert!(ctx.done().try_recv().is_err(), "ctx.done() was not closed");
            assert_eq!(ctx.err(), Some(Error::Canceled));
        }
    });
}

/// Go: TestTryGo.
#[test]
fn try_go() {
    run(|| {
        let g = ErrGroup::<()>::new();
        let n = 42;
        g.set_limit(42);
        let (ch_tx, ch) = channel::<()>(0);
        let task = move |tx: goro::chan::Sender<()>| {
            move || {
                tx.send(()).unwrap();
                Ok(())
            }
        };
        for i in 0..n {
            assert!(
                g.try_go(task(ch_tx.clone())),
                "try_go failed at the {i}th call"
            );
        }
        assert!(
            !g.try_go(task(ch_tx.clone())),
            "try_go succeeded past the limit"
        );
        let rx = ch.clone();
        go!(move || (0..n).for_each(|_| rx.recv().unwrap()));
        g.wait().unwrap();

        assert!(
            g.try_go(task(ch_tx.clone())),
            "try_go failed after all the tasks ended"
        );
        let rx = ch.clone();
        go!(move || rx.recv().unwrap());
        g.wait().unwrap();

        // Switch the limit.
        g.set_limit(1);
        assert!(g.try_go(task(ch_tx.clone())), "try_go failed");
        assert!(
            !g.try_go(task(ch_tx.clone())),
            "try_go succeeded past a limit of 1"
        );
        let rx = ch.clone();
        go!(move || rx.recv().unwrap());
        g.wait().unwrap();

        // Block all calls.
        g.set_limit(0);
        for _ in 0..1 << 10 {
            assert!(
                !g.try_go(task(ch_tx.clone())),
                "try_go succeeded with a limit of 0"
            );
        }
        g.wait().unwrap();
    });
}

/// Go: TestGoLimit.
#[test]
fn go_limit() {
    run(|| {
        const LIMIT: i32 = 10;
        let g = ErrGroup::<String>::new();
        g.set_limit(LIMIT as usize);
        let active = Arc::new(AtomicI32::new(0));
        for _ in 0..=1 << 10 {
            let active = active.clone();
            g.go(move || {
                let n = active.fetch_add(1, Ordering::SeqCst) + 1;
                if n > LIMIT {
                    return Err(format!("saw {n} active tasks; want <= {LIMIT}"));
                }
                goro::time::sleep(Duration::from_micros(1)); // let others start
                active.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            });
        }
        g.wait().unwrap();
    });
}

/// Go: ExampleGroup_parallel (the "Google Search 2.0" fan-out, with a context).
#[test]
fn example_group_parallel() {
    run(|| {
        fn search(kind: &'static str) -> impl Fn(&Context, &str) -> Result<String, String> {
            move |_ctx, query| Ok(format!("{kind} result for {query:?}"))
        }
        let google = |ctx: &Context, query: &'static str| -> Result<Vec<String>, String> {
            let (g, ctx) = ErrGroup::<String>::with_context(ctx);
            let results = Arc::new(goro::sync::Mutex::new(vec![String::new(); 3]));
            for (i, kind) in ["web", "image", "video"].into_iter().enumerate() {
                let (ctx, results) = (ctx.clone(), results.clone());
                g.go(move || {
                    let r = search(kind)(&ctx, query)?;
                    results.lock()[i] = r;
                    Ok(())
                });
            }
            g.wait()?;
            let results = results.lock().clone();
            Ok(results)
        };
        let results = google(&background(), "golang").unwrap();
        assert_eq!(
            results,
            [
                "web result for \"golang\"",
                "image result for \"golang\"",
                "video result for \"golang\""
            ]
        );
    });
}

/// goro's rule for a panicking task: the others are cancelled, `wait` waits for all
/// of them and re-raises the first panic, in preference to an error.
#[test]
fn panicking_task_is_reraised_by_wait() {
    run(|| {
        let (g, ctx) = ErrGroup::<&str>::with_context(&background());
        let finished = Arc::new(AtomicUsize::new(0));
        for i in 0..8 {
            let (ctx, finished) = (ctx.clone(), finished.clone());
            g.go(move || {
                if i == 3 {
                    panic!("task 3 panics (expected by the test)");
                }
                if i == 5 {
                    return Err("task 5 failed");
                }
                select! {
                    recv(ctx.done()) -> _ => {}
                    default(Duration::from_secs(30)) => panic!("never cancelled"),
                }
                finished.fetch_add(1, Ordering::SeqCst);
                Ok(())
            });
        }
        let g2 = g.clone();
        let caught = std::panic::catch_unwind(AssertUnwindSafe(move || g2.wait()));
        let payload = caught.expect_err("wait did not re-raise the panic");
        assert_eq!(
            goro::panic_message(&*payload),
            "task 3 panics (expected by the test)"
        );
        assert_eq!(
            finished.load(Ordering::SeqCst),
            6,
            "wait returned before the others"
        );
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert_eq!(g.wait(), Ok(()), "the failures were handed over already");
    });
}

/// `set_limit(0)` is a rule, never a hang: `go` panics naming it; changing the limit
/// while tasks run panics as Go's does.
#[test]
fn limit_zero_and_limit_changes_are_refused() {
    run(|| {
        let g = ErrGroup::<()>::new();
        g.set_limit(0);
        let err = std::panic::catch_unwind(AssertUnwindSafe(|| g.go(|| Ok(()))))
            .expect_err("go with a limit of 0 did not panic");
        assert!(goro::panic_message(&*err).contains("set_limit(0)"));
        g.set_limit(usize::MAX); // no limit
        let (tx, rx) = channel::<()>(0);
        g.go(move || {
            let _ = rx.recv();
            Ok(())
        });
        let err = std::panic::catch_unwind(AssertUnwindSafe(|| g.set_limit(2)))
            .expect_err("set_limit while a task runs did not panic");
        assert!(goro::panic_message(&*err).contains("still active"));
        drop(tx);
        g.wait().unwrap();
        g.set_limit(2);
    });
}

/// Tasks can start tasks in the same group (a recursive crawl); the group works from
/// a plain thread too; dropping the last handle cancels the group's context.
#[test]
fn nested_tasks_threads_and_drop() {
    common::on_thread_and_coroutine(LIMIT, || {
        let (g, ctx) = ErrGroup::<String>::with_context(&background());
        let seen = Arc::new(AtomicUsize::new(0));
        fn crawl(g: ErrGroup<String>, depth: u32, seen: Arc<AtomicUsize>) {
            seen.fetch_add(1, Ordering::SeqCst);
            if depth < 4 {
                for _ in 0..3 {
                    let (g2, seen) = (g.clone(), seen.clone());
                    g.go(move || {
                        crawl(g2, depth + 1, seen);
                        Ok(())
                    });
                }
            }
        }
        crawl(g.clone(), 0, seen.clone());
        g.wait().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 1 + 3 + 9 + 27 + 81);

        assert_eq!(ctx.err(), Some(Error::Canceled), "wait left the context");
        let (g, ctx2) = ErrGroup::<()>::with_context(&background());
        assert_eq!(ctx2.err(), None);
        drop(g);
        assert_eq!(
            ctx2.err(),
            Some(Error::Canceled),
            "dropping the group left its context"
        );
    });
}
