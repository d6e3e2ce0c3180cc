//! The echo server written against `std::net` only, run on coroutines: with the
//! `hooks` feature every blocking call it makes (accept, read, write, the signal
//! thread's wake-up connect) parks its coroutine on goro's netpoller, so thousands of
//! connections cost coroutines, not threads.
//!
//! ```text
//! cargo run --release --features hooks --example std_echo_server -- [--addr 127.0.0.1:7000]
//! ```
//!
//! The same server as `examples/echo_server.rs` (which uses `goro::net`), for the
//! comparison in docs/benchmark-journal.md: one coroutine per connection, 16 KiB reads,
//! `TCP_NODELAY`. Ctrl-C (SIGINT) or SIGTERM stops it: it stops accepting (a connect
//! to itself wakes the blocked `accept`), shuts every open connection down (their
//! reads return 0) and exits 0 once their coroutines are done.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use goro::sync::{Mutex, WaitGroup};

use goro::signal::{self, Signal};

fn usage(err: &str) -> ! {
    eprintln!("std_echo_server: {err}");
    eprintln!("usage: std_echo_server [--addr HOST:PORT]");
    std::process::exit(2);
}

fn parse_addr() -> String {
    let mut addr = "127.0.0.1:7000".to_string();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--addr" => addr = args.next().unwrap_or_else(|| usage("--addr needs a value")),
            "-h" | "--help" => usage("an echo server on std::net and goro's hooks"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    addr
}

fn log(msg: std::fmt::Arguments<'_>) {
    eprintln!("std_echo_server: {msg}");
}

/// Echoes one connection until EOF or an error.
fn serve(mut conn: TcpStream) {
    if let Err(e) = conn.set_nodelay(true) {
        log(format_args!("setup failed: {e}"));
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if let Err(e) = conn.write_all(&buf[..n]) {
                    if !matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) {
                        log(format_args!("write failed: {e}"));
                    }
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return,
            Err(e) => {
                log(format_args!("read failed: {e}"));
                return;
            }
        }
    }
}

fn main() {
    let addr = parse_addr();
    let signals = signal::notify(&[Signal::INT, Signal::TERM]);
    let listener = TcpListener::bind(&addr).unwrap_or_else(|e| usage(&format!("{addr}: {e}")));
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    log(format_args!(
        "listening on {addr} ({} Ps, std::net with hooks {}); Ctrl-C stops",
        goro::maxprocs(),
        if cfg!(feature = "hooks") { "on" } else { "off" }
    ));

    let stopping = Arc::new(AtomicBool::new(false));
    let open: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::default();
    let handlers = WaitGroup::new();

    // The signal thread: stop accepting, shut every open connection down.
    {
        let (stopping, open) = (stopping.clone(), open.clone());
        std::thread::spawn(move || {
            let Ok(sig) = signals.recv() else { return };
            log(format_args!("{sig}: shutting down"));
            stopping.store(true, Ordering::SeqCst);
            let _ = TcpStream::connect(addr); // wakes the acceptor
            for conn in open.lock().values() {
                let _ = conn.shutdown(Shutdown::Both);
            }
        });
    }

    let served = Arc::new(AtomicU64::new(0));
    let acceptor = {
        let handlers = handlers.clone();
        let (open, stopping, next_id) = (open.clone(), stopping.clone(), served.clone());
        goro::go!(move || loop {
            let conn = match listener.accept() {
                Ok((c, _)) => c,
                Err(e) => {
                    log(format_args!("accept failed: {e}"));
                    goro::time::sleep(std::time::Duration::from_millis(100));
                    continue;
                }
            };
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            match conn.try_clone() {
                Ok(c) => {
                    open.lock().insert(id, c);
                }
                Err(e) => {
                    log(format_args!("try_clone failed: {e}"));
                    continue;
                }
            }
            if stopping.load(Ordering::SeqCst) {
                let _ = conn.shutdown(Shutdown::Both); // raced with the shutdown's sweep
            }
            handlers.add(1);
            let (open, handlers) = (open.clone(), handlers.clone());
            goro::go!(move || {
                serve(conn);
                open.lock().remove(&id);
                handlers.done();
            });
        })
    };
    acceptor.join().expect("the acceptor does not panic");
    handlers.wait();
    log(format_args!(
        "stopped: {} connections served",
        served.load(Ordering::Relaxed)
    ));
}
