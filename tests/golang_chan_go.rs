//! Go's own channel and `select` tests, ported to goro's `Chan<T>` (Go's `chan T`).
//!
//! The same Go tests as `golang_chan.rs`, which runs them against goro's Rust-shaped
//! `Sender`/`Receiver`; here they run against [`goro::chan::Chan`], with Go's own
//! semantics: one handle for both directions, closed only by `close`, a send on a
//! closed channel and a second close panic.
//!
//! Ported from the Go source tree (<https://github.com/golang/go>):
//!
//! - `src/runtime/chan_test.go`: the `Test*` functions. Go's runtime select tests
//!   live there too: the tree has no `src/runtime/select_test.go`.
//! - `test/chan/*.go`: the channel programs run by Go's `test/run.go`.
//! - `test/closedchan.go`: the closed-channel semantics those programs rely on.
//!
//! The Go files are Copyright The Go Authors and governed by Go's BSD-style licence
//! (<https://go.dev/LICENSE>). The code here is our own, written against goro's API
//! from the behaviour each Go test checks.
//!
//! How the translation goes:
//!
//! - Every test body runs on a coroutine, under a watchdog (`run`), so a hang fails.
//!   Go's goroutines are `goro::go!` coroutines, `runtime.Gosched` is
//!   `goro::yield_now`, `time.Sleep` is `goro::time::sleep`.
//! - `make(chan T, n)` is `Chan::<T>::new(n)`, `close(c)` is `c.close()`,
//!   `v, ok := <-c` is `match c.recv()` (`None` for `ok == false`), `for v := range c`
//!   is `for v in &c`. A send on a closed channel and a second close panic, as in Go,
//!   and the ports assert the panic (`std::panic::catch_unwind`, or a coroutine's
//!   join) and its message.
//! - A nil channel: in a `select` whose arms are fixed, `never()` for a receive and
//!   `never_sender()` for a send (test/chan/select3.go). Where Go switches an arm off
//!   at run time by setting a `chan T` variable to nil, the arm needs a `Chan<T>`:
//!   there a fresh `Chan` that nobody else holds stands in (`nil_chan`); nobody sends
//!   on it, receives from it or closes it, so its arms are never ready, as a nil
//!   channel's are.
//! - Go programs whose goroutines loop forever (the sieves, select8) just exit in Go.
//!   A `Chan` is never closed by a drop, so here each such coroutine also selects on a
//!   `quit` channel that the test closes at its end, and returns then.
//! - Go changes `GOMAXPROCS` in a few tests (TestChan: 4, TestSelfSelect: 2,
//!   TestSelectStress: 10, doubleselect.go: 2). The ports leave it alone: the whole
//!   file runs at the default, at 1 and at 2 Ps (`under_maxprocs_1_and_2`).
//! - Iteration counts are Go's full ones (not its `-short` ones). No test asserts
//!   wall-clock speed; the fairness tests use Go's loose bounds.
//
// Not ported:
// - TestNoShrinkStackWhileParking — deliberate: it races GC stack scanning against a
//   goroutine parking on a channel; goro has no GC and never moves or shrinks a
//   stack, and without the GC the test is TestShrinkStackDuringBlockedSend's traffic.
// - The GC halves of TestShrinkStackDuringBlockedSend and TestSelectStackAdjust
//   (runtime.GC, runtime.ReadMemStats): no GC. Their channel halves are ported.
// - test/chan/select2.go's memory check — missing API: no heap statistics
//   (runtime.ReadMemStats). The 100 000 selects themselves are ported.
// - test/chan/perm.go — not runnable: a compile-time errorcheck test of channel
//   directions (send on a receive-only channel and so on). `Chan` has no directional
//   types (Go's `chan<- T`, `<-chan T`), so there is nothing to check.
// - test/chan/powser1.go, powser2.go — left out, as in golang_chan.rs (power series
//   over channels).
// - test/chan/select5.go — not runnable: a generator that writes Go programs to check
//   the evaluation order of every select shape. The rule it checks is tested in
//   chan_select.rs (`select_syntax_trailing_commas_and_temporaries`).
// - test/closedchan.go's `close(nil)` panics — no counterpart: `Chan` has no nil
//   value (`Chan::new` always makes a channel). Its "close twice panics" is ported.
// - golang_chan.rs's Rust-shaped parts have no counterpart: the teardown of the
//   sieves and select8 by dropping an end (a `Chan` is never closed by a drop; a
//   `quit` channel does it here), the `len`/`cap` of `never()` (no nil `Chan`), and
//   closing twice being "not an error" (it panics here, as in Go).
// - Go channel tests outside these files (runtime/chanbarrier_test.go, a GC
//   write-barrier test; test/ken/chan*.go) are not part of this port.

mod common;

use std::any::Any;
use std::cell::Cell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::join;
use goro::chan::{never, never_sender, tick, Chan};
use goro::{go, select};

/// How long any one test may take before it counts as hung.
const LIMIT: Duration = Duration::from_secs(120);

/// Runs `f` on a coroutine under the watchdog; a panic in `f` fails the test.
fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    common::on_coroutine(LIMIT, f)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A stand-in for Go's nil `chan T` where an arm needs a `Chan<T>`: a channel nobody
/// else holds, so nothing ever sends on it, receives from it or closes it.
fn nil_chan<T>() -> Chan<T> {
    Chan::new(0)
}

/// The message of the panic `f` raises; fails if it does not panic.
fn panic_text(f: impl FnOnce()) -> String {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    goro::panic_message(&*p).to_string()
}

/// Go's `ch <- v` in a goroutine that loops forever, with the teardown Go's programs do
/// not need: false (nothing sent) once `quit` is closed.
fn send_or_quit<T>(ch: &Chan<T>, v: T, quit: &Chan<()>) -> bool {
    select! {
        send(ch, v) -> _ => true,
        recv(quit) -> _ => false,
    }
}

/// Go's `<-ch` in such a goroutine: None once `quit` is closed. `ch` is never closed.
fn recv_or_quit<T>(ch: &Chan<T>, quit: &Chan<()>) -> Option<T> {
    select! {
        recv(ch) -> v => Some(v.expect("this channel is never closed")),
        recv(quit) -> _ => None,
    }
}

/// Go's stackGrowthRecursive: uses about 1 KiB of stack per level, briefly.
fn stack_growth_recursive(n: u32) {
    let pad = [0u8; 1024];
    std::hint::black_box(&pad);
    if n > 0 {
        stack_growth_recursive(n - 1);
    }
}

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

// ---------------------------------------------------------------------------------
// runtime/chan_test.go
// ---------------------------------------------------------------------------------

/// Go: runtime/chan_test.go TestChan.
#[test]
fn test_chan() {
    // Go runs capacities 0..200 (0..20 with -short); we run Go's full range.
    const N: usize = 200;
    run(|| {
        for cap in 0..N {
            {
                // Receiving from an empty channel blocks.
                let c = Chan::<i32>::new(cap);
                let recv1 = Arc::new(AtomicBool::new(false));
                let recv2 = Arc::new(AtomicBool::new(false));
                for flag in [&recv1, &recv2] {
                    let (c, flag) = (c.clone(), flag.clone());
                    go!(move || {
                        let _ = c.recv();
                        flag.store(true, Ordering::SeqCst);
                    });
                }
                goro::time::sleep(ms(1));
                assert!(
                    !recv1.load(Ordering::SeqCst) && !recv2.load(Ordering::SeqCst),
                    "chan[{cap}]: receive from empty chan"
                );
                // A non-blocking receive does not block (Go tries `_ = <-c` and
                // `_, _ = <-c`; both are `recv` here).
                for _ in 0..2 {
                    select! {
                        recv(c) -> _ => panic!("chan[{cap}]: receive from empty chan"),
                        default => {}
                    }
                }
                c.send(0);
                c.send(0);
            }

            {
                // Sending to a full channel blocks.
                let c = Chan::<i32>::new(cap);
                for i in 0..cap {
                    c.send(i as i32);
                }
                let sent = Arc::new(AtomicBool::new(false));
                let (c2, sent2) = (c.clone(), sent.clone());
                go!(move || {
                    c2.send(0);
                    sent2.store(true, Ordering::SeqCst);
                });
                goro::time::sleep(ms(1));
                assert!(
                    !sent.load(Ordering::SeqCst),
                    "chan[{cap}]: send to full chan"
                );
                // A non-blocking send does not block.
                select! {
                    send(c, 0) -> _ => panic!("chan[{cap}]: send to full chan"),
                    default => {}
                }
                let _ = c.recv();
            }

            {
                // A closed channel yields its buffered values, then "zero, !ok".
                let c = Chan::<i32>::new(cap);
                for i in 0..cap {
                    c.send(i as i32);
                }
                c.close();
                for i in 0..cap {
                    let v = c.recv();
                    assert_eq!(
                        v,
                        Some(i as i32),
                        "chan[{cap}]: received {v:?}, expected {i}"
                    );
                }
                for _ in 0..2 {
                    let v = c.recv();
                    assert_eq!(v, None, "chan[{cap}]: received {v:?} from closed chan");
                }
            }

            {
                // Closing unblocks a receive.
                let c = Chan::<i32>::new(cap);
                let done = Chan::<bool>::new(0);
                let (c2, d) = (c.clone(), done.clone());
                go!(move || {
                    let v = c2.recv();
                    d.send(v.is_none());
                });
                goro::time::sleep(ms(1));
                c.close();
                assert_eq!(
                    done.recv(),
                    Some(true),
                    "chan[{cap}]: received non zero from closed chan"
                );
            }

            {
                // 100 integers arrive uncorrupted and in FIFO order; twice (Go's
                // second round uses `v, ok := <-c`).
                let c = Chan::<i32>::new(cap);
                for round in 0..2 {
                    let t = c.clone();
                    go!(move || {
                        for i in 0..100 {
                            t.send(i);
                        }
                    });
                    for i in 0..100 {
                        match c.recv() {
                            Some(v) if v == i => {}
                            v => panic!("chan[{cap}] round {round}: received {v:?}, expected {i}"),
                        }
                    }
                }

                // 4 coroutines send 0..1000 each, 4 receive 1000 each: every value
                // arrives 4 times.
                const P: usize = 4;
                const L: i32 = 1000;
                let c = Chan::<i32>::new(cap);
                for _ in 0..P {
                    let t = c.clone();
                    go!(move || {
                        for i in 0..L {
                            t.send(i);
                        }
                    });
                }
                let done = Chan::<HashMap<i32, usize>>::new(0);
                for _ in 0..P {
                    let (r, d) = (c.clone(), done.clone());
                    go!(move || {
                        let mut recv = HashMap::new();
                        for _ in 0..L {
                            *recv.entry(r.recv().expect("open")).or_insert(0) += 1;
                        }
                        d.send(recv);
                    });
                }
                let mut recv = HashMap::new();
                for _ in 0..P {
                    for (k, v) in done.recv().expect("open") {
                        *recv.entry(k).or_insert(0) += v;
                    }
                }
                assert_eq!(
                    recv.len(),
                    L as usize,
                    "chan[{cap}]: received {} values",
                    recv.len()
                );
                for (k, v) in recv {
                    assert_eq!(v, P, "chan[{cap}]: received {k} {v} times, expected {P}");
                }
            }

            {
                // len and cap.
                let c = Chan::<i32>::new(cap);
                assert_eq!((c.len(), c.cap()), (0, cap), "chan[{cap}]: bad len/cap");
                assert!(c.is_empty());
                for i in 0..cap {
                    c.send(i as i32);
                }
                assert_eq!((c.len(), c.cap()), (cap, cap), "chan[{cap}]: bad len/cap");
                assert_eq!(c.is_empty(), cap == 0);
            }
        }
    });
}

/// Go: runtime/chan_test.go TestNonblockRecvRace.
#[test]
fn test_nonblock_recv_race() {
    // Go's count (100 with -short). Go does not wait for the goroutine; we join it at
    // the end of its round, which still lets it run before or after the close.
    const N: usize = 10_000;
    run(|| {
        for _ in 0..N {
            let c = Chan::<i32>::new(1);
            c.send(1);
            let r = c.clone();
            let h = go!(move || {
                select! {
                    recv(r) -> _ => {}
                    default => panic!("chan is not ready"),
                }
            });
            c.close();
            let _ = c.recv();
            join(h);
        }
    });
}

/// Go: runtime/chan_test.go TestNonblockSelectRace.
///
/// From the moment the coroutine exists, c1 or c2 is ready, so its non-blocking
/// select must never take the default.
#[test]
fn test_nonblock_select_race() {
    // Go's count (1000 with -short).
    const N: usize = 100_000;
    run(|| {
        let done = Chan::<bool>::new(1);
        for _ in 0..N {
            let c1 = Chan::<i32>::new(1);
            let c2 = Chan::<i32>::new(1);
            c1.send(1);
            let (a, b, d) = (c1.clone(), c2.clone(), done.clone());
            go!(move || {
                let ready = select! {
                    recv(a) -> _ => true,
                    recv(b) -> _ => true,
                    default => false,
                };
                d.send(ready);
            });
            c2.send(1);
            select! {
                recv(c1) -> _ => {}
                default => {}
            }
            assert_eq!(done.recv(), Some(true), "no chan is ready");
        }
    });
}

/// Go: runtime/chan_test.go TestNonblockSelectRace2 (closing c2 replaces sending on it).
#[test]
fn test_nonblock_select_race2() {
    // Go's count (1000 with -short).
    const N: usize = 100_000;
    run(|| {
        let done = Chan::<bool>::new(1);
        for _ in 0..N {
            let c1 = Chan::<i32>::new(1);
            let c2 = Chan::<i32>::new(0);
            c1.send(1);
            let (a, b, d) = (c1.clone(), c2.clone(), done.clone());
            go!(move || {
                let ready = select! {
                    recv(a) -> _ => true,
                    recv(b) -> _ => true,
                    default => false,
                };
                d.send(ready);
            });
            c2.close();
            select! {
                recv(c1) -> _ => {}
                default => {}
            }
            assert_eq!(done.recv(), Some(true), "no chan is ready");
        }
    });
}

/// Go: runtime/chan_test.go TestSelfSelect.
///
/// Selects with a send and a receive arm on one channel neither crash, deadlock, nor
/// (rendezvous) receive their own value.
#[test]
fn test_self_select() {
    run(|| {
        for cap in [0usize, 10] {
            let wg = goro::sync::WaitGroup::new();
            wg.add(2);
            let c = Chan::<i32>::new(cap);
            let mut hs = Vec::new();
            for p in 0..2i32 {
                let (c, wg) = (c.clone(), wg.clone());
                hs.push(go!(move || {
                    for i in 0..1000 {
                        let got = if p == 0 || i % 2 == 0 {
                            select! {
                                send(c, p) -> () => None,
                                recv(c) -> v => Some(v.expect("open")),
                            }
                        } else {
                            select! {
                                recv(c) -> v => Some(v.expect("open")),
                                send(c, p) -> () => None,
                            }
                        };
                        if cap == 0 && got == Some(p) {
                            panic!("self receive");
                        }
                    }
                    wg.done();
                }));
            }
            wg.wait();
            hs.into_iter().for_each(join);
        }
    });
}

/// Go: runtime/chan_test.go TestSelectStress.
///
/// 4 coroutines send N values on each of 4 channels, 4 receive N from each, one sends
/// N on each in a single select, one receives N from each in a single select: no
/// deadlock. The selecting coroutines switch a channel's arm off (nil in Go) once
/// they are done with it.
#[test]
fn test_select_stress() {
    // Go's count (10 000 with -short).
    const N: usize = 100_000;
    run(|| {
        let c = [
            Chan::<i32>::new(0),
            Chan::<i32>::new(0),
            Chan::<i32>::new(2),
            Chan::<i32>::new(3),
        ];
        let wg = goro::sync::WaitGroup::new();
        wg.add(10);
        let mut hs = Vec::new();
        for ck in &c {
            let (t, wg1) = (ck.clone(), wg.clone());
            hs.push(go!(move || {
                for _ in 0..N {
                    t.send(0);
                }
                wg1.done();
            }));
            let (r, wg2) = (ck.clone(), wg.clone());
            hs.push(go!(move || {
                for _ in 0..N {
                    r.recv().expect("open");
                }
                wg2.done();
            }));
        }
        {
            let (c, wg) = (c.clone(), wg.clone());
            hs.push(go!(move || {
                let nil = nil_chan::<i32>();
                let mut n = [0usize; 4];
                for _ in 0..4 * N {
                    let ch: Vec<&Chan<i32>> = (0..4)
                        .map(|k| if n[k] < N { &c[k] } else { &nil })
                        .collect();
                    let k = select! {
                        send(ch[3], 0) -> () => 3,
                        send(ch[2], 0) -> () => 2,
                        send(ch[0], 0) -> () => 0,
                        send(ch[1], 0) -> () => 1,
                    };
                    n[k] += 1;
                }
                wg.done();
            }));
        }
        {
            let (c, wg) = (c.clone(), wg.clone());
            hs.push(go!(move || {
                let nil = nil_chan::<i32>();
                let mut n = [0usize; 4];
                for _ in 0..4 * N {
                    let ch: Vec<&Chan<i32>> = (0..4)
                        .map(|k| if n[k] < N { &c[k] } else { &nil })
                        .collect();
                    let k = select! {
                        recv(ch[0]) -> v => { v.expect("open"); 0 }
                        recv(ch[1]) -> v => { v.expect("open"); 1 }
                        recv(ch[2]) -> v => { v.expect("open"); 2 }
                        recv(ch[3]) -> v => { v.expect("open"); 3 }
                    };
                    n[k] += 1;
                }
                wg.done();
            }));
        }
        wg.wait();
        hs.into_iter().for_each(join);
        // Every value sent was received: nothing is left over.
        assert!(c.iter().all(Chan::is_empty));
    });
}

/// Go: runtime/chan_test.go TestSelectFairness.
///
/// A select over two always-ready channels (and two never-ready ones) picks each about
/// half the time: Go's bound, within 10 standard deviations.
#[test]
fn test_select_fairness() {
    const TRIALS: usize = 10_000;
    run(|| {
        let c1 = Chan::<u8>::new(TRIALS + 1);
        let c2 = Chan::<u8>::new(TRIALS + 1);
        for _ in 0..TRIALS + 1 {
            c1.send(1);
            c2.send(2);
        }
        let c3 = Chan::<u8>::new(0);
        let c4 = Chan::<u8>::new(0);
        let out = Chan::<u8>::new(0);
        let done = Chan::<u8>::new(0);
        let (o, d) = (out.clone(), done.clone());
        let h = go!(move || loop {
            let b = select! {
                recv(c3) -> v => v.expect("open"),
                recv(c4) -> v => v.expect("open"),
                recv(c1) -> v => v.expect("open"),
                recv(c2) -> v => v.expect("open"),
            };
            select! {
                send(o, b) -> () => {}
                recv(d) -> _ => return,
            }
        });
        let (mut cnt1, mut cnt2) = (0usize, 0usize);
        for _ in 0..TRIALS {
            match out.recv() {
                Some(1) => cnt1 += 1,
                Some(2) => cnt2 += 1,
                b => panic!("unexpected value {b:?} on channel"),
            }
        }
        let mean = TRIALS as f64 * 0.5;
        let stddev = (TRIALS as f64 * 0.5 * 0.5).sqrt();
        assert!(
            (cnt1 as f64 - mean).abs() <= 10.0 * stddev,
            "unfair select: in {TRIALS} trials, results were {cnt1}, {cnt2}"
        );
        done.close();
        join(h);
    });
}

/// Go: runtime/chan_test.go TestChanSendInterface.
#[test]
fn test_chan_send_interface() {
    struct Mt;
    run(|| {
        let m = Arc::new(Mt);
        let c = Chan::<Box<dyn Any + Send + Sync>>::new(1);
        c.send(Box::new(m.clone()));
        select! {
            send(c, Box::new(m.clone())) -> _ => {}
            default => {}
        }
        select! {
            send(c, Box::new(m.clone())) -> _ => {}
            send(c, Box::new(Arc::new(Mt))) -> _ => {}
            default => {}
        }
        // The buffer held one value; the selects took the default.
        assert_eq!(c.len(), 1);
    });
}

/// Go: runtime/chan_test.go TestPseudoRandomSend.
///
/// A select with two send arms on one channel sends each value reasonably often,
/// whether it finds the receiver waiting, waits for it (rendezvous), or has room in
/// the buffer.
#[test]
fn test_pseudo_random_send() {
    const N: usize = 100;
    run(|| {
        for cap in [0, N] {
            let c = Chan::<i32>::new(cap);
            // Go hands the list back under a mutex; the join does that here.
            let r = c.clone();
            let h = go!(move || {
                let mut l = vec![0i32; N];
                for slot in l.iter_mut() {
                    goro::yield_now();
                    *slot = r.recv().expect("open");
                }
                l
            });
            for _ in 0..N {
                select! {
                    send(c, 1) -> () => {}
                    send(c, 0) -> () => {}
                }
            }
            let l = join(h);
            let n1 = l.iter().filter(|&&v| v == 1).count();
            let n0 = l.len() - n1;
            assert!(
                n0 > N / 10 && n1 > N / 10,
                "Want pseudorandom, got {n0} zeros and {n1} ones (chan cap {cap})"
            );
        }
    });
}

/// Go: runtime/chan_test.go TestMultiConsumer.
#[test]
fn test_multi_consumer() {
    const NWORK: usize = 23;
    // Go's count.
    const NITER: usize = 271_828;
    const PN: [i64; 10] = [2, 3, 7, 11, 13, 17, 19, 23, 27, 31];
    run(|| {
        let q = Chan::<i64>::new(NWORK * 3);
        let r = Chan::<i64>::new(NWORK * 3);

        // Workers.
        let wg = goro::sync::WaitGroup::new();
        for w in 0..NWORK {
            wg.add(1);
            let (q, r, wg) = (q.clone(), r.clone(), wg.clone());
            go!(move || {
                for v in &q {
                    // Mess with the FIFO-ish nature of the loop.
                    if PN[w % PN.len()] == v {
                        goro::yield_now();
                    }
                    r.send(v);
                }
                wg.done();
            });
        }

        // Feeder and closer.
        let r2 = r.clone();
        let feeder = go!(move || {
            let mut expect = 0;
            for i in 0..NITER {
                let v = PN[i % PN.len()];
                expect += v;
                q.send(v);
            }
            q.close(); // no more work
            wg.wait(); // workers done
            r2.close(); // ... so there can be no more results
            expect
        });

        // Consume and check.
        let (mut n, mut s) = (0usize, 0i64);
        for v in &r {
            n += 1;
            s += v;
        }
        let expect = join(feeder);
        assert!(
            n == NITER && s == expect,
            "Expected sum {expect} (got {s}) from {NITER} iter (saw {n})"
        );
    });
}

/// Go: runtime/chan_test.go TestShrinkStackDuringBlockedSend.
///
/// Only the channel half: the sender uses a lot of stack between sends and blocks
/// on a rendezvous send while the receiver sleeps. Go then runs the GC to shrink the
/// sender's stack; goro has no GC and never shrinks a stack.
#[test]
fn test_shrink_stack_during_blocked_send() {
    const N: i32 = 10;
    run(|| {
        let c = Chan::<i32>::new(0);
        let done = Chan::<()>::new(0);
        let (t, d) = (c.clone(), done.clone());
        go!(move || {
            for i in 0..N {
                t.send(i);
                // Use lots of stack, briefly.
                stack_growth_recursive(20);
            }
            d.send(());
        });
        for i in 0..N {
            let x = c.recv();
            assert_eq!(x, Some(i), "bad channel read: want {i}, got {x:?}");
            // Give the sender time to finish with its stack and block in the send.
            goro::time::sleep(ms(1));
        }
        assert_eq!(done.recv(), Some(()));
    });
}

/// Go: runtime/chan_test.go TestSelectDuplicateChannel.
///
/// A coroutine can be queued on one channel several times: after a select with two
/// arms on c is woken through d, c's queue is intact and wakes the next receiver.
#[test]
fn test_select_duplicate_channel() {
    run(|| {
        let c = Chan::<i32>::new(0);
        let d = Chan::<i32>::new(0);
        let e = Chan::<i32>::new(0);

        // Coroutine A.
        let (ca, da, ea) = (c.clone(), d.clone(), e.clone());
        let a = go!(move || {
            let got = select! {
                recv(ca) -> v => ("c", v),
                recv(ca) -> v => ("c", v),
                recv(da) -> v => ("d", v),
            };
            ea.send(9);
            got
        });
        goro::time::sleep(ms(1)); // A gets queued on c first

        // Coroutine B.
        let cb = c.clone();
        let b = go!(move || cb.recv());
        goro::time::sleep(ms(1)); // B gets queued on c before we go on

        d.send(7); // wakes A, which unlinks itself from c
        assert_eq!(e.recv(), Some(9)); // A is done
        c.send(8); // wakes B, through c's queue
        assert_eq!(join(a), ("d", Some(7)));
        assert_eq!(join(b), Some(8));
    });
}

/// Go: runtime/chan_test.go TestSelectStackAdjust.
///
/// Only the channel half: two coroutines park in a select over c and d (and c2, d2:
/// nil, or c and d again), and closing d wakes both on a d arm with their locals
/// intact, a pointer to one of them included. Go runs the GC in between to shrink
/// their stacks; goro has no GC.
#[test]
fn test_select_stack_adjust() {
    run(|| {
        let c = Chan::<usize>::new(0);
        let d = Chan::<usize>::new(0);
        let f = |ready: Chan<bool>, dup: bool| {
            let (c, d) = (c.clone(), d.clone());
            go!(move || {
                // Temporarily grow the stack to 10 KiB.
                stack_growth_recursive(10);
                ready.send(true);

                let mut val = std::hint::black_box(42);
                let mut cx: *const i32 = &val;
                let (c2, d2) = if dup {
                    (c.clone(), d.clone())
                } else {
                    (nil_chan(), nil_chan())
                };
                // Receives from d (closed); cx is not touched.
                let arm = select! {
                    recv(c) -> v => { cx = v.expect("nobody sends on c") as *const i32; "c" }
                    recv(c2) -> _ => "c2",
                    recv(d) -> v => { assert_eq!(v, None); "d" }
                    recv(d2) -> v => { assert_eq!(v, None); "d2" }
                };
                assert!(arm == "d" || (dup && arm == "d2"), "woke on arm {arm}");
                assert!(std::ptr::eq(cx, &val), "cx no longer points to val");
                assert_eq!(val, 42, "val changed");
                val = 43;
                assert_eq!(std::hint::black_box(val), 43);
                ready.send(true);
            })
        };
        let ready1 = Chan::<bool>::new(0);
        let ready2 = Chan::<bool>::new(0);
        let h1 = f(ready1.clone(), false);
        let h2 = f(ready2.clone(), true);

        // Let the coroutines get into the select.
        assert_eq!(ready1.recv(), Some(true));
        assert_eq!(ready2.recv(), Some(true));
        goro::time::sleep(ms(10));

        // Wake the selects.
        d.close();
        assert_eq!(ready1.recv(), Some(true));
        assert_eq!(ready2.recv(), Some(true));
        join(h1);
        join(h2);
    });
}

// ---------------------------------------------------------------------------------
// test/chan/*.go
// ---------------------------------------------------------------------------------

/// Go: test/chan/doubleselect.go.
///
/// Two cases of one select must never both run: a value sent through one of four
/// channels by a select arrives exactly once.
#[test]
fn chan_doubleselect() {
    // Go's default count.
    const ITERATIONS: i32 = 100_000;
    run(|| {
        let c: Vec<Chan<i32>> = (0..4).map(|_| Chan::new(0)).collect();
        let done = Chan::<bool>::new(0);
        let cmux = Chan::<i32>::new(0);

        // The sender: each counter value to one of the four channels, then closes
        // them all (Go's deferred closes).
        let cs = c.clone();
        let sender = go!(move || {
            let (c1, c2, c3, c4) = (&cs[0], &cs[1], &cs[2], &cs[3]);
            for i in 0..ITERATIONS {
                select! {
                    send(c1, i) -> () => {}
                    send(c2, i) -> () => {}
                    send(c3, i) -> () => {}
                    send(c4, i) -> () => {}
                }
            }
            for ch in &cs {
                ch.close();
            }
        });
        // The muxes: forward each channel onto cmux.
        for ch in &c {
            let (inp, out, done) = (ch.clone(), cmux.clone(), done.clone());
            go!(move || {
                for v in &inp {
                    out.send(v);
                }
                done.send(true);
            });
        }
        let (d, m) = (done.clone(), cmux.clone());
        go!(move || {
            for _ in 0..4 {
                d.recv().expect("open");
            }
            m.close();
        });

        // The receiver: no duplicates.
        let mut seen = HashSet::new();
        for v in &cmux {
            assert!(seen.insert(v), "got duplicate value: {v}");
        }
        assert_eq!(seen.len(), ITERATIONS as usize, "values lost");
        join(sender);
    });
}

/// Go: test/chan/fifo.go (AsynchFifo and SynchFifo).
#[test]
fn chan_fifo() {
    const N: i32 = 10;
    run(|| {
        // AsynchFifo: a buffered channel is a FIFO.
        let ch = Chan::<i32>::new(N as usize);
        for i in 0..N {
            ch.send(i);
        }
        for i in 0..N {
            assert_eq!(ch.recv(), Some(i), "bad receive");
        }

        // SynchFifo: a daisy chain of coroutines reads a rendezvous channel in turn.
        let ch = Chan::<i32>::new(0);
        let start = Chan::<i32>::new(0);
        let mut inp = start.clone();
        let mut hs = Vec::new();
        for i in 0..N {
            let out = Chan::<i32>::new(0);
            let (ch, inp_i, out_i) = (ch.clone(), inp, out.clone());
            hs.push(go!(move || {
                inp_i.recv().expect("open");
                let v = ch.recv();
                assert_eq!(v, Some(i), "chain {i}");
                out_i.send(1);
            }));
            inp = out;
        }
        start.send(0);
        for i in 0..N {
            ch.send(i);
        }
        assert_eq!(inp.recv(), Some(1));
        hs.into_iter().for_each(join);
    });
}

/// Go: test/chan/goroutines.go.
///
/// Many coroutines threaded together by rendezvous channels pass one value down the
/// chain (Go's `left <- <-right`) and end cleanly.
#[test]
fn chan_goroutines() {
    // Go's default count.
    const N: usize = 10_000;
    run(|| {
        let leftmost = Chan::<i32>::new(0);
        let mut right = leftmost.clone();
        let mut hs = Vec::with_capacity(N);
        for _ in 0..N {
            let left = right;
            right = Chan::<i32>::new(0);
            let r = right.clone();
            hs.push(go!(move || left.send(r.recv().expect("open"))));
        }
        let r = right.clone();
        go!(move || r.send(1));
        assert_eq!(leftmost.recv(), Some(1));
        hs.into_iter().for_each(join);
    });
}

/// Go: test/chan/nonblock.go.
///
/// Non-blocking sends and receives (select with default) of several types, on
/// rendezvous and buffered channels, succeed once the counterpart is there.
#[test]
fn chan_nonblock() {
    run(|| {
        // Go's sleep(): two 10 µs ticks and three yields.
        let ticker = tick(Duration::from_micros(10));
        let sleep = move || {
            ticker.recv().unwrap();
            ticker.recv().unwrap();
            goro::yield_now();
            goro::yield_now();
            goro::yield_now();
        };
        let sync = Chan::<bool>::new(0);
        for buffer in 0..2 {
            nonblock_round(buffer, "i32", 123i32, 234i32, &sync, &sleep);
            nonblock_round(buffer, "i64", 123_456i64, 234_567i64, &sync, &sleep);
            nonblock_round(buffer, "b", true, true, &sync, &sleep);
            nonblock_round(
                buffer,
                "s",
                "hello".to_string(),
                "hello again".to_string(),
                &sync,
                &sleep,
            );
        }
    });
}

/// One type's part of nonblock.go: `to_receiver` goes to a receiving coroutine by a
/// non-blocking send, `from_sender` comes from a sending coroutine by a non-blocking
/// receive.
fn nonblock_round<T: PartialEq + Debug + Clone + Send + 'static>(
    buffer: usize,
    name: &str,
    to_receiver: T,
    from_sender: T,
    sync: &Chan<bool>,
    sleep: &dyn Fn(),
) {
    // Go: up to 100 ms per test.
    const MAX_TRIES: usize = 10_000;
    let c = Chan::<T>::new(buffer);
    select! {
        recv(c) -> v => panic!("blocked {name}sender: got {v:?}"),
        default => {}
    }

    // The receiving coroutine.
    let (r, strobe, want) = (c.clone(), sync.clone(), to_receiver.clone());
    go!(move || {
        assert_eq!(r.recv(), Some(want), "{} value", std::any::type_name::<T>());
        strobe.send(true);
    });
    let mut tries = 0;
    loop {
        select! {
            send(c, to_receiver.clone()) -> () => break,
            default => {
                tries += 1;
                assert!(tries <= MAX_TRIES, "{name}receiver buffer={buffer}: fail");
                sleep();
            }
        }
    }
    assert_eq!(sync.recv(), Some(true));

    // The sending coroutine.
    let (t, strobe, v) = (c.clone(), sync.clone(), from_sender.clone());
    go!(move || {
        t.send(v);
        strobe.send(true);
    });
    if buffer > 0 {
        assert_eq!(sync.recv(), Some(true));
    }
    let mut tries = 0;
    loop {
        select! {
            recv(c) -> v => {
                assert_eq!(v, Some(from_sender.clone()), "{name}sender value");
                break;
            }
            default => {
                tries += 1;
                assert!(tries <= MAX_TRIES, "{name}sender buffer={buffer}: fail");
                sleep();
            }
        }
    }
    if buffer == 0 {
        assert_eq!(sync.recv(), Some(true));
    }
}

/// Go: test/chan/select.go.
///
/// A select evaluates every send value once per execution, including those of arms
/// on nil channels, and a nil channel's arm is never chosen.
#[test]
fn chan_select() {
    run(|| {
        let counter = Cell::new(0u32);
        let shift = Cell::new(0u32);
        let get_value = || {
            counter.set(counter.get() + 1);
            1u32 << shift.get()
        };
        let send = |mut a: Option<&Chan<u32>>, mut b: Option<&Chan<u32>>| -> i32 {
            let nil = nil_chan::<u32>();
            let mut i = 0;
            for _ in 0..10 {
                let (ca, cb) = (a.unwrap_or(&nil), b.unwrap_or(&nil));
                let more = select! {
                    send(ca, get_value()) -> () => { i += 1; a = None; true }
                    send(cb, get_value()) -> () => { i += 1; b = None; true }
                    default => false,
                };
                if !more {
                    return i;
                }
                shift.set(shift.get() + 1);
            }
            panic!("Send looped more than 10 times");
        };

        let a = Chan::<u32>::new(1); // with buffering
        let b = Chan::<u32>::new(1);
        let v = send(Some(&a), Some(&b));
        assert_eq!(v, 2, "Send returned {v} != 2");
        let (av, bv) = (a.recv().expect("open"), b.recv().expect("open"));
        assert_eq!(av | bv, 3, "bad values {av} {bv}");
        let v = send(Some(&a), None);
        assert_eq!(v, 1, "Send returned {v} != 1");
        assert_eq!(counter.get(), 10, "counter is {} != 10", counter.get());
    });
}

/// Go: test/chan/select2.go (without its memory check; see the header).
///
/// 100 000 selects over a channel with traffic and one without, twice.
#[test]
fn chan_select2() {
    // Go's count.
    const N: usize = 100_000;
    run(|| {
        let c = Chan::<i32>::new(0);
        let dummy = Chan::<i32>::new(0);
        for _ in 0..2 {
            let t = c.clone();
            let h = go!(move || {
                for _ in 0..N {
                    t.send(1);
                }
            });
            for _ in 0..N {
                select! {
                    recv(c) -> v => assert_eq!(v, Some(1)),
                    recv(dummy) -> _ => panic!("dummy"),
                }
            }
            join(h);
        }
    });
}

/// Go: test/chan/select3.go.
///
/// The blocking semantics of sends, receives and selects on nil, closed, ready and
/// non-ready channels, and Go's panics for a send on a closed channel, plain or in a
/// select.
#[test]
fn chan_select3() {
    const ASYNC: usize = 1; // asynchronous channels
    run(|| {
        let nil_rx = never::<i32>();
        let nil_tx = never_sender::<i32>();
        let closedch = Chan::<i32>::new(0);
        closedch.close();

        // Sending to or receiving from a nil channel blocks.
        let t = nil_tx.clone();
        test_block(ALWAYS, move || {
            let _ = t.send(7);
        });
        let r = nil_rx.clone();
        test_block(ALWAYS, move || {
            let _ = r.recv();
        });

        // Sending to or receiving from a nil channel inside a select is never chosen.
        test_panic(NEVER, || {
            select! {
                send(nil_tx, 7) -> _ => unreachable(),
                default => {}
            }
        });
        test_panic(NEVER, || {
            select! {
                recv(nil_rx) -> _ => unreachable(),
                default => {}
            }
        });

        // Sending to an async channel with free buffer space never blocks.
        test_block(NEVER, || {
            let ch = Chan::<i32>::new(ASYNC);
            ch.send(7);
        });

        // Receiving from a closed channel never blocks.
        let r = closedch.clone();
        test_block(NEVER, move || {
            for _ in 0..10 {
                assert_eq!(
                    r.recv().unwrap_or(0),
                    0,
                    "expected zero value when reading from closed channel"
                );
                assert_eq!(r.recv(), None, "expected 0, false from closed channel");
            }
        });

        // Sending to a closed channel panics.
        test_panic(ALWAYS, || closedch.send(7));

        // Receiving from a non-ready channel always blocks.
        test_block(ALWAYS, || {
            let ch = Chan::<i32>::new(0);
            let _ = ch.recv();
        });

        // Empty selects always block.
        test_block(ALWAYS, || select! {});

        // Selects with only nil channels always block.
        let r = nil_rx.clone();
        test_block(ALWAYS, move || {
            select! {
                recv(r) -> _ => unreachable(),
            }
        });
        let t = nil_tx.clone();
        test_block(ALWAYS, move || {
            select! {
                send(t, 7) -> _ => unreachable(),
            }
        });
        let (r, t) = (nil_rx.clone(), nil_tx.clone());
        test_block(ALWAYS, move || {
            select! {
                send(t, 7) -> _ => unreachable(),
                recv(r) -> _ => unreachable(),
            }
        });

        // Selects with non-ready non-nil channels always block.
        test_block(ALWAYS, || {
            let ch = Chan::<i32>::new(0);
            select! {
                recv(ch) -> _ => unreachable(),
            }
        });

        // Selects with default cases don't block.
        test_block(NEVER, || select! { default => {} });
        let r = nil_rx.clone();
        test_block(NEVER, move || {
            select! {
                recv(r) -> _ => unreachable(),
                default => {}
            }
        });
        let t = nil_tx.clone();
        test_block(NEVER, move || {
            select! {
                send(t, 7) -> _ => unreachable(),
                default => {}
            }
        });

        // Selects with ready channels don't block.
        test_block(NEVER, || {
            let ch = Chan::<i32>::new(ASYNC);
            select! {
                send(ch, 7) -> () => {}
                default => unreachable(),
            }
        });
        test_block(NEVER, || {
            let ch = Chan::<i32>::new(ASYNC);
            ch.send(7);
            select! {
                recv(ch) -> v => assert_eq!(v, Some(7)),
                default => unreachable(),
            }
        });

        // Selects with closed channels behave like ordinary operations (Go's three
        // receive forms, `<-c`, `x := <-c` and `x, ok := <-c`, are one form here).
        let r = closedch.clone();
        test_block(NEVER, move || {
            select! {
                recv(r) -> v => assert_eq!(v, None),
            }
        });
        test_panic(ALWAYS, || {
            select! {
                send(closedch, 7) -> () => {}
            }
        });

        // A select does not get confused if it sees itself.
        test_block(ALWAYS, || {
            let c = Chan::<i32>::new(0);
            select! {
                send(c, 1) -> () => unreachable(),
                recv(c) -> _ => unreachable(),
            }
        });
    });
}

const ALWAYS: &str = "function did not";
const NEVER: &str = "function did";

fn unreachable() -> ! {
    panic!("control flow shouldn't reach here");
}

/// select3.go's testPanic: runs `f` and checks that it always (`ALWAYS`) or never
/// (`NEVER`) panics; Go's only panic here is "send on closed channel".
fn test_panic(signal: &'static str, f: impl FnOnce()) {
    let got = match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => NEVER,
        Err(p) => {
            assert_eq!(goro::panic_message(&*p), "send on closed channel");
            ALWAYS
        }
    };
    assert_eq!(got, signal, "{signal} panic");
}

/// select3.go's testBlock: runs `f` on a coroutine and checks, empirically (100 ms),
/// that it always or never blocks. A coroutine that blocks stays blocked, as in Go.
fn test_block(signal: &'static str, f: impl FnOnce() + Send + 'static) {
    // Room for both answers: the loser never waits.
    let c = Chan::<&'static str>::new(2);
    let c2 = c.clone();
    go!(move || {
        f();
        c2.send(NEVER); // f didn't block
    });
    let c3 = c.clone();
    go!(move || {
        goro::time::sleep(ms(100)); // 0.1 s seems plenty long
        c3.send(ALWAYS); // f blocked always
    });
    let got = c.recv().expect("open");
    assert_eq!(got, signal, "{signal} block");
}

/// Go: test/chan/select4.go.
///
/// Only the chosen arm's code runs (Go: the assignment target of a losing case is
/// not evaluated).
#[test]
fn chan_select4() {
    run(|| {
        let c = Chan::<i32>::new(1);
        let c1 = Chan::<i32>::new(0);
        c.send(42);
        let f_called = Cell::new(false);
        let x: i32;
        select! {
            recv(c1) -> v => { f_called.set(true); x = v.unwrap_or(0); }
            recv(c) -> v => { x = v.unwrap_or(0); }
        }
        assert!(!f_called.get(), "BUG: called f");
        assert_eq!(x, 42, "BUG: {x}");
    });
}

/// Go: test/chan/select6.go (Go issue 2075).
///
/// A select that loses on c1, where it was queued last behind another receiver,
/// leaves c1's queue intact for later waiters.
#[test]
fn chan_select6() {
    run(|| {
        let c1 = Chan::<bool>::new(0);
        let c2 = Chan::<bool>::new(0);
        let c3 = Chan::<bool>::new(0);
        let r = c1.clone();
        let h1 = go!(move || r.recv());
        let (r, r2, t3) = (c1.clone(), c2.clone(), c3.clone());
        let h2 = go!(move || {
            select! {
                recv(r) -> _ => panic!("dummy"),
                recv(r2) -> _ => t3.send(true),
            }
            r.recv()
        });
        let t2 = c2.clone();
        let h3 = go!(move || t2.send(true));
        assert_eq!(c3.recv(), Some(true));
        c1.send(true);
        c1.send(true);
        assert_eq!(join(h1), Some(true));
        assert_eq!(join(h2), Some(true));
        join(h3);
    });
}

/// Go: test/chan/select7.go.
///
/// Every pairing of a plain, one-arm-select or two-arm-select receive that discards
/// its value with a plain, one-arm-select or two-arm-select send.
#[test]
fn chan_select7() {
    fn recv1(c: Chan<i32>) {
        c.recv().expect("open");
    }
    fn recv2(c: Chan<i32>) {
        select! {
            recv(c) -> v => { v.expect("open"); }
        }
    }
    fn recv3(c: Chan<i32>) {
        let c2 = Chan::<i32>::new(0);
        select! {
            recv(c) -> v => { v.expect("open"); }
            recv(c2) -> _ => unreachable(),
        }
    }
    fn send1(recv: fn(Chan<i32>)) {
        let c = Chan::<i32>::new(0);
        let r = c.clone();
        let h = go!(move || recv(r));
        goro::yield_now();
        c.send(1);
        join(h);
    }
    fn send2(recv: fn(Chan<i32>)) {
        let c = Chan::<i32>::new(0);
        let r = c.clone();
        let h = go!(move || recv(r));
        goro::yield_now();
        select! {
            send(c, 1) -> () => {}
        }
        join(h);
    }
    fn send3(recv: fn(Chan<i32>)) {
        let c = Chan::<i32>::new(0);
        let r = c.clone();
        let h = go!(move || recv(r));
        goro::yield_now();
        let c2 = Chan::<i32>::new(0);
        select! {
            send(c, 1) -> () => {}
            send(c2, 1) -> () => unreachable(),
        }
        join(h);
    }
    run(|| {
        let recvs: [fn(Chan<i32>); 3] = [recv1, recv2, recv3];
        for recv in recvs {
            send1(recv);
            send2(recv);
            send3(recv);
        }
    });
}

/// Go: test/chan/select8.go.
///
/// Leaving a select early from an arm (Go's `break`), for one-arm, default-only,
/// two-arm and three-arm selects. Go's `break` leaves the select; here a labeled
/// block around the select plays that part.
#[test]
#[allow(unreachable_code)]
fn chan_select8() {
    run(|| {
        let ch = Chan::<i32>::new(0);
        let quit = Chan::<()>::new(0);
        let (t, q) = (ch.clone(), quit.clone());
        // Go: `for { ch <- 5 }`; here it also stops once `quit` is closed.
        let h = go!(move || while send_or_quit(&t, 5, &q) {});

        'sel: {
            select! {
                recv(ch) -> v => {
                    assert_eq!(v, Some(5));
                    break 'sel;
                    panic!("unreachable");
                }
            }
        }

        'sel: {
            select! {
                default => {
                    break 'sel;
                    panic!("unreachable");
                }
            }
        }

        'sel: {
            select! {
                recv(ch) -> v => {
                    assert_eq!(v, Some(5));
                    break 'sel;
                    panic!("unreachable");
                }
                default => {
                    break 'sel;
                    panic!("unreachable");
                }
            }
        }

        'sel: {
            select! {
                recv(ch) -> v => {
                    assert_eq!(v, Some(5));
                    break 'sel;
                    panic!("unreachable");
                }
                send(ch, 10) -> _ => panic!("unreachable"),
                default => {
                    break 'sel;
                    panic!("unreachable");
                }
            }
        }

        // Go's program just exits; here the sender stops at the close of `quit`.
        quit.close();
        join(h);
    });
}

/// Go: test/chan/sendstmt.go.
///
/// A send arm on a channel received from a channel of channels; a send of an
/// expression.
#[test]
#[allow(clippy::overly_complex_bool_expr, clippy::nonminimal_bool)]
fn chan_sendstmt() {
    run(|| {
        // chanchan: Go's `case <-cc <- 2` receives the channel on entering the select:
        // here the receive is the arm's channel expression.
        let cc = Chan::<Chan<i32>>::new(1);
        let c = Chan::<i32>::new(1);
        cc.send(c.clone());
        select! {
            send(cc.recv().expect("open"), 2) -> () => {}
            default => panic!("nonblock"),
        }
        assert_eq!(c.recv(), Some(2), "bad receive");

        // sendprec: `c <- false || true` sends the whole expression.
        let c = Chan::<bool>::new(1);
        c.send(false || true);
        assert_eq!(c.recv(), Some(true), "sent false");
    });
}

/// Go: test/chan/sieve1.go.
///
/// The classical concurrent prime sieve: a chain of filter coroutines on rendezvous
/// channels yields the primes below 100.
#[test]
fn chan_sieve1() {
    // Sends 2, 3, 4, ... on `ch` (until `quit` closes).
    fn generate(ch: Chan<i32>, quit: Chan<()>) {
        let mut i = 2;
        while send_or_quit(&ch, i, &quit) {
            i += 1;
        }
    }
    // Copies `inp` to `out`, dropping multiples of `prime`.
    fn filter(inp: Chan<i32>, out: Chan<i32>, prime: i32, quit: Chan<()>) {
        while let Some(i) = recv_or_quit(&inp, &quit) {
            if i % prime != 0 && !send_or_quit(&out, i, &quit) {
                return;
            }
        }
    }
    // Daisy-chains filters together.
    fn sieve(primes: Chan<i32>, quit: Chan<()>) {
        let mut ch = Chan::<i32>::new(0);
        let (c, q) = (ch.clone(), quit.clone());
        go!(move || generate(c, q));
        while let Some(prime) = recv_or_quit(&ch, &quit) {
            if !send_or_quit(&primes, prime, &quit) {
                return;
            }
            let ch1 = Chan::<i32>::new(0);
            let (c1, q) = (ch1.clone(), quit.clone());
            go!(move || filter(ch, c1, prime, q));
            ch = ch1;
        }
    }
    run(|| {
        let primes = Chan::<i32>::new(0);
        let quit = Chan::<()>::new(0);
        let (p, q) = (primes.clone(), quit.clone());
        let h = go!(move || sieve(p, q));
        for want in PRIMES {
            let x = primes.recv();
            assert_eq!(x, Some(want), "{x:?} != {want}");
        }
        // Go's program exits here; closing `quit` tears the chain down.
        quit.close();
        join(h);
    });
}

const PRIMES: [i32; 25] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97,
];

/// Go: test/chan/sieve2.go.
///
/// An Eratosthenes-style sieve over odd candidates: a heap merges channels of
/// multiples into a channel of composites, and a proxy coroutine buffers without
/// bound by switching its send arm off (a nil channel in Go) while it has nothing.
/// Every blocking operation also watches `quit`, which the test closes at its end.
#[test]
fn chan_sieve2() {
    // Odd numbers from 5.
    fn odds(quit: &Chan<()>) -> Chan<i32> {
        let out = Chan::<i32>::new(50);
        let (o, q) = (out.clone(), quit.clone());
        go!(move || {
            let mut n = 5;
            while send_or_quit(&o, n, &q) {
                n += 2;
            }
        });
        out
    }
    // Odd multiples of the prime `p`, from p*p.
    fn multiples(p: i32, quit: &Chan<()>) -> Chan<i32> {
        let out = Chan::<i32>::new(10);
        let (o, q) = (out.clone(), quit.clone());
        go!(move || {
            let mut n = p * p;
            while send_or_quit(&o, n, &q) {
                n += 2 * p;
            }
        });
        out
    }
    // A channel with its next value, ordered for a min-heap on that value.
    struct PeekCh {
        head: i32,
        ch: Chan<i32>,
    }
    impl PartialEq for PeekCh {
        fn eq(&self, o: &Self) -> bool {
            self.head == o.head
        }
    }
    impl Eq for PeekCh {}
    impl PartialOrd for PeekCh {
        fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
            Some(self.cmp(o))
        }
    }
    impl Ord for PeekCh {
        fn cmp(&self, o: &Self) -> CmpOrdering {
            o.head.cmp(&self.head)
        }
    }
    // A sending proxy for `out`: it buffers whatever it is sent, so sending to it
    // never blocks for long.
    fn sendproxy(out: Chan<i32>, quit: &Chan<()>) -> Chan<i32> {
        let proxy = Chan::<i32>::new(10);
        let (p, q) = (proxy.clone(), quit.clone());
        go!(move || {
            let nil = nil_chan::<i32>();
            let mut buf = VecDeque::new();
            loop {
                // Buffer empty: switch the output off.
                let (c, e) = match buf.front() {
                    Some(&e) => (&out, e),
                    None => (&nil, 0),
                };
                select! {
                    send(c, e) -> () => { buf.pop_front(); }
                    recv(p) -> x => buf.push_back(x.expect("never closed")),
                    recv(q) -> _ => return,
                }
            }
        });
        proxy
    }
    fn sieve(quit: &Chan<()>) -> Chan<i32> {
        // The output values.
        let out = Chan::<i32>::new(10);
        out.send(2);
        out.send(3);
        // The composites to be eliminated, in increasing order.
        let composites = Chan::<i32>::new(50);
        // The feedback loop.
        let primes = Chan::<i32>::new(10);
        primes.send(3);

        // Merge channels of multiples of `primes` into `composites`.
        let (pr, comp, q) = (primes.clone(), composites.clone(), quit.clone());
        go!(move || {
            let mut h = BinaryHeap::<PeekCh>::new();
            let mut min = 15;
            // Go's heap.Pop, receive the popped channel's next head, heap.Push.
            let advance = |h: &mut BinaryHeap<PeekCh>, min: &mut i32| -> Option<()> {
                let mut minchan = h.pop().expect("the heap holds a channel");
                *min = minchan.head;
                minchan.head = recv_or_quit(&minchan.ch, &q)?;
                h.push(minchan);
                Some(())
            };
            loop {
                let Some(p) = recv_or_quit(&pr, &q) else {
                    return;
                };
                let m = multiples(p, &q);
                let Some(head) = recv_or_quit(&m, &q) else {
                    return;
                };
                while min < head {
                    if !send_or_quit(&comp, min, &q) || advance(&mut h, &mut min).is_none() {
                        return;
                    }
                }
                while min == head {
                    if advance(&mut h, &mut min).is_none() {
                        return;
                    }
                }
                if !send_or_quit(&comp, head, &q) {
                    return;
                }
                let Some(next) = recv_or_quit(&m, &q) else {
                    return;
                };
                h.push(PeekCh { head: next, ch: m });
            }
        });

        // Sieve the composites out of the candidates.
        let (o, q) = (out.clone(), quit.clone());
        go!(move || {
            // Only multiples of primes up to sqrt(n) are needed for the nth prime, so
            // the merger takes primes far slower than they come: the proxy buffers
            // them, or this coroutine would block and deadlock the loop.
            let primes = sendproxy(primes, &q);
            let candidates = odds(&q);
            let Some(mut p) = recv_or_quit(&candidates, &q) else {
                return;
            };
            loop {
                let Some(c) = recv_or_quit(&composites, &q) else {
                    return;
                };
                while p < c {
                    if !send_or_quit(&primes, p, &q) || !send_or_quit(&o, p, &q) {
                        return;
                    }
                    let Some(next) = recv_or_quit(&candidates, &q) else {
                        return;
                    };
                    p = next;
                }
                if p == c {
                    let Some(next) = recv_or_quit(&candidates, &q) else {
                        return;
                    };
                    p = next;
                }
            }
        });
        out
    }
    run(|| {
        let quit = Chan::<()>::new(0);
        let primes = sieve(&quit);
        for want in PRIMES {
            let x = primes.recv();
            assert_eq!(x, Some(want), "{x:?} != {want}");
        }
        // Go's program exits here; closing `quit` tears the coroutines down.
        quit.close();
    });
}

/// Go: test/chan/zerosize.go.
///
/// Channels of zero-sized types, rendezvous and buffered (and, beyond Go's test, one
/// value through each buffered one).
#[test]
fn chan_zerosize() {
    run(|| {
        let _ = Chan::<[u8; 0]>::new(0);
        let c = Chan::<[u8; 0]>::new(1);
        c.send([]);
        assert_eq!(c.recv(), Some([]));
        let _ = Chan::<()>::new(0);
        let c = Chan::<()>::new(1);
        c.send(());
        assert_eq!(c.recv(), Some(()));
    });
}

// ---------------------------------------------------------------------------------
// test/closedchan.go
// ---------------------------------------------------------------------------------

/// closedchan.go's Chan interface: the channel operations, each done one way.
trait Ops {
    fn send(&self, x: i32);
    /// true: sent; false: would block.
    fn nbsend(&self, x: i32) -> bool;
    /// Go's `<-c`: the zero value once closed.
    fn recv(&self) -> i32 {
        self.recv2().0
    }
    /// Go's non-blocking `<-c`: (value, selected).
    fn nbrecv(&self) -> (i32, bool) {
        let (x, _, selected) = self.nbrecv2();
        (x, selected)
    }
    /// Go's `x, ok := <-c`.
    fn recv2(&self) -> (i32, bool);
    /// Go's non-blocking `x, ok := <-c`: (value, ok, selected).
    fn nbrecv2(&self) -> (i32, bool, bool);
    fn close(&self);
    fn imp(&self) -> &'static str;
}

/// Go's `x, ok` from an `Option`.
fn ok_or_zero(v: Option<i32>) -> (i32, bool) {
    match v {
        Some(x) => (x, true),
        None => (0, false),
    }
}

/// Direct channel operations where Go has them (Go's XChan): `c <- x`, `<-c`; the
/// non-blocking ones are selects with a default, in Go as here.
struct XChan(Chan<i32>);

impl Ops for XChan {
    fn send(&self, x: i32) {
        self.0.send(x);
    }
    fn nbsend(&self, x: i32) -> bool {
        select! {
            send(self.0, x) -> () => true,
            default => false,
        }
    }
    fn recv(&self) -> i32 {
        self.0.recv().unwrap_or(0)
    }
    fn nbrecv(&self) -> (i32, bool) {
        select! {
            recv(self.0) -> v => (v.unwrap_or(0), true),
            default => (0, false),
        }
    }
    fn recv2(&self) -> (i32, bool) {
        ok_or_zero(self.0.recv())
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        select! {
            recv(self.0) -> v => {
                let (x, ok) = ok_or_zero(v);
                (x, ok, true)
            }
            default => (0, false, false),
        }
    }
    fn close(&self) {
        self.0.close();
    }
    fn imp(&self) -> &'static str {
        "(<- operator)"
    }
}

/// Operations through one-arm selects (Go's SChan).
struct SChan(Chan<i32>);

impl Ops for SChan {
    fn send(&self, x: i32) {
        select! {
            send(self.0, x) -> () => {}
        }
    }
    fn nbsend(&self, x: i32) -> bool {
        select! {
            default => false,
            send(self.0, x) -> () => true,
        }
    }
    fn recv2(&self) -> (i32, bool) {
        select! {
            recv(self.0) -> v => ok_or_zero(v),
        }
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        select! {
            default => (0, false, false),
            recv(self.0) -> v => {
                let (x, ok) = ok_or_zero(v);
                (x, ok, true)
            }
        }
    }
    fn close(&self) {
        self.0.close();
    }
    fn imp(&self) -> &'static str {
        "(select)"
    }
}

/// Operations through larger selects, with an arm on a channel nobody sends on (Go's
/// SSChan and its `dummy`).
struct SSChan(Chan<i32>, Chan<bool>);

impl Ops for SSChan {
    fn send(&self, x: i32) {
        select! {
            send(self.0, x) -> () => {}
            recv(self.1) -> _ => panic!("send: dummy"),
        }
    }
    fn nbsend(&self, x: i32) -> bool {
        select! {
            default => false,
            recv(self.1) -> _ => panic!("nbsend: dummy"),
            send(self.0, x) -> () => true,
        }
    }
    fn recv2(&self) -> (i32, bool) {
        select! {
            recv(self.1) -> _ => panic!("recv: dummy"),
            recv(self.0) -> v => ok_or_zero(v),
        }
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        select! {
            recv(self.1) -> _ => panic!("nbrecv: dummy"),
            default => (0, false, false),
            recv(self.0) -> v => {
                let (x, ok) = ok_or_zero(v);
                (x, ok, true)
            }
        }
    }
    fn close(&self) {
        self.0.close();
    }
    fn imp(&self) -> &'static str {
        "(larger select)"
    }
}

/// Wraps a channel as one of the Ops implementations.
type MakeChan<'a> = dyn Fn(Chan<i32>) -> Box<dyn Ops> + 'a;

/// Go's shouldPanic: `f` panics "send on closed channel".
fn should_panic_send(what: &str, f: impl FnOnce()) {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(()) => panic!("{what}: did not panic"),
        Err(p) => assert_eq!(goro::panic_message(&*p), "send on closed channel", "{what}"),
    }
}

/// closedchan.go's test1: a closed, drained channel.
fn closed_test1(c: &dyn Ops) {
    let imp = c.imp();
    for _ in 0..3 {
        // A receive gets the close signal (the zero value).
        assert_eq!(c.recv(), 0, "test1: recv on closed {imp}");
        assert_eq!(c.recv2(), (0, false), "test1: recv2 on closed {imp}");
        // So does a non-blocking one: it got a value without blocking, so it was
        // selected.
        assert_eq!(c.nbrecv(), (0, true), "test1: recv on closed nb {imp}");
        assert_eq!(
            c.nbrecv2(),
            (0, false, true),
            "test1: recv2 on closed nb {imp}"
        );
    }
    // A send on a closed channel panics, non-blocking or not.
    should_panic_send(&format!("test1: nbsend on closed {imp}"), || {
        c.nbsend(1);
    });
    // The value was discarded.
    assert_eq!(
        c.recv(),
        0,
        "test1: recv on closed got non-zero after send on closed {imp}"
    );
    should_panic_send(&format!("test1: send on closed {imp}"), || c.send(2));
    assert_eq!(
        c.recv(),
        0,
        "test1: recv on closed got non-zero after send on closed {imp}"
    );
}

/// Go: test/closedchan.go.
///
/// Receives on a closed channel (rendezvous, or buffered with one value left), done
/// directly, through selects and through larger selects; sends on it panic; closing
/// twice panics.
#[test]
fn closedchan() {
    run(|| {
        let dummy = Chan::<bool>::new(0);
        let mks: [&MakeChan<'_>; 3] = [&|c| Box::new(XChan(c)), &|c| Box::new(SChan(c)), &|c| {
            Box::new(SSChan(c, dummy.clone()))
        }];
        let closedsync = |mk: &MakeChan<'_>| {
            let c = mk(Chan::new(0));
            c.close();
            c
        };
        let closedasync = |mk: &MakeChan<'_>| {
            let c = mk(Chan::new(2));
            c.send(1);
            c.close();
            c
        };

        for mk in mks {
            closed_test1(&*closedsync(mk));
        }

        // testasync1..4: the last buffered value comes out by each kind of receive,
        // then the channel behaves as closed.
        let testcloseds: [fn(&dyn Ops); 4] = [
            |c| {
                assert_eq!(c.recv(), 1, "testasync1: Recv did not get 1 {}", c.imp());
                closed_test1(c);
            },
            |c| {
                assert_eq!(
                    c.recv2(),
                    (1, true),
                    "testasync2: Recv2 did not get 1, true {}",
                    c.imp()
                );
                closed_test1(c);
            },
            |c| {
                assert_eq!(
                    c.nbrecv(),
                    (1, true),
                    "testasync3: Nbrecv did not get 1, true {}",
                    c.imp()
                );
                closed_test1(c);
            },
            |c| {
                assert_eq!(
                    c.nbrecv2(),
                    (1, true, true),
                    "testasync4: Nbrecv2 did not get 1, true, true {}",
                    c.imp()
                );
                closed_test1(c);
            },
        ];
        for testclosed in testcloseds {
            for mk in mks {
                testclosed(&*closedasync(mk));
            }
        }

        // Closing a closed channel panics (Go's `close(nil)`: no nil Chan).
        let ch = Chan::<i32>::new(0);
        ch.close();
        assert_eq!(panic_text(|| ch.close()), "close of closed channel");
        // The failed close changed nothing.
        assert_eq!(ch.recv(), None);
    });
}
