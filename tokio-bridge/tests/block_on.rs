//! `goro::tokio::block_on`: tokio futures on coroutines. Its reactor, timers and
//! `Handle::current()` work inside; futures that park their coroutine inside `poll`
//! (a goro sleep, a goro channel, a nested `block_on`, a goro lock) stay sound; panics
//! reach the caller; the caller may not be a tokio worker. Run at 1 and 2 Ps; the CI
//! runs it again with the `hooks` feature.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{join, on_coroutine, with_timeout};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T: Duration = Duration::from_secs(240);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// An echo server on goro's tokio runtime, for the clients below.
fn echo_server() -> std::net::SocketAddr {
    let listener = goro::tokio::block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    goro::tokio::handle().spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 64];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

/// Tokio's timers, sockets and `Handle::current()` from 1 000 coroutines at once.
#[test]
fn tokio_io_and_timers_from_many_coroutines() {
    on_coroutine(T, || {
        let addr = echo_server();
        let hs: Vec<_> = (0..1_000u32)
            .map(|i| {
                goro::go!(move || {
                    goro::tokio::block_on(async move {
                        let _ = tokio::runtime::Handle::current();
                        tokio::time::sleep(Duration::from_millis(u64::from(i % 20))).await;
                        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                        s.write_all(&i.to_le_bytes()).await.unwrap();
                        let mut b = [0u8; 4];
                        s.read_exact(&mut b).await.unwrap();
                        u32::from_le_bytes(b)
                    })
                })
            })
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(join(h), i as u32);
        }
    });
}

/// Futures that park their coroutine inside `poll`, between tokio awaits: a goro
/// sleep, a goro channel receive, a goro mutex, a nested `block_on`. 1 000
/// coroutines, every result checked, no panic anywhere (the unsound design panicked
/// with "EnterGuard values dropped out of order" or "there is no reactor running" in
/// other coroutines).
#[test]
fn parking_inside_poll_is_sound() {
    on_coroutine(T, || {
        let addr = echo_server();
        let (tx, rx) = goro::chan::channel::<u32>(64);
        let feeder = goro::go!(move || {
            for i in 0..1_000 {
                tx.send(i).unwrap();
            }
        });
        let lock = Arc::new(goro::sync::Mutex::new(0u32));
        let hs: Vec<_> = (0..1_000u32)
            .map(|i| {
                let (rx, lock) = (rx.clone(), lock.clone());
                goro::go!(move || {
                    goro::tokio::block_on(async move {
                        tokio::time::sleep(Duration::from_micros(100)).await;
                        goro::time::sleep(Duration::from_micros(200)); // parks in poll
                        let _ = tokio::runtime::Handle::current(); // still entered
                        let got = rx.recv().unwrap(); // parks in poll
                        *lock.lock() += 1; // may park in poll
                        let nested = goro::tokio::block_on(async move {
                            tokio::time::sleep(Duration::from_micros(100)).await;
                            goro::time::sleep(Duration::from_micros(100));
                            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
                            s.write_all(&i.to_le_bytes()).await.unwrap();
                            let mut b = [0u8; 4];
                            s.read_exact(&mut b).await.unwrap();
                            u32::from_le_bytes(b)
                        });
                        tokio::task::yield_now().await;
                        (nested, got)
                    })
                })
            })
            .collect();
        let mut got = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            let (echo, v) = join(h);
            assert_eq!(echo, i as u32);
            got.push(v);
        }
        join(feeder);
        got.sort_unstable();
        assert_eq!(got, (0..1_000).collect::<Vec<_>>());
        assert_eq!(*lock.lock(), 1_000);
    });
}

/// A future that is not `Send` and borrows from the caller's stack.
#[test]
fn futures_need_not_be_send_or_static() {
    on_coroutine(T, || {
        let local = std::rc::Rc::new(std::cell::Cell::new(1));
        let mut v = vec![1, 2];
        goro::tokio::block_on(async {
            tokio::time::sleep(Duration::from_millis(1)).await;
            local.set(local.get() + 1);
            v.push(3);
        });
        assert_eq!((local.get(), v), (2, vec![1, 2, 3]));
    });
}

/// A panic in the future resumes on the caller, and the future (and the tokio
/// resources it holds) is dropped inside tokio's context; the coroutine goes on.
#[test]
fn a_panic_resumes_on_the_caller() {
    on_coroutine(T, || {
        let dropped = Arc::new(AtomicUsize::new(0));
        struct InContext(Arc<AtomicUsize>);
        impl Drop for InContext {
            fn drop(&mut self) {
                assert!(
                    tokio::runtime::Handle::try_current().is_ok(),
                    "dropped outside"
                );
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let d = dropped.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            goro::tokio::block_on(async move {
                let _guard = InContext(d);
                let _sleep = tokio::time::sleep(Duration::from_secs(60)); // a timer entry
                tokio::time::sleep(Duration::from_millis(1)).await;
                panic!("inside the future");
            })
        }));
        let e = r.unwrap_err();
        assert_eq!(goro::panic_message(&*e), "inside the future");
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(
            goro::tokio::block_on(async { 5 }),
            5,
            "usable after the panic"
        );
    });
}

/// From a plain thread too (it blocks until the future is done).
#[test]
fn from_a_plain_thread() {
    with_timeout(T, || {
        let v = goro::tokio::block_on(async {
            tokio::time::sleep(Duration::from_millis(2)).await;
            7
        });
        assert_eq!(v, 7);
    });
}

/// Called on a tokio worker (inside an async task) it panics with tokio's message, as
/// tokio's own `block_on` does; inside our own poll, nested calls are fine (above).
#[test]
fn refused_on_a_tokio_worker() {
    with_timeout(T, || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let e = rt
            .block_on(rt.spawn(async { goro::tokio::block_on(async { 1 }) }))
            .unwrap_err();
        let p = e.into_panic();
        let msg = goro::panic_message(&*p);
        assert!(
            msg.contains("Cannot start a runtime from within a runtime"),
            "{msg}"
        );
        // Inside tokio's own block_on on a plain thread: the same.
        let r =
            std::panic::catch_unwind(|| rt.block_on(async { goro::tokio::block_on(async { 1 }) }));
        assert!(r.is_err());
        // A handle entered by the program is not a runtime: that works.
        let _g = rt.enter();
        assert_eq!(goro::tokio::block_on(async { 2 }), 2);
    });
}
