//! accept under descriptor exhaustion: a server limited to 64 file descriptors
//! (a child process, RLIMIT_NOFILE) and 200 clients. accept hits EMFILE, backs off,
//! and keeps serving as connections close; no client is lost and the server does
//! not spin (its CPU time stays low while it waits). The back-offs are visible: a
//! count in `debug::stats` and a line on stderr, at most one a second.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::with_timeout;
use goro::net::{TcpListener, TcpStream};

const CHILD_ENV: &str = "GORO_TEST_EMFILE_SERVER";

/// The server: RLIMIT_NOFILE = 64, echo one line per connection, exit when stdin
/// closes. Prints `PORT <n>`.
#[test]
fn child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let lim = libc::rlimit {
        rlim_cur: 64,
        rlim_max: 64,
    };
    // SAFETY: setrlimit with a valid struct.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("PORT {}", l.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    std::thread::spawn(|| {
        let mut sink = String::new();
        let _ = std::io::stdin().read_to_string(&mut sink);
        println!("BACKOFFS {}", goro::debug::stats().accept_backoffs);
        std::io::stdout().flush().unwrap();
        std::process::exit(0);
    });
    goro::go!(move || loop {
        let (s, _) = l
            .accept()
            .expect("accept must back off on EMFILE, not fail");
        goro::go!(move || {
            let mut buf = [0u8; 64];
            let mut s = s;
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    })
    .join()
    .unwrap();
}

#[test]
fn accept_survives_descriptor_exhaustion() {
    with_timeout(Duration::from_secs(120), || {
        let exe = std::env::current_exe().unwrap();
        let mut child = Command::new(exe)
            .env(CHILD_ENV, "1")
            .env("GORO_MAXPROCS", "2")
            .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let port: u16 = loop {
            let mut line = String::new();
            assert!(out.read_line(&mut line).unwrap() > 0, "server exited early");
            // libtest may have printed "test child_entry ... " on the same line.
            if let Some(i) = line.find("PORT ") {
                break line[i + 5..].trim().parse().unwrap();
            }
        };
        // 200 clients at once, each holding its connection a little: the server can
        // hold ~55 at a time.
        let started = std::time::Instant::now();
        let clients: Vec<_> = (0..200u32)
            .map(|i| {
                goro::go!(move || -> Result<(), String> {
                    let mut s =
                        TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
                    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                    let msg = i.to_le_bytes();
                    s.write_all(&msg).map_err(|e| e.to_string())?;
                    let mut b = [0u8; 4];
                    s.read_exact(&mut b)
                        .map_err(|e| format!("client {i}: {e}"))?;
                    assert_eq!(b, msg);
                    goro::time::sleep(Duration::from_millis(20));
                    Ok(())
                })
            })
            .collect();
        let results: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
        let wall = started.elapsed();
        let cpu = cpu_time(child.id());
        drop(child.stdin.take()); // the server exits
        let status = child.wait().unwrap();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        let failed: Vec<_> = results.iter().filter_map(|r| r.as_ref().err()).collect();
        assert!(
            failed.is_empty(),
            "{} clients failed: {:?}\nserver stderr:\n{err}",
            failed.len(),
            &failed[..failed.len().min(5)]
        );
        assert!(status.success(), "server: {status:?}\n{err}");
        let mut rest = String::new();
        out.read_to_string(&mut rest).unwrap();
        let backoffs: u64 = rest
            .split("BACKOFFS ")
            .nth(1)
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no BACKOFFS line: {rest}"));
        let said = err.matches("goro: net: accept error: ").count();
        assert!(backoffs > 0, "the server never backed off; stderr:\n{err}");
        assert!(
            said >= 1 && said as u64 <= backoffs && said as u64 <= wall.as_secs() + 2,
            "{said} lines for {backoffs} back-offs in {wall:?}:\n{err}"
        );
        assert!(err.contains("Too many open files"), "{err}");
        // Backing off, not spinning: the server used well under one CPU.
        assert!(
            cpu < wall / 2 + Duration::from_millis(100),
            "server used {cpu:?} of CPU in {wall:?}"
        );
    });
}

/// User + system CPU time of process `pid` (from /proc/<pid>/stat).
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_millis(ticks * 1000 / hz)
}
