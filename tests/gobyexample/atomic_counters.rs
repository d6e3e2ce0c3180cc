//! Go by Example: Atomic Counters.

use crate::out::Out;
use goro::sync::WaitGroup;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub fn main(out: &Out) {
    let ops = Arc::new(AtomicU64::new(0));

    let wg = WaitGroup::new();

    for _ in 0..50 {
        let ops = ops.clone();
        wg.go(move || {
            for _ in 0..1000 {
                ops.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    wg.wait();

    out.println(format!("ops: {}", ops.load(Ordering::Relaxed)));
}
