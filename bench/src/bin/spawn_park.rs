//! Spawn-and-park: `n` coroutines spawned from a plain thread, each parked on one
//! channel (a connection or request coroutine lives a while), then released.
//!
//! ```text
//! cargo build --release -p goro-bench --bin spawn_park
//! GORO_MAXPROCS=2 target/release/spawn_park 100000
//! ```
//!
//! Prints spawn ns/each (the spawning loop), wake+exit ns/each (close the channel, join
//! them all) and the RSS each parked coroutine adds. Go's side is
//! `bench/go/spawnpark` (same output line), for runs alternated by hand until the
//! comparison tool has this workload (issue 17).

use std::time::{Duration, Instant};

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

fn main() {
    let n: usize = match std::env::args().nth(1).map(|v| v.parse()) {
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("usage: spawn_park N (N > 0 coroutines)");
            std::process::exit(2);
        }
    };
    goro::go!(|| ()).join().expect("warm-up"); // the runtime is started
    let (tx, rx) = goro::chan::channel::<()>(0);
    let r0 = rss_kib();
    let t0 = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|_| {
            let rx = rx.clone();
            goro::go!(move || {
                let _ = rx.recv();
            })
        })
        .collect();
    let spawn = t0.elapsed();
    std::thread::sleep(Duration::from_millis(200)); // all parked
    let r1 = rss_kib();
    let t1 = Instant::now();
    drop(tx);
    for h in hs {
        h.join().expect("a parked coroutine panicked");
    }
    let wake = t1.elapsed();
    println!(
        "n={n} spawn {:.0} ns/each, wake+exit {:.0} ns/each, rss/parked {} B",
        spawn.as_nanos() as f64 / n as f64,
        wake.as_nanos() as f64 / n as f64,
        r1.saturating_sub(r0) * 1024 / n as u64
    );
}
