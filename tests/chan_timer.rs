//! Timer channels: after, tick (drops missed ticks), never and never_sender, Timer
//! (Go's NewTimer) and Ticker with Go 1.23's no-stale-value guarantee. Go's own timer
//! tests are ported in golang_time.rs.

mod common;

use std::time::{Duration, Instant};

use common::with_timeout;
use goro::chan::{
    after, channel, never, never_sender, tick, RecvTimeoutError, SendTimeoutError, Timer,
    TryRecvError, TrySendError,
};
use goro::time::Ticker;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[test]
fn after_fires_once_and_stays_open() {
    with_timeout(T, || {
        let t = Instant::now();
        let rx = after(Duration::from_millis(10));
        let at = rx.recv().unwrap();
        assert!(at >= t + Duration::from_millis(10));
        // Never a second value, never closed (as Go's time.After).
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(20)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(!rx.is_closed());
    });
}

#[test]
fn tick_ticks_and_drops_missed_ticks() {
    with_timeout(T, || {
        let t = Instant::now(); // before tick(): its first tick is 2 ms after the call
        let rx = tick(Duration::from_millis(2));
        for _ in 0..5 {
            rx.recv().unwrap();
        }
        assert!(t.elapsed() >= Duration::from_millis(10));
        // A slow reader: capacity 1, so after a long pause only one tick waits.
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(rx.len(), 1);
        rx.recv().unwrap();
        assert!(std::panic::catch_unwind(|| tick(Duration::ZERO)).is_err());
    });
}

#[test]
fn never_never_receives() {
    let rx = never::<u8>();
    // A nil channel's capacity is 0 (issue 13: it said 1).
    assert_eq!(rx.capacity(), 0);
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(5)),
        Err(RecvTimeoutError::Timeout)
    );
}

/// Go's nil channel in a send: never ready, in a select or alone, and never closed.
#[test]
fn never_sender_never_sends() {
    let tx = never_sender::<u8>();
    assert_eq!(tx.capacity(), 0);
    assert!(tx.is_full());
    assert!(!tx.is_closed());
    assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
    assert_eq!(
        tx.send_timeout(2, Duration::from_millis(5)),
        Err(SendTimeoutError::Timeout(2))
    );
    let (other, rx) = channel::<u8>(1);
    let picked = goro::select! {
        send(tx, 3) -> _ => "never",
        send(other, 4) -> r => { r.unwrap(); "other" }
    };
    assert_eq!((picked, rx.recv()), ("other", Ok(4)));
    let off = goro::select! {
        send(tx, 5) -> _ => false,
        default(Duration::from_millis(5)) => true,
    };
    assert!(off);
}

/// `Timer` (Go's NewTimer, 1.23 semantics): fires once; `Duration::ZERO` fires at
/// once, to a select with `default` too; `stop` and `reset` report a pending firing
/// (an undelivered or unreceived value counts) and leave nothing stale; a huge
/// duration never fires; dropping the timer stops it. From a coroutine and a thread.
#[test]
fn timer_fires_stops_and_resets_without_stale_values() {
    common::on_thread_and_coroutine(T, || {
        let t0 = Instant::now();
        let t = Timer::new(Duration::from_millis(5));
        let at = t.recv();
        assert!(at >= t0 + Duration::from_millis(5));
        assert!(!t.stop(), "stopped a timer whose value was received");
        assert!(!t.reset(Duration::ZERO), "a received timer was pending");
        goro::select! {
            recv(t.receiver()) -> v => assert!(v.unwrap() <= Instant::now()),
            default => panic!("reset(ZERO) did not fire at once"),
        }
        // Fired but not received: pending for stop, and taken back.
        let z = Timer::new(Duration::ZERO);
        assert!(z.stop(), "an unreceived value did not count as pending");
        assert_eq!(z.receiver().try_recv(), Err(TryRecvError::Empty));
        assert!(!z.stop());
        // Delivered into the channel by the runtime timer, then stopped.
        let d = Timer::new(Duration::from_millis(1));
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            d.reset(Duration::from_secs(3600)),
            "the delivered value was pending"
        );
        assert_eq!(
            d.receiver().try_recv(),
            Err(TryRecvError::Empty),
            "stale value"
        );
        // Huge durations never fire, never wrap.
        let never = Timer::new(Duration::MAX);
        assert_eq!(
            never.receiver().recv_timeout(Duration::from_millis(10)),
            Err(RecvTimeoutError::Timeout)
        );
        assert!(never.reset(Duration::MAX));
        // Dropping stops: a receiver kept from it gets nothing.
        let rx = {
            let dropped = Timer::new(Duration::from_millis(1));
            dropped.receiver().clone()
        };
        assert_eq!(
            rx.recv_timeout(Duration::from_millis(20)),
            Err(RecvTimeoutError::Timeout)
        );
    });
}

#[test]
fn ticker_ticks_stops_and_resets() {
    with_timeout(T, || {
        let t = Instant::now();
        let tk = Ticker::new(Duration::from_millis(3));
        for _ in 0..3 {
            tk.recv();
        }
        assert!(t.elapsed() >= Duration::from_millis(9));
        tk.stop();
        assert_eq!(
            tk.receiver().recv_timeout(Duration::from_millis(20)),
            Err(RecvTimeoutError::Timeout),
            "a tick after stop"
        );
        let t = Instant::now(); // before reset(): its first tick is 2 ms after the call
        tk.reset(Duration::from_millis(2));
        tk.recv();
        assert!(
            t.elapsed() >= Duration::from_millis(2),
            "a tick from before the reset"
        );
        let r = std::panic::catch_unwind(|| Ticker::new(Duration::ZERO));
        assert!(r.is_err());
    });
}

/// Go 1.23: once stop or reset returns, no tick from before it can be received, even
/// when the ticker fires right around the call (a tiny period makes that likely).
#[test]
fn no_stale_tick_after_stop_or_reset() {
    with_timeout(T, || {
        let check = || {
            for i in 0..300 {
                let tk = Ticker::new(Duration::from_micros(50));
                std::thread::sleep(Duration::from_micros(100 + (i % 7) * 20));
                if i % 2 == 0 {
                    tk.stop();
                    assert_eq!(
                        tk.receiver().try_recv(),
                        Err(TryRecvError::Empty),
                        "stale tick after stop"
                    );
                } else {
                    let before = Instant::now();
                    tk.reset(Duration::from_secs(3600));
                    match tk.receiver().try_recv() {
                        Err(TryRecvError::Empty) => {}
                        Ok(at) => panic!("stale tick after reset (from {:?} before)", before - at),
                        Err(e) => panic!("{e}"),
                    }
                }
            }
        };
        check();
        goro::go!(check).join().unwrap();
    });
}

/// Go 1.23: an expired timer channel is ready at once to a `select!` with `default`
/// and to `try_recv`, whether or not the runtime timer has fired yet (issue 13: 0 of
/// 100 `after(ZERO)` were), and it delivers exactly one value.
#[test]
fn expired_timer_channels_are_ready_at_once() {
    with_timeout(T, || {
        let check = || {
            for _ in 0..100 {
                let rx = after(Duration::ZERO);
                let ready = goro::select! {
                    recv(rx) -> v => v.is_ok(),
                    default => false,
                };
                assert!(ready, "after(0) not ready to a select with default");
                assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "a second value");
            }
            let rx = after(Duration::ZERO);
            assert!(rx.try_recv().is_ok(), "after(0) not ready to try_recv");
            let rx = after(Duration::from_millis(5));
            std::thread::sleep(Duration::from_millis(10)); // the M, not the timer, runs
            assert!(rx.try_recv().is_ok(), "an expired after(5ms) not ready");
        };
        check();
        goro::go!(check).join().unwrap();
    });
}

/// Go 1.23: the value is the instant the timer was due, not when its firing ran, so
/// a late reader still learns when the deadline was; ticks are a whole number of
/// periods apart.
#[test]
fn timer_channels_send_the_scheduled_instant() {
    with_timeout(T, || {
        let before = Instant::now();
        let rx = after(Duration::from_millis(10));
        let after_call = Instant::now();
        std::thread::sleep(Duration::from_millis(40));
        let at = rx.recv().unwrap();
        let d = Duration::from_millis(10);
        assert!(
            at >= before + d && at <= after_call + d,
            "{:?} after the call",
            at - before
        );
        let period = Duration::from_millis(3);
        let rx = tick(period);
        let first = rx.recv().unwrap();
        for _ in 0..4 {
            let next = rx.recv().unwrap();
            let gap = (next - first).as_nanos();
            assert!(
                gap > 0 && gap % period.as_nanos() == 0,
                "ticks {gap} ns apart"
            );
        }
    });
}

/// Resets that keep pushing a `Timer` back (the idle-timeout idiom, where goro leaves
/// the runtime timer at its first deadline and moves it on when it fires early) never
/// let it fire before its latest deadline, and it does fire then; a reset earlier
/// takes effect at once.
#[test]
fn timer_pushed_back_fires_at_its_last_deadline_only() {
    common::on_thread_and_coroutine(T, || {
        let t = Timer::new(Duration::from_millis(5));
        let mut last = Instant::now();
        for _ in 0..20 {
            goro::time::sleep(Duration::from_millis(1));
            last = Instant::now();
            assert!(
                t.reset(Duration::from_millis(5)),
                "a pushed-back timer was not pending"
            );
        }
        let fired = t.recv();
        assert!(
            fired >= last + Duration::from_millis(5),
            "fired before its last deadline"
        );
        assert!(Instant::now() >= fired);
        // Back and forth: later, then much earlier.
        t.reset(Duration::from_secs(3600));
        t.reset(Duration::from_millis(1));
        assert!(t.receiver().recv_timeout(Duration::from_secs(10)).is_ok());
        // Later again after it fired: fires once, at the new deadline.
        let start = Instant::now();
        assert!(!t.reset(Duration::from_millis(10)));
        let at = t.recv();
        assert!(at >= start + Duration::from_millis(10));
    });
}
