//! Loom model of the WaitGroup word (`WaitGroupWord`, the counter and the waiters in
//! one atomic): tasks finish and `add(-1)` while waiters register. Every waiter
//! returns, sees the tasks' work (loom's `UnsafeCell` reports a race otherwise), and
//! the word is back to zero for the next round.
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-sync --test loom_waitgroup`
#![cfg(loom)]

use goro_sync::__loom::WaitGroupWord;
use loom::cell::UnsafeCell;
use loom::sync::{Arc, Condvar, Mutex};
use loom::thread;

/// The sleeping, as a counting semaphore on loom's mutex and condvar. (The real sema
/// table has its own model, `loom_sema.rs`; here it only has to order a release before
/// the acquire it satisfies.)
#[derive(Default)]
struct Sema {
    count: Mutex<u32>,
    cv: Condvar,
}

impl Sema {
    fn release(&self) {
        *self.count.lock().unwrap() += 1;
        self.cv.notify_one();
    }
    fn acquire(&self) {
        let mut c = self.count.lock().unwrap();
        while *c == 0 {
            c = self.cv.wait(c).unwrap();
        }
        *c -= 1;
    }
}

struct Group {
    word: WaitGroupWord,
    sema: Sema,
    /// The tasks' results, written before `done`, read after `wait`.
    work: [UnsafeCell<u32>; 2],
}

// SAFETY: `work` is written by its task before `done` and read only after `wait`; the
// model checks that ordering.
unsafe impl Sync for Group {}

impl Group {
    /// Task `i` records its result.
    fn set_work(&self, i: usize, v: u32) {
        // SAFETY: only task `i` writes its cell, before its `done`; readers read after
        // `wait`, and loom reports the access if the two are not ordered.
        self.work[i].with_mut(|w| unsafe { *w = v });
    }
    /// A waiter reads task `i`'s result, after `wait`.
    fn work(&self, i: usize) -> u32 {
        // SAFETY: as in `set_work`.
        self.work[i].with(|w| unsafe { *w })
    }
    fn done(&self) {
        for _ in 0..self.word.add(-1) {
            self.sema.release();
        }
    }
    fn wait(&self) {
        if self.word.register() {
            self.sema.acquire();
            self.word.after_wake();
        }
    }
}

fn group(tasks: i32) -> Arc<Group> {
    let g = Arc::new(Group {
        word: WaitGroupWord::new(),
        sema: Sema::default(),
        work: [UnsafeCell::new(0), UnsafeCell::new(0)],
    });
    assert_eq!(g.word.add(tasks), 0);
    g
}

/// Two tasks, one waiter: the waiter returns after both, and sees their work.
#[test]
fn waiter_sees_every_task() {
    loom::model(|| {
        let g = group(2);
        let tasks: Vec<_> = (0..2)
            .map(|i| {
                let g = g.clone();
                thread::spawn(move || {
                    g.set_work(i, i as u32 + 1);
                    g.done();
                })
            })
            .collect();
        g.wait();
        let sum: u32 = (0..2).map(|i| g.work(i)).sum();
        assert_eq!(sum, 3);
        for t in tasks {
            t.join().unwrap();
        }
        assert_eq!(g.word.count(), 0);
    });
}

/// One task, two waiters: both are released, exactly once each, both see the task's
/// work (before issue 14 the reset store was Relaxed, and a waiter that read it raced
/// the task's write), and the word is reset (a next round may start).
#[test]
fn every_waiter_is_released() {
    loom::model(|| {
        let g = group(1);
        let waiter = {
            let g = g.clone();
            thread::spawn(move || {
                g.wait();
                g.work(0)
            })
        };
        let task = {
            let g = g.clone();
            thread::spawn(move || {
                g.set_work(0, 7);
                g.done();
            })
        };
        g.wait();
        assert_eq!(g.work(0), 7);
        assert_eq!(waiter.join().unwrap(), 7);
        task.join().unwrap();
        assert_eq!(g.word.count(), 0);
        assert!(
            !g.word.register(),
            "a fresh round with a zero counter waits for nothing"
        );
    });
}
