//! Thread growth under a contended lock (issue 37, item 8): many coroutines share one
//! lock that std or a library takes, and the process's OS thread count is sampled
//! while they run.
//!
//! ```text
//! storm ureq   N [REQUESTS] [DELAY_MS] [POOL]
//!                                        N coroutines, REQUESTS GETs each, through one ureq Agent
//! storm mutex  N [ROUNDS]  [HOLD_US]     N coroutines take one std Mutex ROUNDS times, HOLD_US under it
//! storm serve  DELAY_MS                  the HTTP backend (a child process; prints its port)
//! ```
//!
//! With POOL (the Agent's idle connections kept), each coroutine first makes one
//! request untimed, so that the timed ones reuse pooled connections: the lock's
//! convoy without the connects' noise (10 000 connects at once overflow the
//! backend's accept queue, and the SYNs the kernel drops are sent again 1 s later).
//!
//! `ureq` starts the backend as a child process (its sockets are not this process's:
//! 10 000 clients and their server would pass a 20 000-descriptor limit), then prints
//! one line: the wall time, the requests per second, the most OS threads seen at once
//! (`/proc/self/status`, sampled every millisecond by a plain thread) and the peak RSS.
//! Build with `--features hooks` (the point of the measurement: blocking crates from
//! coroutines) and run at `GORO_MAXPROCS=2`; docs/benchmarks.md has the command.

use std::io::{self, BufRead, Read, Write};
use std::net::TcpListener;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A line of `/proc/self/status` as a number (`Threads:`, `VmHWM:` in kB).
fn status(key: &str) -> usize {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Samples the thread count every millisecond until `stop`; returns the most seen.
fn sampler(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut most = 0;
        // Bounded: the workloads end within the runner's own limit (10 minutes).
        for _ in 0..600_000 {
            // Relaxed: a flag polled every millisecond; nothing is published through it.
            if stop.load(Ordering::Relaxed) {
                break;
            }
            most = most.max(status("Threads:"));
            std::thread::sleep(Duration::from_millis(1));
        }
        most
    })
}

/// The backend: one coroutine per connection; per request, reads the head, sleeps
/// `delay` (hooked: a timer) and answers with the path.
fn serve(delay: Duration) -> ExitCode {
    let listener = match socket_listener() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("storm serve: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("{}", listener.local_addr().unwrap().port());
    io::stdout().flush().unwrap();
    // Ends when the parent closes our stdin (or dies).
    std::thread::spawn(|| {
        let _ = io::stdin().read_to_end(&mut Vec::new());
        std::process::exit(0);
    });
    for stream in listener.incoming() {
        let Ok(mut s) = stream else { continue };
        goro::go!(move || {
            let _ = s.set_nodelay(true);
            let mut buf = Vec::new();
            let mut chunk = [0u8; 2048];
            loop {
                let end = loop {
                    if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break p + 4;
                    }
                    match s.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                };
                let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                buf.drain(..end);
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
                if !delay.is_zero() {
                    std::thread::sleep(delay);
                }
                let r = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{path}",
                    path.len()
                );
                if s.write_all(r.as_bytes()).is_err() {
                    return;
                }
            }
        });
    }
    ExitCode::SUCCESS
}

/// 127.0.0.1, an ephemeral port, the deepest backlog the kernel allows.
fn socket_listener() -> io::Result<TcpListener> {
    // std's `bind` listens with a backlog of 128; 10 000 simultaneous connects would
    // overflow it into SYN cookies and one-second retries. goro's listener asks for
    // somaxconn, as Go's does.
    let l = goro::net::TcpListener::bind("127.0.0.1:0")?;
    let fd = std::os::fd::OwnedFd::from(l);
    Ok(TcpListener::from(fd))
}

/// Starts the backend and returns it with its port.
fn backend(delay_ms: u64) -> io::Result<(std::process::Child, u16)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["serve", &delay_ms.to_string()])
        .env("GORO_MAXPROCS", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line)?;
    let port = line
        .trim()
        .parse()
        .map_err(|_| io::Error::other(format!("backend said {line:?}")))?;
    Ok((child, port))
}

/// Runs `n` coroutines of `work`, sampling threads; prints the result line.
fn measure(
    what: &str,
    n: usize,
    ops: usize,
    work: impl Fn(usize) -> bool + Send + Sync + 'static,
) -> bool {
    let work = Arc::new(work);
    let stop = Arc::new(AtomicBool::new(false));
    let before = status("Threads:");
    let watch = sampler(stop.clone());
    let failed = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let (work, failed) = (work.clone(), failed.clone());
            goro::go!(move || {
                if !work(i) {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in hs {
        if h.join().is_err() {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    let most = watch.join().unwrap();
    let failed = failed.load(Ordering::Relaxed);
    let st = goro::debug::stats();
    println!(
        "{what}: {n} coroutines, {ops} ops in {:.3} s, {:.0} ops/s, threads {before} before, \
         at most {most}, peak RSS {} MiB, {failed} failed, maxprocs {}, convoy deferrals {}",
        took.as_secs_f64(),
        ops as f64 / took.as_secs_f64(),
        status("VmHWM:") / 1024,
        goro::maxprocs(),
        st.convoy_deferrals,
    );
    failed == 0
}

fn arg(args: &[String], i: usize, default: u64) -> u64 {
    args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let ok = match args.get(1).map(String::as_str) {
        Some("serve") => return serve(Duration::from_millis(arg(&args, 2, 0))),
        Some("ureq") => {
            let (n, reqs, delay) = (arg(&args, 2, 10_000), arg(&args, 3, 1), arg(&args, 4, 0));
            let pool = arg(&args, 5, 0) as usize;
            let (mut child, port) = match backend(delay) {
                Ok(b) => b,
                Err(e) => {
                    eprintln!("storm: cannot start the backend: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let mut config = ureq::Agent::config_builder()
                .proxy(None)
                .timeout_recv_response(Some(Duration::from_secs(60)));
            if pool > 0 {
                config = config
                    .max_idle_connections(pool)
                    .max_idle_connections_per_host(pool);
            }
            let agent: ureq::Agent = config.build().into();
            let base = format!("http://127.0.0.1:{port}");
            let get = move |path: String| match agent.get(format!("{base}{path}")).call() {
                Ok(mut r) => r.body_mut().read_to_string().is_ok_and(|b| b == path),
                Err(e) => {
                    eprintln!("GET {path}: {e}");
                    false
                }
            };
            let get = Arc::new(get);
            let warm = get.clone();
            let warmed = pool == 0
                || measure("ureq warm-up", n as usize, n as usize, move |i| {
                    warm(format!("/warm/{i}"))
                });
            let ok = warmed
                && measure("ureq", n as usize, (n * reqs) as usize, move |i| {
                    (0..reqs).all(|k| get(format!("/{i}/{k}")))
                });
            drop(child.stdin.take());
            let _ = child.kill();
            let _ = child.wait();
            ok
        }
        Some("mutex") => {
            let (n, rounds, hold) = (arg(&args, 2, 10_000), arg(&args, 3, 100), arg(&args, 4, 1));
            let m = Arc::new(Mutex::new(0u64));
            let ok = measure("mutex", n as usize, (n * rounds) as usize, move |_| {
                for _ in 0..rounds {
                    let mut g = m.lock().unwrap();
                    let until = Instant::now() + Duration::from_micros(hold);
                    while Instant::now() < until {
                        std::hint::spin_loop();
                    }
                    *g += 1;
                    drop(g);
                    goro::yield_now();
                }
                true
            });
            ok
        }
        _ => {
            eprintln!("usage: storm ureq N [REQUESTS] [DELAY_MS] | mutex N [ROUNDS] [HOLD_US] | serve DELAY_MS");
            return ExitCode::from(2);
        }
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
