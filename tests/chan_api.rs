//! The std-shaped channel API (issue 18): unbounded channels (sends that never wait,
//! memory given back once drained), `send_deadline` / `recv_deadline`, `is_full`,
//! `same_channel`, and the timer channel `at`, from coroutines and plain threads.
//!
//! Memory is measured through a counting global allocator that keeps, per thread, the
//! bytes allocated minus the bytes freed: a test that allocates and frees on one plain
//! thread sees only its own allocations, whatever the other tests do meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use common::{wait_until, with_timeout};
use goro::chan::{
    after, at, channel, never, unbounded, Receiver, RecvError, RecvTimeoutError, SendError,
    SendTimeoutError, Sender, TryRecvError,
};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

// ---- the counting allocator ----

/// The system allocator, counting each thread's live bytes in [`LIVE_BYTES`].
struct Counting;

thread_local! {
    /// Bytes this thread allocated minus the bytes it freed (a block freed on another
    /// thread than the one that allocated it moves bytes between the two counts).
    /// `const` and without a destructor, so reading it never allocates.
    static LIVE_BYTES: Cell<isize> = const { Cell::new(0) };
}

fn note(delta: isize) {
    // try_with: during a thread's teardown the count may be gone; that is no loss.
    let _ = LIVE_BYTES.try_with(|c| c.set(c.get() + delta));
}

fn live_bytes() -> isize {
    LIVE_BYTES.with(|c| c.get())
}

// SAFETY: every method forwards to `System` with the caller's arguments, so `System`'s
// guarantees are ours; the bookkeeping touches only a thread-local counter and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps GlobalAlloc::alloc's contract, which System's needs.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in alloc.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, that is from System, with `layout`.
        unsafe { System.dealloc(ptr, layout) };
        note(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in dealloc, and the caller keeps realloc's contract on `new_size`.
        let q = unsafe { System.realloc(ptr, layout, new_size) };
        if !q.is_null() {
            note(new_size as isize - layout.size() as isize);
        }
        q
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

// ---- helpers ----

/// Runs `check` on the calling plain thread, then on a coroutine.
fn on_thread_and_coroutine(check: fn()) {
    check();
    goro::go!(check).join().unwrap();
}

/// An instant well in the past (or now, on a machine that booted a second ago).
fn past() -> Instant {
    let now = Instant::now();
    now.checked_sub(Duration::from_secs(1)).unwrap_or(now)
}

/// The farthest instant a power-of-two number of seconds ahead that `Instant` can
/// hold: far past what the runtime clock counts in nanoseconds (~292 years).
fn far_future() -> Instant {
    let now = Instant::now();
    (0..63)
        .rev()
        .find_map(|k| now.checked_add(Duration::from_secs(1u64 << k)))
        .expect("an instant one second ahead")
}

// ---- unbounded ----

/// 100 000 sends from four coroutines and a plain thread, with nobody receiving, all
/// complete; then every value arrives once, each sender's in the order it sent them.
#[test]
fn unbounded_sends_never_wait() {
    with_timeout(T, || {
        const PER_SENDER: u32 = 20_000;
        const SENDERS: usize = 5;
        let (tx, rx) = unbounded::<(usize, u32)>();
        assert_eq!((tx.capacity(), rx.capacity()), (usize::MAX, usize::MAX));
        let send = |tx: Sender<(usize, u32)>, s: usize| {
            move || {
                for i in 0..PER_SENDER {
                    assert!(!tx.is_full(), "an unbounded channel is never full");
                    tx.send((s, i)).unwrap();
                }
            }
        };
        let coroutines: Vec<_> = (0..SENDERS - 1)
            .map(|s| goro::go!(send(tx.clone(), s)))
            .collect();
        let thread = std::thread::spawn(send(tx.clone(), SENDERS - 1));
        // Nobody receives until every sender has finished: none of them may wait.
        coroutines.into_iter().for_each(|h| h.join().unwrap());
        thread.join().unwrap();
        assert_eq!(rx.len(), SENDERS * PER_SENDER as usize);
        drop(tx);
        let received = goro::go!(move || {
            let mut next = [0u32; SENDERS];
            for (s, i) in rx.iter() {
                assert_eq!(i, next[s], "sender {s} out of order");
                next[s] += 1;
            }
            next
        });
        assert_eq!(received.join().unwrap(), [PER_SENDER; SENDERS]);
    });
}

/// A drained unbounded channel gives its buffer's memory back, round after round; and
/// a bounded channel allocates as it fills, never its capacity up front nor past it.
#[test]
fn unbounded_memory_is_given_back_when_drained() {
    with_timeout(T, || {
        // All on this plain thread: LIVE_BYTES sees just these allocations.
        let (tx, rx) = unbounded::<u64>();
        let base = live_bytes();
        for round in 0..3u64 {
            for i in 0..100_000 {
                tx.send(round * 100_000 + i).unwrap();
            }
            let grown = live_bytes() - base;
            assert!(
                grown >= 800_000,
                "round {round}: 100 000 u64 in {grown} bytes?"
            );
            for i in 0..100_000 {
                assert_eq!(rx.try_recv(), Ok(round * 100_000 + i));
            }
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            let kept = live_bytes() - base;
            assert!(
                kept < 4096,
                "round {round}: a drained channel kept {kept} of {grown} bytes"
            );
        }

        // A huge capacity costs nothing until used (it used to reserve it: an
        // allocation failure, or for usize::MAX a capacity-overflow panic).
        let base = live_bytes();
        let (big_tx, big_rx) = channel::<u64>(1 << 40);
        let (max_tx, max_rx) = channel::<u64>(usize::MAX);
        assert!(
            live_bytes() - base < 4096,
            "a channel reserved its capacity"
        );
        assert_eq!(max_tx.capacity(), usize::MAX);
        big_tx.send(1).unwrap();
        max_tx.send(2).unwrap();
        assert_eq!((big_rx.recv(), max_rx.recv()), (Ok(1), Ok(2)));

        // A bounded buffer grows to its capacity and not past it (600 slots, not
        // the 1024 that doubling would give), and is full there.
        let (tx, rx) = channel::<u64>(600);
        let base = live_bytes();
        for i in 0..600 {
            tx.try_send(i).unwrap();
        }
        assert!(tx.is_full());
        let used = live_bytes() - base;
        assert!(
            (600 * 8..=600 * 8 + 1024).contains(&used),
            "600 u64 buffered in {used} bytes"
        );
        assert_eq!(rx.iter().take(600).count(), 600);
    });
}

/// `select!` on an unbounded channel: a send arm is always ready (nobody receiving),
/// a receive arm parks until a value comes, and a closed channel fails the send arm.
#[test]
fn unbounded_in_select() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (tx, rx) = unbounded::<u32>();
            for i in 0..1000 {
                goro::select! {
                    send(tx, i) -> r => r.unwrap(),
                    default => panic!("an unbounded send arm is always ready"),
                }
            }
            // Without a default too, beside an arm that is never ready.
            goro::select! {
                send(tx, 1000) -> r => r.unwrap(),
                recv(never::<u8>()) -> _ => unreachable!(),
            }
            assert_eq!(rx.len(), 1001);
            assert!(rx.try_iter().take(1001).eq(0..=1000));

            // A receive arm waits for a sender on a plain thread, then on a coroutine.
            for sender_on_thread in [true, false] {
                let tx2 = tx.clone();
                let send_later = move || {
                    goro::time::sleep(Duration::from_millis(5));
                    tx2.send(7).unwrap();
                };
                let h: Box<dyn FnOnce() + Send> = if sender_on_thread {
                    let h = std::thread::spawn(send_later);
                    Box::new(move || h.join().unwrap())
                } else {
                    let h = goro::go!(send_later);
                    Box::new(move || h.join().unwrap())
                };
                let got = goro::select! {
                    recv(rx) -> v => v,
                    recv(after(Duration::from_secs(60))) -> _ => panic!("no value in 60 s"),
                };
                assert_eq!(got, Ok(7));
                h();
            }

            drop(rx);
            goro::select! {
                send(tx, 9) -> r => assert_eq!(r, Err(SendError(9))),
                default => panic!("a closed channel's send arm is ready"),
            }
        });
    });
}

// ---- deadlines ----

#[test]
fn send_deadline_past_future_and_woken() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (tx, rx) = channel::<u32>(1);
            // A passed deadline still sends when there is room...
            assert_eq!(tx.send_deadline(1, past()), Ok(()));
            // ...and times out at once, without waiting, when there is none.
            assert_eq!(
                tx.send_deadline(2, past()),
                Err(SendTimeoutError::Timeout(2))
            );
            // A future deadline waits until it passes.
            let d = Instant::now() + Duration::from_millis(20);
            assert_eq!(tx.send_deadline(3, d), Err(SendTimeoutError::Timeout(3)));
            assert!(Instant::now() >= d, "timed out before the deadline");
            // A receiver makes room before the deadline: the send completes.
            let rx2 = rx.clone();
            let h = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                rx2.recv().unwrap()
            });
            let far = Instant::now() + Duration::from_secs(60);
            assert_eq!(tx.send_deadline(4, far), Ok(()));
            assert!(Instant::now() < far);
            assert_eq!(h.join().unwrap(), 1);
            // Unrepresentably far is "wait", not a deadline wrapped into the past.
            let rx2 = rx.clone();
            let h = goro::go!(move || {
                goro::time::sleep(Duration::from_millis(5));
                rx2.recv().unwrap()
            });
            assert_eq!(tx.send_deadline(5, far_future()), Ok(()));
            assert_eq!(h.join().unwrap(), 4);
            assert_eq!(rx.recv(), Ok(5));
            // Closed: the value comes back as Closed, whatever the deadline.
            drop(rx);
            assert_eq!(tx.send_deadline(6, far), Err(SendTimeoutError::Closed(6)));
            assert_eq!(
                tx.send_deadline(7, past()),
                Err(SendTimeoutError::Closed(7))
            );

            // Rendezvous: a waiting receiver takes the value even on a passed
            // deadline, since that needs no waiting.
            let (tx, rx) = channel::<u32>(0);
            let r = goro::go!(move || rx.recv());
            wait_until("the receiver waits", || !tx.is_full());
            assert_eq!(tx.send_deadline(8, past()), Ok(()));
            assert_eq!(r.join().unwrap(), Ok(8));
        });
    });
}

#[test]
fn recv_deadline_past_future_and_woken() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let (tx, rx) = channel::<u32>(1);
            // Empty, deadline passed: Timeout at once.
            assert_eq!(rx.recv_deadline(past()), Err(RecvTimeoutError::Timeout));
            // A value that is there is received even on a passed deadline.
            tx.send(1).unwrap();
            assert_eq!(rx.recv_deadline(past()), Ok(1));
            // A future deadline waits until it passes.
            let d = Instant::now() + Duration::from_millis(20);
            assert_eq!(rx.recv_deadline(d), Err(RecvTimeoutError::Timeout));
            assert!(Instant::now() >= d, "timed out before the deadline");
            // Woken by a sender, on a coroutine, before the deadline.
            let tx2 = tx.clone();
            let h = goro::go!(move || {
                goro::time::sleep(Duration::from_millis(5));
                tx2.send(2).unwrap();
            });
            let far = Instant::now() + Duration::from_secs(60);
            assert_eq!(rx.recv_deadline(far), Ok(2));
            assert!(Instant::now() < far);
            h.join().unwrap();
            // Closed: drained first, then Closed.
            tx.send(3).unwrap();
            drop(tx);
            assert_eq!(rx.recv_deadline(far_future()), Ok(3));
            assert_eq!(rx.recv_deadline(far), Err(RecvTimeoutError::Closed));
            assert_eq!(rx.recv_deadline(past()), Err(RecvTimeoutError::Closed));

            // A due timer channel delivers even to a passed deadline.
            let t = after(Duration::ZERO);
            assert!(t.recv_deadline(past()).is_ok());
        });
    });
}

// ---- is_full ----

#[test]
fn is_full_means_a_send_would_wait() {
    with_timeout(T, || {
        // Rendezvous: full unless a receiver waits, a coroutine's recv, a plain
        // thread's recv, or a select's receive arm.
        for receiver in ["coroutine", "thread", "select"] {
            let (tx, rx) = channel::<u32>(0);
            assert!(tx.is_full(), "rendezvous, nobody receiving");
            let waiting = rx.clone(); // `rx` stays: the channel stays open
            let recv = move || match receiver {
                "select" => goro::select! {
                    recv(waiting) -> v => v,
                    recv(after(Duration::from_secs(60))) -> _ => panic!("no value in 60 s"),
                },
                _ => waiting.recv(),
            };
            let h: Box<dyn FnOnce() -> Result<u32, RecvError> + Send> = if receiver == "thread" {
                let h = std::thread::spawn(recv);
                Box::new(move || h.join().unwrap())
            } else {
                let h = goro::go!(recv);
                Box::new(move || h.join().unwrap())
            };
            wait_until("the receiver waits", || !tx.is_full());
            // "Not full" means a send now needs no waiting.
            assert_eq!(tx.try_send(5), Ok(()), "{receiver}");
            assert_eq!(h(), Ok(5));
            assert!(tx.is_full(), "{receiver}: the receiver has gone");
        }

        // A receiver that timed out no longer counts.
        let (tx, rx) = channel::<u32>(0);
        let waiting = rx.clone();
        let h = goro::go!(move || waiting.recv_timeout(Duration::from_millis(5)));
        assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Timeout));
        assert!(tx.is_full());
        // A closed channel is not full: a send fails at once rather than wait.
        drop(rx);
        assert!(!tx.is_full(), "closed (its last receiver dropped)");

        // Buffered: full exactly when the buffer is.
        let (tx, rx) = channel::<u32>(2);
        assert!(!tx.is_full());
        tx.send(1).unwrap();
        assert!(!tx.is_full());
        tx.send(2).unwrap();
        assert!(tx.is_full());
        rx.recv().unwrap();
        assert!(!tx.is_full());
        tx.send(3).unwrap();
        tx.close();
        assert!(!tx.is_full(), "closed");

        // Unbounded: never.
        let (tx, _rx) = unbounded::<u32>();
        for i in 0..10_000 {
            tx.send(i).unwrap();
        }
        assert!(!tx.is_full());
    });
}

// ---- same_channel ----

#[test]
fn same_channel_compares_channels_not_handles() {
    let (tx, rx) = channel::<u8>(1);
    let (tx_other, rx_other) = channel::<u8>(1);
    assert!(tx.same_channel(&tx));
    assert!(tx.same_channel(&tx.clone()));
    assert!(!tx.same_channel(&tx_other));
    assert!(rx.same_channel(&rx.clone()));
    assert!(!rx.same_channel(&rx_other));
    // Closing does not change which channel a handle is on.
    let rx2 = rx.clone();
    tx.close();
    assert!(rx.same_channel(&rx2));
    // Moved to a coroutine and back.
    let h = goro::go!(move || rx2);
    assert!(rx.same_channel(&h.join().unwrap()));
    // Unbounded and timer channels.
    let (u, _ur) = unbounded::<u8>();
    assert!(u.same_channel(&u.clone()) && !u.same_channel(&tx));
    let t: Receiver<Instant> = after(Duration::from_secs(60));
    assert!(t.same_channel(&t.clone()));
    assert!(!t.same_channel(&after(Duration::from_secs(60))));
    assert!(!t.same_channel(&at(far_future())));
}

// ---- at ----

/// `at` a passed instant is ready at once, to `try_recv`, `recv` and a `select!`
/// with `default`, and delivers that instant.
#[test]
fn at_a_past_instant_is_ready_at_once() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let p = past();
            assert_eq!(at(p).try_recv(), Ok(p));
            assert_eq!(at(p).recv(), Ok(p));
            let now = Instant::now();
            assert_eq!(at(now).recv(), Ok(now));
            let v = goro::select! {
                recv(at(p)) -> v => v,
                default => panic!("at(past) not ready at once"),
            };
            assert_eq!(v, Ok(p));
            // Once only, and never closed.
            let rx = at(p);
            assert_eq!(rx.recv(), Ok(p));
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            assert!(!rx.is_closed());
        });
    });
}

/// `at` a near instant delivers it then (not before, and within a tolerance that
/// counts the time the machine did not give us), to a parked receiver.
#[test]
fn at_a_near_instant_fires_then() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let lost = common::Lost::now();
            let when = Instant::now() + Duration::from_millis(20);
            let rx = at(when);
            let early = rx.try_recv();
            // Empty is a must only if the instant is still ahead after the look: on a
            // busy machine 20 ms can pass between two statements.
            if Instant::now() < when {
                assert_eq!(early, Err(TryRecvError::Empty), "ready early");
                assert_eq!(rx.recv(), Ok(when), "parked receiver");
            } else {
                assert!(matches!(early, Ok(v) if v == when) || rx.recv() == Ok(when));
            }
            let late = Instant::now().saturating_duration_since(when);
            assert!(Instant::now() >= when);
            assert!(
                late < Duration::from_secs(2) + lost.since(),
                "fired {late:?} late"
            );
            assert_eq!(
                rx.recv_timeout(Duration::from_millis(20)),
                Err(RecvTimeoutError::Timeout),
                "a second value"
            );
        });
    });
}

/// `at` and `after` fire in the order of their instants, whichever was made first.
#[test]
fn at_and_after_fire_in_order() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            // An `at` 40 ms ahead, then an `after(10 ms)`: the `after` first.
            let at_when = Instant::now() + Duration::from_millis(40);
            let at_rx = at(at_when);
            let after_rx = after(Duration::from_millis(10));
            let after_by = Instant::now() + Duration::from_millis(10); // due by then
            expect_first("after", &after_rx, after_by, "at", &at_rx, at_when);
            // An `after(40 ms)`, then an `at` 10 ms ahead: the `at` first.
            let after_from = Instant::now() + Duration::from_millis(40); // due from then
            let after_rx = after(Duration::from_millis(40));
            let at_when = Instant::now() + Duration::from_millis(10);
            let at_rx = at(at_when);
            expect_first("at", &at_rx, at_when, "after", &after_rx, after_from);
        });
    });
}

/// Selects over two timer channels, the `early` one due at `early_by` at the latest
/// and the `late` one at `late_at` at the earliest, and checks they fire in that
/// order. If the machine stalled until both were due, a select may pick either (ready
/// arms are chosen at random), so `late` winning is then no error: what is checked is
/// that it did not fire before its instant, and that `early`, if due no later, had
/// fired too.
fn expect_first(
    early_name: &str,
    early: &Receiver<Instant>,
    early_by: Instant,
    late_name: &str,
    late: &Receiver<Instant>,
    late_at: Instant,
) {
    let limit = after(Duration::from_secs(60));
    let first = goro::select! {
        recv(early) -> v => { assert!(v.unwrap() <= early_by); early_name }
        recv(late) -> v => { assert!(v.unwrap() >= late_at); late_name }
        recv(limit) -> _ => panic!("neither timer fired in 60 s"),
    };
    let picked_at = Instant::now();
    if first == late_name {
        assert!(picked_at >= late_at, "{late_name} fired before its instant");
        if early_by <= late_at {
            // `early` was due no later than `late`: it is ready now.
            assert!(early.try_recv().is_ok(), "{early_name} had not fired");
        }
    } else {
        let v = goro::select! {
            recv(late) -> v => v.unwrap(),
            recv(limit) -> _ => panic!("{late_name} never fired"),
        };
        assert!(v >= late_at && Instant::now() >= late_at);
    }
}

/// An instant past the runtime clock's range waits forever: it does not wrap round
/// into the past and fire at once.
#[test]
fn at_a_far_instant_never_fires() {
    with_timeout(T, || {
        on_thread_and_coroutine(|| {
            let rx = at(far_future());
            assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
            assert_eq!(
                rx.recv_timeout(Duration::from_millis(20)),
                Err(RecvTimeoutError::Timeout)
            );
            let soon = goro::select! {
                recv(rx) -> _ => false,
                recv(after(Duration::from_millis(5))) -> _ => true,
            };
            assert!(soon, "at(far future) fired");
            let beyond = Instant::now() + Duration::from_secs(1u64 << 40);
            assert_eq!(at(beyond).try_recv(), Err(TryRecvError::Empty));
        });
    });
}
