//! Loom model of a P's `runnext` slot (`RunNext`, see `sched/runq.rs`): the owner puts
//! and takes with swaps, a thief steals with a CAS from what it saw. Every G that
//! enters the slot leaves it exactly once.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_runnext`
#![cfg(loom)]

use goro_runtime::__loom::RunNext;
use loom::sync::Arc;
use loom::thread;

#[test]
fn each_put_is_taken_once() {
    loom::model(|| {
        let slot = Arc::new(RunNext::<u32>::new());
        let thief = {
            let slot = slot.clone();
            thread::spawn(move || {
                let mut got = Vec::new();
                for _ in 0..2 {
                    let seen = slot.peek();
                    if let Some(g) = slot.steal(seen) {
                        got.push(*g);
                    }
                }
                got
            })
        };
        let mut got = Vec::new();
        // Owner: put 1, put 2 (displacing 1 if still there), take.
        if let Some(old) = slot.put(std::sync::Arc::new(1).into()) {
            got.push(*old);
        }
        if let Some(old) = slot.put(std::sync::Arc::new(2).into()) {
            got.push(*old);
        }
        if let Some(g) = slot.take() {
            got.push(*g);
        }
        got.extend(thief.join().unwrap());
        got.sort_unstable();
        assert_eq!(got, vec![1, 2], "each G must leave runnext exactly once");
        assert!(slot.take().is_none());
    });
}
