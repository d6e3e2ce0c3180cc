//! Loom model of the scan handshake (`sched/scan.rs`): an M resumes and suspends a
//! coroutine while a dump claims it, checks that it is off its CPU, walks its stack and
//! lets go. The G's status is modelled by a flag with the status's orderings (Release
//! when the M moves it off `Running` after a suspension, a Relaxed store of `Running`
//! before a resume, the dump's Acquire load); the dump's word is the runtime's own
//! `ScanWord`. The stack is a loom cell: the M writes it while the coroutine runs, the
//! dump while it walks (the inspection runs on the coroutine's stack), and loom reports
//! any two accesses the handshake leaves unordered. A park's commit action, which the M
//! runs on the coroutine's frame after the suspension (`commit_park`), is a write to
//! that cell too, before the status moves off `Running` (the order `commit_park` keeps:
//! with the move first, loom reports the action's write beside the dump's walk). The
//! barrier is modelled as a SeqCst fence on both sides, as the runtime does under loom.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_scan`
#![cfg(loom)]

use goro_runtime::__loom::ScanWord;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;

struct G {
    /// Stands for the G's status: true while `Running` (on a CPU).
    running: AtomicBool,
    scan: ScanWord,
    /// Stands for the coroutine's stack.
    stack: UnsafeCell<u32>,
}

// SAFETY: `stack` is touched only under the handshake, which the model checks.
unsafe impl Sync for G {}

impl G {
    fn touch(&self) {
        // SAFETY: the handshake gives one side at a time; loom reports two unordered.
        self.stack.with_mut(|s| unsafe { *s += 1 });
    }

    /// One run on an M: `Runnable -> Running` (Relaxed, as `G::transition` is for an
    /// owner's read), the handshake, the coroutine runs, then off `Running` (Release).
    fn run_once(&self) {
        self.running.store(true, Ordering::Relaxed);
        self.scan.begin_run(false);
        self.touch();
        self.running.store(false, Ordering::Release);
    }

    /// One run that ends in a park, as `commit_park` orders it: the coroutine runs and
    /// suspends, the M runs the commit action (whose closure and captures live in the
    /// coroutine's frame), then moves it off `Running` (Release).
    fn run_and_park(&self) {
        self.running.store(true, Ordering::Relaxed);
        self.scan.begin_run(false);
        self.touch();
        // The commit action, on the M, in the coroutine's frame.
        self.touch();
        self.running.store(false, Ordering::Release);
    }
}

/// A G that has run once and is suspended (parked, or in a run queue).
fn suspended_g() -> Arc<G> {
    let g = Arc::new(G {
        running: AtomicBool::new(false),
        scan: ScanWord::new(),
        stack: UnsafeCell::new(0),
    });
    g.run_once();
    g
}

/// An M runs the G `runs` times.
fn spawn_m(g: &Arc<G>, runs: usize) -> thread::JoinHandle<()> {
    let g = g.clone();
    thread::spawn(move || {
        for _ in 0..runs {
            g.run_once();
        }
    })
}

/// One dump: claim, barrier, the status, walk if off its CPU, release. Returns whether
/// it walked the stack.
fn dump(g: &G) -> bool {
    if !g.scan.claim() {
        return false;
    }
    fence(Ordering::SeqCst); // membarrier::sysmon_side, as under loom
                             // Acquire: as `G::status_off_cpu`.
    let walked = !g.running.load(Ordering::Acquire);
    if walked {
        g.touch();
    }
    g.scan.release();
    walked
}

#[test]
fn a_dump_and_a_resume_never_share_the_stack() {
    loom::model(|| {
        let g = suspended_g();
        let m = spawn_m(&g, 1);
        dump(&g);
        m.join().unwrap();
    });
}

#[test]
fn a_dump_between_two_runs_never_shares_the_stack() {
    loom::model(|| {
        let g = suspended_g();
        let m = spawn_m(&g, 2);
        dump(&g);
        m.join().unwrap();
    });
}

/// A dump beside a park whose commit action writes the parked coroutine's frame: the
/// action comes before the move off `Running`, so the dump walks after it or not at
/// all.
#[test]
fn a_dump_never_walks_beside_a_park_commit() {
    loom::model(|| {
        let g = suspended_g();
        let m = {
            let g = g.clone();
            thread::spawn(move || g.run_and_park())
        };
        dump(&g);
        m.join().unwrap();
    });
}

/// Two dumps at once (the runtime serialises them, but the claim alone must keep them
/// apart): at most one walks at a time, and neither beside the M.
#[test]
fn two_dumps_never_share_the_stack() {
    loom::model(|| {
        let g = suspended_g();
        let m = spawn_m(&g, 1);
        let g2 = g.clone();
        let other = thread::spawn(move || dump(&g2));
        dump(&g);
        other.join().unwrap();
        m.join().unwrap();
    });
}

/// A coroutine that nobody resumes is walked: the dump is not starved of a suspended
/// stack.
#[test]
fn a_suspended_coroutine_is_walked() {
    loom::model(|| {
        let g = suspended_g();
        assert!(dump(&g));
    });
}
