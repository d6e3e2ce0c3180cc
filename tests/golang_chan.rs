//! Go's own channel and `select` tests, ported to goro.
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
//! from the behaviour each Go test checks. crossbeam-channel's `tests/golang.rs` was
//! consulted only to see which behaviours port to Rust; no code is taken from it.
//!
//! How the translation goes:
//!
//! - Every test body runs on a coroutine, under a watchdog (`run`), so a hang fails.
//!   Go's goroutines are `goro::go!` coroutines, `runtime.Gosched` is
//!   `goro::yield_now`, `time.Sleep` is `goro::time::sleep`.
//! - `close(c)` is `Sender::close`; `v, ok := <-c` on a closed and drained channel is
//!   `recv()` returning `Err(RecvError)`.
//! - Deliberate difference: sending on a closed channel panics in Go; in goro it
//!   returns the value in `Err(SendError(v))`, and the ports assert that `Err`.
//!   Closing twice panics in Go; in goro it is not an error.
//! - A nil channel in a `select`: `never()` for a receive, `never_sender()` for a
//!   send.
//! - Go programs whose goroutines loop forever (the sieves, select8) stop here when
//!   the test drops its end of a channel: their sends then fail and they return.
//! - Go changes `GOMAXPROCS` in a few tests (TestChan: 4, TestSelfSelect: 2,
//!   TestSelectStress: 10, doubleselect.go: 2). The ports leave it alone: the whole
//!   file runs at the default, at 1 and at 2 Ps (`under_maxprocs_1_and_2`).
//! - Iteration counts are Go's full ones (not its `-short` ones), as the whole file
//!   runs in a few seconds. No test asserts wall-clock speed; the fairness tests use
//!   Go's loose bounds.
//
// Not ported:
// - TestNoShrinkStackWhileParking — deliberate: it races GC stack scanning against a
//   goroutine parking on a channel; goro has no GC and never moves or shrinks a
//   stack, and without the GC the test is TestShrinkStackDuringBlockedSend's traffic.
// - The GC halves of TestShrinkStackDuringBlockedSend and TestSelectStackAdjust
//   (runtime.GC, runtime.ReadMemStats): no GC. Their channel halves are ported.
// - test/chan/select2.go's memory check — missing API: no heap statistics
//   (runtime.ReadMemStats); goro's select keeps its per-arm state on the caller's
//   stack. The 100 000 selects themselves are ported.
// - test/chan/perm.go — not runnable: a compile-time errorcheck test of channel
//   directions (send on a receive-only channel and so on). goro's Sender/Receiver
//   split makes those programs fail to type-check, so there is nothing to run.
// - test/chan/powser1.go, powser2.go — left out by request (power series over
//   channels).
// - test/chan/select5.go — not runnable: a generator that writes Go programs to check
//   the evaluation order of every select shape. The rule it checks (each channel and
//   send value once, in source order) is tested in chan_select.rs
//   (`select_syntax_trailing_commas_and_temporaries`).
// - test/closedchan.go's close(nil) — no counterpart: `never_sender()` is a Sender
//   like any other, and closing it is not an error (nothing panics). Its
//   "close twice panics" is a deliberate difference (see above) and is asserted as
//   "not an error".
// - Go channel tests outside these files (runtime/chanbarrier_test.go, a GC
//   write-barrier test; test/ken/chan*.go) are not part of this port.

mod common;

use std::any::Any;
use std::cell::Cell;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::join;
use goro::chan::{
    channel, never, never_sender, tick, Receiver, RecvError, SendError, Sender, TryRecvError,
    TrySendError,
};
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
                let (tx, rx) = channel::<i32>(cap);
                let recv1 = Arc::new(AtomicBool::new(false));
                let recv2 = Arc::new(AtomicBool::new(false));
                for flag in [&recv1, &recv2] {
                    let (rx, flag) = (rx.clone(), flag.clone());
                    go!(move || {
                        let _ = rx.recv();
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
                        recv(rx) -> _ => panic!("chan[{cap}]: receive from empty chan"),
                        default => {}
                    }
                }
                tx.send(0).unwrap();
                tx.send(0).unwrap();
            }

            {
                // Sending to a full channel blocks.
                let (tx, rx) = channel::<i32>(cap);
                for i in 0..cap {
                    tx.send(i as i32).unwrap();
                }
                let sent = Arc::new(AtomicBool::new(false));
                let (tx2, sent2) = (tx.clone(), sent.clone());
                go!(move || {
                    let _ = tx2.send(0);
                    sent2.store(true, Ordering::SeqCst);
                });
                goro::time::sleep(ms(1));
                assert!(
                    !sent.load(Ordering::SeqCst),
                    "chan[{cap}]: send to full chan"
                );
                // A non-blocking send does not block.
                select! {
                    send(tx, 0) -> _ => panic!("chan[{cap}]: send to full chan"),
                    default => {}
                }
                let _ = rx.recv();
            }

            {
                // A closed channel yields its buffered values, then "zero, !ok".
                let (tx, rx) = channel::<i32>(cap);
                for i in 0..cap {
                    tx.send(i as i32).unwrap();
                }
                tx.close();
                for i in 0..cap {
                    let v = rx.recv();
                    assert_eq!(v, Ok(i as i32), "chan[{cap}]: received {v:?}, expected {i}");
                }
                for _ in 0..2 {
                    let v = rx.recv();
                    assert_eq!(
                        v,
                        Err(RecvError),
                        "chan[{cap}]: received {v:?} from closed chan"
                    );
                }
            }

            {
                // Closing unblocks a receive.
                let (tx, rx) = channel::<i32>(cap);
                let (done_tx, done_rx) = channel::<bool>(0);
                go!(move || {
                    let v = rx.recv();
                    done_tx.send(v == Err(RecvError)).unwrap();
                });
                goro::time::sleep(ms(1));
                tx.close();
                assert!(
                    done_rx.recv().unwrap(),
                    "chan[{cap}]: received non zero from closed chan"
                );
            }

            {
                // 100 integers arrive uncorrupted and in FIFO order; twice (Go's
                // second round uses `v, ok := <-c`).
                let (tx, rx) = channel::<i32>(cap);
                for _ in 0..2 {
                    let t = tx.clone();
                    go!(move || {
                        for i in 0..100 {
                            t.send(i).unwrap();
                        }
                    });
                    for i in 0..100 {
                        let v = rx.recv();
                        assert_eq!(v, Ok(i), "chan[{cap}]: received {v:?}, expected {i}");
                    }
                }

                // 4 coroutines send 0..1000 each, 4 receive 1000 each: every value
                // arrives 4 times.
                const P: usize = 4;
                const L: i32 = 1000;
                for _ in 0..P {
                    let t = tx.clone();
                    go!(move || {
                        for i in 0..L {
                            t.send(i).unwrap();
                        }
                    });
                }
                let (done_tx, done_rx) = channel::<HashMap<i32, usize>>(0);
                for _ in 0..P {
                    let (r, d) = (rx.clone(), done_tx.clone());
                    go!(move || {
                        let mut recv = HashMap::new();
                        for _ in 0..L {
                            *recv.entry(r.recv().unwrap()).or_insert(0) += 1;
                        }
                        d.send(recv).unwrap();
                    });
                }
                let mut recv = HashMap::new();
                for _ in 0..P {
                    for (k, v) in done_rx.recv().unwrap() {
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
                let (tx, rx) = channel::<i32>(cap);
                assert_eq!(
                    (rx.len(), rx.capacity()),
                    (0, cap),
                    "chan[{cap}]: bad len/cap"
                );
                assert_eq!(
                    (tx.len(), tx.capacity()),
                    (0, cap),
                    "chan[{cap}]: bad len/cap"
                );
                for i in 0..cap {
                    tx.send(i as i32).unwrap();
                }
                assert_eq!(
                    (rx.len(), rx.capacity()),
                    (cap, cap),
                    "chan[{cap}]: bad len/cap"
                );
                assert_eq!(
                    (tx.len(), tx.capacity()),
                    (cap, cap),
                    "chan[{cap}]: bad len/cap"
                );
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
            let (tx, rx) = channel::<i32>(1);
            tx.send(1).unwrap();
            let r = rx.clone();
            let h = go!(move || {
                select! {
                    recv(r) -> _ => {}
                    default => panic!("chan is not ready"),
                }
            });
            tx.close();
            let _ = rx.recv();
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
        let (done_tx, done_rx) = channel::<bool>(1);
        for _ in 0..N {
            let (c1_tx, c1_rx) = channel::<i32>(1);
            let (c2_tx, c2_rx) = channel::<i32>(1);
            c1_tx.send(1).unwrap();
            let (c1, c2, done) = (c1_rx.clone(), c2_rx.clone(), done_tx.clone());
            go!(move || {
                let ready = select! {
                    recv(c1) -> _ => true,
                    recv(c2) -> _ => true,
                    default => false,
                };
                done.send(ready).unwrap();
            });
            c2_tx.send(1).unwrap();
            select! {
                recv(c1_rx) -> _ => {}
                default => {}
            }
            assert!(done_rx.recv().unwrap(), "no chan is ready");
        }
    });
}

/// Go: runtime/chan_test.go TestNonblockSelectRace2 (closing c2 replaces sending on it).
#[test]
fn test_nonblock_select_race2() {
    // Go's count (1000 with -short).
    const N: usize = 100_000;
    run(|| {
        let (done_tx, done_rx) = channel::<bool>(1);
        for _ in 0..N {
            let (c1_tx, c1_rx) = channel::<i32>(1);
            let (c2_tx, c2_rx) = channel::<i32>(0);
            c1_tx.send(1).unwrap();
            let (c1, c2, done) = (c1_rx.clone(), c2_rx.clone(), done_tx.clone());
            go!(move || {
                let ready = select! {
                    recv(c1) -> _ => true,
                    recv(c2) -> _ => true,
                    default => false,
                };
                done.send(ready).unwrap();
            });
            c2_tx.close();
            select! {
                recv(c1_rx) -> _ => {}
                default => {}
            }
            assert!(done_rx.recv().unwrap(), "no chan is ready");
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
            let (tx, rx) = channel::<i32>(cap);
            let mut hs = Vec::new();
            for p in 0..2i32 {
                let (tx, rx, wg) = (tx.clone(), rx.clone(), wg.clone());
                hs.push(go!(move || {
                    for i in 0..1000 {
                        let got = if p == 0 || i % 2 == 0 {
                            select! {
                                send(tx, p) -> r => { r.unwrap(); None }
                                recv(rx) -> v => Some(v.unwrap()),
                            }
                        } else {
                            select! {
                                recv(rx) -> v => Some(v.unwrap()),
                                send(tx, p) -> r => { r.unwrap(); None }
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
/// deadlock.
#[test]
fn test_select_stress() {
    // Go's count (10 000 with -short).
    const N: usize = 100_000;
    run(|| {
        let chans = [
            channel::<i32>(0),
            channel::<i32>(0),
            channel::<i32>(2),
            channel::<i32>(3),
        ];
        let txs: Vec<Sender<i32>> = chans.iter().map(|(t, _)| t.clone()).collect();
        let rxs: Vec<Receiver<i32>> = chans.iter().map(|(_, r)| r.clone()).collect();
        let wg = goro::sync::WaitGroup::new();
        wg.add(10);
        let mut hs = Vec::new();
        for k in 0..4 {
            let (t, wg1) = (txs[k].clone(), wg.clone());
            hs.push(go!(move || {
                for _ in 0..N {
                    t.send(0).unwrap();
                }
                wg1.done();
            }));
            let (r, wg2) = (rxs[k].clone(), wg.clone());
            hs.push(go!(move || {
                for _ in 0..N {
                    r.recv().unwrap();
                }
                wg2.done();
            }));
        }
        {
            let (txs, wg) = (txs.clone(), wg.clone());
            hs.push(go!(move || {
                let nil = never_sender::<i32>();
                let mut n = [0usize; 4];
                for _ in 0..4 * N {
                    let c: Vec<&Sender<i32>> = (0..4)
                        .map(|k| if n[k] < N { &txs[k] } else { &nil })
                        .collect();
                    let (c0, c1, c2, c3) = (c[0], c[1], c[2], c[3]);
                    let k = select! {
                        send(c3, 0) -> r => { r.unwrap(); 3 }
                        send(c2, 0) -> r => { r.unwrap(); 2 }
                        send(c0, 0) -> r => { r.unwrap(); 0 }
                        send(c1, 0) -> r => { r.unwrap(); 1 }
                    };
                    n[k] += 1;
                }
                wg.done();
            }));
        }
        {
            let (rxs, wg) = (rxs.clone(), wg.clone());
            hs.push(go!(move || {
                let nil = never::<i32>();
                let mut n = [0usize; 4];
                for _ in 0..4 * N {
                    let c: Vec<&Receiver<i32>> = (0..4)
                        .map(|k| if n[k] < N { &rxs[k] } else { &nil })
                        .collect();
                    let (c0, c1, c2, c3) = (c[0], c[1], c[2], c[3]);
                    let k = select! {
                        recv(c0) -> v => { v.unwrap(); 0 }
                        recv(c1) -> v => { v.unwrap(); 1 }
                        recv(c2) -> v => { v.unwrap(); 2 }
                        recv(c3) -> v => { v.unwrap(); 3 }
                    };
                    n[k] += 1;
                }
                wg.done();
            }));
        }
        wg.wait();
        hs.into_iter().for_each(join);
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
        let (c1_tx, c1_rx) = channel::<u8>(TRIALS + 1);
        let (c2_tx, c2_rx) = channel::<u8>(TRIALS + 1);
        for _ in 0..TRIALS + 1 {
            c1_tx.send(1).unwrap();
            c2_tx.send(2).unwrap();
        }
        let (_c3_tx, c3_rx) = channel::<u8>(0);
        let (_c4_tx, c4_rx) = channel::<u8>(0);
        let (out_tx, out_rx) = channel::<u8>(0);
        let (done_tx, done_rx) = channel::<u8>(0);
        let h = go!(move || loop {
            let b = select! {
                recv(c3_rx) -> v => v.unwrap(),
                recv(c4_rx) -> v => v.unwrap(),
                recv(c1_rx) -> v => v.unwrap(),
                recv(c2_rx) -> v => v.unwrap(),
            };
            select! {
                send(out_tx, b) -> r => r.unwrap(),
                recv(done_rx) -> _ => return,
            }
        });
        let (mut cnt1, mut cnt2) = (0usize, 0usize);
        for _ in 0..TRIALS {
            match out_rx.recv() {
                Ok(1) => cnt1 += 1,
                Ok(2) => cnt2 += 1,
                b => panic!("unexpected value {b:?} on channel"),
            }
        }
        let mean = TRIALS as f64 * 0.5;
        let stddev = (TRIALS as f64 * 0.5 * 0.5).sqrt();
        assert!(
            (cnt1 as f64 - mean).abs() <= 10.0 * stddev,
            "unfair select: in {TRIALS} trials, results were {cnt1}, {cnt2}"
        );
        done_tx.close();
        join(h);
    });
}

/// Go: runtime/chan_test.go TestChanSendInterface.
#[test]
fn test_chan_send_interface() {
    struct Mt;
    run(|| {
        let m = Arc::new(Mt);
        let (tx, _rx) = channel::<Box<dyn Any + Send + Sync>>(1);
        tx.send(Box::new(m.clone())).unwrap();
        select! {
            send(tx, Box::new(m.clone())) -> _ => {}
            default => {}
        }
        select! {
            send(tx, Box::new(m.clone())) -> _ => {}
            send(tx, Box::new(Arc::new(Mt))) -> _ => {}
            default => {}
        }
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
            let (tx, rx) = channel::<i32>(cap);
            // Go hands the list back under a mutex; the join does that here.
            let h = go!(move || {
                let mut l = vec![0i32; N];
                for slot in l.iter_mut() {
                    goro::yield_now();
                    *slot = rx.recv().unwrap();
                }
                l
            });
            for _ in 0..N {
                select! {
                    send(tx, 1) -> r => r.unwrap(),
                    send(tx, 0) -> r => r.unwrap(),
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
        let (q_tx, q_rx) = channel::<i64>(NWORK * 3);
        let (r_tx, r_rx) = channel::<i64>(NWORK * 3);

        // Workers.
        let wg = goro::sync::WaitGroup::new();
        for w in 0..NWORK {
            wg.add(1);
            let (q, r, wg) = (q_rx.clone(), r_tx.clone(), wg.clone());
            go!(move || {
                for v in &q {
                    // Mess with the FIFO-ish nature of the loop.
                    if PN[w % PN.len()] == v {
                        goro::yield_now();
                    }
                    r.send(v).unwrap();
                }
                wg.done();
            });
        }
        drop(q_rx);

        // Feeder and closer.
        let feeder = go!(move || {
            let mut expect = 0;
            for i in 0..NITER {
                let v = PN[i % PN.len()];
                expect += v;
                q_tx.send(v).unwrap();
            }
            q_tx.close(); // no more work
            wg.wait(); // workers done
            r_tx.close(); // ... so there can be no more results
            expect
        });

        // Consume and check.
        let (mut n, mut s) = (0usize, 0i64);
        for v in &r_rx {
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
        let (tx, rx) = channel::<i32>(0);
        let (done_tx, done_rx) = channel::<()>(0);
        go!(move || {
            for i in 0..N {
                tx.send(i).unwrap();
                // Use lots of stack, briefly.
                stack_growth_recursive(20);
            }
            done_tx.send(()).unwrap();
        });
        for i in 0..N {
            let x = rx.recv();
            assert_eq!(x, Ok(i), "bad channel read: want {i}, got {x:?}");
            // Give the sender time to finish with its stack and block in the send.
            goro::time::sleep(ms(1));
        }
        done_rx.recv().unwrap();
    });
}

/// Go: runtime/chan_test.go TestSelectDuplicateChannel.
///
/// A coroutine can be queued on one channel several times: after a select with two
/// arms on c is woken through d, c's queue is intact and wakes the next receiver.
#[test]
fn test_select_duplicate_channel() {
    run(|| {
        let (c_tx, c_rx) = channel::<i32>(0);
        let (d_tx, d_rx) = channel::<i32>(0);
        let (e_tx, e_rx) = channel::<i32>(0);

        // Coroutine A.
        let c = c_rx.clone();
        let a = go!(move || {
            let got = select! {
                recv(c) -> v => ("c", v),
                recv(c) -> v => ("c", v),
                recv(d_rx) -> v => ("d", v),
            };
            e_tx.send(9).unwrap();
            got
        });
        goro::time::sleep(ms(1)); // A gets queued on c first

        // Coroutine B.
        let b = go!(move || c_rx.recv());
        goro::time::sleep(ms(1)); // B gets queued on c before we go on

        d_tx.send(7).unwrap(); // wakes A, which unlinks itself from c
        assert_eq!(e_rx.recv(), Ok(9)); // A is done
        c_tx.send(8).unwrap(); // wakes B, through c's queue
        assert_eq!(join(a), ("d", Ok(7)));
        assert_eq!(join(b), Ok(8));
    });
}

/// Go: runtime/chan_test.go TestSelectStackAdjust.
///
/// Only the channel half: two coroutines park in a select over c and d, one with each
/// channel named twice, and closing d wakes both on a d arm with their locals intact.
/// Go runs the GC in between to shrink their stacks; goro has no GC.
#[test]
fn test_select_stack_adjust() {
    run(|| {
        let (_c_tx, c_rx) = channel::<i32>(0);
        let (d_tx, d_rx) = channel::<i32>(0);
        let f = |ready: Sender<bool>, dup: bool| {
            let (c, d) = (c_rx.clone(), d_rx.clone());
            go!(move || {
                // Temporarily grow the stack to 10 KiB.
                stack_growth_recursive(10);
                ready.send(true).unwrap();

                let val = std::hint::black_box(42);
                let mut cx = 0;
                let (c2, d2) = if dup {
                    (c.clone(), d.clone())
                } else {
                    (never(), never())
                };
                // Receives from d (closed); cx is not touched.
                let arm = select! {
                    recv(c) -> v => { cx = v.unwrap(); "c" }
                    recv(c2) -> _ => "c2",
                    recv(d) -> v => { assert_eq!(v, Err(RecvError)); "d" }
                    recv(d2) -> v => { assert_eq!(v, Err(RecvError)); "d2" }
                };
                assert!(arm == "d" || (dup && arm == "d2"), "woke on arm {arm}");
                assert_eq!((cx, val), (0, 42), "locals changed");
                ready.send(true).unwrap();
            })
        };
        let (ready1_tx, ready1_rx) = channel::<bool>(0);
        let (ready2_tx, ready2_rx) = channel::<bool>(0);
        let h1 = f(ready1_tx, false);
        let h2 = f(ready2_tx, true);

        // Let the coroutines get into the select.
        ready1_rx.recv().unwrap();
        ready2_rx.recv().unwrap();
        goro::time::sleep(ms(10));

        // Wake the selects.
        d_tx.close();
        ready1_rx.recv().unwrap();
        ready2_rx.recv().unwrap();
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
        let chans: Vec<_> = (0..4).map(|_| channel::<i32>(0)).collect();
        let (done_tx, done_rx) = channel::<bool>(0);
        let (cmux_tx, cmux_rx) = channel::<i32>(0);

        // The sender: each counter value to one of the four channels.
        let txs: Vec<Sender<i32>> = chans.iter().map(|(t, _)| t.clone()).collect();
        let sender = go!(move || {
            let (c1, c2, c3, c4) = (&txs[0], &txs[1], &txs[2], &txs[3]);
            for i in 0..ITERATIONS {
                select! {
                    send(c1, i) -> r => r.unwrap(),
                    send(c2, i) -> r => r.unwrap(),
                    send(c3, i) -> r => r.unwrap(),
                    send(c4, i) -> r => r.unwrap(),
                }
            }
            for t in &txs {
                t.close();
            }
        });
        // The muxes: forward each channel onto cmux.
        for (_, rx) in &chans {
            let (rx, out, done) = (rx.clone(), cmux_tx.clone(), done_tx.clone());
            go!(move || {
                for v in &rx {
                    out.send(v).unwrap();
                }
                done.send(true).unwrap();
            });
        }
        drop(chans);
        go!(move || {
            for _ in 0..4 {
                done_rx.recv().unwrap();
            }
            cmux_tx.close();
        });

        // The receiver: no duplicates.
        let mut seen = HashSet::new();
        for v in &cmux_rx {
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
        let (tx, rx) = channel::<i32>(N as usize);
        for i in 0..N {
            tx.send(i).unwrap();
        }
        for i in 0..N {
            assert_eq!(rx.recv(), Ok(i), "bad receive");
        }

        // SynchFifo: a daisy chain of coroutines reads a rendezvous channel in turn.
        let (ch_tx, ch_rx) = channel::<i32>(0);
        let (start, mut inp) = channel::<i32>(0);
        let mut hs = Vec::new();
        for i in 0..N {
            let (out_tx, out_rx) = channel::<i32>(0);
            let ch = ch_rx.clone();
            hs.push(go!(move || {
                inp.recv().unwrap();
                let v = ch.recv();
                assert_eq!(v, Ok(i), "chain {i}");
                out_tx.send(1).unwrap();
            }));
            inp = out_rx;
        }
        start.send(0).unwrap();
        for i in 0..N {
            ch_tx.send(i).unwrap();
        }
        inp.recv().unwrap();
        hs.into_iter().for_each(join);
    });
}

/// Go: test/chan/goroutines.go.
///
/// Many coroutines threaded together by rendezvous channels pass one value down the
/// chain and end cleanly.
#[test]
fn chan_goroutines() {
    // Go's default count.
    const N: usize = 10_000;
    run(|| {
        let (leftmost_tx, leftmost_rx) = channel::<i32>(0);
        let mut left = leftmost_tx;
        let mut right_tx = None;
        for _ in 0..N {
            let (rt, rr) = channel::<i32>(0);
            let l = left;
            go!(move || {
                let v = rr.recv().unwrap();
                l.send(v).unwrap();
            });
            left = rt.clone();
            right_tx = Some(rt);
        }
        drop(left);
        let right = right_tx.unwrap();
        go!(move || right.send(1).unwrap());
        assert_eq!(leftmost_rx.recv(), Ok(1));
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
        let (sync_tx, sync_rx) = channel::<bool>(0);
        for buffer in 0..2 {
            nonblock_round(buffer, "i32", 123i32, 234i32, &sync_tx, &sync_rx, &sleep);
            nonblock_round(
                buffer, "i64", 123_456i64, 234_567i64, &sync_tx, &sync_rx, &sleep,
            );
            nonblock_round(buffer, "b", true, true, &sync_tx, &sync_rx, &sleep);
            nonblock_round(
                buffer,
                "s",
                "hello".to_string(),
                "hello again".to_string(),
                &sync_tx,
                &sync_rx,
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
    sync_tx: &Sender<bool>,
    sync_rx: &Receiver<bool>,
    sleep: &dyn Fn(),
) {
    // Go: up to 100 ms per test.
    const MAX_TRIES: usize = 10_000;
    let (tx, rx) = channel::<T>(buffer);
    select! {
        recv(rx) -> v => panic!("blocked {name}sender: got {v:?}"),
        default => {}
    }

    // The receiving coroutine.
    let (r, strobe, want) = (rx.clone(), sync_tx.clone(), to_receiver.clone());
    go!(move || {
        assert_eq!(r.recv(), Ok(want), "{} value", std::any::type_name::<T>());
        strobe.send(true).unwrap();
    });
    let mut tries = 0;
    loop {
        select! {
            send(tx, to_receiver.clone()) -> r => { r.unwrap(); break; }
            default => {
                tries += 1;
                assert!(tries <= MAX_TRIES, "{name}receiver buffer={buffer}: fail");
                sleep();
            }
        }
    }
    sync_rx.recv().unwrap();

    // The sending coroutine.
    let (t, strobe, v) = (tx.clone(), sync_tx.clone(), from_sender.clone());
    go!(move || {
        t.send(v).unwrap();
        strobe.send(true).unwrap();
    });
    if buffer > 0 {
        sync_rx.recv().unwrap();
    }
    let mut tries = 0;
    loop {
        select! {
            recv(rx) -> v => {
                assert_eq!(v, Ok(from_sender.clone()), "{name}sender value");
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
        sync_rx.recv().unwrap();
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
        let send = |mut a: Option<&Sender<u32>>, mut b: Option<&Sender<u32>>| -> i32 {
            let nil = never_sender::<u32>();
            let mut i = 0;
            loop {
                let (ca, cb) = (a.unwrap_or(&nil), b.unwrap_or(&nil));
                let more = select! {
                    send(ca, get_value()) -> r => { r.unwrap(); i += 1; a = None; true }
                    send(cb, get_value()) -> r => { r.unwrap(); i += 1; b = None; true }
                    default => false,
                };
                if !more {
                    break;
                }
                shift.set(shift.get() + 1);
            }
            i
        };

        let (a_tx, a_rx) = channel::<u32>(1);
        let (b_tx, b_rx) = channel::<u32>(1);
        let v = send(Some(&a_tx), Some(&b_tx));
        assert_eq!(v, 2, "Send returned {v} != 2");
        let (av, bv) = (a_rx.recv().unwrap(), b_rx.recv().unwrap());
        assert_eq!(av | bv, 3, "bad values {av} {bv}");
        let v = send(Some(&a_tx), None);
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
        let (c_tx, c_rx) = channel::<i32>(0);
        let (_dummy_tx, dummy_rx) = channel::<i32>(0);
        for _ in 0..2 {
            let t = c_tx.clone();
            let h = go!(move || {
                for _ in 0..N {
                    t.send(1).unwrap();
                }
            });
            for _ in 0..N {
                select! {
                    recv(c_rx) -> v => { v.unwrap(); }
                    recv(dummy_rx) -> _ => panic!("dummy"),
                }
            }
            join(h);
        }
    });
}

/// Go: test/chan/select3.go.
///
/// The blocking semantics of sends, receives and selects on nil, closed, ready and
/// non-ready channels.
#[test]
fn chan_select3() {
    const ASYNC: usize = 1; // asynchronous channels
    run(|| {
        let nil_rx = never::<i32>();
        let nil_tx = never_sender::<i32>();
        let (closed_tx, closed_rx) = channel::<i32>(0);
        closed_tx.close();

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
        select! {
            send(nil_tx, 7) -> _ => unreachable(),
            default => {}
        }
        select! {
            recv(nil_rx) -> _ => unreachable(),
            default => {}
        }

        // Sending to an async channel with free buffer space never blocks.
        test_block(NEVER, || {
            let (tx, _rx) = channel::<i32>(ASYNC);
            tx.send(7).unwrap();
        });

        // Receiving from a closed channel never blocks.
        let r = closed_rx.clone();
        test_block(NEVER, move || {
            for _ in 0..10 {
                assert_eq!(
                    r.recv(),
                    Err(RecvError),
                    "expected 0, false from closed channel"
                );
            }
        });

        // Sending to a closed channel panics in Go; goro returns the value.
        assert_eq!(closed_tx.send(7), Err(SendError(7)));

        // Receiving from a non-ready channel always blocks.
        test_block(ALWAYS, || {
            let (_tx, rx) = channel::<i32>(0);
            let _ = rx.recv();
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
                recv(r) -> _ => unreachable(),
                send(t, 7) -> _ => unreachable(),
            }
        });

        // Selects with non-ready non-nil channels always block.
        test_block(ALWAYS, || {
            let (_tx, rx) = channel::<i32>(0);
            select! {
                recv(rx) -> _ => unreachable(),
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
            let (tx, _rx) = channel::<i32>(ASYNC);
            select! {
                send(tx, 7) -> r => r.unwrap(),
                default => unreachable(),
            }
        });
        test_block(NEVER, || {
            let (tx, rx) = channel::<i32>(ASYNC);
            tx.send(7).unwrap();
            select! {
                recv(rx) -> v => assert_eq!(v, Ok(7)),
                default => unreachable(),
            }
        });

        // Selects with closed channels behave like ordinary operations (Go's three
        // receive forms, `<-c`, `x := <-c` and `x, ok := <-c`, are one form here).
        let r = closed_rx.clone();
        test_block(NEVER, move || {
            select! {
                recv(r) -> v => assert_eq!(v, Err(RecvError)),
            }
        });
        let r = select! {
            send(closed_tx, 7) -> r => r,
        };
        assert_eq!(r, Err(SendError(7)), "send on a closed channel in a select");

        // A select does not get confused if it sees itself.
        test_block(ALWAYS, || {
            let (tx, rx) = channel::<i32>(0);
            select! {
                send(tx, 1) -> _ => unreachable(),
                recv(rx) -> _ => unreachable(),
            }
        });

        // Go's nil channel has length and capacity 0. An addition to the Go test, last
        // so as not to hide the rest: never() stands in for nil throughout.
        assert_eq!(
            (nil_rx.len(), nil_rx.capacity()),
            (0, 0),
            "len/cap of a nil channel"
        );
    });
}

const ALWAYS: &str = "function did not";
const NEVER: &str = "function did";

fn unreachable() -> ! {
    panic!("control flow shouldn't reach here");
}

/// select3.go's testBlock: runs `f` on a coroutine and checks, empirically (100 ms),
/// that it always or never blocks.
fn test_block(signal: &'static str, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = channel::<&'static str>(0);
    let tx2 = tx.clone();
    go!(move || {
        f();
        let _ = tx.send(NEVER); // f didn't block
    });
    go!(move || {
        goro::time::sleep(ms(100)); // 0.1 s seems plenty long
        let _ = tx2.send(ALWAYS); // f blocked always
    });
    let got = rx.recv().unwrap();
    assert_eq!(got, signal, "{signal} block");
}

/// Go: test/chan/select4.go.
///
/// Only the chosen arm's code runs (Go: the assignment target of a losing case is
/// not evaluated).
#[test]
fn chan_select4() {
    run(|| {
        let (c_tx, c_rx) = channel::<i32>(1);
        let (_c1_tx, c1_rx) = channel::<i32>(0);
        c_tx.send(42).unwrap();
        let f_called = Cell::new(false);
        let x: i32;
        select! {
            recv(c1_rx) -> v => { f_called.set(true); x = v.unwrap(); }
            recv(c_rx) -> v => { x = v.unwrap(); }
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
        let (c1_tx, c1_rx) = channel::<bool>(0);
        let (c2_tx, c2_rx) = channel::<bool>(0);
        let (c3_tx, c3_rx) = channel::<bool>(0);
        let r = c1_rx.clone();
        let h1 = go!(move || r.recv().unwrap());
        let r = c1_rx.clone();
        let h2 = go!(move || {
            select! {
                recv(r) -> _ => panic!("dummy"),
                recv(c2_rx) -> _ => c3_tx.send(true).unwrap(),
            }
            r.recv().unwrap()
        });
        let h3 = go!(move || c2_tx.send(true).unwrap());
        c3_rx.recv().unwrap();
        c1_tx.send(true).unwrap();
        c1_tx.send(true).unwrap();
        assert!(join(h1));
        assert!(join(h2));
        join(h3);
    });
}

/// Go: test/chan/select7.go.
///
/// Every pairing of a plain, one-arm-select or two-arm-select receive that discards
/// its value with a plain, one-arm-select or two-arm-select send.
#[test]
fn chan_select7() {
    fn recv1(c: Receiver<i32>) {
        c.recv().unwrap();
    }
    fn recv2(c: Receiver<i32>) {
        select! {
            recv(c) -> v => { v.unwrap(); }
        }
    }
    fn recv3(c: Receiver<i32>) {
        let (_c2_tx, c2) = channel::<i32>(0);
        select! {
            recv(c) -> v => { v.unwrap(); }
            recv(c2) -> _ => unreachable(),
        }
    }
    fn send1(recv: fn(Receiver<i32>)) {
        let (c, r) = channel::<i32>(0);
        let h = go!(move || recv(r));
        goro::yield_now();
        c.send(1).unwrap();
        join(h);
    }
    fn send2(recv: fn(Receiver<i32>)) {
        let (c, r) = channel::<i32>(0);
        let h = go!(move || recv(r));
        goro::yield_now();
        select! {
            send(c, 1) -> res => res.unwrap(),
        }
        join(h);
    }
    fn send3(recv: fn(Receiver<i32>)) {
        let (c, r) = channel::<i32>(0);
        let h = go!(move || recv(r));
        goro::yield_now();
        let (c2, _c2_rx) = channel::<i32>(0);
        select! {
            send(c, 1) -> res => res.unwrap(),
            send(c2, 1) -> _ => unreachable(),
        }
        join(h);
    }
    run(|| {
        let recvs: [fn(Receiver<i32>); 3] = [recv1, recv2, recv3];
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
        let (tx, rx) = channel::<i32>(0);
        let t = tx.clone();
        let h = go!(move || while t.send(5).is_ok() {});

        'sel: {
            select! {
                recv(rx) -> v => {
                    v.unwrap();
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
                recv(rx) -> v => {
                    v.unwrap();
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
                recv(rx) -> v => {
                    v.unwrap();
                    break 'sel;
                    panic!("unreachable");
                }
                send(tx, 10) -> _ => panic!("unreachable"),
                default => {
                    break 'sel;
                    panic!("unreachable");
                }
            }
        }

        // Go's program just exits; here the sender stops when the channel closes.
        drop(rx);
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
        // chanchan: Go's `case <-cc <- 2` receives the channel on entering the select.
        let (cc_tx, cc_rx) = channel::<Sender<i32>>(1);
        let (c_tx, c_rx) = channel::<i32>(1);
        cc_tx.send(c_tx).unwrap();
        let c = cc_rx.recv().unwrap();
        select! {
            send(c, 2) -> r => r.unwrap(),
            default => panic!("nonblock"),
        }
        assert_eq!(c_rx.recv(), Ok(2), "bad receive");

        // sendprec: `c <- false || true` sends the whole expression.
        let (tx, rx) = channel::<bool>(1);
        tx.send(false || true).unwrap();
        assert!(rx.recv().unwrap(), "sent false");
    });
}

/// Go: test/chan/sieve1.go.
///
/// The classical concurrent prime sieve: a chain of filter coroutines on rendezvous
/// channels yields the primes below 100.
#[test]
fn chan_sieve1() {
    // Sends 2, 3, 4, ... on `ch` (until the channel closes).
    fn generate(ch: Sender<i32>) {
        let mut i = 2;
        while ch.send(i).is_ok() {
            i += 1;
        }
    }
    // Copies `inp` to `out`, dropping multiples of `prime`.
    fn filter(inp: Receiver<i32>, out: Sender<i32>, prime: i32) {
        for i in &inp {
            if i % prime != 0 && out.send(i).is_err() {
                return;
            }
        }
    }
    // Daisy-chains filters together.
    fn sieve(primes: Sender<i32>) {
        let (tx, mut ch) = channel::<i32>(0);
        go!(move || generate(tx));
        loop {
            let Ok(prime) = ch.recv() else { return };
            if primes.send(prime).is_err() {
                return;
            }
            let (tx1, ch1) = channel::<i32>(0);
            go!(move || filter(ch, tx1, prime));
            ch = ch1;
        }
    }
    run(|| {
        let (primes_tx, primes) = channel::<i32>(0);
        go!(move || sieve(primes_tx));
        for want in PRIMES {
            let x = primes.recv().unwrap();
            assert_eq!(x, want, "{x} != {want}");
        }
        // Dropping `primes` here tears the chain down.
    });
}

const PRIMES: [i32; 25] = [
    2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97,
];

/// Go: test/chan/sieve2.go.
///
/// An Eratosthenes-style sieve over odd candidates: a heap merges channels of
/// multiples into a channel of composites, and a proxy coroutine buffers without
/// bound by disabling its send arm (a nil channel in Go) while it has nothing.
#[test]
fn chan_sieve2() {
    // Odd numbers from 5.
    fn odds() -> Receiver<i32> {
        let (tx, rx) = channel::<i32>(50);
        go!(move || {
            let mut n = 5;
            while tx.send(n).is_ok() {
                n += 2;
            }
        });
        rx
    }
    // Odd multiples of the prime `p`, from p*p.
    fn multiples(p: i32) -> Receiver<i32> {
        let (tx, rx) = channel::<i32>(10);
        go!(move || {
            let mut n = p * p;
            while tx.send(n).is_ok() {
                n += 2 * p;
            }
        });
        rx
    }
    // A channel with its next value, ordered for a min-heap on that value.
    struct PeekCh {
        head: i32,
        ch: Receiver<i32>,
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
    fn sendproxy(out: Sender<i32>) -> Sender<i32> {
        let (proxy_tx, proxy_rx) = channel::<i32>(10);
        go!(move || {
            let nil = never_sender::<i32>();
            let mut buf = VecDeque::new();
            loop {
                // Buffer empty: disable output.
                let (c, e) = match buf.front() {
                    Some(&e) => (&out, e),
                    None => (&nil, 0),
                };
                select! {
                    recv(proxy_rx) -> v => match v {
                        Ok(v) => buf.push_back(v),
                        Err(RecvError) => return,
                    },
                    send(c, e) -> r => {
                        if r.is_err() {
                            return;
                        }
                        buf.pop_front();
                    }
                }
            }
        });
        proxy_tx
    }
    fn sieve() -> Receiver<i32> {
        // The output values.
        let (out_tx, out_rx) = channel::<i32>(10);
        out_tx.send(2).unwrap();
        out_tx.send(3).unwrap();
        // The composites to be eliminated, in increasing order.
        let (comp_tx, comp_rx) = channel::<i32>(50);
        // The feedback loop.
        let (primes_tx, primes_rx) = channel::<i32>(10);
        primes_tx.send(3).unwrap();

        // Merge channels of multiples of `primes` into `composites`.
        go!(move || {
            let mut h = BinaryHeap::<PeekCh>::new();
            let mut min = 15;
            let advance = |h: &mut BinaryHeap<PeekCh>, min: &mut i32| -> Option<()> {
                let mut minchan = h.pop().expect("the heap holds a channel");
                *min = minchan.head;
                minchan.head = minchan.ch.recv().ok()?;
                h.push(minchan);
                Some(())
            };
            loop {
                let Ok(p) = primes_rx.recv() else { return };
                let m = multiples(p);
                let Ok(head) = m.recv() else { return };
                while min < head {
                    if comp_tx.send(min).is_err() || advance(&mut h, &mut min).is_none() {
                        return;
                    }
                }
                while min == head {
                    if advance(&mut h, &mut min).is_none() {
                        return;
                    }
                }
                if comp_tx.send(head).is_err() {
                    return;
                }
                let Ok(next) = m.recv() else { return };
                h.push(PeekCh { head: next, ch: m });
            }
        });

        // Sieve the composites out of the candidates.
        go!(move || {
            // Only multiples of primes up to sqrt(n) are needed for the nth prime, so
            // the merger takes primes far slower than they come: the proxy buffers
            // them, or this coroutine would block and deadlock the loop.
            let primes = sendproxy(primes_tx);
            let candidates = odds();
            let Ok(mut p) = candidates.recv() else { return };
            loop {
                let Ok(c) = comp_rx.recv() else { return };
                while p < c {
                    if primes.send(p).is_err() || out_tx.send(p).is_err() {
                        return;
                    }
                    let Ok(next) = candidates.recv() else { return };
                    p = next;
                }
                if p == c {
                    let Ok(next) = candidates.recv() else { return };
                    p = next;
                }
            }
        });
        out_rx
    }
    run(|| {
        let primes = sieve();
        for want in PRIMES {
            let x = primes.recv().unwrap();
            assert_eq!(x, want, "{x} != {want}");
        }
        // Dropping `primes` here tears the coroutines down.
    });
}

/// Go: test/chan/zerosize.go.
///
/// Channels of zero-sized types, rendezvous and buffered (and, beyond Go's test, one
/// value through each buffered one).
#[test]
fn chan_zerosize() {
    run(|| {
        let _ = channel::<[u8; 0]>(0);
        let (tx, rx) = channel::<[u8; 0]>(1);
        tx.send([]).unwrap();
        assert_eq!(rx.recv(), Ok([]));
        let _ = channel::<()>(0);
        let (tx, rx) = channel::<()>(1);
        tx.send(()).unwrap();
        assert_eq!(rx.recv(), Ok(()));
    });
}

// ---------------------------------------------------------------------------------
// test/closedchan.go
// ---------------------------------------------------------------------------------

/// What a send on a closed channel gives: Go panics, goro hands the value back.
#[derive(Debug, PartialEq)]
struct SendOnClosed(i32);

/// closedchan.go's Chan interface: the channel operations, each done one way.
trait Chan {
    fn send(&self, x: i32) -> Result<(), SendOnClosed>;
    /// Ok(true): sent; Ok(false): would block.
    fn nbsend(&self, x: i32) -> Result<bool, SendOnClosed>;
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

fn ok_or_zero(v: Result<i32, RecvError>) -> (i32, bool) {
    match v {
        Ok(x) => (x, true),
        Err(RecvError) => (0, false),
    }
}

/// Direct channel operations (Go's XChan): send, try_send, recv, try_recv.
struct XChan(Sender<i32>, Receiver<i32>);

impl Chan for XChan {
    fn send(&self, x: i32) -> Result<(), SendOnClosed> {
        self.0.send(x).map_err(|SendError(v)| SendOnClosed(v))
    }
    fn nbsend(&self, x: i32) -> Result<bool, SendOnClosed> {
        match self.0.try_send(x) {
            Ok(()) => Ok(true),
            Err(TrySendError::Full(_)) => Ok(false),
            Err(TrySendError::Closed(v)) => Err(SendOnClosed(v)),
        }
    }
    fn recv2(&self) -> (i32, bool) {
        ok_or_zero(self.1.recv())
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        match self.1.try_recv() {
            Ok(x) => (x, true, true),
            Err(TryRecvError::Closed) => (0, false, true),
            Err(TryRecvError::Empty) => (0, false, false),
        }
    }
    fn close(&self) {
        self.0.close();
    }
    fn imp(&self) -> &'static str {
        "(direct)"
    }
}

/// Operations through one-arm selects (Go's SChan).
struct SChan(Sender<i32>, Receiver<i32>);

impl Chan for SChan {
    fn send(&self, x: i32) -> Result<(), SendOnClosed> {
        select! {
            send(self.0, x) -> r => r.map_err(|SendError(v)| SendOnClosed(v)),
        }
    }
    fn nbsend(&self, x: i32) -> Result<bool, SendOnClosed> {
        select! {
            default => Ok(false),
            send(self.0, x) -> r => r.map(|()| true).map_err(|SendError(v)| SendOnClosed(v)),
        }
    }
    fn recv2(&self) -> (i32, bool) {
        select! {
            recv(self.1) -> v => ok_or_zero(v),
        }
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        select! {
            default => (0, false, false),
            recv(self.1) -> v => {
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
/// SSChan).
struct SSChan(Sender<i32>, Receiver<i32>, Receiver<bool>);

impl Chan for SSChan {
    fn send(&self, x: i32) -> Result<(), SendOnClosed> {
        select! {
            send(self.0, x) -> r => r.map_err(|SendError(v)| SendOnClosed(v)),
            recv(self.2) -> _ => panic!("send: dummy"),
        }
    }
    fn nbsend(&self, x: i32) -> Result<bool, SendOnClosed> {
        select! {
            default => Ok(false),
            recv(self.2) -> _ => panic!("nbsend: dummy"),
            send(self.0, x) -> r => r.map(|()| true).map_err(|SendError(v)| SendOnClosed(v)),
        }
    }
    fn recv2(&self) -> (i32, bool) {
        select! {
            recv(self.2) -> _ => panic!("recv: dummy"),
            recv(self.1) -> v => ok_or_zero(v),
        }
    }
    fn nbrecv2(&self) -> (i32, bool, bool) {
        select! {
            recv(self.2) -> _ => panic!("nbrecv: dummy"),
            default => (0, false, false),
            recv(self.1) -> v => {
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

/// Wraps a channel's two ends as one of the Chan implementations.
type MakeChan<'a> = dyn Fn(Sender<i32>, Receiver<i32>) -> Box<dyn Chan> + 'a;

/// closedchan.go's test1: a closed, drained channel.
fn closed_test1(c: &dyn Chan) {
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
    // Sends on a closed channel: Go panics; goro hands the value back.
    assert_eq!(
        c.nbsend(1),
        Err(SendOnClosed(1)),
        "test1: nbsend on closed {imp}"
    );
    // The value was discarded.
    assert_eq!(
        c.recv(),
        0,
        "test1: recv on closed got non-zero after send on closed {imp}"
    );
    assert_eq!(
        c.send(2),
        Err(SendOnClosed(2)),
        "test1: send on closed {imp}"
    );
    assert_eq!(
        c.recv(),
        0,
        "test1: recv on closed got non-zero after send on closed {imp}"
    );
}

/// Go: test/closedchan.go.
///
/// Receives on a closed channel (rendezvous, or buffered with one value left), done
/// directly, through selects and through larger selects; sends on it; closing twice.
#[test]
fn closedchan() {
    run(|| {
        let (_dummy_tx, dummy) = channel::<bool>(0);
        let mks: [&MakeChan<'_>; 3] = [
            &|t, r| Box::new(XChan(t, r)),
            &|t, r| Box::new(SChan(t, r)),
            &|t, r| Box::new(SSChan(t, r, dummy.clone())),
        ];
        let closed_sync = |mk: &MakeChan<'_>| {
            let (t, r) = channel::<i32>(0);
            let c = mk(t, r);
            c.close();
            c
        };
        let closed_async = |mk: &MakeChan<'_>| {
            let (t, r) = channel::<i32>(2);
            let c = mk(t, r);
            assert_eq!(c.send(1), Ok(()));
            c.close();
            c
        };

        for mk in mks {
            closed_test1(&*closed_sync(mk));
        }

        // testasync1..4: the last buffered value comes out by each kind of receive,
        // then the channel behaves as closed.
        let testcloseds: [fn(&dyn Chan); 4] = [
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
                testclosed(&*closed_async(mk));
            }
        }

        // Closing a closed channel panics in Go; in goro it is not an error.
        let (tx, rx) = channel::<i32>(0);
        tx.close();
        tx.close();
        assert!(tx.is_closed() && rx.is_closed());
        assert_eq!(rx.recv(), Err(RecvError));
    });
}
