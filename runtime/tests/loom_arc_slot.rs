//! Loom model of `ArcSlot` (see `arc_slot.rs`), the hooks' per-descriptor pointer to
//! its poll registration: a reader racing a take never takes a reference to a value
//! the taker let go of, a fill racing a take is disposed of exactly once, and two
//! racing fillers fill once. Each value counts its drops: exactly one per value made.
//! Checked by breaking it: without `take`'s wait for readers to leave, the first model
//! fails (loom reports the `Arc` used after its last reference went).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test --release -p goro-runtime --test loom_arc_slot`
#![cfg(loom)]

use goro_runtime::__loom::{ArcSlot, Got};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// A value that counts how often it is dropped, and how often one was made.
struct Payload {
    value: u32,
    drops: Arc<AtomicUsize>,
}

impl Drop for Payload {
    fn drop(&mut self) {
        // A reader's reference that outlived the value would show here as a second drop.
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn payload(drops: &Arc<AtomicUsize>, made: &AtomicUsize) -> Arc<Payload> {
    made.fetch_add(1, Ordering::SeqCst);
    Arc::new(Payload {
        value: 42,
        drops: drops.clone(),
    })
}

#[test]
fn a_reader_racing_a_take_holds_a_live_value() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(ArcSlot::<Payload>::default());
        // Filled before the race.
        match slot.get_or_fill(|| Ok(payload(&drops, &made)), drop, thread::yield_now) {
            Got::Value(_) => {}
            _ => panic!("an uncontended fill must succeed"),
        }
        let reader = {
            let slot = slot.clone();
            thread::spawn(move || {
                if let Some(v) = slot.get() {
                    assert_eq!(v.value, 42);
                    assert_eq!(v.drops.load(Ordering::SeqCst), 0, "read a dropped value");
                }
            })
        };
        let taken = slot.take();
        assert!(taken.is_some(), "the slot held a value");
        drop(taken);
        reader.join().unwrap();
        assert!(slot.get().is_none());
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        assert_eq!(made.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn a_fill_racing_a_take_is_disposed_of_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let disposed = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(ArcSlot::<Payload>::default());
        let filler = {
            let (slot, drops, made, disposed) =
                (slot.clone(), drops.clone(), made.clone(), disposed.clone());
            thread::spawn(move || {
                let got = slot.get_or_fill(
                    || Ok(payload(&drops, &made)),
                    |v| {
                        disposed.fetch_add(1, Ordering::SeqCst);
                        drop(v);
                    },
                    thread::yield_now,
                );
                match got {
                    Got::Value(v) => assert_eq!(v.value, 42),
                    Got::Taken => {}
                    Got::Failed(e) => panic!("fill failed: {e}"),
                }
            })
        };
        let taken = slot.take();
        filler.join().unwrap();
        let still = slot.take();
        // The value is in exactly one place: taken by the race, taken after it, or
        // disposed of by the filler.
        let places =
            taken.is_some() as usize + still.is_some() as usize + disposed.load(Ordering::SeqCst);
        assert_eq!(places, 1, "the value ended in {places} places");
        drop((taken, still));
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
        assert_eq!(made.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn racing_fillers_fill_once() {
    loom::model(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let slot = Arc::new(ArcSlot::<Payload>::default());
        let other = {
            let (slot, drops, made) = (slot.clone(), drops.clone(), made.clone());
            thread::spawn(move || {
                match slot.get_or_fill(|| Ok(payload(&drops, &made)), drop, thread::yield_now) {
                    Got::Value(v) => assert_eq!(v.value, 42),
                    _ => panic!("no take races this fill"),
                }
            })
        };
        match slot.get_or_fill(|| Ok(payload(&drops, &made)), drop, thread::yield_now) {
            Got::Value(v) => assert_eq!(v.value, 42),
            _ => panic!("no take races this fill"),
        }
        other.join().unwrap();
        assert_eq!(made.load(Ordering::SeqCst), 1, "filled once");
        drop(slot.take());
        assert_eq!(drops.load(Ordering::SeqCst), 1, "dropped once");
    });
}
