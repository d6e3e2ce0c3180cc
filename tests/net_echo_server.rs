//! The echo_server example, end to end: echo, --max-conns, --idle-timeout, and a
//! clean exit on SIGINT. Runs the binary `cargo test` builds in target/*/examples.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::with_timeout;

/// target/<profile>/examples/echo_server, built first if this test ran alone
/// (`cargo test --workspace` builds examples; `cargo test --test net_echo_server` not).
fn example_binary() -> std::path::PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let bin = dir.join("echo_server");
    BUILT.call_once(|| {
        if !bin.exists() {
            let mut cmd = Command::new(env!("CARGO"));
            cmd.args(["build", "--example", "echo_server"]);
            if !cfg!(debug_assertions) {
                cmd.arg("--release");
            }
            let out = cmd.output().expect("run cargo");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    });
    bin
}

/// Starts the server on an ephemeral loopback port; returns it and the address.
fn start(args: &[&str]) -> (Child, String, BufReader<std::process::ChildStderr>) {
    let bin = example_binary();
    let mut child = Command::new(bin)
        .args(["--addr", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string();
    (child, addr, err)
}

fn stop(mut child: Child, mut err: BufReader<std::process::ChildStderr>) -> String {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the server did not stop on SIGINT"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    assert!(status.success(), "exit status {status:?}; stderr:\n{rest}");
    rest
}

#[test]
fn echoes_and_stops_cleanly_on_sigint() {
    with_timeout(Duration::from_secs(120), || {
        let (child, addr, err) = start(&[]);
        let clients: Vec<_> = (0..20)
            .map(|i| {
                let addr = addr.clone();
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(&addr).unwrap();
                    for j in 0..50u32 {
                        let msg = format!("client {i} message {j}\n");
                        s.write_all(msg.as_bytes()).unwrap();
                        let mut back = vec![0u8; msg.len()];
                        s.read_exact(&mut back).unwrap();
                        assert_eq!(back, msg.as_bytes());
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|c| c.join().unwrap());
        // A connection still open at shutdown is closed by it.
        let mut open = TcpStream::connect(&addr).unwrap();
        open.write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        open.read_exact(&mut b).unwrap();
        let log = stop(child, err);
        assert!(
            log.contains("shutting down") && log.contains("stopped"),
            "{log}"
        );
        assert_eq!(
            open.read(&mut b).unwrap_or(0),
            0,
            "the open connection was not closed"
        );
    });
}

#[test]
fn max_conns_and_idle_timeout() {
    with_timeout(Duration::from_secs(120), || {
        let (child, addr, err) = start(&["--max-conns", "2", "--idle-timeout", "0.3"]);
        let echo = |s: &mut TcpStream| {
            s.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            s.read_exact(&mut b).unwrap();
        };
        let mut a = TcpStream::connect(&addr).unwrap();
        let mut b = TcpStream::connect(&addr).unwrap();
        echo(&mut a);
        echo(&mut b);
        // A third connection waits for a slot: no echo while a and b are busy.
        let mut c = TcpStream::connect(&addr).unwrap();
        c.write_all(b"ping").unwrap();
        c.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut buf = [0u8; 4];
        assert!(c.read_exact(&mut buf).is_err(), "served beyond --max-conns");
        // a and b go idle and are closed after 0.3 s; then c is served.
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ping");
        assert_eq!(
            a.read(&mut buf).unwrap_or(0),
            0,
            "an idle connection was not closed"
        );
        let log = stop(child, err);
        assert!(log.contains("idle for"), "{log}");
    });
}

#[test]
fn bad_arguments_are_reported() {
    let out = Command::new(example_binary())
        .args(["--max-conns", "zero"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--max-conns must be a positive whole number"));
}
