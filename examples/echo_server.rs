//! An echo server: one coroutine per connection, on goro's netpoller.
//!
//! ```text
//! cargo run --release --example echo_server -- [--addr 127.0.0.1:7000] [--max-conns N] [--idle-timeout SECS]
//! ```
//!
//! Binds loopback by default. `--max-conns` caps concurrent connections (further
//! clients wait in the kernel's backlog until one closes); `--idle-timeout` closes a
//! connection that sends nothing for that long. Ctrl-C (SIGINT) or SIGTERM stops it
//! cleanly: it stops accepting, closes the open connections, waits for their coroutines
//! and exits 0. Try it with `nc 127.0.0.1 7000`, or load it with
//! `cargo run --release -p goro-bench --bin compare -- load --addr 127.0.0.1:7000`.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::net::{TcpListener, TcpStream};
use goro::signal::{self, Signal};
use goro::sync::{Mutex, Semaphore, WaitGroup};

struct Config {
    addr: String,
    max_conns: usize,
    idle_timeout: Option<Duration>,
}

fn usage(err: &str) -> ! {
    eprintln!("echo_server: {err}");
    eprintln!("usage: echo_server [--addr HOST:PORT] [--max-conns N] [--idle-timeout SECS]");
    std::process::exit(2);
}

fn parse_args() -> Config {
    let mut cfg = Config {
        addr: "127.0.0.1:7000".into(),
        max_conns: 10_000,
        idle_timeout: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = |name: &str| {
            args.next()
                .unwrap_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--addr" => cfg.addr = value("--addr"),
            "--max-conns" => {
                cfg.max_conns = value("--max-conns")
                    .parse()
                    .ok()
                    .filter(|&n| n > 0)
                    .unwrap_or_else(|| usage("--max-conns must be a positive whole number"))
            }
            "--idle-timeout" => {
                let secs: f64 = value("--idle-timeout")
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .unwrap_or_else(|| {
                        usage("--idle-timeout must be a positive number of seconds")
                    });
                cfg.idle_timeout = Some(Duration::from_secs_f64(secs));
            }
            "-h" | "--help" => usage("an echo server on goro"),
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    cfg
}

fn log(msg: std::fmt::Arguments<'_>) {
    eprintln!("echo_server: {msg}");
}

/// Echoes one connection until EOF, an error, or the idle timeout.
fn serve(conn: &TcpStream, peer: SocketAddr, idle: Option<Duration>) {
    if let Err(e) = conn
        .set_read_timeout(idle)
        .and_then(|_| conn.set_nodelay(true))
    {
        log(format_args!("{peer}: setup failed: {e}"));
        return;
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut r = conn;
    let mut w = conn;
    loop {
        match r.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if let Err(e) = w.write_all(&buf[..n]) {
                    if e.kind() != ErrorKind::NotConnected {
                        log(format_args!("{peer}: write failed: {e}"));
                    }
                    return;
                }
            }
            Err(e) if e.kind() == ErrorKind::TimedOut => {
                log(format_args!(
                    "{peer}: idle for {:?}, closing",
                    idle.unwrap_or_default()
                ));
                return;
            }
            Err(e) if e.kind() == ErrorKind::NotConnected => return, // closed at shutdown
            Err(e) => {
                log(format_args!("{peer}: read failed: {e}"));
                return;
            }
        }
    }
}

fn main() {
    let cfg = parse_args();
    // Subscribed first: a Ctrl-C from here on shuts down cleanly.
    let signals = signal::notify(&[Signal::INT, Signal::TERM]);
    let listener = match TcpListener::bind(&cfg.addr) {
        Ok(l) => Arc::new(l),
        Err(e) => usage(&format!("cannot listen on {}: {e}", cfg.addr)),
    };
    let addr = listener
        .local_addr()
        .expect("a bound listener has an address");
    log(format_args!(
        "listening on {addr} ({} Ps, at most {} connections{}); Ctrl-C stops",
        goro::maxprocs(),
        cfg.max_conns,
        cfg.idle_timeout
            .map(|d| format!(", idle timeout {d:?}"))
            .unwrap_or_default()
    ));

    let stopping = Arc::new(AtomicBool::new(false));
    let open: Arc<Mutex<HashMap<u64, Arc<TcpStream>>>> = Arc::default();
    let slots = Arc::new(Semaphore::new(cfg.max_conns));
    let handlers = WaitGroup::new();

    // The signal coroutine: stop accepting, close every open connection.
    {
        let (listener, stopping, open, slots) = (
            listener.clone(),
            stopping.clone(),
            open.clone(),
            slots.clone(),
        );
        goro::go!(move || {
            let Ok(sig) = signals.recv() else { return };
            log(format_args!("{sig}: shutting down"));
            stopping.store(true, Ordering::SeqCst);
            listener.close();
            slots.release(1); // an acceptor waiting for a slot sees `stopping`
            for conn in open.lock().values() {
                conn.close();
            }
        });
    }

    let served = Arc::new(AtomicU64::new(0));
    let acceptor = {
        let handlers = handlers.clone();
        let (open, stopping, next_id) = (open.clone(), stopping.clone(), served.clone());
        goro::go!(move || loop {
            slots.acquire();
            if stopping.load(Ordering::SeqCst) {
                return;
            }
            let (conn, peer) = match listener.accept() {
                Ok(c) => c,
                Err(_) if stopping.load(Ordering::SeqCst) => return,
                Err(e) => {
                    log(format_args!("accept failed: {e}"));
                    slots.release(1);
                    goro::time::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            let conn = Arc::new(conn);
            let id = next_id.fetch_add(1, Ordering::Relaxed);
            open.lock().insert(id, conn.clone());
            if stopping.load(Ordering::SeqCst) {
                conn.close(); // raced with the shutdown's sweep
            }
            handlers.add(1);
            let (open, slots, handlers) = (open.clone(), slots.clone(), handlers.clone());
            let idle = cfg.idle_timeout;
            goro::go!(move || {
                serve(&conn, peer, idle);
                open.lock().remove(&id);
                slots.release(1);
                handlers.done();
            });
        })
    };
    acceptor.join().expect("the acceptor does not panic");
    let t = Instant::now();
    handlers.wait();
    log(format_args!(
        "stopped: {} connections served, the last ones closed in {:?}",
        served.load(Ordering::Relaxed),
        t.elapsed()
    ));
}
