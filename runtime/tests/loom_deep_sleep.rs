//! Loom model of sysmon's deep sleep (`DeepSleep`, "the deep-sleep Dekker pair" in
//! `sched/idle.rs`): sysmon announces a sleep with no timeout and re-reads the idle-P
//! count; an M takes the last idle P and checks for the announcement. Either sysmon sees
//! the P taken (and sleeps with a timeout), or the M pokes it: sysmon never sleeps
//! unbounded while a P runs.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_deep_sleep`
#![cfg(loom)]

use goro_runtime::__loom::{DeepSleep, Spinning};
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

const BROKEN: &str = "sysmon sleeps with no timeout while a P runs";

/// The runtime's code: one P, idle; an M takes it while sysmon goes to sleep.
#[test]
fn sysmon_sees_the_p_taken_or_is_poked() {
    loom::model(|| {
        let sp = Arc::new(Spinning::new());
        let ds = Arc::new(DeepSleep::new());
        sp.pidle_inc();
        let m = {
            let (sp, ds) = (sp.clone(), ds.clone());
            thread::spawn(move || {
                sp.pidle_dec();
                ds.should_poke()
            })
        };
        let still_idle = ds.announce(&sp, 1);
        let poked = m.join().unwrap();
        assert!(!still_idle || poked, "{BROKEN}");
    });
}

/// The pair as it was before issue 14 (Relaxed loads on both sides): the model finds
/// the interleaving where both loads miss the other side's write.
#[test]
#[should_panic(expected = "sysmon sleeps with no timeout while a P runs")]
fn with_relaxed_loads_sysmon_sleeps_through() {
    loom::model(|| {
        let npidle = Arc::new(AtomicUsize::new(1));
        let asleep = Arc::new(AtomicBool::new(false));
        let m = {
            let (npidle, asleep) = (npidle.clone(), asleep.clone());
            thread::spawn(move || {
                npidle.fetch_sub(1, Ordering::SeqCst);
                asleep.load(Ordering::Relaxed) && asleep.swap(false, Ordering::AcqRel)
            })
        };
        asleep.store(true, Ordering::SeqCst);
        let still_idle = npidle.load(Ordering::Relaxed) >= 1;
        let poked = m.join().unwrap();
        assert!(!still_idle || poked, "{BROKEN}");
    });
}

/// Two Ms taking Ps during one sleep: only one pokes.
#[test]
fn one_poke_per_sleep() {
    loom::model(|| {
        let sp = Arc::new(Spinning::new());
        let ds = Arc::new(DeepSleep::new());
        sp.pidle_inc();
        sp.pidle_inc();
        assert!(ds.announce(&sp, 2));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (sp, ds) = (sp.clone(), ds.clone());
                thread::spawn(move || {
                    sp.pidle_dec();
                    ds.should_poke()
                })
            })
            .collect();
        let pokes: u32 = hs.into_iter().map(|h| h.join().unwrap() as u32).sum();
        assert_eq!(pokes, 1);
    });
}
