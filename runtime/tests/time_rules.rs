//! Go's timer rules as the runtime enforces them (Go commit b78b427b): positive
//! deadlines, non-negative periods, and overflow pinned rather than wrapped.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro_runtime::time::{runtime_nanotime, RawTimer};

fn counting() -> (RawTimer, Arc<AtomicUsize>) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (
        RawTimer::new(move || {
            n2.fetch_add(1, Ordering::SeqCst);
        }),
        n,
    )
}

fn within<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let t = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t.elapsed() < limit, "timed out after {limit:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Go's TestOverflowPeriodRuntimeTimer: a timer that fires at once with a period of
/// i64::MAX would overflow its next deadline. It must fire once, pin its next deadline
/// to the end of time, and leave other timers working.
#[test]
fn overflow_period_runtime_timer() {
    let (t, n) = counting();
    t.reset_raw(runtime_nanotime(), i64::MAX);
    within(Duration::from_secs(20), || {
        (n.load(Ordering::SeqCst) >= 1).then_some(())
    });
    // Other timers still fire (the smoke test Go uses: a 25 ms timer).
    let (other, m) = counting();
    other.reset(Duration::from_millis(25));
    within(Duration::from_secs(20), || {
        (m.load(Ordering::SeqCst) == 1).then_some(())
    });
    assert_eq!(
        n.load(Ordering::SeqCst),
        1,
        "the overflowing timer fired again"
    );
    assert!(
        t.stop(),
        "the overflowing timer is still pending, at the end of time"
    );
}

#[test]
#[should_panic(expected = "timer when must be positive")]
fn zero_when_panics() {
    RawTimer::new(|| ()).reset_raw(0, 0);
}

#[test]
#[should_panic(expected = "timer when must be positive")]
fn negative_when_panics() {
    RawTimer::new(|| ()).reset_raw(-5, 0);
}

#[test]
#[should_panic(expected = "timer period must be non-negative")]
fn negative_period_panics() {
    RawTimer::new(|| ()).reset_raw(1, -1);
}

#[test]
#[should_panic(expected = "timer period must be positive")]
fn zero_period_ticker_panics() {
    RawTimer::new(|| ()).reset_at(Instant::now(), Some(Duration::ZERO));
}

/// A bad reset leaves a pending timer as it was.
#[test]
fn bad_reset_changes_nothing() {
    let (t, n) = counting();
    t.reset(Duration::from_millis(5));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| t.reset_raw(-1, 0)));
    assert!(r.is_err());
    within(Duration::from_secs(20), || {
        (n.load(Ordering::SeqCst) == 1).then_some(())
    });
}

/// A periodic timer fires once per period and skips missed periods in one step.
#[test]
fn periodic_timer_fires_each_period() {
    let (t, n) = counting();
    t.reset_at(Instant::now(), Some(Duration::from_millis(2)));
    within(Duration::from_secs(20), || {
        (n.load(Ordering::SeqCst) >= 5).then_some(())
    });
    assert!(t.stop());
    let seen = n.load(Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(n.load(Ordering::SeqCst), seen, "fired after stop");
}

/// A deadline computed from Duration::MAX is pinned, and such a timer never fires.
#[test]
fn duration_max_never_fires() {
    let (t, n) = counting();
    t.reset(Duration::MAX);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(n.load(Ordering::SeqCst), 0);
    assert!(t.stop());
}
