//! What a dump costs the program it inspects in memory (issue 39): a dump of many
//! parked coroutines allocates at most 200 bytes per coroutine at its peak, the
//! stacks it captures interned as they are captured, not kept one buffer per walk.
//!
//! The heap is counted by this test binary's own global allocator (current and peak
//! bytes); `GORO_TEST_DUMP_COROUTINES` sets the count (20 000 by default; the figures
//! in docs/benchmarks.md are of 100 000 in a release build).

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
