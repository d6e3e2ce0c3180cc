//! Ms that leave the pool free what they held (issue 14): 1 000 Ms made by bursts of
//! blocking calls and retired leave the heap, the mappings and the RSS where they were.
//! Before, each exited M leaked its `M` and its `MShared` (with its thread handle), and
//! the signal stack goro gives a thread that has none.
//!
//! The churn runs in a child process (this binary re-executed), with a short idle-M
//! timeout and 2 Ps; the binary counts live heap bytes with a wrapping allocator.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::{Duration, Instant};

/// Counts live heap bytes (Relaxed: a statistic read once the churn is over).
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: forwards to the system allocator unchanged, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const CHILD_ENV: &str = "GORO_TEST_MEXIT_CHILD";

#[test]
fn retired_ms_free_their_memory() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return churn();
    }
    let exe = std::env::current_exe().unwrap();
    let out = common::with_timeout(Duration::from_secs(120), move || {
        Command::new(exe)
            .env(CHILD_ENV, "1")
            .env("GORO_IDLE_M_EXIT_MS", "20")
            .env("GORO_MAXPROCS", "2")
            .args(["--exact", "retired_ms_free_their_memory", "--nocapture"])
            .output()
            .unwrap()
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("retired"), "{stdout}");
}

/// (live heap bytes, mappings, RSS in KiB, M threads now, highest M id seen)
fn census() -> (isize, usize, usize, usize, usize) {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .count();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let (mut live, mut top) = (0, 0);
    for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if let Some(id) = comm.trim().strip_prefix("goro-m") {
            live += 1;
            top = top.max(id.parse().unwrap_or(0));
        }
    }
    (LIVE.load(Ordering::Relaxed), maps, rss, live, top)
}

/// `n` coroutines in overlapping blocking calls (each grows the pool by about one M),
/// then a bounded wait for the pool to shrink back.
fn burst(n: usize) {
    let hs: Vec<_> = (0..n)
        .map(|_| goro::go!(|| goro::blocking(|| std::thread::sleep(Duration::from_millis(60)))))
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    let start = Instant::now();
    while census().3 > goro::maxprocs() + 1 && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn churn() {
    // Warm up: the stack pool, the coroutine registry, glibc's cache of thread stacks.
    burst(100);
    burst(100);
    let (heap0, maps0, rss0, _, top0) = census();
    let start = Instant::now();
    let mut top = top0;
    while top < top0 + 1000 && start.elapsed() < Duration::from_secs(60) {
        burst(100);
        top = census().4;
    }
    let (heap1, maps1, rss1, live, _) = census();
    println!(
        "retired {} Ms: heap {heap0} -> {heap1} B, {maps0} -> {maps1} mappings, \
         {rss0} -> {rss1} KiB RSS, {live} M threads left",
        top - top0
    );
    assert!(top - top0 >= 1000, "only {} Ms were made", top - top0);
    // Each leaked M cost ~300 bytes of heap: 1 000 of them, ~300 KB.
    assert!(heap1 - heap0 < 64 * 1024, "heap grew: {heap0} -> {heap1} B");
    // glibc keeps up to 40 MiB of exited threads' stacks for reuse: a few mappings of
    // slack, not the two per M a leaked signal stack cost.
    assert!(maps1 <= maps0 + 64, "mappings grew: {maps0} -> {maps1}");
    assert!(rss1 <= rss0 + 16 * 1024, "RSS grew: {rss0} -> {rss1} KiB");
}
