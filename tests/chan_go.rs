//! `goro::chan::Chan`, Go's `chan T`: one handle for both directions, closed only by
//! `close`; Go's panics ("send on closed channel", "close of closed channel"), Go's
//! `v, ok := <-ch` as `Option`, `range` as `iter()`, and `select!` arms that bind Go's
//! values. Ported Go programs whose traps this type removes are here too.

mod common;

use std::time::Duration;

use common::{join, on_thread_and_coroutine, with_timeout};
use goro::chan::Chan;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

fn panic_text(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let p = std::panic::catch_unwind(f).expect_err("expected a panic");
    goro::panic_message(&*p).to_string()
}

#[test]
fn send_recv_len_cap_and_close() {
    on_thread_and_coroutine(T, || {
        let ch = Chan::<u32>::new(2);
        assert_eq!((ch.len(), ch.cap(), ch.is_empty()), (0, 2, true));
        ch.send(1);
        ch.send(2);
        assert_eq!(ch.len(), 2);
        ch.close();
        // Closed: what was sent before is still received, then None (ok == false).
        assert_eq!(
            (ch.recv(), ch.recv(), ch.recv(), ch.recv()),
            (Some(1), Some(2), None, None)
        );
        assert_eq!(panic_text(|| ch.send(3)), "send on closed channel");
        assert_eq!(panic_text(|| ch.close()), "close of closed channel");
    });
}

/// Go's trap with Rust's channels: the goroutine that sent returned, and its end
/// closed the channel. A `Chan` is never closed by a drop, also not of every clone but
/// one, and a clone made on another coroutine is the same channel.
#[test]
fn drops_never_close() {
    on_thread_and_coroutine(T, || {
        let ch = Chan::<&str>::new(0);
        let c = ch.clone();
        assert!(c == ch);
        join(goro::go!(move || drop(c)));
        let c2 = ch.clone();
        let h = goro::go!(move || c2.send("still open"));
        assert_eq!(ch.recv(), Some("still open"));
        join(h);
        goro::select! {
            recv(ch) -> v => panic!("a dropped clone closed it: {v:?}"),
            default(Duration::from_millis(20)) => {}
        }
        // Buffered values outlive every handle but the last, and go with it.
        let ch = Chan::new(4);
        ch.clone().send(String::from("kept"));
        assert_eq!(ch.recv().as_deref(), Some("kept"));
    });
}

/// Go by Example's `select`: two goroutines send after a while and return; the main
/// one receives both in a select loop. With `Sender`/`Receiver` moved into the
/// senders, the first to return closes its channel and the loop sees `Err`.
#[test]
fn go_by_example_select() {
    on_thread_and_coroutine(T, || {
        let (c1, c2) = (Chan::<&str>::new(0), Chan::<&str>::new(0));
        let (s1, s2) = (c1.clone(), c2.clone());
        goro::go!(move || {
            goro::time::sleep(Duration::from_millis(10));
            s1.send("one");
        });
        goro::go!(move || {
            goro::time::sleep(Duration::from_millis(20));
            s2.send("two");
        });
        let mut got = Vec::new();
        for _ in 0..2 {
            goro::select! {
                recv(c1) -> msg1 => got.push(format!("received {}", msg1.unwrap())),
                recv(c2) -> msg2 => got.push(format!("received {}", msg2.unwrap())),
            }
        }
        assert_eq!(got, ["received one", "received two"]);
    });
}

/// Go by Example's `range-over-channels` and `closing-channels`: a worker ranges over
/// jobs until they are closed, then says it is done on another channel.
#[test]
fn go_by_example_closing_and_range() {
    on_thread_and_coroutine(T, || {
        let jobs = Chan::<u32>::new(5);
        let done = Chan::<bool>::new(0);
        let (j, d) = (jobs.clone(), done.clone());
        let worker = goro::go!(move || {
            let mut seen = Vec::new();
            for job in &j {
                seen.push(job);
            }
            d.send(true);
            seen
        });
        for job in 1..=3 {
            jobs.send(job);
        }
        jobs.close();
        assert_eq!(done.recv(), Some(true));
        assert_eq!(join(worker), [1, 2, 3]);
        // Reading more from the closed channel: ok == false.
        assert_eq!(jobs.recv(), None);
    });
}

/// In `select!`: a receive binds `Option<T>` (None once closed and drained), a send
/// binds `()`, and a send chosen on a closed channel panics, as Go's select does.
#[test]
fn select_arms_bind_gos_values() {
    with_timeout(T, || {
        let ch = Chan::<u8>::new(1);
        goro::select! {
            send(ch, 7) -> r => { let () = r; }
        }
        goro::select! {
            recv(ch) -> v => assert_eq!(v, Some(7)),
        }
        ch.close();
        goro::select! {
            recv(ch) -> v => assert_eq!(v, None),
            default(Duration::from_secs(10)) => panic!("a closed channel is ready"),
        }
        let msg = panic_text(|| {
            goro::select! {
                send(ch, 8) -> _ => {},
                default(Duration::from_secs(10)) => panic!("a closed channel is ready"),
            }
        });
        assert_eq!(msg, "send on closed channel");
        // Mixed with Rust's ends in one select.
        let (tx, rx) = goro::chan::channel::<u8>(1);
        tx.send(1).unwrap();
        let gc = Chan::<u8>::new(0);
        goro::select! {
            recv(rx) -> v => assert_eq!(v, Ok(1)),
            recv(gc) -> v => panic!("nothing was sent: {v:?}"),
        }
    });
}

/// A sender waiting on a full channel when it is closed panics (Go: "send on closed
/// channel" for the blocked sender too); receivers waiting get `None`.
#[test]
fn close_wakes_waiters_the_go_way() {
    with_timeout(T, || {
        let ch = Chan::<u32>::new(0);
        let s = ch.clone();
        let sender = goro::go!(move || s.send(1));
        let r = ch.clone();
        let full = Chan::<u32>::new(0);
        let f = full.clone();
        let receiver = goro::go!(move || f.recv());
        goro::time::sleep(Duration::from_millis(20)); // both wait
        ch.close();
        full.close();
        let e = sender.join().unwrap_err();
        assert_eq!(goro::panic_message(&*e), "send on closed channel");
        assert_eq!(receiver.join().unwrap(), None);
        assert_eq!(r.recv(), None);
    });
}

/// Go: TestChan (chan_test.go), its checks rewritten for `Chan`: a receive from an
/// empty channel and a send to a full one block; after a close, receives drain then
/// give the zero value with ok == false; values arrive in FIFO order; len and cap.
#[test]
fn go_test_chan() {
    with_timeout(T, || {
        const N: u32 = 200;
        for cap in [0usize, 1, 2, 10, 100] {
            // Receive from an empty channel blocks.
            let c = Chan::<u32>::new(cap);
            let r = c.clone();
            let recv = goro::go!(move || r.recv());
            goro::time::sleep(Duration::from_millis(2));
            assert!(!recv.is_finished(), "chan[{cap}]: receive from empty chan");
            c.send(0);
            assert_eq!(join(recv), Some(0));
            // Send to a full channel blocks.
            let c = Chan::<u32>::new(cap);
            for i in 0..cap as u32 {
                c.send(i);
            }
            let s = c.clone();
            let send = goro::go!(move || s.send(0));
            goro::time::sleep(Duration::from_millis(2));
            assert!(!send.is_finished(), "chan[{cap}]: send to full chan");
            for _ in 0..=cap {
                c.recv();
            }
            join(send);
            // Closed: drains, then None for ever.
            let c = Chan::<u32>::new(cap);
            for i in 0..cap as u32 {
                c.send(i);
            }
            c.close();
            for i in 0..cap as u32 {
                assert_eq!(c.recv(), Some(i), "chan[{cap}]");
            }
            for _ in 0..3 {
                assert_eq!(c.recv(), None, "chan[{cap}]");
            }
            // FIFO, from several senders' points of view.
            let c = Chan::<u32>::new(cap);
            let s = c.clone();
            let sender = goro::go!(move || (0..N).for_each(|i| s.send(i)));
            for i in 0..N {
                assert_eq!(c.recv(), Some(i), "chan[{cap}]");
            }
            join(sender);
            // len and cap.
            let c = Chan::<u32>::new(cap);
            for i in 0..cap {
                assert_eq!((c.len(), c.cap()), (i, cap));
                c.send(i as u32);
            }
        }
    });
}
