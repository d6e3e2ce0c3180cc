//! Go by Example: Timeouts.

use crate::out::Out;
use goro::chan::Chan;
use goro::time::after;
use std::time::Duration;

/// Go's `time.Second`, scaled down: 100 ms, twice the other programs', since the
/// output depends on the order of timers 1 s apart.
const SECOND: Duration = Duration::from_millis(100);

pub fn main(out: &Out) {
    let c1 = Chan::<String>::new(1);
    let c = c1.clone();
    goro::go!(move || {
        goro::time::sleep(2 * SECOND);
        c.send("result 1".to_string());
    });

    goro::select! {
        recv(c1) -> res => out.println(res.unwrap()),
        recv(after(SECOND)) -> _ => out.println("timeout 1"),
    }

    let c2 = Chan::<String>::new(1);
    let c = c2.clone();
    goro::go!(move || {
        goro::time::sleep(2 * SECOND);
        c.send("result 2".to_string());
    });
    goro::select! {
        recv(c2) -> res => out.println(res.unwrap()),
        recv(after(3 * SECOND)) -> _ => out.println("timeout 2"),
    }
}
