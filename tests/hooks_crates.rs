//! Unmodified third-party blocking crates, called from coroutines, with the `hooks`
//! feature: their libc calls (connect, accept, read, write, poll on sockets, nanosleep)
//! park the coroutine on the netpoller and the timers instead of blocking its thread,
//! so hundreds of blocking calls in flight need about `maxprocs()` OS threads.
//!
//! - `ureq`: 500 coroutines each make one HTTP request to a local server whose handler
//!   sleeps 50 ms (`std::thread::sleep`) before echoing the request path. Every client
//!   checks its own path came back; the batch takes far less than the 25 s it would take
//!   one at a time; then a few sequential requests reuse the agent's pooled connections
//!   (ureq probes a pooled connection with a nonblocking read, which must not park).
//! - `tungstenite`: 200 coroutines each open a websocket to a local echo server, send
//!   text and binary messages (frame lengths around the 7-bit, 16-bit and 64-bit
//!   boundaries), check every echo and close the connection properly.
//!
//! Both servers are `std::net` listeners and streams served by coroutines, one per
//! connection, so they need no threads either. While the clients run, the process's OS
//! thread count (`/proc/self/status`) is sampled: the most seen must stay within
//! `maxprocs() + 8` (the test harness's threads, the watchdog, sysmon, a spare M).
//! Each scenario runs by itself in a child process (`common::alone`: no threads left
//! over from another test), one at a time (`serial`), and the file runs again under
//! `GORO_MAXPROCS=1` and `2` (not while a scenario runs here).
#![cfg(feature = "hooks")]

mod common;

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{alone, os_threads, thread_names, with_timeout};
use goro::JoinHandle;
use tungstenite::Message;

/// The watchdog of every test.
const T: Duration = Duration::from_secs(60);
/// OS threads allowed beyond `maxprocs()`: the harness's main and test threads, the
/// watchdog threads, sysmon, a spare M.
const EXTRA_THREADS: usize = 8;
/// How long the clients of one scenario may take before the sampler gives up on them.
const CLIENTS_LIMIT: Duration = Duration::from_secs(30);
/// The most connections a test server accepts.
const MAX_ACCEPTS: usize = 2_000;
/// The most requests (or websocket messages) one connection may carry.
const MAX_PER_CONN: usize = 1_000;

static SERIAL: Mutex<()> = Mutex::new(());

/// One scenario at a time in this process (the thread count is the process's), and
/// none while the re-runs run.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn under_maxprocs_1_and_2() {
    // Serial too: the children's CPU load would make the scenarios here lose their
    // threads to the kernel, and sysmon hand their Ps to new Ms.
    let _serial = serial();
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// What [`watch`] saw.
struct Watched {
    max_threads: usize,
    /// The threads by name at a sample over the bound (near the most), if any.
    over: Option<String>,
    elapsed: Duration,
}

/// Samples the thread count every millisecond (on this plain thread) until `done`
/// reaches `n` or [`CLIENTS_LIMIT`] has passed since `start`.
fn watch(done: &AtomicUsize, n: usize, start: Instant) -> Watched {
    let bound = goro::maxprocs() + EXTRA_THREADS;
    let mut w = Watched {
        max_threads: 0,
        over: None,
        elapsed: Duration::ZERO,
    };
    // Names are read at the first sample over the bound and again each time the count
    // has doubled since (reading them costs a file per thread).
    let mut named_at = 0;
    let max_samples = CLIENTS_LIMIT.as_millis() as usize;
    for _ in 0..max_samples {
        let threads = os_threads();
        w.max_threads = w.max_threads.max(threads);
        if threads > bound && threads >= 2 * named_at {
            w.over = Some(thread_names());
            named_at = threads;
        }
        if done.load(Ordering::Acquire) >= n || start.elapsed() > CLIENTS_LIMIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    w.elapsed = start.elapsed();
    w
}

/// Fails the test if the thread count went over `maxprocs() + EXTRA_THREADS`.
fn check_threads(what: &str, w: &Watched, before: usize) {
    let procs = goro::maxprocs();
    eprintln!(
        "{what}: {:?}, OS threads {before} before, at most {} during (maxprocs {procs})",
        w.elapsed, w.max_threads
    );
    assert!(
        w.max_threads <= procs + EXTRA_THREADS,
        "{} {what}: {} OS threads at once with maxprocs {procs} ({before} before): the \
         blocking calls did not park their coroutines; threads then: {}",
        common::BUDGET_MISS,
        w.max_threads,
        w.over.as_deref().unwrap_or("?")
    );
}

/// Counts a client as done when it ends, panicking or not.
struct DoneOnDrop(Arc<AtomicUsize>);

impl Drop for DoneOnDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// Joins the clients and fails the test with every client's failure.
fn join_clients(what: &str, clients: Vec<JoinHandle<Result<(), String>>>) {
    let n = clients.len();
    let failures: Vec<String> = clients
        .into_iter()
        .enumerate()
        .filter_map(|(id, h)| match h.join() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!("client {id}: {e}")),
            Err(p) => Some(format!(
                "client {id} panicked: {}",
                goro::panic_message(&*p)
            )),
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{what}: {} of {n} clients failed, first ones:\n{}",
        failures.len(),
        failures[..failures.len().min(10)].join("\n")
    );
}

/// A test server: a coroutine accepting on a `std::net::TcpListener` on 127.0.0.1
/// (port 0) and one coroutine per connection running `handler`.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<io::Result<()>>,
    /// Connections accepted so far (not counting the stop wake-up).
    accepted: Arc<AtomicUsize>,
    /// Connection coroutines still running.
    live: Arc<AtomicUsize>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn start(handler: fn(TcpStream) -> Result<(), String>) -> Server {
        // A deep backlog, so that hundreds of simultaneous connects are not dropped
        // and retried a second later when the accept queue is full.
        let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("socket");
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        sock.bind(&any.into()).expect("bind");
        sock.listen(1024).expect("listen");
        let listener: TcpListener = sock.into();
        let addr = listener.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicUsize::new(0));
        let live = Arc::new(AtomicUsize::new(0));
        let errors = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (stop, accepted, live, errors) =
                (stop.clone(), accepted.clone(), live.clone(), errors.clone());
            goro::go!(move || {
                for _ in 0..MAX_ACCEPTS {
                    let (stream, _) = listener.accept()?;
                    if stop.load(Ordering::Acquire) {
                        return Ok(());
                    }
                    accepted.fetch_add(1, Ordering::Relaxed);
                    live.fetch_add(1, Ordering::AcqRel);
                    let (live, errors) = (live.clone(), errors.clone());
                    goro::go!(move || {
                        if let Err(e) = handler(stream) {
                            errors.lock().unwrap().push(e);
                        }
                        live.fetch_sub(1, Ordering::AcqRel);
                    });
                }
                Err(io::Error::other("too many connections"))
            })
        };
        Server {
            addr,
            stop,
            acceptor,
            accepted,
            live,
            errors,
        }
    }

    /// Stops accepting, waits (boundedly) for the connection coroutines to see their
    /// clients close, and fails the test on any server-side error.
    fn stop(self, what: &str) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept up; it sees `stop` and returns.
        drop(TcpStream::connect(self.addr).expect("connect to wake the acceptor"));
        match self.acceptor.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{what}: accept failed: {e}"),
            Err(p) => panic!("{what}: acceptor panicked: {}", goro::panic_message(&*p)),
        }
        let until = Instant::now() + Duration::from_secs(10);
        while self.live.load(Ordering::Acquire) > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        let errors = self.errors.lock().unwrap();
        assert!(
            errors.is_empty(),
            "{what}: {} connection errors on the server, first ones:\n{}",
            errors.len(),
            errors[..errors.len().min(10)].join("\n")
        );
        let live = self.live.load(Ordering::Acquire);
        assert_eq!(
            live, 0,
            "{what}: {live} server connections still open 10 s after their clients closed"
        );
    }
}

/// The HTTP backend: per request, reads the head (no body: only GETs come), sleeps
/// 50 ms with `std::thread::sleep` and answers with the request path as the body.
/// Keeps the connection open for the next request until the client closes it.
fn serve_http(mut s: TcpStream) -> Result<(), String> {
    s.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    for _ in 0..MAX_PER_CONN {
        let end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            if buf.len() > 64 * 1024 {
                return Err("request head over 64 KiB".into());
            }
            match s.read(&mut chunk) {
                Ok(0) if buf.is_empty() => return Ok(()), // closed between requests
                Ok(0) => return Err(format!("EOF inside a request head: {buf:?}")),
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("read: {e}")),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end);
        let mut words = head.split_whitespace();
        let (method, path) = (words.next(), words.next());
        let path = match (method, path) {
            (Some("GET"), Some(path)) => path.to_string(),
            _ => return Err(format!("not a GET: {head:?}")),
        };
        std::thread::sleep(Duration::from_millis(50));
        let response = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{path}",
            path.len()
        );
        s.write_all(response.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
    }
    Err("too many requests on one connection".into())
}

/// One GET through `agent`, checking the body is the path asked for.
fn http_get(agent: &ureq::Agent, base: &str, path: &str) -> Result<(), String> {
    let mut resp = agent
        .get(format!("{base}{path}"))
        .call()
        .map_err(|e| format!("GET {path}: {e}"))?;
    if resp.status() != 200 {
        return Err(format!("GET {path}: status {}", resp.status()));
    }
    let body = resp
        .body_mut()
        .read_to_string()
        .map_err(|e| format!("GET {path}: body: {e}"))?;
    if body != path {
        return Err(format!("GET {path}: body {body:?}"));
    }
    Ok(())
}

#[test]
fn ureq_500_concurrent_requests() {
    let _serial = serial();
    if alone("ureq_500_concurrent_requests", &[]) {
        return;
    }
    with_timeout(T, || {
        const N: usize = 500;
        const SEQUENTIAL: usize = 10;
        let server = Server::start(serve_http);
        let base = format!("http://{}", server.addr);
        // No proxy from the environment; a read timeout (SO_RCVTIMEO, which a hooked
        // read must honour) well above the 50 ms. No overall timeout: with one, ureq
        // resolves the address on a thread of its own.
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .proxy(None)
            .timeout_recv_response(Some(Duration::from_secs(20)))
            .timeout_recv_body(Some(Duration::from_secs(20)))
            .build()
            .into();

        let before = os_threads();
        let done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let clients: Vec<_> = (0..N)
            .map(|id| {
                let (agent, base, done) = (agent.clone(), base.clone(), done.clone());
                goro::go!(move || {
                    let _done = DoneOnDrop(done);
                    http_get(&agent, &base, &format!("/req/{id}"))
                })
            })
            .collect();
        let w = watch(&done, N, start);
        join_clients("ureq", clients);
        check_threads("ureq, 500 requests of 50 ms", &w, before);
        assert!(
            w.elapsed < Duration::from_secs(5),
            "ureq: 500 requests of 50 ms took {:?} (25 s one at a time): they did not overlap",
            w.elapsed
        );

        // Sequential requests on the same agent reuse the connections its pool kept;
        // before reusing one, ureq checks it with a nonblocking read, which must fail
        // with WouldBlock at once (not park, not report the connection closed).
        let conns = server.accepted.load(Ordering::Relaxed);
        let seq = {
            let (agent, base) = (agent.clone(), base.clone());
            goro::go!(move || {
                for k in 0..SEQUENTIAL {
                    http_get(&agent, &base, &format!("/seq/{k}"))?;
                }
                Ok::<(), String>(())
            })
        };
        match seq.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("ureq, sequential requests: {e}"),
            Err(p) => panic!("ureq, sequential: panicked: {}", goro::panic_message(&*p)),
        }
        let new_conns = server.accepted.load(Ordering::Relaxed) - conns;
        eprintln!("ureq: {SEQUENTIAL} sequential requests opened {new_conns} new connections");
        assert!(
            new_conns < SEQUENTIAL,
            "ureq: {SEQUENTIAL} sequential requests opened {new_conns} new connections: no \
             pooled connection passed ureq's liveness probe (a nonblocking read)"
        );

        // Closing the agent's pooled connections ends their server coroutines.
        drop(agent);
        server.stop("ureq");
    });
}

/// The websocket echo server: a handshake with `tungstenite::accept`, then every text
/// and binary message sent back, until the client closes.
fn serve_ws(stream: TcpStream) -> Result<(), String> {
    stream
        .set_nodelay(true)
        .map_err(|e| format!("nodelay: {e}"))?;
    let mut ws = tungstenite::accept(stream).map_err(|e| format!("handshake: {e}"))?;
    for _ in 0..MAX_PER_CONN {
        match ws.read() {
            Ok(m @ (Message::Text(_) | Message::Binary(_))) => {
                ws.send(m).map_err(|e| format!("send: {e}"))?
            }
            // The reply to a close is queued; the next read sends it and ends.
            Ok(_) => {}
            Err(tungstenite::Error::ConnectionClosed) => return Ok(()),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    Err("too many messages on one connection".into())
}

/// Binary payload `k` of client `id`, `len` bytes.
fn payload(id: usize, k: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (id * 31 + k * 7 + j) as u8).collect()
}

/// One websocket client: connect, handshake, a few text and binary round trips, and
/// the close handshake.
fn ws_client(addr: SocketAddr, id: usize) -> Result<(), String> {
    // Binary lengths around the frame header's 7-bit, 16-bit and 64-bit forms.
    const LENS: [usize; 4] = [1, 125, 126, 65_536 + 3];
    let stream = TcpStream::connect(addr).map_err(|e| format!("connect: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("nodelay: {e}"))?;
    let url = format!("ws://{addr}/echo/{id}");
    let (mut ws, resp) =
        tungstenite::client(url.as_str(), stream).map_err(|e| format!("handshake: {e}"))?;
    if resp.status() != 101 {
        return Err(format!("handshake: status {}", resp.status()));
    }
    for (k, len) in LENS.into_iter().enumerate() {
        let text = Message::text(format!("client {id}, message {k}: grüße, 😀"));
        let bin = Message::binary(payload(id, k, len));
        for m in [text, bin] {
            ws.send(m.clone()).map_err(|e| format!("send {k}: {e}"))?;
            let echo = ws.read().map_err(|e| format!("read echo {k}: {e}"))?;
            if echo != m {
                let show = |m: &Message| match m {
                    Message::Text(t) => format!("text {:?}", t.as_str()),
                    Message::Binary(b) => format!("{} bytes", b.len()),
                    other => format!("{other:?}"),
                };
                return Err(format!("echo {k}: sent {}, got {}", show(&m), show(&echo)));
            }
        }
    }
    ws.close(None).map_err(|e| format!("close: {e}"))?;
    // The server's close reply, then the end of the connection once it drops it.
    let mut replied = false;
    for _ in 0..8 {
        match ws.read() {
            Ok(Message::Close(_)) => replied = true,
            Ok(m) => return Err(format!("closing: unexpected {m:?}")),
            Err(tungstenite::Error::ConnectionClosed) if replied => return Ok(()),
            Err(e) => return Err(format!("closing (reply seen: {replied}): {e}")),
        }
    }
    Err("close handshake did not finish".into())
}

#[test]
fn tungstenite_200_echo_clients() {
    let _serial = serial();
    if alone("tungstenite_200_echo_clients", &[]) {
        return;
    }
    with_timeout(T, || {
        const N: usize = 200;
        let server = Server::start(serve_ws);
        let addr = server.addr;
        let before = os_threads();
        let done = Arc::new(AtomicUsize::new(0));
        let start = Instant::now();
        let clients: Vec<_> = (0..N)
            .map(|id| {
                let done = done.clone();
                goro::go!(move || {
                    let _done = DoneOnDrop(done);
                    ws_client(addr, id)
                })
            })
            .collect();
        let w = watch(&done, N, start);
        join_clients("tungstenite", clients);
        check_threads("tungstenite, 200 echo clients", &w, before);
        let accepted = server.accepted.load(Ordering::Relaxed);
        assert_eq!(accepted, N, "tungstenite: connections accepted");
        server.stop("tungstenite");
    });
}
