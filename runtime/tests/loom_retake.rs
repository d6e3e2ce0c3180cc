//! Loom model of the retake handshake ("the retake handshake" in `sched/p.rs`): the
//! holder of a P leaves goro (its coroutine runs user code) and enters it again; sysmon,
//! seeing the holder outside with no progress, tries to take the P. The holder's side is
//! a plain store, the M-side fence and a load; sysmon's a CAS, the barrier
//! (`membarrier`, modelled as a SeqCst fence on both sides, as the runtime does under
//! loom) and a load. Exactly one of them owns the P afterwards, the verdict is decided
//! by one CAS, and the owner's accesses to the P's local state never race (loom's
//! `UnsafeCell` reports a race otherwise).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_retake`
#![cfg(loom)]

use goro_runtime::__loom::{enter_goro, leave_goro, try_retake, RetakeWord};
use loom::cell::UnsafeCell;
use loom::sync::atomic::AtomicU64;
use loom::sync::Arc;
use loom::thread;

/// The id a holder leaves goro with (any coroutine id: not 0).
const G: u64 = 7;

struct P {
    retake: RetakeWord,
    /// The holder's flag (in the runtime it lives on the M).
    outside: AtomicU64,
    /// Stands for the P's local state.
    local: UnsafeCell<u32>,
}

// SAFETY: `local` is only touched by the P's owner, which the model checks.
unsafe impl Sync for P {}

impl P {
    fn touch(&self) {
        // SAFETY: only the P's owner calls this; loom reports two unordered owners.
        self.local.with_mut(|l| unsafe { *l += 1 });
    }
}

fn new_p() -> (Arc<P>, u64) {
    let p = Arc::new(P {
        retake: RetakeWord::new(),
        outside: AtomicU64::new(0),
        local: UnsafeCell::new(0),
    });
    let epoch = p.retake.acquire();
    (p, epoch)
}

/// sysmon on a thread of its own: tries to take `p` once, and uses it if it did.
fn spawn_sysmon(p: &Arc<P>) -> thread::JoinHandle<bool> {
    let p = p.clone();
    thread::spawn(move || {
        let taken = try_retake(&p.retake, |_| Some(&p.outside), || true);
        if taken {
            p.touch(); // the new holder uses the P
        }
        taken
    })
}

/// The holder leaves once and comes back while sysmon tries to take the P: one owner,
/// and across the interleavings both verdicts happen.
#[test]
fn one_owner_after_a_race() {
    use std::sync::atomic::{AtomicBool as StdBool, Ordering::Relaxed};
    static HELD_SEEN: StdBool = StdBool::new(false);
    static TAKEN_SEEN: StdBool = StdBool::new(false);
    loom::model(|| {
        let (p, epoch) = new_p();
        let sysmon = spawn_sysmon(&p);
        p.touch();
        leave_goro(&p.outside, G);
        // ... user code ...
        let held = enter_goro(&p.outside, &p.retake, RetakeWord::held_word(epoch), true);
        if held {
            p.touch();
        }
        let taken = sysmon.join().unwrap();
        assert!(held ^ taken, "held {held}, taken {taken}");
        HELD_SEEN.fetch_or(held, Relaxed);
        TAKEN_SEEN.fetch_or(taken, Relaxed);
    });
    assert!(
        HELD_SEEN.load(Relaxed) && TAKEN_SEEN.load(Relaxed),
        "a verdict never happened"
    );
}

/// A holder inside goro the whole time (it never left) keeps its P.
#[test]
fn inside_is_never_taken() {
    loom::model(|| {
        let (p, epoch) = new_p();
        let sysmon = {
            let p = p.clone();
            thread::spawn(move || try_retake(&p.retake, |_| Some(&p.outside), || true))
        };
        assert!(enter_goro(
            &p.outside,
            &p.retake,
            RetakeWord::held_word(epoch),
            true
        ));
        p.touch();
        assert!(!sysmon.join().unwrap(), "taken from a holder inside goro");
    });
}

/// A P taken and acquired again (a new epoch) is lost for good to its old holder.
#[test]
fn the_old_holder_stays_lost() {
    loom::model(|| {
        let (p, epoch) = new_p();
        leave_goro(&p.outside, G);
        assert!(try_retake(&p.retake, |_| Some(&p.outside), || true));
        let newer = {
            let p = p.clone();
            thread::spawn(move || {
                let e = p.retake.acquire(); // the next holder
                p.touch();
                e
            })
        };
        assert!(
            !enter_goro(&p.outside, &p.retake, RetakeWord::held_word(epoch), true),
            "the old holder came back"
        );
        assert_ne!(newer.join().unwrap(), epoch);
    });
}

/// Without the M-side fence (a store and a load that may pass each other) the model
/// finds the interleaving with two owners: documents why `enter_goro` fences.
#[test]
#[should_panic(expected = "Causality violation")]
fn without_the_m_side_fence_two_owners() {
    use loom::sync::atomic::Ordering;
    loom::model(|| {
        let (p, epoch) = new_p();
        let sysmon = spawn_sysmon(&p);
        leave_goro(&p.outside, G);
        p.outside.store(0, Ordering::Relaxed); // enter_goro without the fence
        let held = p.retake.enter(RetakeWord::held_word(epoch));
        if held {
            p.touch();
        }
        let taken = sysmon.join().unwrap();
        assert!(held ^ taken, "held {held}, taken {taken}");
    });
}

/// sysmon looks up the holder of the epoch it requested (`P::owner`, set under its
/// lock with the epoch): after the P changed hands, the new holder is judged by its own
/// `outside` word, not by the old holder's (still outside), and races sysmon as any
/// holder does.
#[test]
fn a_new_holder_is_judged_by_its_own_flag() {
    use loom::sync::Mutex;
    loom::model(|| {
        let p = Arc::new(P {
            retake: RetakeWord::new(),
            outside: AtomicU64::new(G), // the old holder's word: it left goro
            local: UnsafeCell::new(0),
        });
        let new_outside = Arc::new(AtomicU64::new(0));
        let owner = Arc::new(Mutex::new((p.retake.acquire(), 0usize)));
        // sysmon took the P from the old holder and handed it to a new one.
        assert!(try_retake(&p.retake, |_| Some(&p.outside), || true));
        let epoch = {
            let mut o = owner.lock().unwrap();
            let e = p.retake.acquire();
            *o = (e, 1);
            e
        };
        let sysmon = {
            let (p, owner, new_outside) = (p.clone(), owner.clone(), new_outside.clone());
            thread::spawn(move || {
                let flags = [&p.outside, &*new_outside];
                let taken = try_retake(
                    &p.retake,
                    |e| {
                        let o = owner.lock().unwrap();
                        (o.0 == e).then(|| flags[o.1])
                    },
                    || true,
                );
                if taken {
                    p.touch();
                }
                taken
            })
        };
        // The new holder works inside goro, leaves, comes back.
        p.touch();
        leave_goro(&new_outside, G);
        let held = enter_goro(&new_outside, &p.retake, RetakeWord::held_word(epoch), true);
        if held {
            p.touch();
        }
        let taken = sysmon.join().unwrap();
        assert!(held ^ taken, "held {held}, taken {taken}");
    });
}
