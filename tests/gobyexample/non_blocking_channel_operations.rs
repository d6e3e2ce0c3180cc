//! Go by Example: Non-Blocking Channel Operations.

use crate::out::Out;
use goro::chan::Chan;

pub fn main(out: &Out) {
    let messages = Chan::<String>::new(0);
    let signals = Chan::<bool>::new(0);

    goro::select! {
        recv(messages) -> msg => out.println(format!("received message {}", msg.unwrap())),
        default => out.println("no message received"),
    }

    let msg = "hi".to_string();
    goro::select! {
        send(messages, msg.clone()) -> _ => out.println(format!("sent message {msg}")),
        default => out.println("no message sent"),
    }

    goro::select! {
        recv(messages) -> msg => out.println(format!("received message {}", msg.unwrap())),
        recv(signals) -> sig => out.println(format!("received signal {}", sig.unwrap())),
        default => out.println("no activity"),
    }
}
