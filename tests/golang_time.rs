//! Go's own timer tests that need `time.NewTimer`, ported to `goro::chan::Timer` (and
//! its `Ticker`), with Go 1.23's synchronous timer channels.
//!
//! Ported from the Go source tree (<https://github.com/golang/go>, Go 1.23 and later):
//! `src/time/sleep_test.go` (TestReset, TestStopResult, TestResetResult,
//! TestMultiWakeupTimer, TestAfterStop, TestZeroTimer, TestTimerModifiedEarlier,
//! TestAdjustTimers) and `src/time/tick_test.go` (the Go 1.23 channel-timer tests
//! TestChan, TestAfterTimes, TestTickTimes). The Go files are Copyright The Go Authors
//! and governed by Go's BSD-style licence (<https://go.dev/LICENSE>). The code here is
//! our own, written against goro's API from the behaviour each Go test checks; each
//! test names the Go test it follows.
//!
//! How the translation goes:
//!
//! - Every test body runs on a coroutine under a watchdog (`run`); Go's goroutines
//!   are coroutines, `time.Sleep` is `goro::time::sleep`, `time.AfterFunc` is
//!   `goro::time::after_func`, `<-t.C` is `t.recv()` or a receive from
//!   `t.receiver()`.
//! - Go runs several of these under `GODEBUG=asynctimerchan=0,1,2` (the pre-1.23
//!   asynchronous channels and the 1.23 synchronous ones). goro has only the
//!   synchronous semantics, so each runs once, with the checks Go makes for them.
//! - Go's `newTimerFunc` (a timer built from `AfterFunc` and a buffered channel, to
//!   test the non-channel code path) has no counterpart: the ports that use it run on
//!   `chan::Timer`.
//
// Not ported:
// - TestTimerGC — not needed: it counts heap objects after runtime.GC to check that
//   unreferenced timers are collected; goro has no GC, and a dropped Timer stops and
//   frees its timer at once (chan_timer.rs checks the stop).
// - TestZeroTimerResetPanics, TestZeroTimerStopPanics — not needed: there is no
//   uninitialised Timer value in Rust.
// - TestMultiWakeupTicker — not asked for here: its Ticker twin of
//   TestMultiWakeupTimer (100 000 selects each bounded by After(1 ms)) is long.
//
// Scaled down:
// - TestZeroTimer: 100 000 rounds instead of 1 000 000 (Go skips it under -short).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::chan::{after, channel, tick, Receiver, Timer};
use goro::sync::WaitGroup;
use goro::time::{sleep, Ticker};
use goro::{go, select};

/// How long any one test may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(240);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Runs `f` on a coroutine under the watchdog; a panic in `f` fails the test.
fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    common::on_coroutine(LIMIT, f)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const HOUR: Duration = Duration::from_secs(3600);
const NS: Duration = Duration::from_nanos(1);

/// Whether a value is ready on `rx` now (Go's `select { case <-C: default: }`).
fn ready(rx: &Receiver<Instant>) -> bool {
    select! {
        recv(rx) -> v => { v.unwrap(); true }
        default => false,
    }
}

/// Go's testReset.
fn test_reset(d: Duration) -> Result<(), String> {
    let t0 = Timer::new(2 * d);
    sleep(d);
    if !t0.reset(3 * d) {
        return Err("resetting unfired timer returned false".into());
    }
    sleep(2 * d);
    if ready(t0.receiver()) {
        return Err("timer fired early".into());
    }
    sleep(2 * d);
    if !ready(t0.receiver()) {
        return Err("reset timer did not fire".into());
    }
    if t0.reset(ms(50)) {
        return Err("resetting expired timer returned true".into());
    }
    Ok(())
}

/// Go: TestReset (retried with doubling durations, as Go does on slow machines).
#[test]
fn reset() {
    run(|| {
        let mut d = ms(1);
        loop {
            match test_reset(d) {
                Ok(()) => break,
                Err(e) => {
                    d *= 2;
                    assert!(d <= Duration::from_secs(10), "{e}");
                    eprintln!("{e}; trying duration {d:?}");
                }
            }
        }
    });
}

/// Go's testStopResetResult (its synchronous-channel variant): whenever the stop (or
/// reset) of the timer that lost a race says nothing was pending, its value can be
/// received; when it says something was, nothing is left.
fn test_stop_reset_result(test_stop: bool) {
    const N: usize = 1000;
    let stop_or_reset = move |t: &Timer| if test_stop { t.stop() } else { t.reset(HOUR) };
    let (start_tx, start_rx) = channel::<()>(0);
    let wg = WaitGroup::new();
    for _ in 0..N {
        let start = start_rx.clone();
        wg.go(move || {
            let _ = start.recv();
            for _ in 0..100 {
                let t1 = Timer::new(ms(1));
                let t2 = Timer::new(ms(1));
                let other = select! {
                    recv(t1.receiver()) -> _ => &t2,
                    recv(t2.receiver()) -> _ => &t1,
                };
                if !stop_or_reset(other) {
                    // The test fails if this waits too long.
                    let got = other.receiver().recv_timeout(Duration::from_secs(30));
                    assert!(got.is_ok(), "not pending, and no value to receive");
                }
            }
        });
    }
    drop((start_tx, start_rx)); // close(start)
    wg.wait();
}

/// Go: TestStopResult.
#[test]
fn stop_result() {
    run(|| test_stop_reset_result(true));
}

/// Go: TestResetResult.
#[test]
fn reset_result() {
    run(|| test_stop_reset_result(false));
}

/// Go: TestMultiWakeupTimer: many coroutines polling and resetting one timer.
#[test]
fn multi_wakeup_timer() {
    run(|| {
        let timer = Arc::new(Timer::new(NS));
        let wg = WaitGroup::new();
        for _ in 0..goro::maxprocs() {
            let timer = timer.clone();
            wg.go(move || {
                for _ in 0..10_000 {
                    ready(timer.receiver());
                    timer.reset(NS);
                }
            });
        }
        wg.wait();
    });
}

/// Go: TestAfterStop (its NewTimer variant). Timing-dependent in Go too: it passes if
/// one of five attempts does.
#[test]
fn after_stop() {
    run(|| {
        let mut errs = Vec::new();
        for _ in 0..5 {
            let _noise = goro::time::after_func(ms(100), || {});
            let t0 = Timer::new(ms(50));
            let (c1_tx, c1) = channel::<bool>(1);
            let t1 = goro::time::after_func(ms(150), move || {
                let _ = c1_tx.try_send(true);
            });
            let c2 = after(ms(200));
            if !t0.stop() {
                errs.push("failed to stop event 0");
                continue;
            }
            if !t1.stop() {
                errs.push("failed to stop event 1");
                continue;
            }
            c2.recv().unwrap();
            let stray = select! {
                recv(t0.receiver()) -> _ => Some("event 0 was not stopped"),
                recv(c1) -> _ => Some("event 1 was not stopped"),
                default => None,
            };
            if let Some(e) = stray {
                errs.push(e);
                continue;
            }
            if t1.stop() {
                errs.push("Stop returned true twice");
                continue;
            }
            return;
        }
        panic!("saw {} errors: {errs:?}", errs.len());
    });
}

/// Go: TestZeroTimer (its NewTimer variant): a zero timer is never missed.
#[test]
fn zero_timer() {
    run(|| {
        for _ in 0..100_000 {
            let s = Instant::now();
            let t = Timer::new(Duration::ZERO);
            t.recv();
            let took = s.elapsed();
            assert!(took < Duration::from_secs(2), "a zero timer took {took:?}");
        }
    });
}

/// Go: TestTimerModifiedEarlier: rapidly moving a timer earlier does not drop it.
#[test]
fn timer_modified_earlier() {
    run(|| {
        let mut fail = 0;
        for _ in 0..1000 {
            let timer = Timer::new(HOUR);
            for _ in 0..10 {
                if !timer.stop() {
                    timer.recv(); // never reached with synchronous channels
                }
                timer.reset(Duration::ZERO); // Go: Until(Unix(0, 0)), far in the past
            }
            let deadline = Timer::new(Duration::from_secs(10));
            let now = Instant::now();
            select! {
                recv(timer.receiver()) -> _ => {
                    if now.elapsed() > Duration::from_secs(8) {
                        fail += 1;
                    }
                }
                recv(deadline.receiver()) -> _ => panic!("deadline expired"),
            }
        }
        assert_eq!(fail, 0, "{fail} failures");
    });
}

/// Go: TestAdjustTimers: moving timers earlier and later in a random order loses
/// none of their firings.
#[test]
fn adjust_timers() {
    run(|| {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut rand = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let mut timers: Vec<Option<Timer>> = (0..100).map(|_| None).collect();
        let mut states = [0u32; 100];
        let mut indices: Vec<usize> = (0..100).collect();
        for i in (1..indices.len()).rev() {
            indices.swap(i, rand(i + 1));
        }
        while !indices.is_empty() {
            let ii = rand(indices.len());
            let i = indices[ii];
            let state = states[i];
            states[i] += 1;
            match state {
                0 => timers[i] = Some(Timer::new(Duration::ZERO)),
                1 => {
                    timers[i].as_ref().unwrap().recv(); // the timer is idle now
                }
                // Reset to long durations, which are cancelled.
                2 | 4 | 6 => {
                    let d = [
                        Duration::from_secs(60),
                        Duration::from_secs(180),
                        Duration::from_secs(120),
                    ][(state as usize - 2) / 2];
                    assert!(
                        !timers[i].as_ref().unwrap().reset(d),
                        "shouldn't be active ({state})"
                    );
                }
                // Stop (and drain, if need be) a long timer.
                3 | 5 | 7 => {
                    let t = timers[i].as_ref().unwrap();
                    if !t.stop() {
                        t.recv();
                    }
                }
                // A short timer the next state receives without a long wait.
                8 => assert!(
                    !timers[i].as_ref().unwrap().reset(Duration::ZERO),
                    "reset returned true"
                ),
                9 => {
                    let now = Instant::now();
                    timers[i].as_ref().unwrap().recv();
                    let took = now.elapsed();
                    assert!(took < ms(750), "timer {i} took {took:?} to complete");
                }
                _ => {
                    indices.swap_remove(ii);
                }
            }
        }
    });
}

/// What Go's testTimerChan needs of a timer: its channel, stop and reset with Go's
/// results.
trait GoTimer: Send + Sync {
    fn c(&self) -> &Receiver<Instant>;
    fn stop(&self) -> bool;
    fn reset(&self, d: Duration) -> bool;
    fn is_ticker(&self) -> bool;
}

impl GoTimer for Timer {
    fn c(&self) -> &Receiver<Instant> {
        self.receiver()
    }
    fn stop(&self) -> bool {
        Timer::stop(self)
    }
    fn reset(&self, d: Duration) -> bool {
        Timer::reset(self, d)
    }
    fn is_ticker(&self) -> bool {
        false
    }
}

/// Go's tickerTimer: a Ticker whose stop and reset say whether it was running.
struct TickerTimer {
    ticker: Ticker,
    stopped: AtomicBool,
}

impl GoTimer for TickerTimer {
    fn c(&self) -> &Receiver<Instant> {
        self.ticker.receiver()
    }
    fn stop(&self) -> bool {
        let pending = !self.stopped.swap(true, Ordering::SeqCst);
        self.ticker.stop();
        pending
    }
    fn reset(&self, d: Duration) -> bool {
        let pending = !self.stopped.swap(false, Ordering::SeqCst);
        self.ticker.reset(d);
        pending
    }
    fn is_ticker(&self) -> bool {
        true
    }
}

/// Go's testTimerChan with `synctimerchan`: the Go 1.23 semantics, where no value
/// from before a stop or reset is ever received after it.
fn test_timer_chan(tim: Arc<dyn GoTimer>) {
    const SCHED: Duration = Duration::from_millis(10);
    const TRIES: usize = 100;
    let is_ticker = tim.is_ticker();
    let no_tick = |tim: &dyn GoTimer| assert!(!ready(tim.c()), "extra tick");
    let assert_tick = |tim: &dyn GoTimer| {
        if ready(tim.c()) {
            return;
        }
        for _ in 0..TRIES {
            sleep(SCHED);
            if ready(tim.c()) {
                return;
            }
        }
        panic!("missing tick");
    };
    let not_done = |done: &Receiver<bool>| assert!(done.try_recv().is_err(), "early done");
    let wait_done = |done: &Receiver<bool>| {
        for _ in 0..TRIES {
            sleep(SCHED);
            if done.try_recv().is_ok() || done.is_closed() {
                return;
            }
        }
        panic!("never got done");
    };

    // A simple stop; the timer is never in the heap.
    tim.stop();
    no_tick(&*tim);
    // Modify a timer not in the heap.
    tim.reset(Duration::from_secs(10_000));
    no_tick(&*tim);
    // Modify a timer in the heap.
    tim.reset(NS);
    sleep(SCHED);
    assert_tick(&*tim);

    // Sleep long enough for a second tick of a ticker: reset loses nothing stale.
    sleep(SCHED);
    tim.reset(Duration::from_secs(10_000));
    no_tick(&*tim);

    // A stop while a coroutine is blocked on the channel.
    tim.reset(Duration::from_secs(10_000));
    let (done_tx, done) = channel::<bool>(0);
    not_done(&done);
    let c = tim.c().clone();
    go!(move || {
        let _ = c.recv();
        drop(done_tx); // close(done)
    });
    sleep(SCHED);
    not_done(&done);
    // Reset far away while the receiver waits.
    tim.reset(Duration::from_secs(20_000));
    sleep(SCHED);
    not_done(&done);
    // An imminent reset while the receiver waits.
    tim.reset(NS);
    wait_done(&done);
    // A ticker ticked again by now (1 ns apart); a timer is spent.
    if is_ticker {
        assert_tick(&*tim);
    } else {
        no_tick(&*tim);
    }
    tim.stop();
    no_tick(&*tim);

    // Again with selects, two coroutines waiting.
    tim.reset(Duration::from_secs(10_000));
    let (done_tx, done) = channel::<bool>(2);
    let (stop_tx, stop) = channel::<bool>(0);
    let mut waiters = Vec::new();
    for _ in 0..2 {
        let (c, done_tx, stop) = (tim.c().clone(), done_tx.clone(), stop.clone());
        waiters.push(go!(move || {
            select! {
                recv(c) -> _ => { let _ = done_tx.send(true); }
                recv(stop) -> _ => {}
            }
        }));
    }
    sleep(SCHED);
    not_done(&done);
    tim.reset(SCHED / 2);
    sleep(SCHED);
    wait_done(&done);
    tim.stop();
    drop(stop_tx); // close(stop)
    for w in waiters {
        w.join().unwrap();
    }
    if is_ticker {
        // A second waiter may have had a tick too, and one more may sit in C.
        let _ = done.try_recv();
        let _ = tim.c().try_recv();
    }
    not_done(&done);

    // Receivers of a stopped timer get nothing.
    let (stop_tx, stop) = channel::<bool>(0);
    let (done_tx, done) = channel::<bool>(2);
    for _ in 0..2 {
        let (c, done_tx, stop) = (tim.c().clone(), done_tx.clone(), stop.clone());
        go!(move || {
            select! {
                recv(c) -> _ => panic!("unexpected data"),
                recv(stop) -> _ => {}
            }
            let _ = done_tx.send(true);
        });
    }
    sleep(SCHED);
    drop(stop_tx);
    wait_done(&done);
    wait_done(&done);

    // Stop and Reset keep old values from being received (go.dev/issue/37196).
    tim.reset(NS);
    sleep(ms(10));
    assert!(tim.stop(), "stop() = false, want true");
    no_tick(&*tim);
    tim.reset(HOUR);
    no_tick(&*tim);
    assert!(tim.reset(NS), "reset() = false, want true");
    assert_tick(&*tim);
    sleep(ms(10));
    if is_ticker {
        assert_tick(&*tim);
        sleep(ms(10));
    } else {
        no_tick(&*tim);
    }
    assert_eq!(tim.reset(HOUR), is_ticker, "reset() of a spent timer");
    no_tick(&*tim);
}

/// Go: TestChan (the synchronous variant: `asynctimerchan=0`), on a Timer and a
/// Ticker.
#[test]
fn chan() {
    run(|| {
        test_timer_chan(Arc::new(Timer::new(Duration::from_secs(10_000))));
        test_timer_chan(Arc::new(TickerTimer {
            ticker: Ticker::new(Duration::from_secs(10_000)),
            stopped: AtomicBool::new(false),
        }));
    });
}

/// Go's TestAfterTimes and TestTickTimes: a channel made by `make(10ms)` and read
/// 500 ms later gives the instant its first value was due, not when it was read (ten
/// tries, as Go's, against long scheduling delays).
fn first_value_is_the_due_instant(what: &'static str, make: fn(Duration) -> Receiver<Instant>) {
    run(move || {
        for _ in 0..10 {
            let start = Instant::now();
            let c = make(ms(10));
            sleep(ms(500));
            let dt = c.recv().unwrap() - start;
            if dt < ms(400) {
                return;
            }
            eprintln!("{what}(10ms) time is +{dt:?}, want <400ms");
        }
        panic!("not working");
    });
}

/// Go: TestAfterTimes.
#[test]
fn after_times() {
    first_value_is_the_due_instant("after", after);
}

/// Go: TestTickTimes.
#[test]
fn tick_times() {
    first_value_is_the_due_instant("tick", tick);
}
