//! `select!`: readiness, fairness, default arms, send and receive arms on one channel,
//! overlapping selects from many coroutines, and closed channels.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::chan::{after, channel, never, RecvError, SendError};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[test]
fn picks_the_ready_arm() {
    let (tx1, rx1) = channel::<u32>(1);
    let (_tx2, rx2) = channel::<&str>(1);
    tx1.send(5).unwrap();
    let got = goro::select! {
        recv(rx1) -> v => v.unwrap(),
        recv(rx2) -> _ => unreachable!(),
    };
    assert_eq!(got, 5);
    // Trailing commas, blocks and references all parse.
    let (tx3, rx3) = channel::<u32>(1);
    goro::select! {
        send(&tx3, 1) -> r => { r.unwrap() }
        recv(&rx2) -> _ => { unreachable!() },
    }
    assert_eq!(rx3.recv(), Ok(1));
}

#[test]
fn default_arms() {
    let (_tx, rx) = channel::<u32>(0);
    let took_default = goro::select! {
        recv(rx) -> _ => false,
        default => true,
    };
    assert!(took_default);
    let t = Instant::now();
    let timed_out = goro::select! {
        recv(rx) -> _ => false,
        default(Duration::from_millis(20)) => true,
    };
    assert!(timed_out && t.elapsed() >= Duration::from_millis(20));
    // A huge timeout does not overflow, and a ready arm still wins.
    let (tx, rx) = channel::<u32>(1);
    tx.send(3).unwrap();
    let v = goro::select! {
        recv(rx) -> v => v.unwrap(),
        default(Duration::MAX) => 0,
    };
    assert_eq!(v, 3);
    // Only a default: taken at once.
    let d = goro::select! { default => 9 };
    assert_eq!(d, 9);
}

/// Two always-ready arms are each chosen 40-60% of 100 000 times.
#[test]
fn fairness_between_ready_arms() {
    with_timeout(T, || {
        let (tx1, rx1) = channel::<u8>(1);
        let (tx2, rx2) = channel::<u8>(1);
        let (mut a, mut b) = (0u32, 0u32);
        for _ in 0..100_000 {
            let _ = tx1.try_send(1);
            let _ = tx2.try_send(2);
            goro::select! {
                recv(rx1) -> _ => a += 1,
                recv(rx2) -> _ => b += 1,
            }
        }
        assert_eq!(a + b, 100_000);
        assert!(
            (40_000..=60_000).contains(&a),
            "arm 1 chosen {a} times, arm 2 {b}"
        );
    });
}

/// A select with a send and a receive arm on the same channel pairs with others,
/// never with itself.
#[test]
fn send_and_recv_arms_on_one_channel() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let (sent, received) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let hs: Vec<_> = (0..20)
            .map(|i| {
                let (tx, rx, sent, received) = (tx.clone(), rx.clone(), sent.clone(), received.clone());
                goro::go!(move || {
                    for _ in 0..500 {
                        goro::select! {
                            send(tx, i) -> r => { r.unwrap(); sent.fetch_add(1, Ordering::SeqCst); }
                            recv(rx) -> v => { v.unwrap(); received.fetch_add(1, Ordering::SeqCst); }
                        }
                    }
                })
            })
            .collect();
        // 20 x 500 operations pair up into sends and receives; an odd one left over
        // waits for a partner: give it one from outside until all are done.
        let start = Instant::now();
        loop {
            if sent.load(Ordering::SeqCst) + received.load(Ordering::SeqCst) >= 10_000 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "selects stuck");
            goro::select! {
                recv(rx) -> _ => {},
                default(Duration::from_millis(5)) => {},
            }
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
        let (s, r) = (sent.load(Ordering::SeqCst), received.load(Ordering::SeqCst));
        assert_eq!(s + r, 10_000);
    });
}

/// Many coroutines select over overlapping sets of channels in different orders:
/// no deadlock, no lost message.
#[test]
fn overlapping_selects_do_not_deadlock() {
    with_timeout(T, || {
        let chans: Vec<_> = (0..5).map(|_| channel::<u64>(0)).collect();
        let txs: Vec<_> = chans.iter().map(|(t, _)| t.clone()).collect();
        let rxs: Vec<_> = chans.iter().map(|(_, r)| r.clone()).collect();
        drop(chans);
        let total = Arc::new(AtomicUsize::new(0));
        // Receivers: each selects over three of the channels, in its own order.
        let receivers: Vec<_> = (0..10)
            .map(|k| {
                let r: Vec<_> = (0..3).map(|j| rxs[(k + j * 2) % 5].clone()).collect();
                let total = total.clone();
                goro::go!(move || loop {
                    let v = goro::select! {
                        recv(r[0]) -> v => v,
                        recv(r[1]) -> v => v,
                        recv(r[2]) -> v => v,
                        default(Duration::from_millis(200)) => return,
                    };
                    match v {
                        Ok(_) => {
                            total.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(RecvError) => return,
                    }
                })
            })
            .collect();
        // Senders: each selects over two channels to send on.
        let senders: Vec<_> = (0..10)
            .map(|k| {
                let t: Vec<_> = (0..2).map(|j| txs[(k * 3 + j) % 5].clone()).collect();
                goro::go!(move || {
                    for i in 0..1000u64 {
                        goro::select! {
                            send(t[0], i) -> r => r.unwrap(),
                            send(t[1], i) -> r => r.unwrap(),
                        }
                    }
                })
            })
            .collect();
        senders.into_iter().for_each(|h| h.join().unwrap());
        drop(txs);
        drop(rxs);
        receivers.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(total.load(Ordering::SeqCst), 10_000);
    });
}

#[test]
fn closed_channels_are_ready() {
    let (tx, rx) = channel::<u32>(0);
    tx.close();
    let r = goro::select! {
        recv(rx) -> v => v,
        recv(never::<u32>()) -> v => v,
    };
    assert_eq!(r, Err(RecvError));
    let r = goro::select! {
        send(tx, 4) -> r => r,
        recv(never::<u32>()) -> _ => unreachable!(),
    };
    assert_eq!(r, Err(SendError(4)));
}

/// A blocked select is woken by a close, from a thread or a coroutine.
#[test]
fn close_wakes_a_blocked_select() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let (_tx2, rx2) = channel::<u32>(0);
        let h = goro::go!(move || {
            goro::select! {
                recv(rx) -> v => v,
                recv(rx2) -> v => v,
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        drop(tx);
        assert_eq!(h.join().unwrap(), Err(RecvError));
    });
}

/// after() in a select: the timeout arm fires; a never() arm never does.
#[test]
fn after_and_never_in_select() {
    with_timeout(T, || {
        let t = Instant::now();
        let which = goro::select! {
            recv(never::<()>()) -> _ => "never",
            recv(after(Duration::from_millis(15))) -> at => { assert!(at.unwrap() >= t); "after" }
        };
        assert_eq!(which, "after");
        assert!(t.elapsed() >= Duration::from_millis(15));
    });
}

/// Selects from plain threads and coroutines mix.
#[test]
fn selects_on_threads_and_coroutines() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let (_qtx, qrx) = channel::<()>(0);
        let thread = std::thread::spawn(move || {
            let mut n = 0;
            loop {
                goro::select! {
                    // The sender's end is dropped when it is done: the close ends us.
                    recv(rx) -> v => match v { Ok(_) => n += 1, Err(_) => return n },
                    recv(qrx) -> _ => unreachable!("nobody sends on the quit channel"),
                }
            }
        });
        let sender = goro::go!(move || {
            for i in 0..1000 {
                goro::select! {
                    send(tx, i) -> r => r.unwrap(),
                }
            }
        });
        sender.join().unwrap();
        assert_eq!(thread.join().unwrap(), 1000);
    });
}

/// Runs 300 parked selects, on a coroutine, through `select_once` (which returns the
/// arm it took), and asserts that each of the `arms` arms was taken at least 30 times.
/// The driver hands over one value per round only after the selector has come back to
/// its select: at 1 P the yield lets the selector run until it parks, so every round
/// resolves a parked select, not a polling one.
fn assert_parked_select_is_fair(
    arms: usize,
    select_once: impl Fn() -> usize + Send + 'static,
    hand_over: impl Fn() + Send + 'static,
) {
    const N: usize = 300;
    with_timeout(T, move || {
        goro::go!(move || {
            let (ack_tx, ack_rx) = channel::<usize>(0);
            let selector = goro::go!(move || {
                for _ in 0..N {
                    ack_tx.send(select_once()).unwrap();
                }
            });
            let mut counts = vec![0; arms];
            for _ in 0..N {
                goro::yield_now();
                hand_over();
                counts[ack_rx.recv().unwrap()] += 1;
            }
            selector.join().unwrap();
            assert!(
                counts.iter().all(|&c| c >= N / 10),
                "arms taken {counts:?} times"
            );
        })
        .join()
        .unwrap();
    });
}

/// Go's TestPseudoRandomSend pattern: a parked select with two send arms on one
/// channel sends both values about equally often. Before issue 13 the arms were
/// queued in index order and the receiver always took arm 0 (`[300, 0]` at 1 P).
#[test]
fn parked_select_with_send_arms_on_one_channel_is_fair() {
    let (tx, rx) = channel::<usize>(0);
    assert_parked_select_is_fair(
        2,
        move || {
            goro::select! {
                send(tx, 0) -> r => { r.unwrap(); 0 }
                send(tx, 1) -> r => { r.unwrap(); 1 }
            }
        },
        move || {
            rx.recv().unwrap();
        },
    );
}

/// Duplicate `recv` arms of a parked select are taken about equally often (before
/// issue 13: `[300, 0, 0]` at 1 P, `[288, 7, 5]` at 2 Ps).
#[test]
fn parked_select_with_recv_arms_on_one_channel_is_fair() {
    let (tx, rx) = channel::<u32>(0);
    assert_parked_select_is_fair(
        3,
        move || {
            goro::select! {
                recv(rx) -> v => { v.unwrap(); 0 }
                recv(rx) -> v => { v.unwrap(); 1 }
                recv(rx) -> v => { v.unwrap(); 2 }
            }
        },
        move || tx.send(7).unwrap(),
    );
}

/// crossbeam's syntax where it costs nothing: trailing commas inside an arm's
/// parentheses, and temporaries in an arm's channel expression (E0716 before
/// issue 13).
#[test]
fn select_syntax_trailing_commas_and_temporaries() {
    let (tx, rx) = channel::<u32>(1);
    let none: Option<goro::chan::Receiver<u32>> = None;
    goro::select! {
        send(tx, 1,) -> r => r.unwrap(),
        recv(none.as_ref().unwrap_or(&never()),) -> _ => unreachable!(),
    }
    let v = goro::select! {
        recv(rx,) -> v => v.unwrap(),
        recv(none.as_ref().unwrap_or(&never())) -> _ => unreachable!(),
        default(Duration::from_secs(5),) => 0,
    };
    assert_eq!(v, 1);
    // Channels and send values are evaluated in source order (Go's rule, and Go's
    // test/chan/select5.go): each send's channel, then its value.
    let order = std::cell::RefCell::new(Vec::new());
    let log = |i: u32| order.borrow_mut().push(i);
    let (nobody_receives, _rx0) = channel::<u32>(0);
    goro::select! {
        recv({ log(1); &rx }) -> _ => unreachable!(),
        send({ log(2); &tx }, { log(3); 5 }) -> r => r.unwrap(),
        recv({ log(4); never::<u32>() }) -> _ => unreachable!(),
        send({ log(5); &nobody_receives }, { log(6); 6 }) -> _ => unreachable!(),
    }
    assert_eq!(*order.borrow(), [1, 2, 3, 4, 5, 6]);
}
