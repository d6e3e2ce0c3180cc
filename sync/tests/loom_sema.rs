//! Loom model of the sema table (`sema.rs`): the real `acquire` / `release`, with
//! loom's thread park standing in for goro's park API. Checks the sema missed-wakeup
//! rule: a release that sees `nwait == 0` and an acquire about to queue never leave
//! the acquirer asleep with a unit available.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-sync --test loom_sema`
#![cfg(loom)]

use goro_runtime::park::WaitReason;
use goro_sync::sema::{ParkApi, SemaTable};
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

struct LoomPark;

impl ParkApi for LoomPark {
    type Unparker = thread::Thread;
    fn prepare() -> thread::Thread {
        thread::current()
    }
    fn park_commit<F: FnOnce()>(_: WaitReason, commit: F) {
        commit();
        thread::park();
    }
    fn unpark(u: thread::Thread) {
        u.unpark();
    }
    fn yield_now() {
        thread::yield_now();
    }
}

/// One acquirer, one release: the acquirer always gets the unit.
#[test]
fn no_lost_wakeup() {
    loom::model(|| {
        let table = Arc::new(SemaTable::<LoomPark>::new());
        let count = Arc::new(AtomicU32::new(0));
        let rel = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.release(&count, false))
        };
        table.acquire(&count, false, WaitReason::Sema);
        rel.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    });
}

/// A hand-off release gives the unit to the woken waiter through its ticket.
#[test]
fn handoff_release() {
    loom::model(|| {
        let table = Arc::new(SemaTable::<LoomPark>::new());
        let count = Arc::new(AtomicU32::new(0));
        let rel = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.release(&count, true))
        };
        table.acquire(&count, false, WaitReason::Sema);
        rel.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    });
}

/// One thread acquires twice (the second time LIFO, as a mutex's woken waiter that
/// lost the race does) against two releases: it gets both units, none is left over. Spin-lock retries make long paths, so
/// this model has a tighter preemption bound and more branches than the default.
#[test]
fn two_waiters_two_releases() {
    let mut builder = loom::model::Builder::new();
    builder.max_branches = 100_000;
    builder.preemption_bound = Some(2);
    builder.check(|| {
        let table = Arc::new(SemaTable::<LoomPark>::new());
        let count = Arc::new(AtomicU32::new(0));
        let acq = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || {
                table.acquire(&count, false, WaitReason::Sema);
                table.acquire(&count, true, WaitReason::Sema);
            })
        };
        table.release(&count, false);
        table.release(&count, false);
        acq.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    });
}
