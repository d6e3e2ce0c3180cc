//! Go by Example: Channels.

use crate::out::Out;
use goro::chan::Chan;

pub fn main(out: &Out) {
    let messages = Chan::<String>::new(0);

    let m = messages.clone();
    goro::go!(move || m.send("ping".to_string()));

    let msg = messages.recv().unwrap();
    out.println(msg);
}
