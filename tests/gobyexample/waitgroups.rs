//! Go by Example: WaitGroups.

use crate::out::Out;
use goro::sync::WaitGroup;
use std::time::Duration;

const SECOND: Duration = Duration::from_millis(50);

fn worker(out: &Out, id: i32) {
    out.println(format!("Worker {id} starting"));

    goro::time::sleep(SECOND);
    out.println(format!("Worker {id} done"));
}

pub fn main(out: &Out) {
    let wg = WaitGroup::new();

    for i in 1..=5 {
        let o = out.clone();
        wg.go(move || worker(&o, i));
    }

    wg.wait();
}
