//! Go by Example: Rate Limiting. Go prints `time.Now()` after each request; this
//! prints the time since the program started.

use crate::out::Out;
use goro::chan::Chan;
use goro::time::tick;
use std::time::{Duration, Instant};

/// Go's 200 ms, scaled down.
const PERIOD: Duration = Duration::from_millis(20);

pub fn main(out: &Out) {
    let start = Instant::now();
    let requests = Chan::<i32>::new(5);
    for i in 1..=5 {
        requests.send(i);
    }
    requests.close();

    let limiter = tick(PERIOD);

    for req in &requests {
        let _ = limiter.recv();
        out.println(format!("request {req} {:?}", start.elapsed()));
    }

    let bursty_limiter = Chan::<Instant>::new(3);

    for _ in 0..3 {
        bursty_limiter.send(Instant::now());
    }

    let b = bursty_limiter.clone();
    goro::go!(move || {
        // Go's `for t := range time.Tick(d)`, bounded: once the program is done, this
        // fills the buffer and waits on the send for good, as in Go.
        for t in tick(PERIOD).iter().take(1000) {
            b.send(t);
        }
    });

    let bursty_requests = Chan::<i32>::new(5);
    for i in 1..=5 {
        bursty_requests.send(i);
    }
    bursty_requests.close();
    for req in &bursty_requests {
        bursty_limiter.recv();
        out.println(format!("request {req} {:?}", start.elapsed()));
    }
}
