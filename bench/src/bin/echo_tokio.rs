//! A tokio echo server: the peer of `examples/echo_server.rs` (goro) in the echo
//! benchmark.
//!
//! ```text
//! cargo run --release -p goro-bench --bin echo_tokio -- [--addr 127.0.0.1:7001] [--threads N]
//! ```
//!
//! The same behaviour as goro's server: one task per connection, a 16 KiB buffer,
//! `TCP_NODELAY`, echo until EOF (or an error, which is logged). A multi-thread runtime
//! with `worker_threads = N` (default: `GORO_MAXPROCS` if set, else 2). It prints
//! `echo_tokio: listening on ADDR` as its first line on stderr (`--addr 127.0.0.1:0`
//! picks a free port). SIGINT (Ctrl-C) or SIGTERM stops it cleanly: it stops accepting,
//! closes the open connections (aborting their tasks), waits for them (10 s at most)
//! and exits 0.
//!
//! The signal streams (`tokio::signal::unix`, what `tokio::signal::ctrl_c` uses) are
//! registered before the listening line is printed, so a SIGINT sent as soon as the
//! address is known is never lost or fatal.
//!
//! `echo_compare` includes this file as a module and runs it in a child process.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{signal, SignalKind};
use tokio::task::JoinSet;

const USAGE: &str = "usage: echo_tokio [--addr HOST:PORT] [--threads N]";

struct Config {
    addr: String,
    threads: usize,
}

fn parse_args(args: impl IntoIterator<Item = String>) -> Result<Config, String> {
    let threads = std::env::var("GORO_MAXPROCS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(2);
    let mut cfg = Config {
        addr: "127.0.0.1:7001".into(),
        threads,
    };
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--addr" => cfg.addr = value("--addr")?,
            "--threads" => {
                cfg.threads = value("--threads")?
                    .parse()
                    .ok()
                    .filter(|&n| n > 0 && n <= 1024)
                    .ok_or("--threads must be a whole number in 1..=1024")?
            }
            "-h" | "--help" => return Err("an echo server on tokio".into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(cfg)
}

fn log(msg: std::fmt::Arguments<'_>) {
    eprintln!("echo_tokio: {msg}");
}

/// Echoes one connection until EOF or an error, which is logged.
async fn serve(mut conn: TcpStream, peer: SocketAddr) {
    if let Err((step, e)) = goro_bench::tools::tokio_echo(&mut conn).await {
        log(format_args!("{peer}: {step} failed: {e}"));
    }
}

async fn run(cfg: Config) -> Result<(), String> {
    let mut sigint =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot catch SIGINT: {e}"))?;
    let mut sigterm =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot catch SIGTERM: {e}"))?;
    let listener = TcpListener::bind(&cfg.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", cfg.addr))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("local_addr: {e}"))?;
    log(format_args!(
        "listening on {addr} ({} worker threads); Ctrl-C stops",
        cfg.threads
    ));

    let mut conns = JoinSet::new();
    let mut served: u64 = 0;
    let sig = loop {
        tokio::select! {
            _ = sigint.recv() => break "SIGINT",
            _ = sigterm.recv() => break "SIGTERM",
            Some(done) = conns.join_next(), if !conns.is_empty() => {
                if let Err(e) = done {
                    log(format_args!("a connection task failed: {e}"));
                }
            }
            accepted = listener.accept() => match accepted {
                Ok((conn, peer)) => {
                    served += 1;
                    conns.spawn(serve(conn, peer));
                }
                Err(e) => {
                    // EMFILE and the like: back off instead of spinning.
                    log(format_args!("accept failed: {e}"));
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    };
    log(format_args!("{sig}: shutting down"));
    drop(listener);
    let t = Instant::now();
    let open = conns.len();
    // Aborting a task drops its socket, which closes the connection.
    if tokio::time::timeout(Duration::from_secs(10), conns.shutdown())
        .await
        .is_err()
    {
        return Err(format!(
            "{open} connections not closed within 10 s of {sig}"
        ));
    }
    log(format_args!(
        "stopped: {served} connections served, the last {open} closed in {:?}",
        t.elapsed()
    ));
    Ok(())
}

/// Runs echo_tokio with `args` (without the program name); the exit status.
pub fn main_with_args(args: impl IntoIterator<Item = String>) -> i32 {
    let cfg = match parse_args(args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("echo_tokio: {e}\n{USAGE}");
            return 2;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cfg.threads)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo_tokio: cannot start the runtime: {e}");
            return 1;
        }
    };
    let status = match rt.block_on(run(cfg)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("echo_tokio: {e}");
            1
        }
    };
    rt.shutdown_timeout(Duration::from_secs(5));
    status
}

#[allow(dead_code)] // unused where echo_compare includes this file
fn main() {
    std::process::exit(main_with_args(std::env::args().skip(1)));
}
