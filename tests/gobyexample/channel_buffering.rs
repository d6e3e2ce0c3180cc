//! Go by Example: Channel Buffering.

use crate::out::Out;
use goro::chan::Chan;

pub fn main(out: &Out) {
    let messages = Chan::<&str>::new(2);

    messages.send("buffered");
    messages.send("channel");

    out.println(messages.recv().unwrap());
    out.println(messages.recv().unwrap());
}
