//! Go by Example: Channel Synchronization.

use crate::out::Out;
use goro::chan::Chan;
use std::time::Duration;

const SECOND: Duration = Duration::from_millis(50);

fn worker(out: &Out, done: Chan<bool>) {
    out.print("working...");
    goro::time::sleep(SECOND);
    out.println("done");

    done.send(true);
}

pub fn main(out: &Out) {
    let done = Chan::<bool>::new(1);
    let (o, d) = (out.clone(), done.clone());
    goro::go!(move || worker(&o, d));

    done.recv();
}
