//! reqwest, a tokio-based HTTP client, from goro's coroutines through
//! `goro::tokio::block_on`, against a local hyper server in a child process
//! (`slow_server`). The CI runs these in release, with and without `hooks`.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{join, with_timeout};
use goro_ecosystem::{raise_fd_limit, SlowServer};

const T: Duration = Duration::from_secs(300);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// 1 000 coroutines whose futures park inside `poll` between tokio awaits: a goro
/// sleep, a goro channel receive, a nested `block_on`, a reqwest GET. No panic, every
/// result right (the unsound design panicked in unrelated coroutines in every run).
/// Each coroutine parked inside a poll holds its thread (the thread lock), so this
/// one runs up to a thousand threads: tests/slow_gets.rs, in a process of its own,
/// counts the threads of the usual case.
#[test]
fn parking_inside_poll_between_gets() {
    with_timeout(T, || {
        raise_fd_limit();
        let server = SlowServer::start(env!("CARGO_BIN_EXE_slow_server"), Duration::from_millis(1));
        let client = reqwest::Client::new();
        let (tx, rx) = goro::chan::channel::<u64>(16);
        let feeder = goro::go!(move || {
            for i in 0..1_000 {
                tx.send(i).unwrap();
            }
        });
        let hs: Vec<_> = (0..1_000u64)
            .map(|i| {
                let (client, rx) = (client.clone(), rx.clone());
                let (a, b) = (server.url(i), server.url(i + 1_000_000));
                goro::go!(move || {
                    goro::tokio::block_on(async move {
                        let first = client.get(&a).send().await.unwrap().text().await.unwrap();
                        goro::time::sleep(Duration::from_micros(300)); // parks in poll
                        let fed = rx.recv().unwrap(); // parks in poll
                        let c = client.clone();
                        let nested = goro::tokio::block_on(async move {
                            tokio::time::sleep(Duration::from_micros(100)).await;
                            c.get(&b).send().await.unwrap().text().await.unwrap()
                        });
                        (first, nested, fed)
                    })
                })
            })
            .collect();
        let mut fed = Vec::new();
        for (i, h) in hs.into_iter().enumerate() {
            let (first, nested, f) = join(h);
            assert_eq!(first, i.to_string());
            assert_eq!(nested, (i + 1_000_000).to_string());
            fed.push(f);
        }
        join(feeder);
        fed.sort_unstable();
        assert_eq!(fed, (0..1_000).collect::<Vec<_>>());
    });
}
