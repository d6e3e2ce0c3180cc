//! `debug::stats` and `debug::coroutines`: what they report about parked, sleeping,
//! blocking and named coroutines.

mod common;

use std::time::Duration;

use common::{wait_until, with_timeout};
use goro::debug::{CoroutineInfo, CoroutineState};
use goro::park::WaitReason;

const T: Duration = Duration::from_secs(60);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &["exact_counts_alone"]);
}

/// The entries of `ids`, in a fresh list.
fn infos_of(ids: &[u64]) -> Vec<CoroutineInfo> {
    goro::debug::coroutines()
        .into_iter()
        .filter(|c| ids.contains(&c.id))
        .collect()
}

#[test]
fn parked_on_a_channel_show_as_chan_receive() {
    with_timeout(T, || {
        let (tx, rx) = goro::chan::channel::<u32>(0);
        let hs: Vec<_> = (0..100)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || rx.recv().unwrap())
            })
            .collect();
        let ids: Vec<u64> = hs.iter().map(|h| h.id()).collect();
        wait_until("100 coroutines parked on the channel", || {
            let infos = infos_of(&ids);
            infos.len() == 100
                && infos.iter().all(|c| {
                    c.state == CoroutineState::Waiting
                        && c.wait_reason == Some(WaitReason::ChanReceive)
                        && c.waiting_for.is_some()
                })
        });
        let s = goro::debug::stats();
        assert!(s.waiting >= 100, "{s:?}");
        assert!(s.coroutines >= 100, "{s:?}");
        // The list is sorted by id and has no duplicates.
        let all = goro::debug::coroutines();
        assert!(all.windows(2).all(|w| w[0].id < w[1].id));
        for i in 0..100 {
            tx.send(i).unwrap();
        }
        let mut sum: u32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
        sum -= 99 * 100 / 2;
        assert_eq!(sum, 0);
        // A join returns once the result is handed over; the coroutine leaves the
        // list when its M is done with it, a moment later (a plain thread's join can
        // run on the other CPU before that).
        wait_until("finished coroutines leave the list", || {
            infos_of(&ids).is_empty()
        });
    });
}

#[test]
fn names_and_reasons() {
    with_timeout(T, || {
        let (tx, rx) = goro::chan::channel::<()>(0);
        let (tx2, rx2) = goro::chan::channel::<()>(0);
        let sleeper = goro::Builder::new()
            .name("sleeper")
            .spawn(|| goro::time::sleep(Duration::from_secs(3600)))
            .unwrap();
        let sender = goro::Builder::new()
            .name("sender")
            .spawn(move || tx.send(()))
            .unwrap();
        let blocker = goro::Builder::new()
            .name("blocker")
            .spawn(move || goro::blocking(|| rx2.recv()))
            .unwrap();
        let ids = [sleeper.id(), sender.id(), blocker.id()];
        let want = [
            ("sleeper", CoroutineState::Waiting, WaitReason::Sleep),
            ("sender", CoroutineState::Waiting, WaitReason::ChanSend),
            (
                "blocker",
                CoroutineState::Blocking,
                WaitReason::BlockingCall,
            ),
        ];
        wait_until("three coroutines in their waits", || {
            let infos = infos_of(&ids);
            infos.len() == 3
                && want.iter().all(|(name, state, reason)| {
                    infos.iter().any(|c| {
                        c.name.as_deref() == Some(*name)
                            && c.state == *state
                            && c.wait_reason == Some(*reason)
                    })
                })
        });
        let s = goro::debug::stats();
        assert!(s.timers >= 1, "{s:?}");
        assert!(s.blocking >= 1, "{s:?}");
        // An unnamed coroutine has no name.
        let h = goro::go!(goro::current_id);
        let id = h.id();
        assert_eq!(h.join().unwrap(), Some(id));
        rx.recv().unwrap();
        sender.join().unwrap().unwrap();
        tx2.send(()).unwrap();
        blocker.join().unwrap().unwrap();
        // The sleeper stays: the process ends with it asleep.
        drop(sleeper);
    });
}

#[test]
fn socket_waiter_is_counted() {
    with_timeout(T, || {
        let l = goro::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = goro::go!(move || l.accept().map(|_| ()));
        let id = h.id();
        wait_until("a coroutine waiting in accept", || {
            infos_of(&[id])
                .first()
                .is_some_and(|c| c.wait_reason == Some(WaitReason::IoRead))
                && goro::debug::stats().io_waiters >= 1
        });
        let _c = std::net::TcpStream::connect(addr).unwrap();
        h.join().unwrap().unwrap();
    });
}

#[test]
fn stats_fields_are_consistent() {
    with_timeout(T, || {
        for _ in 0..20 {
            let s = goro::debug::stats();
            assert_eq!(s.gomaxprocs, goro::maxprocs());
            assert_eq!(s.local_runqs.len(), s.gomaxprocs);
            assert!(s.idle_procs <= s.gomaxprocs, "{s:?}");
            assert!(s.spinning_threads <= s.threads, "{s:?}");
            assert!(s.idle_threads <= s.threads, "{s:?}");
            assert!(s.threads >= 1, "{s:?}");
            // From a coroutine, at least the caller is running.
            let s = goro::go!(goro::debug::stats).join().unwrap();
            assert!(s.running >= 1, "{s:?}");
        }
    });
}

/// In a process of its own, so that no other test's coroutines are counted.
#[test]
fn exact_counts_alone() {
    if common::alone("exact_counts_alone", &[]) {
        return;
    }
    with_timeout(T, || {
        let (tx, rx) = goro::chan::channel::<()>(0);
        let hs: Vec<_> = (0..100)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || rx.recv().unwrap())
            })
            .collect();
        wait_until("exactly 100 waiting", || {
            let s = goro::debug::stats();
            s.waiting == 100 && s.coroutines == 100
        });
        let s = goro::debug::stats();
        assert_eq!(
            (s.running, s.runnable, s.waiting, s.blocking, s.coroutines),
            (0, 0, 100, 0, 100),
            "{s:?}"
        );
        assert_eq!(s.global_runq, 0, "{s:?}");
        assert!(s.local_runqs.iter().all(|&n| n == 0), "{s:?}");
        let list = goro::debug::coroutines();
        assert_eq!(list.len(), 100);
        assert!(list
            .iter()
            .all(|c| c.wait_reason == Some(WaitReason::ChanReceive) && c.name.is_none()));
        for _ in 0..100 {
            tx.send(()).unwrap();
        }
        for h in hs {
            h.join().unwrap();
        }
        // Both views empty out as each M finishes with its coroutine (the registry
        // first, then the count), a moment after the joins return.
        wait_until("no coroutines left", || {
            goro::debug::coroutines().is_empty() && goro::debug::stats().coroutines == 0
        });
    });
}
