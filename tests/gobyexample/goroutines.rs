//! Go by Example: Goroutines.

use crate::out::Out;
use std::time::Duration;

/// Go's `time.Second`, scaled down: 100 ms, twice most programs', so that the
/// goroutines have printed before "done" on a busy machine too.
const SECOND: Duration = Duration::from_millis(100);

fn f(out: &Out, from: &str) {
    for i in 0..3 {
        out.println(format!("{from} : {i}"));
    }
}

pub fn main(out: &Out) {
    f(out, "direct");

    let o = out.clone();
    goro::go!(move || f(&o, "goroutine"));

    let o = out.clone();
    let msg = "going";
    goro::go!(move || o.println(msg));

    goro::time::sleep(SECOND);
    out.println("done");
}
