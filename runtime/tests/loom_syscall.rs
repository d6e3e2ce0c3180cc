//! Loom model of the syscall hand-off (`sched/syscall.rs`; the CASes are
//! `StatusWord::cas`): an M enters a blocking call (`Running -> Syscall`, a Release
//! store after its last touch of the P's local state) and, coming back, tries
//! `Syscall -> Running`; sysmon tries `Syscall -> Idle` to retake the P. Exactly one of
//! them owns the P afterwards, and the winner's accesses to the P's local state are
//! ordered after the M's (loom's `UnsafeCell` reports a data race otherwise).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_syscall`
#![cfg(loom)]

use std::sync::atomic::Ordering as StdOrdering;

use goro_runtime::__loom::{PStatus, StatusWord};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

struct P {
    status: StatusWord,
    /// Stands for the P's local state (run queue, caches).
    local: UnsafeCell<u32>,
}

// SAFETY: `local` is only touched by the P's owner, which the model checks.
unsafe impl Sync for P {}

impl P {
    /// The P's owner uses its local state.
    fn touch(&self, by: u32) {
        // SAFETY: called only by whoever owns the P (the M before its call and after
        // winning its CAS, sysmon after winning its own); loom reports the access if
        // two of them are not ordered.
        self.local.with_mut(|l| unsafe { *l += by });
    }
}

fn model(enter_order: StdOrdering) {
    loom::model(move || {
        let p = Arc::new(P {
            status: StatusWord::new(PStatus::Running),
            local: UnsafeCell::new(0),
        });
        let sysmon = {
            let p = p.clone();
            thread::spawn(move || {
                let won = p.status.cas(PStatus::Syscall, PStatus::Idle);
                if won {
                    // The new owner (handoffp's M) uses the P.
                    p.touch(10);
                }
                won
            })
        };
        // The M: last touch of the local state, then the blocking call.
        p.touch(1);
        p.status.store(PStatus::Syscall, enter_order);
        // ... the call ... then back:
        let m_won = p.status.cas(PStatus::Syscall, PStatus::Running);
        if m_won {
            p.touch(100);
        }
        let sysmon_won = sysmon.join().unwrap();
        assert!(
            m_won ^ sysmon_won,
            "the P has {} owners",
            m_won as u8 + sysmon_won as u8
        );
    });
}

/// The runtime's orderings: the Release store on entry, AcqRel CASes.
#[test]
fn exactly_one_owner_and_no_race() {
    model(StdOrdering::Release);
}

/// Without the Release on entry, sysmon's win does not see the M's last writes to the
/// P's local state: loom reports the data race (documents why entry is Release).
#[test]
#[should_panic(expected = "Causality violation")]
fn relaxed_entry_races() {
    model(StdOrdering::Relaxed);
}
