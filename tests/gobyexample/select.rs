//! Go by Example: Select.

use crate::out::Out;
use goro::chan::Chan;
use std::time::Duration;

/// Go's `time.Second`, scaled down: 100 ms, twice the other programs', since the
/// output depends on the order of timers 1 s apart.
const SECOND: Duration = Duration::from_millis(100);

pub fn main(out: &Out) {
    let c1 = Chan::<String>::new(0);
    let c2 = Chan::<String>::new(0);

    let c = c1.clone();
    goro::go!(move || {
        goro::time::sleep(SECOND);
        c.send("one".to_string());
    });
    let c = c2.clone();
    goro::go!(move || {
        goro::time::sleep(2 * SECOND);
        c.send("two".to_string());
    });

    for _ in 0..2 {
        goro::select! {
            recv(c1) -> msg1 => out.println(format!("received {}", msg1.unwrap())),
            recv(c2) -> msg2 => out.println(format!("received {}", msg2.unwrap())),
        }
    }
}
