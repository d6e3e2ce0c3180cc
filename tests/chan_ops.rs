//! Channel operations in every state (open/closed, empty/full, rendezvous/buffered),
//! FIFO order, close waking waiters, exact accounting under load, timeouts, and every
//! mix of threads and coroutines on both ends.

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::chan::{
    channel, RecvError, RecvTimeoutError, SendError, SendTimeoutError, TryRecvError, TrySendError,
};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn assert_error_traits<
    E: std::fmt::Debug + std::fmt::Display + std::error::Error + PartialEq + Eq + Clone,
>() {
}
fn assert_copy<E: Copy>() {}

#[test]
fn error_types_have_the_promised_traits() {
    assert_error_traits::<SendError<Vec<u8>>>();
    assert_error_traits::<TrySendError<Vec<u8>>>();
    assert_error_traits::<SendTimeoutError<Vec<u8>>>();
    assert_error_traits::<RecvError>();
    assert_error_traits::<TryRecvError>();
    assert_error_traits::<RecvTimeoutError>();
    assert_copy::<SendError<u8>>();
    assert_copy::<RecvError>();
    assert_copy::<TryRecvError>();
    assert_copy::<RecvTimeoutError>();
    // Debug does not need T: Debug and does not print the value.
    struct Opaque;
    assert_eq!(format!("{:?}", SendError(Opaque)), "SendError { .. }");
    assert_eq!(SendError(5).to_string(), "sending on a closed channel");
    assert_eq!(TrySendError::Full(1).into_inner(), 1);
}

#[test]
fn buffered_open_empty_full() {
    let (tx, rx) = channel::<u32>(2);
    assert_eq!((tx.capacity(), rx.capacity()), (2, 2));
    assert!(rx.is_empty());
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    assert_eq!(tx.try_send(1), Ok(()));
    assert_eq!(tx.send(2), Ok(()));
    assert_eq!(rx.len(), 2);
    assert_eq!(tx.try_send(3), Err(TrySendError::Full(3)));
    assert_eq!(
        tx.send_timeout(3, Duration::from_millis(5)),
        Err(SendTimeoutError::Timeout(3))
    );
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(
        rx.recv_timeout(Duration::from_millis(5)),
        Err(RecvTimeoutError::Timeout)
    );
}

#[test]
fn buffered_closed_drains_then_errs() {
    let (tx, rx) = channel::<u32>(3);
    tx.send(1).unwrap();
    tx.send(2).unwrap();
    tx.close();
    tx.close(); // closing twice is not an error
    assert!(tx.is_closed() && rx.is_closed());
    assert_eq!(tx.send(9), Err(SendError(9)));
    assert_eq!(tx.try_send(9), Err(TrySendError::Closed(9)));
    assert_eq!(
        tx.send_timeout(9, Duration::from_secs(1)),
        Err(SendTimeoutError::Closed(9))
    );
    // Receivers drain what is buffered first.
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.try_recv(), Ok(2));
    assert_eq!(rx.recv(), Err(RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Closed));
    assert_eq!(
        rx.recv_timeout(Duration::from_secs(1)),
        Err(RecvTimeoutError::Closed)
    );
    assert_eq!(rx.iter().count(), 0);
}

#[test]
fn rendezvous_needs_a_receiver() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        assert_eq!(tx.capacity(), 0);
        assert_eq!(
            tx.try_send(1),
            Err(TrySendError::Full(1)),
            "nobody is receiving"
        );
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
        assert_eq!(
            tx.send_timeout(1, Duration::from_millis(5)),
            Err(SendTimeoutError::Timeout(1))
        );
        // A send completes only when the receiver takes the value.
        let taken = Arc::new(AtomicUsize::new(0));
        let t2 = taken.clone();
        let r = goro::go!(move || {
            goro::time::sleep(Duration::from_millis(20));
            t2.store(1, Ordering::SeqCst);
            rx.recv().unwrap()
        });
        tx.send(7).unwrap();
        assert_eq!(
            taken.load(Ordering::SeqCst),
            1,
            "send returned before the receiver took it"
        );
        assert_eq!(r.join().unwrap(), 7);
        // The receiver is gone: closed, the value comes back.
        assert_eq!(tx.send(8), Err(SendError(8)));
    });
}

#[test]
fn last_sender_or_receiver_closes() {
    let (tx, rx) = channel::<u32>(1);
    let tx2 = tx.clone();
    drop(tx);
    assert!(!rx.is_closed());
    tx2.send(1).unwrap();
    drop(tx2);
    assert_eq!(rx.recv(), Ok(1));
    assert_eq!(rx.recv(), Err(RecvError));

    let (tx, rx) = channel::<u32>(1);
    let rx2 = rx.clone();
    drop(rx);
    tx.send(1).unwrap();
    drop(rx2);
    assert_eq!(tx.send(2), Err(SendError(2)));
}

/// close wakes every blocked sender and receiver, coroutines and threads.
#[test]
fn close_wakes_all_waiters() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let mut waiters: Vec<Box<dyn FnOnce() -> bool + Send>> = Vec::new();
        for i in 0..40 {
            let (tx, rx) = (tx.clone(), rx.clone());
            let f = move || -> bool {
                if i % 2 == 0 {
                    rx.recv() == Err(RecvError)
                } else {
                    tx.send(i) == Err(SendError(i))
                }
            };
            if i % 10 < 2 {
                let h = std::thread::spawn(f);
                waiters.push(Box::new(move || h.join().unwrap()));
            } else {
                let h = goro::go!(f);
                waiters.push(Box::new(move || h.join().unwrap()));
            }
        }
        // Waiters on both sides of a rendezvous channel pair up with each other; the
        // rest stay blocked until the close. Give them time to block.
        std::thread::sleep(Duration::from_millis(50));
        tx.close();
        for w in waiters {
            let _ = w(); // paired ones succeeded, the rest got the close error
        }
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

/// A close with more waiters than one wake-up batch (a close wakes them 32 at a time,
/// from an array, to allocate nothing): 1 000 receivers and 300 senders, every one of
/// them woken with the close error, none left behind.
#[test]
fn close_wakes_waiters_past_one_batch() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let blocked = Arc::new(AtomicUsize::new(0));
        let receivers: Vec<_> = (0..1000)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || rx.recv())
            })
            .collect();
        // Wait for them to queue before the senders come, so that none pair up.
        let t = Instant::now();
        while goro::debug::stats().waiting < 1000 {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "receivers never parked"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(rx);
        let (tx2, rx2) = channel::<u32>(0);
        let senders = spawn_senders(&tx2, 300, &blocked);
        while blocked.load(Ordering::SeqCst) < 300 {
            std::thread::sleep(Duration::from_millis(1));
        }
        tx.close();
        tx2.close();
        drop(rx2);
        for h in receivers {
            assert_eq!(h.join().unwrap(), Err(RecvError));
        }
        for (i, h) in senders.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), Err(SendError(i as u32)));
        }
    });
}

/// Spawns `n` coroutines that each count themselves in `started` and send their
/// index on `tx`; their handles.
fn spawn_senders(
    tx: &goro::chan::Sender<u32>,
    n: u32,
    started: &Arc<AtomicUsize>,
) -> Vec<goro::JoinHandle<Result<(), SendError<u32>>>> {
    (0..n)
        .map(|i| {
            let (tx, started) = (tx.clone(), started.clone());
            goro::go!(move || {
                started.fetch_add(1, Ordering::SeqCst);
                tx.send(i)
            })
        })
        .collect()
}

/// A close is one event for the senders blocked at it: each gets its value back, and
/// a receive that comes once the channel shows closed gets `RecvError`, even while
/// the closer still wakes them a batch at a time (a receive between two batches took
/// a condemned sender's value, and that send returned `Ok` after the close). 300
/// senders blocked on a rendezvous channel (ten batches), a thread receiving as soon
/// as the channel shows closed, twenty rounds.
#[test]
fn a_receive_after_close_takes_nothing_from_blocked_senders() {
    with_timeout(T, || {
        for _ in 0..20 {
            let (tx, rx) = channel::<u32>(0);
            let blocked = Arc::new(AtomicUsize::new(0));
            let senders = spawn_senders(&tx, 300, &blocked);
            let t = Instant::now();
            while blocked.load(Ordering::SeqCst) < 300 || goro::debug::stats().waiting < 300 {
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "senders never parked"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
            let receiver = std::thread::spawn(move || {
                let t = Instant::now();
                while !rx.is_closed() {
                    assert!(t.elapsed() < Duration::from_secs(30), "never closed");
                    std::hint::spin_loop();
                }
                rx.recv()
            });
            tx.close();
            assert_eq!(receiver.join().unwrap(), Err(RecvError));
            for (i, h) in senders.into_iter().enumerate() {
                assert_eq!(h.join().unwrap(), Err(SendError(i as u32)));
            }
        }
    });
}

/// Each sender's values arrive in the order it sent them.
#[test]
fn fifo_per_sender() {
    with_timeout(T, || {
        for cap in [0, 1, 16] {
            let (tx, rx) = channel::<(usize, u32)>(cap);
            let senders: Vec<_> = (0..4)
                .map(|s| {
                    let tx = tx.clone();
                    goro::go!(move || {
                        for i in 0..2000 {
                            tx.send((s, i)).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            let mut next = [0u32; 4];
            for (s, i) in rx.iter() {
                assert_eq!(i, next[s], "sender {s} out of order (cap {cap})");
                next[s] += 1;
            }
            senders.into_iter().for_each(|h| h.join().unwrap());
            assert_eq!(next, [2000; 4]);
        }
    });
}

/// 10 000 coroutines send through one channel to a few receivers: every message
/// arrives exactly once.
#[test]
fn ten_thousand_coroutines_through_one_channel() {
    with_timeout(T, || {
        for cap in [0usize, 64] {
            let (tx, rx) = channel::<u64>(cap);
            let seen = Arc::new(Mutex::new(HashSet::new()));
            let receivers: Vec<_> = (0..8)
                .map(|_| {
                    let (rx, seen) = (rx.clone(), seen.clone());
                    goro::go!(move || {
                        let mut n = 0;
                        for v in rx.iter() {
                            assert!(seen.lock().unwrap().insert(v), "{v} received twice");
                            n += 1;
                        }
                        n
                    })
                })
                .collect();
            drop(rx);
            let senders: Vec<_> = (0..10_000u64)
                .map(|i| {
                    let tx = tx.clone();
                    goro::go!(move || {
                        for j in 0..3 {
                            tx.send(i * 3 + j).unwrap();
                        }
                    })
                })
                .collect();
            drop(tx);
            senders.into_iter().for_each(|h| h.join().unwrap());
            let total: usize = receivers.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(total, 30_000, "cap {cap}");
            assert_eq!(seen.lock().unwrap().len(), 30_000);
        }
    });
}

/// Every mix of plain threads and coroutines on both ends.
#[test]
fn threads_and_coroutines_on_both_ends() {
    with_timeout(T, || {
        for cap in [0, 4] {
            for (send_on_thread, recv_on_thread) in
                [(false, false), (true, false), (false, true), (true, true)]
            {
                let (tx, rx) = channel::<u32>(cap);
                let send = move || {
                    for i in 0..2000 {
                        tx.send(i).unwrap();
                    }
                };
                let recv = move || rx.iter().sum::<u32>();
                let s: Box<dyn FnOnce() + Send> = if send_on_thread {
                    let h = std::thread::spawn(send);
                    Box::new(move || h.join().unwrap())
                } else {
                    let h = goro::go!(send);
                    Box::new(move || h.join().unwrap())
                };
                let sum = if recv_on_thread {
                    std::thread::spawn(recv).join().unwrap()
                } else {
                    goro::go!(recv).join().unwrap()
                };
                s();
                assert_eq!(sum, (0..2000).sum::<u32>());
            }
        }
    });
}

#[test]
fn timeouts_are_honoured() {
    with_timeout(T, || {
        let check = || {
            let (tx, rx) = channel::<u8>(0);
            let t = Instant::now();
            assert_eq!(
                rx.recv_timeout(Duration::from_millis(20)),
                Err(RecvTimeoutError::Timeout)
            );
            assert!(t.elapsed() >= Duration::from_millis(20));
            let t = Instant::now();
            assert_eq!(
                tx.send_timeout(5, Duration::from_millis(20)),
                Err(SendTimeoutError::Timeout(5))
            );
            assert!(t.elapsed() >= Duration::from_millis(20));
            // A value arriving before the deadline wins.
            let tx2 = tx.clone();
            let h = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(5));
                tx2.send(9).unwrap();
            });
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(9));
            h.join().unwrap();
            // Huge timeouts do not overflow.
            let (tx3, rx3) = channel::<u8>(1);
            tx3.send(1).unwrap();
            assert_eq!(rx3.recv_timeout(Duration::MAX), Ok(1));
            assert_eq!(tx3.send_timeout(2, Duration::MAX), Ok(()));
        };
        check();
        goro::go!(check).join().unwrap();
    });
}

/// Timed-out waiters leave the queues clean: later operations pair correctly.
#[test]
fn timed_out_waiters_do_not_linger() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let hs: Vec<_> = (0..50)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || rx.recv_timeout(Duration::from_millis(1)))
            })
            .collect();
        for h in hs {
            assert_eq!(h.join().unwrap(), Err(RecvTimeoutError::Timeout));
        }
        // Nobody waits any more: a rendezvous send cannot complete.
        assert_eq!(tx.try_send(1), Err(TrySendError::Full(1)));
        let r = goro::go!(move || rx.recv());
        tx.send(2).unwrap();
        assert_eq!(r.join().unwrap(), Ok(2));
    });
}

/// Dropping the last receiver drops what is buffered right away: nobody can receive
/// it (before issue 13 it lived until the last sender went).
#[test]
fn drops_buffered_values_with_the_last_receiver() {
    let token = Arc::new(());
    let (tx, rx) = channel::<Arc<()>>(4);
    let rx2 = rx.clone();
    for _ in 0..3 {
        tx.send(token.clone()).unwrap();
    }
    drop(rx);
    assert_eq!(Arc::strong_count(&token), 4, "a receiver is still alive");
    drop(rx2);
    assert_eq!(
        Arc::strong_count(&token),
        1,
        "buffered values outlived the receivers"
    );
    assert_eq!(tx.send(token.clone()).unwrap_err().0, token);
    // A value whose destructor uses its own channel does not deadlock the drop.
    struct SendsOnDrop(Option<goro::chan::Sender<SendsOnDrop>>);
    impl Drop for SendsOnDrop {
        fn drop(&mut self) {
            if let Some(tx) = self.0.take() {
                assert!(matches!(
                    tx.try_send(SendsOnDrop(None)),
                    Err(TrySendError::Closed(_))
                ));
            }
        }
    }
    let (tx, rx) = channel::<SendsOnDrop>(1);
    tx.send(SendsOnDrop(Some(tx.clone()))).unwrap();
    with_timeout(T, move || drop(rx));
}

/// `try_send` / `try_recv` are preemption points: a coroutine spinning on one does
/// not starve, even at 1 P, the coroutine it waits for (before issue 13: 2 of 999
/// values in 10 s at 1 P). Each value costs the spinner a time slice (~10 ms) at 1
/// P, as in Go; the spin loops give up (and fail) after 10 s rather than hang the P.
#[test]
fn no_starvation_spinning_on_try_send_or_try_recv() {
    with_timeout(T, || {
        const N: u32 = 20;
        let limit = Duration::from_secs(10);
        // A spinning sender and a blocking receiver.
        let (tx, rx) = channel::<u32>(0);
        let spinner = goro::go!(move || {
            let start = Instant::now();
            for i in 0..N {
                let mut v = i;
                while let Err(TrySendError::Full(back)) = tx.try_send(v) {
                    assert!(start.elapsed() < limit, "try_send spun {limit:?}: starved");
                    v = back;
                }
            }
        });
        let receiver = goro::go!(move || (0..N).map(|_| rx.recv().unwrap()).collect::<Vec<_>>());
        spinner.join().unwrap();
        assert_eq!(receiver.join().unwrap(), (0..N).collect::<Vec<_>>());
        // A spinning receiver and a blocking sender.
        let (tx, rx) = channel::<u32>(0);
        let spinner = goro::go!(move || {
            let start = Instant::now();
            let mut got = Vec::new();
            while got.len() < N as usize {
                match rx.try_recv() {
                    Ok(v) => got.push(v),
                    Err(TryRecvError::Empty) => {
                        assert!(start.elapsed() < limit, "try_recv spun {limit:?}: starved")
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            got
        });
        let sender = goro::go!(move || (0..N).for_each(|i| tx.send(i).unwrap()));
        sender.join().unwrap();
        assert_eq!(spinner.join().unwrap(), (0..N).collect::<Vec<_>>());
    });
}
