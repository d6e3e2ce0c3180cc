//! Async code awaits goro: a `JoinHandle` is a future (`IntoFuture`), and channels
//! have `send_async` / `recv_async`. Runtime-agnostic (here `goro::block_on` on plain
//! threads and coroutines, and a hand-driven poll with a counting waker), and
//! cancel-safe: a future dropped while it waits leaves nothing behind and loses no
//! value.

mod common;

use std::future::{Future, IntoFuture};
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use common::{join, on_thread_and_coroutine, with_timeout};
use goro::chan::{channel, RecvError, SendError};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    (c.clone(), Waker::from(c))
}

fn assert_send<T: Send>(_: &T) {}

#[test]
fn join_handles_are_futures() {
    on_thread_and_coroutine(T, || {
        let h = goro::go!(|| {
            goro::time::sleep(Duration::from_millis(2));
            "done"
        });
        let fut = h.into_future();
        assert_send(&fut);
        assert_eq!(goro::block_on(fut).unwrap(), "done");
        // A finished coroutine: ready at the first poll.
        let h = goro::go!(|| 3);
        while !h.is_finished() {
            goro::time::sleep(Duration::from_micros(100));
        }
        assert_eq!(goro::block_on(h.into_future()).unwrap(), 3);
        // A panic is the Err that join gives.
        let h = goro::go!(|| -> u8 { panic!("boom") });
        let e = goro::block_on(async move { h.await }).unwrap_err();
        assert_eq!(goro::panic_message(&*e), "boom");
    });
}

/// Polled by one task, then another: the second task's waker is the one woken; a
/// dropped future's coroutine wakes nobody.
#[test]
fn join_future_follows_the_latest_waker_and_cancels() {
    with_timeout(T, || {
        let (tx, rx) = channel::<()>(0);
        let h = goro::go!(move || rx.recv().unwrap());
        let mut fut = pin!(h.into_future());
        let (c1, w1) = counting();
        let (c2, w2) = counting();
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&w1))
            .is_pending());
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(&w2))
            .is_pending());
        tx.send(()).unwrap();
        common::wait_until("the second waker woken", || {
            c2.0.load(Ordering::SeqCst) == 1
        });
        assert_eq!(
            c1.0.load(Ordering::SeqCst),
            0,
            "the replaced waker was woken"
        );
        assert!(fut.as_mut().poll(&mut Context::from_waker(&w2)).is_ready());

        let (tx, rx) = channel::<()>(0);
        let h = goro::go!(move || rx.recv().unwrap());
        let (c3, w3) = counting();
        {
            let mut fut = pin!(h.into_future());
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&w3))
                .is_pending());
        } // dropped: the coroutine is detached
        tx.send(()).unwrap();
        goro::time::sleep(Duration::from_millis(5));
        assert_eq!(c3.0.load(Ordering::SeqCst), 0, "a dropped future was woken");
    });
}

#[test]
fn send_and_recv_async_meet_blocking_ends() {
    on_thread_and_coroutine(T, || {
        for cap in [0, 1, 4] {
            let (tx, rx) = channel::<u32>(cap);
            let producer = goro::go!(move || {
                for i in 0..200 {
                    tx.send(i).unwrap();
                }
            });
            let got = goro::block_on(async {
                let mut got = Vec::new();
                while let Ok(v) = rx.recv_async().await {
                    got.push(v);
                }
                got
            });
            assert_eq!(got, (0..200).collect::<Vec<_>>(), "cap {cap}");
            join(producer);

            let (tx, rx) = channel::<u32>(cap);
            let consumer = goro::go!(move || rx.iter().collect::<Vec<_>>());
            goro::block_on(async {
                for i in 0..200 {
                    tx.send_async(i).await.unwrap();
                }
            });
            drop(tx);
            assert_eq!(join(consumer), (0..200).collect::<Vec<_>>(), "cap {cap}");
        }
        // Closed: the errors a blocking call gives, the value back.
        let (tx, rx) = channel::<u32>(0);
        drop(rx);
        assert_eq!(goro::block_on(tx.send_async(9)), Err(SendError(9)));
        let (tx, rx) = channel::<u32>(0);
        drop(tx);
        assert_eq!(goro::block_on(rx.recv_async()), Err(RecvError));
    });
}

/// A waiting async receive is woken by a send, and by a close; a waiting async send by
/// a receive and by a close (its value back).
#[test]
fn waiting_futures_are_completed_by_counterparts_and_close() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let (c, w) = counting();
        let mut f = pin!(rx.recv_async());
        assert_send(&f);
        assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
        assert!(!tx.is_full(), "a waiting async receive takes a send");
        tx.try_send(5).unwrap(); // the waiting future takes it
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            f.as_mut().poll(&mut Context::from_waker(&w)),
            Poll::Ready(Ok(5))
        );

        let (tx, rx) = channel::<u32>(0);
        let (c, w) = counting();
        let mut f = pin!(tx.send_async(6));
        assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
        assert_eq!(rx.try_recv(), Ok(6));
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            f.as_mut().poll(&mut Context::from_waker(&w)),
            Poll::Ready(Ok(()))
        );

        let (tx, rx) = channel::<u32>(0);
        let (c, w) = counting();
        let mut f = pin!(tx.send_async(7));
        assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
        drop(rx);
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert_eq!(
            f.as_mut().poll(&mut Context::from_waker(&w)),
            Poll::Ready(Err(SendError(7)))
        );
    });
}

/// Cancel safety: a receive dropped after a sender handed it a value gives the value
/// back, ahead of later ones; a send dropped while waiting sends nothing; dropped
/// waiters leave the queues.
#[test]
fn dropped_futures_lose_no_value() {
    with_timeout(T, || {
        // Rendezvous: the value goes back to the channel and the next receive gets it.
        let (tx, rx) = channel::<u32>(0);
        let (_c, w) = counting();
        {
            let mut f = pin!(rx.recv_async());
            assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
            tx.try_send(1).unwrap();
        }
        assert_eq!(rx.len(), 1, "given back");
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.len(), 0);

        // Buffered: given back ahead of what was sent after it.
        let (tx, rx) = channel::<u32>(2);
        {
            let mut f = pin!(rx.recv_async());
            assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
            tx.try_send(1).unwrap(); // to the waiting future
            tx.try_send(2).unwrap(); // buffered
        }
        assert_eq!((rx.try_recv(), rx.try_recv()), (Ok(1), Ok(2)));

        // Given straight to a receiver waiting behind the dropped one.
        let (tx, rx) = channel::<u32>(0);
        {
            let mut first = Box::pin(rx.recv_async());
            assert!(first
                .as_mut()
                .poll(&mut Context::from_waker(&w))
                .is_pending());
            let mut second = pin!(rx.recv_async());
            let (c2, w2) = counting();
            assert!(second
                .as_mut()
                .poll(&mut Context::from_waker(&w2))
                .is_pending());
            tx.try_send(3).unwrap(); // to the first
            drop(first);
            assert_eq!(
                c2.0.load(Ordering::SeqCst),
                1,
                "the second was handed the value"
            );
            assert_eq!(
                second.as_mut().poll(&mut Context::from_waker(&w2)),
                Poll::Ready(Ok(3))
            );
        }

        // Closed after the hand-off: the value is still received, then the close.
        let (tx, rx) = channel::<u32>(0);
        {
            let mut f = pin!(rx.recv_async());
            assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
            tx.try_send(4).unwrap();
            drop(tx);
        }
        assert_eq!(rx.recv(), Ok(4));
        assert_eq!(rx.recv(), Err(RecvError));

        // A waiting receive dropped: nobody waits any more.
        let (tx, rx) = channel::<u32>(0);
        {
            let mut f = pin!(rx.recv_async());
            assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
            assert!(!tx.is_full());
        }
        assert!(tx.is_full(), "the dropped receive still waits");
        assert_eq!(tx.try_send(1), Err(goro::chan::TrySendError::Full(1)));

        // A waiting send dropped: its value is never received.
        let (tx, rx) = channel::<u32>(0);
        {
            let mut f = pin!(tx.send_async(8));
            assert!(f.as_mut().poll(&mut Context::from_waker(&w)).is_pending());
        }
        assert!(rx.try_recv().is_err(), "a called-off send was delivered");
    });
}

/// Many async receivers and senders against coroutines, with futures dropped at random
/// points (a timeout race): every value sent is received exactly once.
#[test]
fn cancellation_storm_loses_nothing() {
    with_timeout(T, || {
        const N: u64 = 2_000;
        let (tx, rx) = channel::<u64>(0);
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let tx = tx.clone();
                goro::go!(move || {
                    for i in 0..N {
                        tx.send(p * N + i).unwrap();
                    }
                })
            })
            .collect();
        drop(tx);
        let receivers: Vec<_> = (0..4)
            .map(|r| {
                let rx = rx.clone();
                goro::go!(move || {
                    let mut got = Vec::new();
                    let mut polls = 0u64;
                    loop {
                        // Poll a receive a few times, then drop it (a lost race).
                        let mut f = pin!(rx.recv_async());
                        let (_c, w) = counting();
                        let mut done = None;
                        for _ in 0..(1 + (polls + r) % 3) {
                            polls += 1;
                            if let Poll::Ready(v) = f.as_mut().poll(&mut Context::from_waker(&w)) {
                                done = Some(v);
                                break;
                            }
                            goro::yield_now();
                        }
                        match done {
                            Some(Ok(v)) => got.push(v),
                            Some(Err(_)) => return got,
                            None => {} // dropped while waiting, maybe after a hand-off
                        }
                    }
                })
            })
            .collect();
        producers.into_iter().for_each(join);
        let mut all: Vec<u64> = receivers.into_iter().flat_map(join).collect();
        all.sort_unstable();
        assert_eq!(all, (0..4 * N).collect::<Vec<_>>());
    });
}
