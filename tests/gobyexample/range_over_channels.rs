//! Go by Example: Range over Channels.

use crate::out::Out;
use goro::chan::Chan;

pub fn main(out: &Out) {
    let queue = Chan::<&str>::new(2);
    queue.send("one");
    queue.send("two");
    queue.close();

    for elem in &queue {
        out.println(elem);
    }
}
