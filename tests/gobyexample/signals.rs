//! Go by Example: Signals, in its two published versions: the current one
//! (`signal.NotifyContext` and `context.Cause`) and the one before it
//! (`signal.Notify` on a channel). The user's Ctrl-C is `raise`, called by the test
//! once the program waits (signals are process-wide: the test runs these in a child
//! process).

use crate::out::Out;
use goro::chan::Chan;
use goro::context;
use goro::signal::{self, Signal};

pub fn main(out: &Out) {
    let (ctx, stop) = signal::notify_context(&context::background(), &[Signal::INT, Signal::TERM]);
    let _stop = stop; // defer stop()

    out.println("awaiting signal");
    let _ = ctx.done().recv();

    out.println("");
    out.println(ctx.cause().unwrap().to_string());
    out.println("exiting");
}

/// The version before Go 1.26's `context.Cause` one.
pub fn main_notify(out: &Out) {
    let sigs = signal::notify(&[Signal::INT, Signal::TERM]);

    let done = Chan::<bool>::new(1);

    let (o, d) = (out.clone(), done.clone());
    goro::go!(move || {
        let sig = sigs.recv().unwrap();
        o.println("");
        o.println(sig.to_string());
        d.send(true);
    });

    out.println("awaiting signal");
    done.recv();
    out.println("exiting");
}
