//! `goro::process`: exit codes, output, signals, piped stdin, 100 children at once
//! while another coroutine keeps ticking, plain-thread callers, outputs larger than the
//! pipes, a missing program, and the blocking fallback without pidfds
//! (`GORO_PIDFD=off`).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::process::{Command, Stdio};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &["pidfd_off_falls_back"]);
}

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script);
    c
}

/// Whether this kernel (and sandbox) gives out pidfds.
fn pidfds_work() -> bool {
    // SAFETY: pidfd_open of our own pid, no memory; the fd is closed right away.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) };
    if fd >= 0 {
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd as i32) };
    }
    fd >= 0 && std::env::var("GORO_PIDFD").as_deref() != Ok("off")
}

/// Runs `f` on a coroutine and on a plain thread.
fn both(f: fn()) {
    with_timeout(T, move || {
        goro::go!(f).join().unwrap();
        std::thread::spawn(f).join().unwrap();
    });
}

#[test]
fn exit_codes() {
    both(|| {
        for code in [0, 1, 7, 255] {
            let st = sh(&format!("exit {code}")).status().unwrap();
            assert_eq!(st.code(), Some(code));
            assert_eq!(st.success(), code == 0);
        }
        assert!(Command::new("true").status().unwrap().success());
    });
}

#[test]
fn output_captures_both_streams() {
    both(|| {
        let out = sh("echo out; echo err >&2; exit 2").output().unwrap();
        assert_eq!(out.stdout, b"out\n");
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.code(), Some(2));
        // stdin is null for `output`: `cat` ends at once.
        let out = Command::new("cat").output().unwrap();
        assert!(out.status.success() && out.stdout.is_empty());
    });
}

#[test]
fn environment_and_directory() {
    both(|| {
        let out = Command::new("/bin/sh")
            .args(["-c", "echo \"$A:$B:$HOME\"; pwd"])
            .env_clear()
            .env("A", "1")
            .envs([("B", "2"), ("HOME", "h")])
            .env_remove("HOME")
            .current_dir("/")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1:2:\n/\n");
    });
}

/// `kill` gives a status with SIGKILL; a signal from outside shows too.
#[test]
fn signals_end_children() {
    both(|| {
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(c.try_wait().unwrap().is_none());
        c.kill().unwrap();
        let st = c.wait().unwrap();
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        assert_eq!(st.code(), None);
        // Waiting again gives the same status.
        assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));

        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        // SAFETY: kill with a pid we own and have not reaped.
        assert_eq!(unsafe { libc::kill(c.id() as i32, libc::SIGTERM) }, 0);
        assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGTERM));
    });
}

/// stdin piped: written, then closed, and the child sees end of file. 1 MiB through
/// `cat` needs writing and reading at once (both pipes fill).
#[test]
fn piped_stdin_write_then_close() {
    both(|| {
        let mut c = Command::new("wc")
            .arg("-c")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = c.stdin.take().unwrap();
        stdin.write_all(&[b'x'; 1000]).unwrap();
        drop(stdin);
        let mut s = String::new();
        c.stdout.take().unwrap().read_to_string(&mut s).unwrap();
        assert_eq!(s.trim(), "1000");
        assert!(c.wait().unwrap().success());

        let mut c = Command::new("cat")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = c.stdin.take().unwrap();
        let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
        let expect = data.clone();
        let w = goro::go!(move || {
            let mut stdin = stdin;
            stdin.write_all(&data).unwrap();
        });
        let out = c.wait_with_output().unwrap();
        w.join().unwrap();
        assert!(out.status.success());
        assert!(out.stdout == expect, "cat changed the bytes");
    });
}

/// A child that writes 2 MiB to stdout and to stderr, interleaved: `output` reads both
/// at once, so neither pipe's fill stops the child.
#[test]
fn large_outputs_on_both_pipes() {
    both(|| {
        let script = "for i in 1 2 3 4 5 6 7 8; do \
             head -c 262144 /dev/zero; head -c 262144 /dev/zero >&2; done";
        let out = sh(script).output().unwrap();
        assert!(out.status.success());
        assert_eq!(out.stdout.len(), 2 << 20);
        assert_eq!(out.stderr.len(), 2 << 20);
        assert!(out.stdout.iter().chain(&out.stderr).all(|&b| b == 0));
    });
}

#[test]
fn missing_program_is_not_found() {
    both(|| {
        for prog in [
            "/nonexistent/goro-no-such-program",
            "goro-no-such-program-9d2e",
        ] {
            let e = Command::new(prog).spawn().unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotFound, "{prog}: {e}");
            assert_eq!(
                Command::new(prog).status().unwrap_err().kind(),
                ErrorKind::NotFound
            );
        }
    });
}

/// 100 children at once, each waited for by its own coroutine, while a ticker
/// coroutine keeps running: the waits park, they do not hold the P (the re-runs at
/// one P are the point). Then ten plain threads do the same.
#[test]
fn hundred_children_while_another_coroutine_ticks() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let ticks = Arc::new(AtomicUsize::new(0));
        let (s2, t2) = (stop.clone(), ticks.clone());
        let ticker = goro::go!(move || {
            let start = Instant::now();
            while !s2.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(100) {
                goro::time::sleep(Duration::from_millis(2));
                t2.fetch_add(1, Ordering::SeqCst);
            }
        });
        let start = Instant::now();
        let waiters: Vec<_> = (0..100)
            .map(|i| {
                goro::go!(move || {
                    let st = sh(&format!("sleep 0.3; exit {}", i % 7)).status().unwrap();
                    assert_eq!(st.code(), Some(i % 7));
                })
            })
            .collect();
        // While the children sleep, the ticker ticks.
        let before = ticks.load(Ordering::SeqCst);
        goro::time::sleep(Duration::from_millis(150));
        let during = ticks.load(Ordering::SeqCst) - before;
        for w in waiters {
            w.join().unwrap();
        }
        let took = start.elapsed();
        stop.store(true, Ordering::SeqCst);
        ticker.join().unwrap();
        assert!(during >= 5, "the ticker ticked {during} times in 150 ms");
        // 100 children of 0.3 s each, concurrently: far less than serially (30 s).
        assert!(took < Duration::from_secs(20), "took {took:?}");

        let threads: Vec<_> = (0..10)
            .map(|i| {
                std::thread::spawn(move || {
                    let out = sh(&format!("sleep 0.1; echo {i}")).output().unwrap();
                    assert_eq!(out.stdout, format!("{i}\n").as_bytes());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    });
}

/// The child's pidfd is on the poller where the kernel gives one.
#[test]
fn wait_uses_a_pidfd_where_there_is_one() {
    let mut c = Command::new("true").spawn().unwrap();
    let dbg = format!("{c:?}");
    assert_eq!(dbg.contains("pidfd: Some("), pidfds_work(), "{dbg}");
    assert!(c.wait().unwrap().success());
}

/// With `GORO_PIDFD=off`, waits fall back to a blocking `wait`: the same results, and
/// at one P another coroutine still runs while a child is waited for.
#[test]
fn pidfd_off_falls_back() {
    if common::alone(
        "pidfd_off_falls_back",
        &[("GORO_PIDFD", "off"), ("GORO_MAXPROCS", "1")],
    ) {
        return;
    }
    with_timeout(T, || {
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        assert!(format!("{c:?}").contains("pidfd: None"));
        c.kill().unwrap();
        assert_eq!(c.wait().unwrap().signal(), Some(libc::SIGKILL));
        assert_eq!(sh("exit 5").status().unwrap().code(), Some(5));
        let out = sh("echo a; echo b >&2").output().unwrap();
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"a\n"[..], &b"b\n"[..])
        );
        let ticks = Arc::new(AtomicUsize::new(0));
        let t2 = ticks.clone();
        let ticker = goro::go!(move || {
            for _ in 0..20 {
                goro::time::sleep(Duration::from_millis(5));
                t2.fetch_add(1, Ordering::SeqCst);
            }
        });
        let st = goro::go!(|| sh("sleep 0.3").status().unwrap())
            .join()
            .unwrap();
        assert!(st.success());
        assert!(ticks.load(Ordering::SeqCst) >= 5, "the ticker was held up");
        ticker.join().unwrap();
    });
}
