//! Loom model of the sema table (`sema.rs`): the real `acquire` / `acquire_timeout` /
//! `release` / `release_many`, with loom's thread park standing in for goro's park
//! API. Checks the sema missed-wakeup rule (a release that sees `nwait == 0` and an
//! acquire about to queue never leave the acquirer asleep with a unit available) and
//! the sema timeout rule (a timed waiter whose deadline fires after a release chose it
//! takes over that release's wake-up).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-sync --test loom_sema`
#![cfg(loom)]

use std::cell::RefCell;
use std::time::Instant;

use goro_runtime::park::WaitReason;
use goro_sync::sema::{ParkApi, SemaTable};
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;

/// The state of one wait, as goro's `WaitCell` has it: prepared, woken by an
/// unparker, or woken by its own deadline. Whoever moves it from `WAITING` wins.
const WAITING: u32 = 0;
const NOTIFIED: u32 = 1;
const TIMED_OUT: u32 = 2;

loom::thread_local! {
    /// The current wait of this thread (a fresh cell per `prepare`, so a late unparker
    /// of an older wait can never wake a newer one, as with goro's sequence numbers).
    static WAIT: RefCell<Option<Arc<AtomicU32>>> = RefCell::new(None);
}

loom::lazy_static! {
    /// Untimed parks so far in this execution (after their commit: the waiter is
    /// queued), for a model that needs a waiter queued before it goes on.
    static ref PARKS: AtomicU32 = AtomicU32::new(0);
}

fn current_wait() -> Arc<AtomicU32> {
    WAIT.with(|w| w.borrow().clone().expect("park without prepare"))
}

struct LoomUnparker {
    thread: thread::Thread,
    wait: Arc<AtomicU32>,
}

struct LoomPark<const EARLY: bool = false>;

impl<const EARLY: bool> ParkApi for LoomPark<EARLY> {
    type Unparker = LoomUnparker;
    fn prepare() -> LoomUnparker {
        let wait = Arc::new(AtomicU32::new(WAITING));
        WAIT.with(|w| *w.borrow_mut() = Some(wait.clone()));
        LoomUnparker {
            thread: thread::current(),
            wait,
        }
    }
    fn park_commit<F: FnOnce()>(_: WaitReason, commit: F) {
        commit();
        PARKS.fetch_add(1, Ordering::SeqCst);
        let wait = current_wait();
        while wait.load(Ordering::SeqCst) != NOTIFIED {
            thread::park();
        }
    }
    /// The deadline fires as soon as the commit has run (loom has no clock): every
    /// interleaving of a release with it is one of a release with a deadline.
    fn park_commit_timeout<F: FnOnce()>(_: WaitReason, _: Instant, commit: F) -> bool {
        let wait = current_wait();
        if EARLY {
            let fired = wait
                .compare_exchange(WAITING, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok();
            commit();
            assert!(fired, "woken before the commit published the waiter");
            return true;
        }
        commit();
        if wait
            .compare_exchange(WAITING, TIMED_OUT, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            return true;
        }
        while wait.load(Ordering::SeqCst) != NOTIFIED {
            thread::park();
        }
        false
    }
    fn unpark(u: LoomUnparker) {
        if u.wait
            .compare_exchange(WAITING, NOTIFIED, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
        {
            u.thread.unpark();
        }
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

/// A timed acquirer against one release: the unit is taken exactly once or left in the
/// count, never lost or doubled.
#[test]
fn timed_acquire_against_release() {
    loom::model(|| {
        let table = Arc::new(SemaTable::<LoomPark>::new());
        let count = Arc::new(AtomicU32::new(0));
        let rel = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.release(&count, false))
        };
        let took = table.acquire_timeout(&count, false, WaitReason::Sema, Instant::now());
        rel.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst) + u32::from(took), 1);
    });
}

/// The sema timeout rule: a plain waiter is queued, then a timed one queues ahead of
/// it (LIFO) and its deadline fires before its park, racing one release. If the
/// release dequeues the timed waiter before the timed waiter re-locks the root, the
/// timed waiter must take the unit (and here gives it back, which wakes the plain
/// one); if it did not, the unit would sit in the count with the plain waiter parked,
/// which loom reports as a deadlock. The set-up (the plain waiter parked first, the
/// timed one ahead of it) makes the losing order one preemption deep: with the three
/// threads free to start in any order, loom's bounded search did not reach it in
/// 360,000 iterations (five minutes).
///
/// Checked: with the take-over step in `SemaTable::timed_out` removed (returning
/// `ticket != 0` instead of `ticket != 0 || can_acquire(count)`), this model fails
/// with loom's "deadlock" report.
#[test]
fn timed_acquire_takes_over_the_wakeup() {
    loom::model(|| {
        let table = Arc::new(SemaTable::<LoomPark<true>>::new());
        let count = Arc::new(AtomicU32::new(0));
        let plain = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.acquire(&count, false, WaitReason::Sema))
        };
        while PARKS.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let rel = {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.release(&count, false))
        };
        if table.acquire_timeout(&count, true, WaitReason::Sema, Instant::now()) {
            table.release(&count, false);
        }
        plain.join().unwrap();
        rel.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    });
}

/// `release_many`: one waiter is parked and another races to queue while two units go
/// in with one CAS. The release wakes the parked one and either wakes the other too or
/// leaves it a unit to find on its re-check (the missed-wakeup rule with a multi-unit
/// bump). Waiting for the first park keeps the search small: three threads free to
/// start in any order ran for minutes at a preemption bound of 2.
#[test]
fn release_many_wakes_every_waiter() {
    loom::model(|| {
        let table = Arc::new(SemaTable::<LoomPark>::new());
        let count = Arc::new(AtomicU32::new(0));
        let acquirer = || {
            let (table, count) = (table.clone(), count.clone());
            thread::spawn(move || table.acquire(&count, false, WaitReason::Sema))
        };
        let first = acquirer();
        while PARKS.load(Ordering::SeqCst) == 0 {
            thread::yield_now();
        }
        let second = acquirer();
        table.release_many(&count, 2).unwrap();
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(count.load(Ordering::SeqCst), 0);
    });
}
