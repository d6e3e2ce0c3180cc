//! What the runtime keeps in the heap, counted by this test binary's own global
//! allocator (current and peak bytes):
//!
//! - a dump of many parked coroutines allocates at most 200 bytes per coroutine at its
//!   peak, the stacks it captures interned as they are captured, not kept one buffer
//!   per walk (issue 39); `GORO_TEST_DUMP_COROUTINES` sets the count (20 000 by
//!   default; the figures in docs/benchmarks.md are of 100 000 in a release build);
//! - a plain thread's burst of spawns while every P is busy keeps at most a backlog's
//!   worth of bodies in the heap (issue 38): past it the spawner makes its coroutines
//!   itself, each body on its own stack.
//!
//! The tests take [`ONE_AT_A_TIME`]: the counters are the whole process's.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// The system allocator, counting the bytes it holds and their high-water mark.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; the counters are only counters
// (Relaxed: each is a statistic, read after the measured work has ended).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = HELD.fetch_add(layout.size(), Relaxed) + layout.size();
            PEAK.fetch_max(now, Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(p, layout) };
        HELD.fetch_sub(layout.size(), Relaxed);
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let q = unsafe { System.realloc(p, layout, new) };
        if !q.is_null() {
            if new >= layout.size() {
                let now = HELD.fetch_add(new - layout.size(), Relaxed) + new - layout.size();
                PEAK.fetch_max(now, Relaxed);
            } else {
                HELD.fetch_sub(layout.size() - new, Relaxed);
            }
        }
        q
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Held by each test here: the counters count every thread of the process.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The process's resident bytes (`/proc/self/statm`), for the report.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

/// The test again at `GORO_MAXPROCS` 1 and 2 (child processes).
#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

#[inline(never)]
fn wait_here(rx: goro::chan::Receiver<()>) {
    let _ = rx.recv();
}

/// Parks `n` coroutines in one place, then dumps them (grouped, as SIGQUIT and the
/// deadlock report do by default, and one entry each): the heap the dump adds at its
/// peak, per coroutine, is at most 200 bytes for the grouped dump.
#[test]
fn a_dump_of_many_parked_coroutines_allocates_little_per_coroutine() {
    let n: usize = std::env::var("GORO_TEST_DUMP_COROUTINES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::with_timeout(Duration::from_secs(120), move || {
        let (tx, rx) = goro::chan::channel::<()>(0);
        let hs: Vec<_> = (0..n)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || wait_here(rx))
            })
            .collect();
        common::wait_until("the coroutines to park", || {
            goro::debug::stats().waiting >= n
        });
        // A first dump loads the debug info the symbols come from (kept by the
        // process for good): not the dump's per-coroutine cost.
        let rss0 = rss();
        let t = Instant::now();
        let first = goro::debug::dump();
        println!(
            "first dump: resident memory +{:.0} B per coroutine after it, {:?}",
            rss().saturating_sub(rss0) as f64 / n as f64,
            t.elapsed()
        );
        assert!(
            first.contains(&format!("{n} coroutines [chan receive")),
            "{first}"
        );
        drop(first);
        for (layout, dump) in [
            ("grouped", goro::debug::dump as fn() -> String),
            ("each", goro::debug::dump_each),
        ] {
            let rss0 = rss();
            let base = HELD.load(Relaxed);
            PEAK.store(base, Relaxed);
            let t = Instant::now();
            let out = dump();
            let took = t.elapsed();
            let per = (PEAK.load(Relaxed) - base) as f64 / n as f64;
            let rss_per = rss().saturating_sub(rss0) as f64 / n as f64;
            println!(
                "{layout}: {n} parked coroutines, peak heap {per:.0} B per coroutine \
                 ({} B of it the dump's text), resident memory +{rss_per:.0} B per \
                 coroutine after it, {took:?}",
                out.len() / n
            );
            assert!(out.contains("wait_here"), "{}", &out[..out.len().min(4000)]);
            if layout == "grouped" {
                assert!(per <= 200.0, "the dump's peak is {per:.0} B per coroutine");
            }
        }
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// Bytes each coroutine of the burst below carries in its body.
const PAYLOAD: usize = 1000;

/// Every P runs a coroutine that spins (no scheduling point) while the test thread
/// spawns 2 000 coroutines, each body carrying 1 000 bytes: none can start until sysmon
/// takes the spinners' Ps (12 ms on), so they wait in the global queue. A coroutine
/// spawned by a plain thread is made by the M that first runs it, its body boxed until
/// then; past `UNMADE_BACKLOG` (256) waiting, the spawner makes it, the body moved onto
/// its stack. So the burst grows the heap by far less than its bodies: by at most 750
/// bytes a coroutine (a backlog's bodies, 128 a coroutine here, and each coroutine's
/// own record). Before the backlog had a bound, every body of the burst stayed in the
/// heap until an M ran it.
#[test]
fn a_burst_of_spawns_beside_busy_ps_keeps_few_bodies_in_the_heap() {
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::sync::Arc;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    common::with_timeout(Duration::from_secs(60), || {
        let procs = goro::maxprocs();
        let stop = Arc::new(AtomicBool::new(false));
        let spinning = Arc::new(AtomicUsize::new(0));
        let spinners: Vec<_> = (0..procs)
            .map(|_| {
                let (stop, spinning) = (stop.clone(), spinning.clone());
                goro::go!(move || {
                    spinning.fetch_add(1, Relaxed);
                    // Relaxed: a flag; nothing is published with it.
                    while !stop.load(Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        common::wait_until("every P to run a spinner", || {
            spinning.load(Relaxed) == procs
        });
        let n = 2_000;
        let mut hs = Vec::with_capacity(n);
        let t = Instant::now();
        let base = HELD.load(Relaxed);
        for i in 0..n {
            let body = [i as u8; PAYLOAD];
            hs.push(goro::go!(move || std::hint::black_box(body)[PAYLOAD - 1]));
        }
        let grown = HELD.load(Relaxed).saturating_sub(base);
        let took = t.elapsed();
        stop.store(true, Relaxed);
        for h in spinners {
            h.join().unwrap();
        }
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i as u8);
        }
        let per = grown / n;
        println!("a burst of {n} spawns beside {procs} busy Ps in {took:?}: +{per} B of heap each");
        assert!(
            per <= PAYLOAD * 3 / 4,
            "the burst grew the heap by {per} B a coroutine: its bodies stayed there"
        );
    });
}
