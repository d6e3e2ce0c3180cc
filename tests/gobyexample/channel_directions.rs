//! Go by Example: Channel Directions. Go's `chan<- string` and `<-chan string` are
//! Rust's ends, `Sender` and `Receiver`, from `goro::chan::channel`.

use crate::out::Out;
use goro::chan::{channel, Receiver, Sender};

fn ping(pings: &Sender<String>, msg: &str) {
    pings.send(msg.to_string()).unwrap();
}

fn pong(pings: &Receiver<String>, pongs: &Sender<String>) {
    let msg = pings.recv().unwrap();
    pongs.send(msg).unwrap();
}

pub fn main(out: &Out) {
    let (pings_tx, pings_rx) = channel::<String>(1);
    let (pongs_tx, pongs_rx) = channel::<String>(1);
    ping(&pings_tx, "passed message");
    pong(&pings_rx, &pongs_tx);
    out.println(pongs_rx.recv().unwrap());
}
