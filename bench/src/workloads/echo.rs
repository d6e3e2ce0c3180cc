//! The echo workloads: the servers' accept loop, goro's server ([`serve`]) and the
//! closed-loop load generator (`compare load`) that measures every contender's server. Each
//! of `--conns` connections sends a `--size`-byte message carrying its sequence number, reads
//! it back, checks it and sends the next; the round trips that start after `--warmup` seconds
//! and end within the `--secs` after count. It prints requests/s, the p50, p99 and max round
//! trip (nearest rank) and round trips per connection (mean, busiest, fewest, busiest / mean).
//!
//! The clients are goro coroutines in a process of their own: plain threads on 2 cores would
//! measure the kernel's scheduler, which lets a few run back to back while the others wait.

use std::fmt::Display;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use goro::chan::{channel, RecvTimeoutError};
use goro::net::{TcpListener, TcpStream};
use serde::Serialize;

/// A connect, write or read that makes no progress for this long fails its connection.
pub const STALL: Duration = Duration::from_secs(10);
/// How long after its deadline the run waits for its connections; then it fails.
const GRACE: Duration = Duration::from_secs(15);

/// The command line of `compare load`.
#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// The server.
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub addr: String,
    /// Connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub conns: u32,
    /// Message size, bytes.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1 << 24))]
    pub size: u32,
    /// Measured seconds.
    #[arg(long, default_value_t = 10.0, value_parser = seconds)]
    pub secs: f64,
    /// Warm-up seconds (not counted).
    #[arg(long, default_value_t = 1.0, value_parser = seconds)]
    pub warmup: f64,
    /// Also print the report as a JSON line.
    #[arg(long)]
    pub json: bool,
}

fn seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds in 0..=86400")),
    }
}

/// What one run measured (its JSON line: the field names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub conns: usize,
    pub size: usize,
    pub secs: f64,
    pub requests: u64,
    pub rps: f64,
    pub p50_us: u32,
    pub p99_us: u32,
    pub max_us: u32,
    pub mean_per_conn: f64,
    pub busiest_per_conn: u64,
    /// The busiest connection (its index in connect order).
    pub busiest_conn: usize,
    pub busiest_over_mean: f64,
    pub min_per_conn: u64,
}

impl Report {
    /// Merges the per-connection latencies (µs; one entry per counted round trip).
    fn from_latencies(cfg: &Config, per_conn: Vec<Vec<u32>>) -> Result<Report, String> {
        let counts: Vec<u64> = per_conn.iter().map(|l| l.len() as u64).collect();
        let mut all = per_conn.concat();
        if all.is_empty() {
            return Err(format!(
                "no round trip completed in {} s after the warm-up",
                cfg.secs
            ));
        }
        all.sort_unstable();
        let percentile = |p: f64| super::quantile(&all, p);
        let requests = all.len() as u64;
        let mean = requests as f64 / counts.len() as f64;
        let (busiest_conn, busiest) = (counts.iter().copied().enumerate())
            .max_by_key(|&(_, n)| n)
            .unwrap_or((0, 0));
        Ok(Report {
            conns: counts.len(),
            size: cfg.size as usize,
            secs: cfg.secs,
            requests,
            rps: requests as f64 / cfg.secs,
            p50_us: percentile(0.50),
            p99_us: percentile(0.99),
            max_us: all[all.len() - 1],
            mean_per_conn: mean,
            busiest_per_conn: busiest,
            busiest_conn,
            busiest_over_mean: busiest as f64 / mean,
            min_per_conn: counts.iter().copied().min().unwrap_or(0),
        })
    }

    fn human(&self) -> String {
        format!(
            "compare load: {} conns x {} B for {} s (goro clients, {} Ps): {:.0} req/s ({} \
             round trips), latency p50 {} us, p99 {} us, max {} us; per connection: mean \
             {:.1}, busiest {} (connection {}: {:.2}x mean), min {}",
            self.conns,
            self.size,
            self.secs,
            goro::maxprocs(),
            self.rps,
            self.requests,
            self.p50_us,
            self.p99_us,
            self.max_us,
            self.mean_per_conn,
            self.busiest_per_conn,
            self.busiest_conn,
            self.busiest_over_mean,
            self.min_per_conn
        )
    }
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, 2^20 if unlimited (500 connections
/// need 500+ descriptors here and in the server); the soft limit in force afterwards.
fn raise_nofile_limit() -> io::Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = if hard == RLIM_INFINITY { 1 << 20 } else { hard };
    if soft < target && setrlimit(Resource::RLIMIT_NOFILE, target, hard).is_ok() {
        return Ok(target);
    }
    Ok(soft)
}

type ConnResult = Result<Vec<u32>, String>;

/// Runs the load; the report, or every error seen (at most 20 are listed).
pub fn run(cfg: &Config) -> Result<Report, String> {
    let limit = raise_nofile_limit().map_err(|e| format!("getrlimit(RLIMIT_NOFILE): {e}"))?;
    let conns = cfg.conns as usize;
    if (conns as u64).saturating_add(32) > limit {
        return Err(format!(
            "{conns} connections need more file descriptors than RLIMIT_NOFILE allows ({limit})"
        ));
    }
    let addr: SocketAddr = (cfg.addr.to_socket_addrs())
        .map_err(|e| format!("cannot resolve {}: {e}", cfg.addr))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", cfg.addr))?;
    // Connect one after the other (no burst on the server's backlog), then start together.
    let streams = (0..conns)
        .map(|i| connect(&addr).map_err(|e| format!("connection {i}: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    let (gate_tx, gate_rx) = channel::<Instant>(conns);
    let (res_tx, res_rx) = channel::<(usize, ConnResult)>(conns);
    let warmup = Duration::from_secs_f64(cfg.warmup);
    let secs = Duration::from_secs_f64(cfg.secs);
    let size = cfg.size as usize;
    for (i, stream) in streams.into_iter().enumerate() {
        let (gate_rx, res_tx) = (gate_rx.clone(), res_tx.clone());
        drop(goro::go!(move || {
            let r = match gate_rx.recv_timeout(STALL + STALL) {
                Ok(t0) => client(&stream, size, t0 + warmup, t0 + warmup + secs),
                Err(RecvTimeoutError::Timeout) => Err("the start gate never opened".into()),
                Err(RecvTimeoutError::Closed) => Err("the gate closed without a start time".into()),
            };
            drop(stream);
            // Room for every result: never blocks; fails if the main thread gave up (and said why).
            let _ = res_tx.send((i, r));
        }));
    }
    drop(res_tx);
    let t0 = Instant::now();
    for _ in 0..conns {
        // Room for every start time: never blocks.
        let _ = gate_tx.send(t0);
    }

    let deadline = t0 + warmup + secs + GRACE;
    let mut per_conn: Vec<Option<Vec<u32>>> = vec![None; conns];
    let mut errors = Vec::new();
    for _ in 0..conns {
        let left = deadline.saturating_duration_since(Instant::now());
        match res_rx.recv_timeout(left) {
            Ok((i, Ok(lat))) => per_conn[i] = Some(lat),
            Ok((i, Err(e))) => errors.push(format!("connection {i}: {e}")),
            Err(RecvTimeoutError::Timeout) => {
                let missing = per_conn.iter().filter(|l| l.is_none()).count() - errors.len();
                errors.push(format!(
                    "{missing} connections still not done {GRACE:?} after the deadline (hang?)"
                ));
                break;
            }
            Err(RecvTimeoutError::Closed) => {
                errors.push("a client ended without reporting (panic?)".into());
                break;
            }
        }
    }
    if !errors.is_empty() {
        let n = errors.len();
        if n > 20 {
            errors.truncate(20);
            errors.push(format!("... {} more", n - 20));
        }
        return Err(format!("{n} error(s):\n  {}", errors.join("\n  ")));
    }
    let per_conn = per_conn.into_iter().map(Option::unwrap_or_default);
    Report::from_latencies(cfg, per_conn.collect())
}

fn connect(addr: &SocketAddr) -> Result<TcpStream, String> {
    let s = TcpStream::connect_timeout(addr, STALL)
        .map_err(|e| format!("connect to {addr} failed: {e}"))?;
    s.set_nodelay(true)
        .and_then(|_| s.set_read_timeout(Some(STALL)))
        .and_then(|_| s.set_write_timeout(Some(STALL)))
        .map_err(|e| format!("socket options: {e}"))?;
    Ok(s)
}

/// One connection's closed loop until `end`: the latencies (µs) from `warm_end` on.
fn client(stream: &TcpStream, size: usize, warm_end: Instant, end: Instant) -> ConnResult {
    let mut out: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    let mut back = vec![0u8; size];
    let mut lat: Vec<u32> = Vec::with_capacity(4096);
    let mut seq: u64 = 0;
    let (mut w, mut r) = (stream, stream);
    loop {
        let t = Instant::now();
        if t >= end {
            return Ok(lat);
        }
        seq += 1;
        let tag = seq.to_le_bytes();
        let n = tag.len().min(size);
        out[..n].copy_from_slice(&tag[..n]);
        let what = |op: &str, e: io::Error| {
            let e = match e.kind() {
                ErrorKind::TimedOut | ErrorKind::WouldBlock => {
                    format!("no progress for {STALL:?} (stalled)")
                }
                ErrorKind::UnexpectedEof => "the server closed the connection".to_string(),
                _ => e.to_string(),
            };
            format!("{op} of round trip {seq}: {e}")
        };
        w.write_all(&out).map_err(|e| what("write", e))?;
        r.read_exact(&mut back).map_err(|e| what("read", e))?;
        let done = Instant::now();
        if back != out {
            let at = back.iter().zip(&out).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "round trip {seq}: wrong bytes echoed (first difference at byte {at}: \
                 got {:#04x}, sent {:#04x})",
                back[at], out[at]
            ));
        }
        if t >= warm_end && done <= end {
            let us = (done - t).as_micros();
            lat.push(u32::try_from(us).unwrap_or(u32::MAX));
        }
    }
}

/// `compare load`: runs the load and prints the report; the exit status.
pub fn main(cfg: &Config) -> i32 {
    match run(cfg) {
        Ok(rep) => {
            println!("{}", rep.human());
            if cfg.json {
                let json = serde_json::to_string(&rep).expect("a report serialises");
                println!("{json}");
            }
            0
        }
        Err(e) => {
            eprintln!("compare load: {e}");
            1
        }
    }
}

/// goro's echo server: binds `addr`, prints `LISTENING <addr>`, a coroutine per connection.
pub fn serve(addr: SocketAddr) -> io::Result<()> {
    let listener = TcpListener::bind(addr)?;
    crate::contenders::listening(listener.local_addr()?)?;
    let acceptor = goro::go!(move || accept_loop(
        "compare serve goro",
        || listener.accept(),
        |c| c.set_nodelay(true),
        |task| goro::Builder::new().spawn(task).map(drop),
        goro::time::sleep,
    ));
    acceptor
        .join()
        .map_err(|_| io::Error::other("the acceptor panicked"))
}

/// The accept loop of goro's, the threads' and may's echo servers: every connection gets
/// TCP_NODELAY and is echoed on a task of `spawn`'s; a failed accept (EMFILE and the like)
/// is logged, then `sleep` backs off 10 ms instead of spinning.
pub fn accept_loop<C: Read + Write + Send + 'static, E: Display>(
    who: &str,
    mut accept: impl FnMut() -> io::Result<(C, SocketAddr)>,
    nodelay: fn(&C) -> io::Result<()>,
    spawn: impl Fn(Box<dyn FnOnce() + Send>) -> Result<(), E>,
    sleep: fn(Duration),
) -> ! {
    loop {
        match accept() {
            Ok((conn, _)) => {
                let task = Box::new(move || {
                    if nodelay(&conn).is_ok() {
                        echo(conn);
                    }
                });
                if let Err(e) = spawn(task) {
                    eprintln!("{who}: spawn: {e}");
                }
            }
            Err(e) => {
                eprintln!("{who}: accept: {e}");
                sleep(Duration::from_millis(10));
            }
        }
    }
}

/// Echoes one connection until EOF or an error, through a 16 KiB buffer on the heap (may's
/// coroutine stacks are 32 KiB).
fn echo(mut conn: impl Read + Write) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n @ 1..) = conn.read(&mut buf) {
        if conn.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}
