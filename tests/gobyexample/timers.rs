//! Go by Example: Timers.

use crate::out::Out;
use goro::time::Timer;
use std::time::Duration;

const SECOND: Duration = Duration::from_millis(50);

pub fn main(out: &Out) {
    let timer1 = Timer::new(2 * SECOND);

    timer1.recv();
    out.println("Timer 1 fired");

    let timer2 = Timer::new(SECOND);
    let (o, c) = (out.clone(), timer2.receiver().clone());
    goro::go!(move || {
        let _ = c.recv();
        o.println("Timer 2 fired");
    });
    let stop2 = timer2.stop();
    if stop2 {
        out.println("Timer 2 stopped");
    }

    goro::time::sleep(2 * SECOND);
}
