//! `goro::context` beyond Go's own tests (golang_context.rs): the unlinking rule under
//! a million short-lived children, deep chains, dropping a `CancelFunc`, bad input
//! (huge and past deadlines), `connect_context`, and the `after_func` idiom that
//! unblocks a socket read. From coroutines and plain threads; 127.0.0.1 only.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{on_thread_and_coroutine, with_timeout};
use goro::chan::channel;
use goro::context::{background, AfterFunc, CancelFunc, Context, Error};
use goro::net::{connect_context, TcpListener, TcpStream};
use goro::sync::WaitGroup;

const T: Duration = Duration::from_secs(240);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// The types have the traits the API promises.
#[test]
fn types_have_the_promised_traits() {
    fn context<T: Clone + Send + Sync + std::fmt::Debug + 'static>() {}
    fn error<
        T: std::fmt::Debug + Clone + Copy + PartialEq + Eq + std::fmt::Display + std::error::Error,
    >() {
    }
    fn handle<T: Send + Sync + std::fmt::Debug + 'static>() {}
    context::<Context>();
    error::<Error>();
    handle::<CancelFunc>();
    handle::<AfterFunc>();
    handle::<goro::sync::ErrGroup<String>>();
}

/// The process's resident set size (VmRSS), in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line");
    kb * 1024
}

/// A long-lived parent with a million short-lived children (and a hundred thousand
/// with timers, and as many `after_func`s stopped) stays flat: no child stays linked,
/// no registration stays, memory does not grow with the count. Four coroutines make
/// children of the same parent at once. Alone in a child process, so that RSS is this
/// test's.
#[test]
fn million_short_lived_children_stay_flat() {
    if common::alone("million_short_lived_children_stay_flat", &[]) {
        return;
    }
    with_timeout(T, || {
        let (parent, _cancel) = background().with_cancel();
        let round = |parent: &Context, n: usize| {
            for i in 0..n {
                let (child, cancel) = parent.with_cancel();
                if i % 2 == 0 {
                    cancel.cancel();
                } // else: dropped, which cancels too
                drop(child);
            }
        };
        round(&parent, 10_000); // warm-up: the list's room, the allocator's pools
        let before = rss();
        let wg = WaitGroup::new();
        for _ in 0..4 {
            let parent = parent.clone();
            wg.go(move || round(&parent, 250_000));
        }
        wg.wait();
        for _ in 0..100_000 {
            let (_child, _cancel) = parent.with_timeout(Duration::from_secs(3600));
            parent.after_func(|| unreachable!("stopped")).stop();
        }
        let grew = rss().saturating_sub(before);
        assert_eq!(parent.__children(), 0, "children stayed linked");
        assert_eq!(
            parent.__after_funcs(),
            0,
            "stopped after_funcs stayed registered"
        );
        assert!(parent.err().is_none());
        assert!(
            grew < 16 << 20,
            "RSS grew by {grew} bytes over 1.2 million children"
        );
    });
}

/// A burst of children alive at once all leave when cancelled, and the parent's
/// list gives its room back.
#[test]
fn burst_of_children_leaves_no_trace() {
    with_timeout(T, || {
        let (parent, _cancel) = background().with_cancel();
        let children: Vec<_> = (0..100_000).map(|_| parent.with_cancel()).collect();
        assert_eq!(parent.__children(), 100_000);
        drop(children);
        assert_eq!(parent.__children(), 0);
    });
}

/// A chain of 200 000 nested contexts is cancelled from its root and dropped on a
/// coroutine (a 256 KiB stack): neither recurses.
#[test]
fn deep_chain_cancels_and_drops_without_recursion() {
    with_timeout(T, || {
        goro::go!(|| {
            let (root, cancel) = background().with_cancel();
            let mut ctx = root.with_value(0u32);
            let mut cancels = Vec::new();
            for i in 0..200_000u32 {
                let (c, f) = ctx.with_cancel();
                ctx = if i % 1000 == 0 { c.with_value(i) } else { c };
                cancels.push(f);
            }
            let leaf = ctx.clone();
            cancel.cancel();
            assert_eq!(leaf.err(), Some(Error::Canceled));
            assert_eq!(leaf.value::<u32>(), Some(&199_000));
            drop((ctx, leaf, cancels, root));
        })
        .join()
        .unwrap();
    });
}

/// Dropping a `CancelFunc` cancels (the documented choice), so `let (ctx, _) = ...`
/// is born cancelled: loud, not silent. `cancel` is idempotent and works from any
/// thread.
#[test]
fn dropping_the_cancel_func_cancels() {
    on_thread_and_coroutine(T, || {
        let (ctx, _) = background().with_cancel();
        assert_eq!(ctx.err(), Some(Error::Canceled));
        assert!(ctx.done().try_recv().is_err()); // closed: ready

        let (ctx, cancel) = background().with_timeout(Duration::from_secs(60));
        {
            let _cancel = cancel; // the scope's `defer cancel()`
            assert_eq!(ctx.err(), None);
        }
        assert_eq!(ctx.err(), Some(Error::Canceled));

        let (ctx, cancel) = background().with_cancel();
        let cancel = Arc::new(cancel);
        let c2 = cancel.clone();
        std::thread::spawn(move || c2.cancel()).join().unwrap();
        cancel.cancel();
        cancel.cancel();
        assert_eq!(ctx.err(), Some(Error::Canceled));
    });
}

/// Bad input follows the timer rules: `Duration::MAX` and far deadlines neither
/// overflow nor fire; zero and past ones are born done.
#[test]
fn huge_and_past_deadlines() {
    on_thread_and_coroutine(T, || {
        let bg = background();
        let (ctx, _c1) = bg.with_timeout(Duration::MAX);
        assert_eq!(ctx.deadline(), None, "an unrepresentable deadline is none");
        let far = Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600);
        let (far_ctx, _c2) = bg.with_deadline(far);
        assert_eq!(far_ctx.deadline(), Some(far));
        let (child, _c3) = far_ctx.with_timeout(Duration::MAX);
        assert_eq!(
            child.deadline(),
            Some(far),
            "the ancestor's deadline is inherited"
        );
        let quiet = goro::select! {
            recv(ctx.done()) -> _ => false,
            recv(far_ctx.done()) -> _ => false,
            recv(child.done()) -> _ => false,
            default(Duration::from_millis(20)) => true,
        };
        assert!(quiet, "a huge deadline fired");

        let (zero, _c4) = bg.with_timeout(Duration::ZERO);
        assert_eq!(zero.err(), Some(Error::DeadlineExceeded));
        let (past, _c5) = bg.with_deadline(Instant::now() - Duration::from_secs(1));
        assert_eq!(past.err(), Some(Error::DeadlineExceeded));
        // A later deadline under an earlier one keeps the earlier.
        let soon = Instant::now() + Duration::from_millis(5);
        let (p, _c6) = bg.with_deadline(soon);
        let (c, _c7) = p.with_deadline(soon + Duration::from_secs(60));
        assert_eq!(c.deadline(), Some(soon));
        let _ = c.done().recv();
        assert_eq!(c.err(), Some(Error::DeadlineExceeded));
    });
}

/// A listener that completes no handshakes: its backlog is full, so the kernel drops
/// new SYNs and a connect to it waits (for the SYN retries, a second and more).
/// Returns its address and what must be kept alive; `None` if the kernel completed a
/// connect anyway.
fn blackhole() -> Option<(SocketAddr, Vec<Box<dyn Send>>)> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
        .unwrap();
    sock.listen(0).unwrap();
    let addr = sock.local_addr().unwrap().as_socket().unwrap();
    let mut keep: Vec<Box<dyn Send>> = vec![Box::new(sock)];
    for _ in 0..16 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
            Ok(s) => keep.push(Box::new(s)),
            Err(e) if e.kind() == ErrorKind::TimedOut || e.kind() == ErrorKind::WouldBlock => {
                return Some((addr, keep));
            }
            Err(e) => panic!("filling the backlog: {e}"),
        }
    }
    None
}

/// `connect_context` connects (TCP_NODELAY on), fails at once for a done context,
/// gives up at the context's deadline, and at its cancel while waiting.
#[test]
fn connect_context_honours_cancel_and_deadline() {
    on_thread_and_coroutine(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (ctx, cancel) = background().with_timeout(Duration::from_secs(30));
        let s = connect_context(&ctx, addr).unwrap();
        assert!(s.nodelay().unwrap());
        cancel.cancel();
        let e = connect_context(&ctx, addr).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Other);
        assert_eq!(
            e.get_ref().and_then(|e| e.downcast_ref()),
            Some(&Error::Canceled)
        );

        let Some((hole, _keep)) = blackhole() else {
            eprintln!("connect_context: the kernel completed every connect; skipping the waits");
            return;
        };
        let (ctx, _c) = background().with_timeout(Duration::from_millis(30));
        let t0 = Instant::now();
        let e = connect_context(&ctx, hole).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert_eq!(
            e.get_ref().and_then(|e| e.downcast_ref()),
            Some(&Error::DeadlineExceeded)
        );
        assert!(t0.elapsed() < Duration::from_secs(20));

        let (ctx, cancel) = background().with_cancel();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            cancel.cancel();
        });
        let e = connect_context(&ctx, hole).unwrap_err();
        assert_eq!(
            e.get_ref().and_then(|e| e.downcast_ref()),
            Some(&Error::Canceled)
        );
        canceller.join().unwrap();
        assert_eq!(ctx.__after_funcs(), 0);
    });
}

/// The idiom for a blocking call that takes no context: `after_func` closes the
/// stream, which wakes the read; a read that finishes first stops the function.
#[test]
fn after_func_unblocks_a_read() {
    on_thread_and_coroutine(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = Arc::new(TcpStream::connect(l.local_addr().unwrap()).unwrap());
        let (peer, _) = l.accept().unwrap();

        // A read that finishes first: stop() keeps the stream open.
        let (ctx, _cancel) = background().with_timeout(Duration::from_secs(60));
        let s = stream.clone();
        let stop = ctx.after_func(move || s.close());
        (&peer).write_all(b"x").unwrap();
        let mut buf = [0u8; 1];
        (&*stream).read_exact(&mut buf).unwrap();
        assert!(stop.stop());

        // A read nobody answers: the context's end closes the stream.
        let (ctx, cancel) = background().with_cancel();
        let s = stream.clone();
        let _stop = ctx.after_func(move || s.close());
        let (tx, rx) = channel::<()>(0);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            cancel.cancel();
            drop(tx);
        });
        let e = (&*stream).read(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotConnected);
        let _ = rx.recv();
        assert_eq!(ctx.err(), Some(Error::Canceled));
    });
}

/// `done()` in a select from a plain thread and a coroutine at once, woken by a
/// deadline.
#[test]
fn done_wakes_threads_and_coroutines() {
    with_timeout(T, || {
        let (ctx, _cancel) = background().with_timeout(Duration::from_millis(20));
        let c = ctx.clone();
        let thread = std::thread::spawn(move || {
            goro::select! {
                recv(c.done()) -> _ => c.err(),
                default(Duration::from_secs(30)) => None,
            }
        });
        let c = ctx.clone();
        let co = goro::go!(move || {
            goro::select! {
                recv(c.done()) -> _ => c.err(),
                default(Duration::from_secs(30)) => None,
            }
        });
        assert_eq!(thread.join().unwrap(), Some(Error::DeadlineExceeded));
        assert_eq!(co.join().unwrap(), Some(Error::DeadlineExceeded));
    });
}
