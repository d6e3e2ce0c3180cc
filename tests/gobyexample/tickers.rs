//! Go by Example: Tickers.
//!
//! Go ticks every 500 ms and stops the ticker after 1600 ms: three ticks, the stop
//! 100 ms after the third. Scaled, the ticker ticks every 100 ms and stops after 350
//! ms, half way between the third tick and the fourth, so that a busy machine's
//! scheduling delays do not move the stop past a tick.

use crate::out::Out;
use goro::chan::Chan;
use goro::time::Ticker;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub fn main(out: &Out) {
    let ticker = Arc::new(Ticker::new(Duration::from_millis(100)));
    let done = Chan::<bool>::new(0);

    let (o, t, d) = (out.clone(), ticker.clone(), done.clone());
    let start = Instant::now();
    goro::go!(move || {
        // Go's `for {}`, bounded: the loop returns on `done` long before.
        for _ in 0..1000 {
            goro::select! {
                recv(d) -> _ => return,
                recv(t.receiver()) -> t => {
                    o.println(format!("Tick at {:?}", t.unwrap() - start));
                }
            }
        }
    });

    goro::time::sleep(Duration::from_millis(350));
    ticker.stop();
    done.send(true);
    out.println("Ticker stopped");
}
