//! The reverse direction: 10 000 tokio tasks that each await a coroutine's
//! `JoinHandle` and a `recv_async`, on a 2-worker tokio runtime beside goro's 2 Ps.
//! Before `IntoFuture` and `recv_async`, a task had to block its worker in `join`
//! (10 000 tasks joining coroutines that sleep 20 ms took 102 s).

use std::time::{Duration, Instant};

#[test]
fn ten_thousand_tasks_await_coroutines() {
    goro::Config::from_env()
        .unwrap()
        .maxprocs(2)
        .init()
        .unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let threads = || std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let start = Instant::now();
    let peak = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..10_000u64 {
            tasks.push(tokio::spawn(async move {
                let (tx, rx) = goro::chan::channel::<u64>(0);
                let h = goro::go!(move || {
                    goro::time::sleep(Duration::from_millis(20));
                    tx.send(i * 2).unwrap();
                    i
                });
                let sent = rx.recv_async().await.unwrap();
                let joined = h.await.unwrap();
                assert_eq!((sent, joined), (i * 2, i));
                threads()
            }));
        }
        let mut peak = 0;
        for t in tasks {
            peak = peak.max(t.await.unwrap());
        }
        peak
    });
    let wall = start.elapsed();
    eprintln!("10 000 tasks awaiting coroutines that sleep 20 ms: {wall:?}, peak threads {peak}");
    assert!(peak <= 32, "peak threads {peak} (at most 32)");
    // Bounded, not timed: the blocking way took 102 s; a hang fails here, not forever.
    assert!(wall < Duration::from_secs(60), "took {wall:?}");
}
