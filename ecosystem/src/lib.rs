//! goro with tokio's ecosystem: tests (tests/) and the `slow_gets` load of compare's
//! async row family (src/bin/). This library is what both share: a slow HTTP server,
//! run in a child process so that its descriptors and threads are not the client's.

use std::convert::Infallible;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// Serves HTTP/1.1 on 127.0.0.1 (an ephemeral port) until the process ends: every
/// request is answered after `delay` with its path, without the leading `/`, as the
/// body (so each answer can be checked). Prints `listening on ADDR` on stdout once it
/// accepts. What the `slow_server` binary runs.
pub fn serve(delay: Duration, workers: usize) -> ! {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("the server's runtime");
    rt.block_on(async move {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("SO_REUSEADDR");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind 127.0.0.1");
        // The kernel caps the backlog at net.core.somaxconn.
        let listener = socket.listen(8192).expect("listen");
        println!(
            "listening on {}",
            listener.local_addr().expect("local_addr")
        );
        loop {
            let (stream, _) = match listener.accept().await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("slow_server: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<hyper::body::Incoming>| async move {
                    tokio::time::sleep(delay).await;
                    let body = req.uri().path().trim_start_matches('/').to_owned();
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    })
}

/// A `slow_server` child process (see [`serve`]), killed when dropped.
pub struct SlowServer {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

impl SlowServer {
    /// Starts the `slow_server` binary at `exe` answering after `delay`, and waits
    /// (at most 30 s) until it listens.
    pub fn start(exe: &str, delay: Duration) -> SlowServer {
        let mut child = Command::new(exe)
            .arg(delay.as_millis().to_string())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {exe}: {e}"));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("slow_server did not start listening within 30 s");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("slow_server said {line:?}"));
        SlowServer { child, addr }
    }

    /// The URL of request `id`: answered with `id`.
    pub fn url(&self, id: u64) -> String {
        format!("http://{}/{id}", self.addr)
    }
}

impl Drop for SlowServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Raises this process's soft descriptor limit to its hard limit (10 000 connections
/// need 10 000 descriptors); returns the new soft limit.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: our own process's limit, into a valid rlimit.
    let r = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    assert_eq!(r, 0, "getrlimit(RLIMIT_NOFILE)");
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: as above; raising the soft limit up to the hard one needs no privilege.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    assert_eq!(r, 0, "setrlimit(RLIMIT_NOFILE)");
    lim.rlim_cur
}

/// The number of threads of this process now (/proc/self/status).
pub fn threads_now() -> usize {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

/// Samples [`threads_now`] every millisecond on a plain thread until dropped; `peak`
/// gives the most seen.
pub struct ThreadPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    peak: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    sampler: Option<std::thread::JoinHandle<()>>,
}

impl ThreadPeak {
    /// Starts sampling.
    pub fn start() -> ThreadPeak {
        use std::sync::atomic::Ordering::Relaxed;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(threads_now()));
        let (s, p) = (stop.clone(), peak.clone());
        let sampler = std::thread::spawn(move || {
            while !s.load(Relaxed) {
                p.fetch_max(threads_now(), Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        ThreadPeak {
            stop,
            peak,
            sampler: Some(sampler),
        }
    }

    /// The most threads seen so far (the sampler's own included).
    pub fn peak(&self) -> usize {
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for ThreadPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
    }
}
