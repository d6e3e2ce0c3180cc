//! `block_on`: futures on coroutines and plain threads, woken from anywhere.

mod common;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use common::with_timeout;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// A one-shot flag future: `set` from anywhere completes it.
#[derive(Clone, Default)]
struct Flag {
    inner: Arc<FlagInner>,
}

#[derive(Default)]
struct FlagInner {
    done: AtomicBool,
    waker: Mutex<Option<Waker>>,
    polls: AtomicUsize,
}

impl Flag {
    fn set(&self) {
        self.inner.done.store(true, Ordering::SeqCst);
        if let Some(w) = self.inner.waker.lock().unwrap().take() {
            w.wake();
        }
    }

    fn polls(&self) -> usize {
        self.inner.polls.load(Ordering::SeqCst)
    }
}

impl Future for Flag {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.inner.polls.fetch_add(1, Ordering::SeqCst);
        *self.inner.waker.lock().unwrap() = Some(cx.waker().clone());
        if self.inner.done.load(Ordering::SeqCst) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// Runs `f` once on a coroutine and once on a plain thread.
fn on_both(f: impl Fn() + Send + Sync + 'static) {
    let f = Arc::new(f);
    let g = f.clone();
    goro::go!(move || g()).join().unwrap();
    std::thread::spawn(move || f()).join().unwrap();
}

#[test]
fn ready_at_once() {
    with_timeout(T, || {
        on_both(|| {
            assert_eq!(goro::block_on(std::future::ready(3)), 3);
            assert_eq!(goro::block_on(async { 4 }), 4);
            let mut polls = 0;
            let v = goro::block_on(poll_fn(|_| {
                polls += 1;
                Poll::Ready(5)
            }));
            assert_eq!((v, polls), (5, 1));
        });
    });
}

#[test]
fn woken_from_another_thread() {
    with_timeout(T, || {
        on_both(|| {
            for i in 0..200u64 {
                let f = Flag::default();
                let s = f.clone();
                let t = std::thread::spawn(move || {
                    if i % 2 == 0 {
                        std::thread::sleep(Duration::from_micros(i * 5));
                    }
                    s.set();
                });
                goro::block_on(f.clone());
                t.join().unwrap();
                // One poll per wake at most: the first, and the one after `set`.
                assert!(f.polls() <= 2, "polled {} times", f.polls());
            }
        });
    });
}

#[test]
fn woken_from_coroutine() {
    with_timeout(T, || {
        on_both(|| {
            for i in 0..200u64 {
                let f = Flag::default();
                let s = f.clone();
                let h = goro::go!(move || {
                    if i % 2 == 0 {
                        goro::yield_now();
                    }
                    s.set();
                });
                goro::block_on(f.clone());
                h.join().unwrap();
                assert!(f.polls() <= 2, "polled {} times", f.polls());
            }
        });
    });
}

#[test]
fn woken_many_times_before_polled_again() {
    with_timeout(T, || {
        on_both(|| {
            // 1000 wakes during the first poll, from the poll itself and from another
            // thread that finishes before the poll returns: one more poll, not 1000.
            let mut polls = 0;
            goro::block_on(poll_fn(|cx| {
                polls += 1;
                if polls > 1 {
                    return Poll::Ready(());
                }
                for _ in 0..500 {
                    cx.waker().wake_by_ref();
                }
                let w = cx.waker().clone();
                std::thread::spawn(move || {
                    for _ in 0..500 {
                        w.wake_by_ref();
                    }
                })
                .join()
                .unwrap();
                Poll::Pending
            }));
            assert_eq!(polls, 2);
        });
    });
}

#[test]
fn woken_many_times_while_parked() {
    with_timeout(T, || {
        on_both(|| {
            // The waker is woken 1000 times after the caller may have parked; the
            // future is done only after the last. Polls never exceed wakes + 1.
            let wakes = Arc::new(AtomicUsize::new(0));
            let w2 = wakes.clone();
            let mut polls = 0;
            let mut started = false;
            goro::block_on(poll_fn(|cx| {
                polls += 1;
                if wakes.load(Ordering::SeqCst) == 1000 {
                    return Poll::Ready(());
                }
                if !started {
                    started = true;
                    let w = cx.waker().clone();
                    let n = w2.clone();
                    std::thread::spawn(move || {
                        for _ in 0..1000 {
                            n.fetch_add(1, Ordering::SeqCst);
                            w.wake_by_ref();
                        }
                    });
                }
                Poll::Pending
            }));
            assert!((2..=1001).contains(&polls), "polled {polls} times");
        });
    });
}

#[test]
fn nested_block_on_in_spawned_coroutine() {
    with_timeout(T, || {
        on_both(|| {
            let v = goro::block_on(async {
                let h = goro::go!(|| {
                    let f = Flag::default();
                    let s = f.clone();
                    let t = goro::go!(move || s.set());
                    goro::block_on(f);
                    t.join().unwrap();
                    goro::block_on(async { 40 })
                });
                h.join().unwrap() + 2
            });
            assert_eq!(v, 42);
        });
    });
}

#[test]
fn no_lost_wakeup_many_coroutines() {
    with_timeout(T, || {
        let hs: Vec<_> = (0..1000)
            .map(|_| {
                let f = Flag::default();
                let s = f.clone();
                let setter = goro::go!(move || s.set());
                goro::go!(move || {
                    goro::block_on(f);
                    setter.join().unwrap();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    });
}
