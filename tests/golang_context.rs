//! Go's own `context` tests, ported to `goro::context`.
//!
//! Ported from the Go source tree (<https://github.com/golang/go>):
//! `src/context/context_test.go` (Go 1.19: the `XTest*` functions, run by
//! `x_test.go`) and `src/context/x_test.go` (Go 1.21 and later, where most of them
//! moved and the `AfterFunc`, `WithoutCancel` and Go 1.26 `Err`/`Done` race tests were
//! added). The Go files are Copyright The Go Authors and governed by Go's BSD-style
//! licence (<https://go.dev/LICENSE>). The code here is our own, written against
//! goro's API from the behaviour each Go test checks; each test names the Go test it
//! follows.
//!
//! How the translation goes:
//!
//! - Every test body runs on a coroutine under a watchdog (`run`), so a hang fails;
//!   Go's `quiescent(t)` bound (how long to wait for a timeout before failing) is
//!   [`QUIESCENT`].
//! - Go's `otherContext{ctx}` wraps a context in a type the package does not know, to
//!   take the code paths for foreign contexts. goro's `Context` is one concrete type
//!   with no foreign implementations, so the ports put a `with_value` layer there
//!   instead (a context that is not itself cancellable, as `otherContext` is not).
//! - Go keys values by any comparable value; goro keys them by type (the issue's
//!   rule), so the value tests use one type per Go key.
//! - Go's `CancelFunc` is a function that does nothing when dropped; goro's cancels
//!   its context when dropped. Where Go discards one (`c, _ := WithCancel(p)`) and
//!   relies on the parent or a deadline, the ports keep it (`_cancel`).
//!
// Not ported:
// - TestTODO — no counterpart: goro has one root, `background()`, which is Go's
//   Background and TODO alike.
// - TestWithValueChecksKey — not needed: keys are types, so a nil or incomparable key
//   cannot be written.
// - TestInvalidDerivedFail — not needed: there is no nil parent to derive from.
// - TestCustomContextCause — not needed: no user-defined Context types (TestCause and
//   TestCauseRace are ported below, as `cause` and `cause_race`).
// - TestCustomContextPropagation — not needed: no user-defined Context types. Its
//   companion TestCustomContextGoroutines is ported as the check that propagation
//   needs no coroutine at all.
// - TestAllocs is ported with goro's own allocation counts (a counting allocator),
//   Go's limits as the upper bounds.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{channel, Receiver, RecvTimeoutError, TryRecvError};
use goro::context::{self, CancelFunc, Context, Error};
use goro::sync::WaitGroup;
use goro::{go, select};

/// How long any one test may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(120);
/// Go's `quiescent(t)`: how long a test waits for something that must happen.
const QUIESCENT: Duration = Duration::from_secs(20);
/// Go's `shortDuration` and `veryLongDuration`.
const SHORT: Duration = Duration::from_millis(1);
const VERY_LONG: Duration = Duration::from_secs(1000 * 3600);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Runs `f` on a coroutine under the watchdog; a panic in `f` fails the test.
fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    common::on_coroutine(LIMIT, f)
}

/// Whether `rx` (a done channel) is ready now: Go's `select { case <-c.Done(): default: }`.
fn is_ready(rx: &Receiver<()>) -> bool {
    select! {
        recv(rx) -> _ => true,
        default => false,
    }
}

/// Go's testDeadline: `c` must be done within [`QUIESCENT`], with DeadlineExceeded.
fn test_deadline(c: &Context, name: &str) {
    select! {
        recv(c.done()) -> _ => {}
        default(QUIESCENT) => panic!("{name}: context not timed out after {QUIESCENT:?}"),
    }
    assert_eq!(c.err(), Some(Error::DeadlineExceeded), "{name}");
}

/// Go: TestBackground.
#[test]
fn background() {
    run(|| {
        let c = context::background();
        assert!(!is_ready(&c.done()), "background's done is ready");
        assert_eq!(c.err(), None);
        assert_eq!(c.deadline(), None);
    });
}

/// Go: TestWithCancel.
#[test]
fn with_cancel() {
    run(|| {
        let (c1, cancel) = context::background().with_cancel();
        let o = c1.with_value("other"); // Go's otherContext{c1}
        let (c2, _cancel2) = o.with_cancel();
        let contexts = [c1, o, c2];
        for (i, c) in contexts.iter().enumerate() {
            assert_eq!(c.err(), None, "c[{i}]");
            assert!(!is_ready(&c.done()), "c[{i}] done before the cancel");
        }
        cancel.cancel(); // propagates synchronously
        for (i, c) in contexts.iter().enumerate() {
            assert!(is_ready(&c.done()), "c[{i}] not done after the cancel");
            assert_eq!(c.err(), Some(Error::Canceled), "c[{i}]");
        }
    });
}

/// Go: TestParentFinishesChild. Go reads the parent's `children` map; goro's count
/// of linked children is `__children`.
#[test]
fn parent_finishes_child() {
    run(|| {
        // Go's comment: a parent with cancel, timer and value children, and a
        // cancellable child of the value child (linked to the parent, the nearest
        // cancellable ancestor).
        let (parent, cancel) = context::background().with_cancel();
        let (cancel_child, _stop1) = parent.with_cancel();
        let (timer_child, _stop2) = parent.with_timeout(VERY_LONG);
        let value_child = parent.with_value("value");
        let (value_cancel_child, _stop3) = value_child.with_cancel();
        assert_eq!(parent.__children(), 3);
        for c in [
            &parent,
            &cancel_child,
            &timer_child,
            &value_child,
            &value_cancel_child,
        ] {
            assert!(!is_ready(&c.done()));
        }
        // Those made from a done parent cannot be linked to it; those made before its
        // cancel are cancelled with it and unlinked.
        cancel.cancel();
        for (name, c) in [
            ("parent", &parent),
            ("cancel child", &cancel_child),
            ("timer child", &timer_child),
            ("value child", &value_child),
            ("value's cancel child", &value_cancel_child),
        ] {
            assert!(is_ready(&c.done()), "{name} not done");
            assert_eq!(c.err(), Some(Error::Canceled), "{name}");
        }
        assert_eq!(parent.__children(), 0, "the cancel left children linked");
        assert_eq!(cancel_child.__children(), 0);
        assert_eq!(timer_child.__children(), 0);
        // A child of the done parent is born done and never linked.
        let (late, _stop4) = parent.with_cancel();
        assert_eq!(late.err(), Some(Error::Canceled));
        assert_eq!(parent.__children(), 0);
    });
}

/// Go: TestChildFinishesFirst.
#[test]
fn child_finishes_first() {
    run(|| {
        let (cancellable, _cancel) = context::background().with_cancel();
        for (parent, lists) in [(context::background(), false), (cancellable, true)] {
            let (child, cancel_child) = parent.with_cancel();
            // The background keeps no list; a cancellable parent lists the child.
            assert_eq!(parent.__children(), usize::from(lists));
            cancel_child.cancel();
            assert_eq!(parent.__children(), 0, "the cancelled child stayed linked");
            assert!(is_ready(&child.done()));
            assert_eq!(child.err(), Some(Error::Canceled));
            assert!(!is_ready(&parent.done()), "the child cancelled its parent");
            assert_eq!(parent.err(), None);
        }
    });
}

/// Go: TestDeadline.
#[test]
fn deadline() {
    run(|| {
        let (c, _c1) = context::background().with_deadline(Instant::now() + SHORT);
        test_deadline(&c, "with_deadline");

        let (c, _c2) = context::background().with_deadline(Instant::now() + SHORT);
        let o = c.with_value("other");
        test_deadline(&o, "with_deadline+other");

        let (c, _c3) = context::background().with_deadline(Instant::now() + SHORT);
        let o = c.with_value("other");
        let (c, _c4) = o.with_deadline(Instant::now() + VERY_LONG);
        assert!(
            c.deadline().unwrap() < Instant::now() + VERY_LONG,
            "the earlier rules"
        );
        test_deadline(&c, "with_deadline+other+with_deadline");

        let (c, _c5) = context::background().with_deadline(Instant::now() - SHORT);
        test_deadline(&c, "with_deadline+in the past");

        let (c, _c6) = context::background().with_deadline(Instant::now());
        test_deadline(&c, "with_deadline+now");
    });
}

/// Go: TestTimeout.
#[test]
fn timeout() {
    run(|| {
        let (c, _c1) = context::background().with_timeout(SHORT);
        test_deadline(&c, "with_timeout");

        let (c, _c2) = context::background().with_timeout(SHORT);
        let o = c.with_value("other");
        test_deadline(&o, "with_timeout+other");

        let (c, _c3) = context::background().with_timeout(SHORT);
        let o = c.with_value("other");
        let (c, _c4) = o.with_timeout(VERY_LONG);
        test_deadline(&c, "with_timeout+other+with_timeout");
    });
}

/// Go: TestCanceledTimeout.
#[test]
fn canceled_timeout() {
    run(|| {
        let (c, _c1) = context::background().with_timeout(Duration::from_secs(1));
        let o = c.with_value("other");
        let (c, cancel) = o.with_timeout(VERY_LONG);
        cancel.cancel(); // propagates synchronously
        assert!(is_ready(&c.done()));
        assert_eq!(c.err(), Some(Error::Canceled));
    });
}

// Go's keys k1 = key1(1), k2 = key2(1) (the same int, another type) and k3 = key2(3)
// (the same type, another int): here three types.
#[derive(Debug, PartialEq)]
struct K1(&'static str);
#[derive(Debug, PartialEq)]
struct K2(&'static str);
#[derive(Debug, PartialEq)]
struct K3(&'static str);

/// Go: TestValues (keys are types: see the top).
#[test]
fn values() {
    run(|| {
        let check =
            |c: &Context, name: &str, v1: Option<&str>, v2: Option<&str>, v3: Option<&str>| {
                assert_eq!(c.value::<K1>().map(|k| k.0), v1, "{name}: K1");
                assert_eq!(c.value::<K2>().map(|k| k.0), v2, "{name}: K2");
                assert_eq!(c.value::<K3>().map(|k| k.0), v3, "{name}: K3");
            };
        let c0 = context::background();
        check(&c0, "c0", None, None, None);
        let c1 = context::background().with_value(K1("c1k1"));
        check(&c1, "c1", Some("c1k1"), None, None);
        let c2 = c1.with_value(K2("c2k2"));
        check(&c2, "c2", Some("c1k1"), Some("c2k2"), None);
        let c3 = c2.with_value(K3("c3k3"));
        check(&c3, "c3", Some("c1k1"), Some("c2k2"), Some("c3k3"));
        // Go sets k1 to nil here; a type-keyed value hides the outer one with another.
        let c4 = c3.with_value(K1("c4k1"));
        check(&c4, "c4", Some("c4k1"), Some("c2k2"), Some("c3k3"));
        check(&c3, "c3 after c4", Some("c1k1"), Some("c2k2"), Some("c3k3"));

        // Through cancellable layers (Go's otherContext cases).
        let (o1, _cancel) = c1.with_cancel();
        check(&o1, "o1", Some("c1k1"), None, None);
        let o2 = o1.with_value(K2("o2k2"));
        check(&o2, "o2", Some("c1k1"), Some("o2k2"), None);
        let (o3, _cancel3) = c4.with_timeout(VERY_LONG);
        check(&o3, "o3", Some("c4k1"), Some("c2k2"), Some("c3k3"));
    });
}

/// Counts the allocations made by each thread.
#[global_allocator]
static COUNTING: Counting = Counting;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is passed to the system allocator unchanged; the count is a
// thread-local `Cell` with a const initialiser, which allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Average allocations of `f` over `runs` runs on this thread (Go's AllocsPerRun).
fn allocs_per_run(runs: u64, mut f: impl FnMut()) -> f64 {
    f(); // warm-up, as Go's
    let before = ALLOCS.with(Cell::get);
    for _ in 0..runs {
        f();
    }
    (ALLOCS.with(Cell::get) - before) as f64 / runs as f64
}

/// Go: TestAllocs, with Go's limits as upper bounds. Runs on a plain thread, where
/// the thread-local count sees every allocation of `f` (a coroutine could move).
#[test]
fn allocs() {
    common::with_timeout(LIMIT, || {
        let bg = context::background();
        type Case<'a> = (&'static str, f64, Box<dyn FnMut() + 'a>);
        let cases: [Case<'_>; 5] = [
            (
                "context::background()",
                0.0,
                Box::new(|| drop(context::background())),
            ),
            (
                "with_value(bg, K1)",
                3.0,
                Box::new(|| {
                    let c = bg.with_value(K1("v"));
                    assert!(c.value::<K1>().is_some());
                }),
            ),
            (
                "with_timeout(bg, 1ns)",
                12.0,
                Box::new(|| {
                    let (c, _cancel) = bg.with_timeout(Duration::from_nanos(1));
                    let _ = c.done().recv();
                }),
            ),
            (
                "with_cancel(bg)",
                5.0,
                Box::new(|| {
                    let (c, cancel) = bg.with_cancel();
                    cancel.cancel();
                    let _ = c.done().recv();
                }),
            ),
            (
                "with_timeout(bg, 5ms)",
                8.0,
                Box::new(|| {
                    let (c, cancel) = bg.with_timeout(Duration::from_millis(5));
                    cancel.cancel();
                    let _ = c.done().recv();
                }),
            ),
        ];
        for (name, limit, f) in cases {
            let n = allocs_per_run(100, f);
            assert!(
                n <= limit,
                "{name}: {n} allocations per run, want <= {limit}"
            );
        }
        // Creating and cancelling a child of a cancellable parent: one allocation
        // (the node); the parent's list reuses its room.
        let (parent, _cancel) = bg.with_cancel();
        let n = allocs_per_run(1000, || {
            let (_c, cancel) = parent.with_cancel();
            cancel.cancel();
        });
        assert!(
            n <= 1.0,
            "with_cancel(parent) + cancel: {n} allocations per run"
        );
    });
}

/// Go: TestSimultaneousCancels.
#[test]
fn simultaneous_cancels() {
    run(|| {
        let (root, cancel) = context::background().with_cancel();
        let mut all: Vec<(Context, CancelFunc)> = vec![(root.clone(), cancel)];
        let mut queue = vec![root];
        // A tree of at least 100 contexts, four children each.
        let mut i = 0;
        while all.len() < 100 {
            let parent = queue[i].clone();
            i += 1;
            for _ in 0..4 {
                let (c, cancel) = parent.with_cancel();
                queue.push(c.clone());
                all.push((c, cancel));
            }
        }
        // Start all the cancels, each on its own coroutine, in a random order.
        let wg = WaitGroup::new();
        let mut contexts = Vec::new();
        let mut order: Vec<usize> = (0..all.len()).collect();
        shuffle(&mut order, 0x5eed);
        let mut slots: Vec<Option<(Context, CancelFunc)>> = all.into_iter().map(Some).collect();
        for k in order {
            let (ctx, cancel) = slots[k].take().unwrap();
            contexts.push(ctx);
            wg.go(move || cancel.cancel());
        }
        // Wait on all the contexts, in another random order.
        shuffle(&mut contexts, 7);
        for ctx in &contexts {
            select! {
                recv(ctx.done()) -> _ => {}
                default(QUIESCENT) => panic!("timed out waiting for a done channel"),
            }
        }
        let (done_tx, done_rx) = channel::<()>(1);
        go!(move || {
            wg.wait();
            let _ = done_tx.send(());
        });
        assert!(
            done_rx.recv_timeout(QUIESCENT).is_ok(),
            "timed out waiting for the cancels to return"
        );
    });
}

/// A Fisher-Yates shuffle with a fixed seed (the tests are deterministic).
fn shuffle<T>(v: &mut [T], mut seed: u64) {
    for i in (1..v.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

/// Go: TestInterlockedCancels.
#[test]
fn interlocked_cancels() {
    run(|| {
        let (parent, cancel_parent) = context::background().with_cancel();
        let (child, cancel_child) = parent.with_cancel();
        let p = parent.clone();
        go!(move || {
            let _ = p.done().recv();
            cancel_child.cancel();
        });
        cancel_parent.cancel();
        select! {
            recv(child.done()) -> _ => {}
            default(QUIESCENT) => panic!("timed out waiting for child.done()"),
        }
    });
}

// Value types for the layers tests (Go makes a fresh key per layer; here a layer's
// value is one of four types, and the innermost of each type must be found).
#[derive(Debug, PartialEq, Clone, Copy)]
struct L0(usize);
#[derive(Debug, PartialEq, Clone, Copy)]
struct L1(usize);
#[derive(Debug, PartialEq, Clone, Copy)]
struct L2(usize);
#[derive(Debug, PartialEq, Clone, Copy)]
struct L3(usize);

/// Go's testLayers: at least 30 random layers of values, cancels and timeouts, with at
/// least one of each; then a random cancel (or the timeouts) must end the innermost
/// context, and every value must still be found.
fn test_layers(seed: u64, test_timeout: bool) {
    let mut rng = seed | 1;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut ctx = context::background();
    let mut cancels = Vec::new();
    let mut timers = 0;
    let mut latest: HashMap<u64, usize> = HashMap::new();
    let mut i = 0;
    while i < 30 || timers == 0 || cancels.is_empty() || latest.is_empty() {
        match next(3) {
            0 => {
                let kind = next(4);
                ctx = match kind {
                    0 => ctx.with_value(L0(i)),
                    1 => ctx.with_value(L1(i)),
                    2 => ctx.with_value(L2(i)),
                    _ => ctx.with_value(L3(i)),
                };
                latest.insert(kind, i);
            }
            1 => {
                let (c, cancel) = ctx.with_cancel();
                ctx = c;
                cancels.push(cancel);
            }
            _ => {
                let d = if test_timeout { SHORT } else { VERY_LONG };
                let (c, cancel) = ctx.with_timeout(d);
                ctx = c;
                cancels.push(cancel);
                timers += 1;
            }
        }
        i += 1;
    }
    let check_values = |ctx: &Context, when: &str| {
        let found = [
            ctx.value::<L0>().map(|v| v.0),
            ctx.value::<L1>().map(|v| v.0),
            ctx.value::<L2>().map(|v| v.0),
            ctx.value::<L3>().map(|v| v.0),
        ];
        for (kind, want) in found.iter().enumerate() {
            assert_eq!(
                *want,
                latest.get(&(kind as u64)).copied(),
                "seed={seed} {when}: L{kind}"
            );
        }
    };
    if !test_timeout {
        assert!(
            !is_ready(&ctx.done()),
            "seed={seed}: ctx should not be canceled yet"
        );
    }
    check_values(&ctx, "before cancel");
    if test_timeout {
        select! {
            recv(ctx.done()) -> _ => {}
            default(QUIESCENT) => panic!("seed={seed}: ctx should have timed out"),
        }
        check_values(&ctx, "after timeout");
    } else {
        let k = next(cancels.len() as u64) as usize;
        cancels[k].cancel();
        assert!(is_ready(&ctx.done()), "seed={seed}: ctx should be canceled");
        check_values(&ctx, "after cancel");
    }
}

/// Go: TestLayersCancel.
#[test]
fn layers_cancel() {
    run(|| {
        for seed in 1..20 {
            test_layers(seed * 7919, false);
        }
    });
}

/// Go: TestLayersTimeout.
#[test]
fn layers_timeout() {
    run(|| {
        for seed in 1..20 {
            test_layers(seed * 104_729, true);
        }
    });
}

/// Go: TestCancelRemoves: a cancelled child leaves its parent's list (and here, a
/// dropped `CancelFunc`, which cancels, too).
#[test]
fn cancel_removes() {
    run(|| {
        let (ctx, _cancel) = context::background().with_cancel();
        assert_eq!(ctx.__children(), 0);
        let (_child, cancel) = ctx.with_cancel();
        assert_eq!(ctx.__children(), 1);
        cancel.cancel();
        assert_eq!(ctx.__children(), 0);

        let (_child, cancel) = ctx.with_timeout(Duration::from_secs(60));
        assert_eq!(ctx.__children(), 1);
        cancel.cancel();
        assert_eq!(ctx.__children(), 0);

        let (child, cancel) = ctx.with_timeout(Duration::from_secs(60));
        assert_eq!(ctx.__children(), 1);
        drop(cancel);
        assert_eq!(ctx.__children(), 0);
        assert_eq!(child.err(), Some(Error::Canceled));
    });
}

/// Go: TestWithCancelCanceledParent (without its cause half).
#[test]
fn with_cancel_canceled_parent() {
    run(|| {
        let (parent, pcancel) = context::background().with_cancel();
        pcancel.cancel();
        let (c, _cancel) = parent.with_cancel();
        assert!(
            is_ready(&c.done()),
            "child not done immediately upon construction"
        );
        assert_eq!(c.err(), Some(Error::Canceled));
    });
}

/// Go: TestWithCancelSimultaneouslyCanceledParent (without its cause half).
#[test]
fn with_cancel_simultaneously_canceled_parent() {
    run(|| {
        for _ in 0..100 {
            let (parent, pcancel) = context::background().with_cancel();
            go!(move || pcancel.cancel());
            let (c, _cancel) = parent.with_cancel();
            select! {
                recv(c.done()) -> _ => {}
                default(QUIESCENT) => panic!("child of a cancelled parent never done"),
            }
            assert_eq!(c.err(), Some(Error::Canceled));
        }
    });
}

/// Go: TestDeadlineExceededSupportsTimeout (Go's `Timeout() bool`; here also the
/// `io::Error` kind a timeout becomes).
#[test]
fn deadline_exceeded_supports_timeout() {
    assert!(Error::DeadlineExceeded.is_timeout());
    assert!(!Error::Canceled.is_timeout());
    let io: std::io::Error = Error::DeadlineExceeded.into();
    assert_eq!(io.kind(), std::io::ErrorKind::TimedOut);
    assert_eq!(
        Error::DeadlineExceeded.to_string(),
        "context deadline exceeded"
    );
    assert_eq!(Error::Canceled.to_string(), "context canceled");
}

/// Go: TestCustomContextGoroutines. Go counts the goroutines it starts to propagate a
/// cancel into contexts it does not know; goro has no such contexts, and propagation,
/// deadlines and creation start none at all. Alone in a child process, so that no
/// other test's coroutines are counted.
#[test]
fn custom_context_goroutines() {
    if common::alone("custom_context_goroutines", &[]) {
        return;
    }
    common::with_timeout(LIMIT, || {
        let before = goro::num_goroutines();
        let (root, cancel) = context::background().with_cancel();
        let mut keep = Vec::new();
        for i in 0..1000 {
            let (c, f) = root.with_cancel();
            let (d, g) = c.with_timeout(Duration::from_secs(60 + i));
            let v = d.with_value(i);
            let (e, h) = v.with_cancel();
            keep.push((c, f, d, g, e, h));
        }
        assert_eq!(
            goro::num_goroutines(),
            before,
            "creating contexts started coroutines"
        );
        cancel.cancel();
        assert_eq!(
            goro::num_goroutines(),
            before,
            "cancelling started coroutines"
        );
        assert!(keep
            .iter()
            .all(|(_, _, _, _, e, _)| e.err() == Some(Error::Canceled)));
        let (short, _stop) = context::background().with_timeout(SHORT);
        let _ = short.done().recv();
        assert_eq!(
            goro::num_goroutines(),
            before,
            "a deadline started a coroutine"
        );
    });
}

/// Go: TestWithoutCancel.
#[test]
fn without_cancel() {
    run(|| {
        let (ctx, cancel) = context::background()
            .with_value(K1("value"))
            .with_timeout(SHORT);
        let ctx = ctx.without_cancel();
        assert_eq!(ctx.deadline(), None);
        assert!(!is_ready(&ctx.done()));
        cancel.cancel();
        assert_eq!(ctx.err(), None);
        assert!(!is_ready(&ctx.done()));
        assert_eq!(ctx.value::<K1>(), Some(&K1("value")));
    });
}

/// Go: TestAfterFuncCalledAfterCancel.
#[test]
fn after_func_called_after_cancel() {
    run(|| {
        let (ctx, cancel) = context::background().with_cancel();
        let (tx, rx) = channel::<()>(0);
        let stop = ctx.after_func(move || drop(tx));
        assert!(
            rx.recv_timeout(SHORT) == Err(RecvTimeoutError::Timeout),
            "after_func called before the context is done"
        );
        cancel.cancel();
        assert!(
            rx.recv_timeout(QUIESCENT) == Err(RecvTimeoutError::Closed),
            "not called"
        );
        assert!(!stop.stop(), "stop() = true after the function ran");
    });
}

/// Go: TestAfterFuncCalledAfterTimeout.
#[test]
fn after_func_called_after_timeout() {
    run(|| {
        let (ctx, _cancel) = context::background().with_timeout(SHORT);
        let (tx, rx) = channel::<()>(0);
        ctx.after_func(move || drop(tx));
        assert!(
            rx.recv_timeout(QUIESCENT) == Err(RecvTimeoutError::Closed),
            "not called"
        );
    });
}

/// Go: TestAfterFuncCalledImmediately.
#[test]
fn after_func_called_immediately() {
    run(|| {
        let (ctx, cancel) = context::background().with_cancel();
        cancel.cancel();
        let (tx, rx) = channel::<()>(0);
        ctx.after_func(move || drop(tx));
        assert!(
            rx.recv_timeout(QUIESCENT) == Err(RecvTimeoutError::Closed),
            "not called for a context done already"
        );
    });
}

/// Go: TestAfterFuncNotCalledAfterStop.
#[test]
fn after_func_not_called_after_stop() {
    run(|| {
        let (ctx, cancel) = context::background().with_cancel();
        let called = Arc::new(AtomicBool::new(false));
        let c = called.clone();
        let stop = ctx.after_func(move || c.store(true, Ordering::SeqCst));
        assert!(stop.stop(), "stop() = false before the context was done");
        assert_eq!(
            ctx.__after_funcs(),
            0,
            "a stopped function stayed registered"
        );
        cancel.cancel();
        goro::time::sleep(Duration::from_millis(10));
        assert!(!called.load(Ordering::SeqCst), "called after stop");
        assert!(!stop.stop(), "stop() = true twice");
    });
}

/// Go: TestAfterFuncCalledAsynchronously: cancel does not wait for the functions.
#[test]
fn after_func_called_asynchronously() {
    run(|| {
        let (ctx, cancel) = context::background().with_cancel();
        let (tx, rx) = channel::<()>(0);
        let stop = ctx.after_func(move || {
            let _ = tx.send(()); // waits until the test receives, after cancel returned
        });
        cancel.cancel();
        assert!(rx.recv_timeout(QUIESCENT).is_ok(), "not called");
        stop.stop();
    });
}

/// Go: TestContextErrDoneRace (go.dev/issue/75533): once `err` says done, the done
/// channel taken before is closed.
#[test]
fn context_err_done_race() {
    run(|| {
        for _ in 0..1000 {
            let (ctx, cancel) = context::background().with_cancel();
            let done = ctx.done();
            go!(move || cancel.cancel());
            while ctx.err().is_none() {
                goro::yield_now();
            }
            assert_eq!(
                done.try_recv(),
                Err(TryRecvError::Closed),
                "err set, done open"
            );
        }
    });
}

/// The other direction of the same rule, with the receiver woken by the close: it
/// finds the error (many receivers on one done channel, from coroutines and a
/// thread).
#[test]
fn woken_by_done_err_is_set() {
    run(|| {
        for _ in 0..200 {
            let (ctx, cancel) = context::background().with_cancel();
            let seen = Arc::new(AtomicU32::new(0));
            let wg = WaitGroup::new();
            for _ in 0..4 {
                let (ctx, seen) = (ctx.clone(), seen.clone());
                wg.go(move || {
                    let _ = ctx.done().recv();
                    if ctx.err().is_some() {
                        seen.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
            let c = ctx.clone();
            let thread = std::thread::spawn(move || {
                let _ = c.done().recv();
                c.err()
            });
            cancel.cancel();
            wg.wait();
            assert_eq!(seen.load(Ordering::SeqCst), 4);
            assert_eq!(thread.join().unwrap(), Some(Error::Canceled));
        }
    });
}

/// What `Context::cause` says, for comparing with Go's expectations: `None`, the
/// context error it is (`Canceled`, `DeadlineExceeded`), or another error's text.
fn cause_of(ctx: &Context) -> Option<String> {
    ctx.cause().map(|c| match (*c).downcast_ref::<Error>() {
        Some(e) => format!("{e:?}"),
        None => c.to_string(),
    })
}

/// Go: TestCause (x_test.go), every case of its table, in order.
#[test]
fn cause() {
    run(|| {
        let forever = Duration::from_secs(1_000_000);
        type Case = (
            &'static str,
            Box<dyn Fn() -> (Context, Vec<Box<dyn std::any::Any>>)>,
            Option<Error>,
            Option<&'static str>,
        );
        let keep = |v: Vec<Box<dyn std::any::Any>>| v;
        let cases: Vec<Case> = vec![
            (
                "Background",
                Box::new(move || (context::background(), keep(vec![]))),
                None,
                None,
            ),
            (
                "WithCancel",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_cancel();
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::Canceled),
                Some("Canceled"),
            ),
            (
                "WithCancelCause",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_cancel_cause();
                    cancel.cancel("parentCause");
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::Canceled),
                Some("parentCause"),
            ),
            (
                "WithCancelCause: parent cause before child",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel_cause();
                    let (ctx, cancel_child) = ctx.with_cancel_cause();
                    cancel_parent.cancel("parentCause");
                    cancel_child.cancel("childCause");
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("parentCause"),
            ),
            (
                "WithCancelCause: parent cause after child",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel_cause();
                    let (ctx, cancel_child) = ctx.with_cancel_cause();
                    cancel_child.cancel("childCause");
                    cancel_parent.cancel("parentCause");
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("childCause"),
            ),
            (
                "WithCancelCause: parent cause before nil",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel_cause();
                    let (ctx, cancel_child) = ctx.with_cancel();
                    cancel_parent.cancel("parentCause");
                    cancel_child.cancel();
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("parentCause"),
            ),
            (
                "WithCancelCause: parent cause after nil",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel_cause();
                    let (ctx, cancel_child) = ctx.with_cancel();
                    cancel_child.cancel();
                    cancel_parent.cancel("parentCause");
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("Canceled"),
            ),
            (
                "WithCancelCause: child cause after nil",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel();
                    let (ctx, cancel_child) = ctx.with_cancel_cause();
                    cancel_parent.cancel();
                    cancel_child.cancel("childCause");
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("Canceled"),
            ),
            (
                "WithCancelCause: child cause before nil",
                Box::new(move || {
                    let (ctx, cancel_parent) = context::background().with_cancel();
                    let (ctx, cancel_child) = ctx.with_cancel_cause();
                    cancel_child.cancel("childCause");
                    cancel_parent.cancel();
                    (
                        ctx,
                        keep(vec![Box::new(cancel_parent), Box::new(cancel_child)]),
                    )
                }),
                Some(Error::Canceled),
                Some("childCause"),
            ),
            (
                "WithTimeout",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_timeout(Duration::ZERO);
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::DeadlineExceeded),
                Some("DeadlineExceeded"),
            ),
            (
                "WithTimeout canceled",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_timeout(forever);
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::Canceled),
                Some("Canceled"),
            ),
            (
                "WithTimeoutCause",
                Box::new(move || {
                    let (ctx, cancel) =
                        context::background().with_timeout_cause(Duration::ZERO, "tooSlow");
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::DeadlineExceeded),
                Some("tooSlow"),
            ),
            (
                "WithTimeoutCause canceled",
                Box::new(move || {
                    let (ctx, cancel) =
                        context::background().with_timeout_cause(forever, "tooSlow");
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                Some(Error::Canceled),
                Some("Canceled"),
            ),
            (
                "WithTimeoutCause stacked",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_cancel_cause();
                    let (ctx, c2) = ctx.with_timeout_cause(Duration::ZERO, "tooSlow");
                    cancel.cancel("finishedEarly");
                    (ctx, keep(vec![Box::new(cancel), Box::new(c2)]))
                }),
                Some(Error::DeadlineExceeded),
                Some("tooSlow"),
            ),
            (
                "WithTimeoutCause stacked canceled",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_cancel_cause();
                    let (ctx, c2) = ctx.with_timeout_cause(forever, "tooSlow");
                    cancel.cancel("finishedEarly");
                    (ctx, keep(vec![Box::new(cancel), Box::new(c2)]))
                }),
                Some(Error::Canceled),
                Some("finishedEarly"),
            ),
            (
                "WithoutCancel",
                Box::new(move || (context::background().without_cancel(), keep(vec![]))),
                None,
                None,
            ),
            (
                "WithoutCancel canceled",
                Box::new(move || {
                    let (ctx, cancel) = context::background().with_cancel_cause();
                    let ctx = ctx.without_cancel();
                    cancel.cancel("finishedEarly");
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                None,
                None,
            ),
            (
                "WithoutCancel timeout",
                Box::new(move || {
                    let (ctx, cancel) =
                        context::background().with_timeout_cause(Duration::ZERO, "tooSlow");
                    let ctx = ctx.without_cancel();
                    cancel.cancel();
                    (ctx, keep(vec![Box::new(cancel)]))
                }),
                None,
                None,
            ),
        ];
        for (name, make, err, cause) in cases {
            let (ctx, _keep) = make();
            assert_eq!(ctx.err(), err, "{name}: err");
            assert_eq!(cause_of(&ctx).as_deref(), cause, "{name}: cause");
        }
    });
}

/// Go: TestCauseRace. A cause set on another coroutine is seen whole by a poll of
/// `cause()` (not only after waiting on `done()`).
#[test]
fn cause_race() {
    run(|| {
        for _ in 0..100 {
            let (ctx, cancel) = context::background().with_cancel_cause();
            let h = go!(move || cancel.cancel("TestCauseRace"));
            let deadline = Instant::now() + QUIESCENT;
            loop {
                if let Some(c) = ctx.cause() {
                    assert_eq!(c.to_string(), "TestCauseRace");
                    break;
                }
                assert!(Instant::now() < deadline, "no cause seen");
                goro::yield_now();
            }
            h.join().unwrap();
        }
    });
}
