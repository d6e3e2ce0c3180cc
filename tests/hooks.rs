//! The `hooks` feature as a user sees it: std's blocking calls inside coroutines park
//! them, on about `GORO_MAXPROCS` OS threads, with std's semantics; plain threads,
//! pipes and non-blocking sockets are left alone; `GORO_HOOKS=off` and `fork`.
//!
//! The scale tests count the process's threads, so each runs alone in a child
//! process of this test binary (`alone`), with a fresh runtime. The whole file runs
//! again under `GORO_MAXPROCS=1` and `2`.
#![cfg(feature = "hooks")]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{alone, os_threads as threads, thread_names, with_timeout};

/// The watchdog of every test.
const T: Duration = Duration::from_secs(60);

static SERIAL: Mutex<()> = Mutex::new(());

/// One test at a time in this process: the thread counts must not see another's.
fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The budget: the Ps' threads, sysmon, and the test harness's few.
fn budget() -> usize {
    goro::maxprocs() + 8
}

/// Joins `hs` in order, counting the process's threads before each join, and fails
/// if the most seen is over the budget.
fn join_within_budget(hs: Vec<goro::JoinHandle<()>>) {
    let mut most = threads();
    for h in hs {
        most = most.max(threads());
        h.join().unwrap();
    }
    assert!(
        most <= budget(),
        "{} {most} threads (budget {}): {}",
        common::BUDGET_MISS,
        budget(),
        thread_names()
    );
}

#[test]
fn under_maxprocs_1_and_2() {
    let _s = serial();
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// 10 000 coroutines in `std::thread::sleep(200ms)` are 10 000 runtime timers, not
/// 10 000 threads: all done in well under the serial time, on the budget.
#[test]
fn ten_thousand_std_sleeps() {
    let _s = serial();
    if alone("ten_thousand_std_sleeps", &[]) {
        return;
    }
    with_timeout(T, || {
        const N: usize = 10_000;
        let t0 = Instant::now();
        let hs: Vec<_> = (0..N)
            .map(|_| goro::go!(move || std::thread::sleep(Duration::from_millis(200))))
            .collect();
        join_within_budget(hs);
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_millis(200),
            "{took:?}: a sleep ended early"
        );
        assert!(
            took < Duration::from_millis(1500),
            "10k sleeps took {took:?}"
        );
    });
}

/// A std::net echo server on coroutines (one per connection) and 2 000 std::net
/// client coroutines, every byte checked, on the budget.
#[test]
fn std_net_echo_with_two_thousand_clients() {
    let _s = serial();
    if alone("std_net_echo_with_two_thousand_clients", &[]) {
        return;
    }
    with_timeout(T, || {
        const CLIENTS: usize = 2000;
        const ROUNDS: usize = 5;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = goro::go!(move || {
            let mut conns = Vec::new();
            // One connection per client, told apart by the client's address: a burst
            // of 2 000 connects overflows std's backlog of 128, the kernel answers
            // with SYN cookies, and a late copy of a client's handshake ACK can then
            // make a second connection for a 4-tuple whose first one already closed
            // (seen here: the same client address accepted twice, its socket in
            // TIME-WAIT). That connection never sees data or a FIN, so serving it
            // instead of the last real client hung the test; it is closed at once.
            let mut peers = std::collections::HashSet::new();
            while peers.len() < CLIENTS {
                let (mut s, peer) = l.accept().unwrap();
                if !peers.insert(peer) {
                    continue;
                }
                conns.push(goro::go!(move || {
                    let mut buf = [0u8; 4096];
                    loop {
                        let n = s.read(&mut buf).unwrap();
                        if n == 0 {
                            return;
                        }
                        s.write_all(&buf[..n]).unwrap();
                    }
                }));
            }
            for c in conns {
                c.join().unwrap();
            }
        });
        let clients: Vec<_> = (0..CLIENTS)
            .map(|i| {
                goro::go!(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    for r in 0..ROUNDS {
                        // Sizes that take more than one segment now and then.
                        let len = 1 + (i * 7919 + r * 104_729) % 3000;
                        let msg: Vec<u8> = (0..len).map(|k| (i + r + k) as u8).collect();
                        s.write_all(&msg).unwrap();
                        let mut back = vec![0u8; len];
                        s.read_exact(&mut back).unwrap();
                        assert!(back == msg, "client {i} round {r}: echo differs");
                    }
                })
            })
            .collect();
        join_within_budget(clients);
        server.join().unwrap();
    });
}

/// `set_read_timeout(100ms)` on a silent peer: the read returns after about 100 ms
/// with std's kind for it (`WouldBlock`: Linux reports an expired `SO_RCVTIMEO` as
/// EAGAIN), and the stream still works afterwards. The same on a plain thread that
/// uses the socket the coroutine made non-blocking underneath.
#[test]
fn read_timeout_on_a_silent_peer() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = goro::go!(move || {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            let t0 = Instant::now();
            let e = (&s).read(&mut [0u8; 16]).unwrap_err();
            let took = t0.elapsed();
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
            assert!(
                took >= Duration::from_millis(100) && took < Duration::from_millis(1000),
                "timed out after {took:?}"
            );
            s
        });
        let (mut peer, _) = l.accept().unwrap();
        let mut s = h.join().unwrap();
        // A plain thread now: still a blocking socket with its timeout.
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let t0 = Instant::now();
        let e = s.read(&mut [0u8; 16]).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}");
        assert!(t0.elapsed() >= Duration::from_millis(50));
        peer.write_all(b"late").unwrap();
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"late");
    });
}

/// A socket a coroutine made non-blocking underneath still blocks a plain thread:
/// its read waits for data that comes later, and `F_GETFL` does not show the flag.
#[test]
fn a_plain_thread_still_sees_a_blocking_socket() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = goro::go!(move || {
            let (s, _) = l.accept().unwrap();
            // A read that parks makes the socket non-blocking underneath.
            s.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
            assert!((&s).read(&mut [0u8; 1]).is_err());
            s.set_read_timeout(None).unwrap();
            s
        });
        let mut c = TcpStream::connect(addr).unwrap();
        let mut s = h.join().unwrap();
        // SAFETY: F_GETFL on an fd we own.
        let fl = unsafe { libc::fcntl(s.as_raw_fd(), libc::F_GETFL) };
        assert_eq!(fl & libc::O_NONBLOCK, 0, "O_NONBLOCK shows through");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            c.write_all(b"hello").unwrap();
            c
        });
        let t0 = Instant::now();
        let mut buf = [0u8; 5];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(t0.elapsed() >= Duration::from_millis(40), "did not wait");
        drop(writer.join().unwrap());
    });
}

/// A socket the user made non-blocking stays non-blocking on a coroutine, and going
/// back to blocking makes reads wait again (parking).
#[test]
fn user_non_blocking_mode_is_kept() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = goro::go!(move || {
            let s = TcpStream::connect(addr).unwrap();
            s.set_nonblocking(true).unwrap();
            let e = (&s).read(&mut [0u8; 4]).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
            s.set_nonblocking(false).unwrap();
            let mut buf = [0u8; 4];
            (&s).read_exact(&mut buf).unwrap();
            buf
        });
        let (mut peer, _) = l.accept().unwrap();
        goro::time::sleep(Duration::from_millis(30));
        peer.write_all(b"ping").unwrap();
        assert_eq!(&h.join().unwrap(), b"ping");
    });
}

/// `libc::poll` on a coroutine parks when the set holds a socket, for its timeout or
/// until a socket is ready; 300 coroutines in it stay on the budget.
#[test]
fn poll_parks_on_sockets() {
    let _s = serial();
    if alone("poll_parks_on_sockets", &[]) {
        return;
    }
    with_timeout(T, || {
        const N: usize = 300;
        let hs: Vec<_> = (0..N)
            .map(|i| {
                goro::go!(move || {
                    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
                    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
                    let mut pfd = libc::pollfd {
                        fd: a.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    };
                    // Nothing comes: a timeout of 50 ms.
                    let t0 = Instant::now();
                    // SAFETY: one pollfd of ours.
                    let n = unsafe { libc::poll(&mut pfd, 1, 50) };
                    assert_eq!(n, 0);
                    assert!(t0.elapsed() >= Duration::from_millis(50));
                    // Something comes 20 ms later, from another coroutine.
                    let to = a.local_addr().unwrap();
                    let sender = goro::go!(move || {
                        std::thread::sleep(Duration::from_millis(20));
                        b.send_to(&[i as u8], to).unwrap();
                    });
                    // SAFETY: as above.
                    let n = unsafe { libc::poll(&mut pfd, 1, 10_000) };
                    assert_eq!(n, 1);
                    assert!(pfd.revents & libc::POLLIN != 0);
                    let mut buf = [0u8; 1];
                    assert_eq!(a.recv(&mut buf).unwrap(), 1);
                    assert_eq!(buf[0], i as u8);
                    sender.join().unwrap();
                })
            })
            .collect();
        join_within_budget(hs);
    });
}

/// `TcpStream::connect_timeout` (std's non-blocking connect and `poll`) works on a
/// coroutine: a listening port connects, a closed one is refused.
#[test]
fn connect_timeout_on_a_coroutine() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let closed = {
            let t = TcpListener::bind("127.0.0.1:0").unwrap();
            t.local_addr().unwrap()
        };
        goro::go!(move || {
            let s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
            assert_eq!(s.peer_addr().unwrap(), addr);
            let e = TcpStream::connect_timeout(&closed, Duration::from_secs(5)).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
            let e = TcpStream::connect(closed).unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        })
        .join()
        .unwrap();
    });
}

/// Pipes stay real calls: a coroutine's read of a blocking pipe is not made
/// non-blocking (retake keeps the runtime going while it blocks).
#[test]
fn pipes_are_left_alone() {
    let _s = serial();
    with_timeout(T, || {
        let mut fds = [0; 2];
        // SAFETY: pipe writes two fds into the array.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (r, w) = (fds[0], fds[1]);
        let reader = goro::go!(move || {
            let mut b = [0u8; 3];
            // SAFETY: a read into a local buffer from our pipe.
            let n = unsafe { libc::read(r, b.as_mut_ptr().cast(), 3) };
            // SAFETY: F_GETFL on our fd.
            let fl = unsafe { libc::fcntl(r, libc::F_GETFL) };
            (n, b, fl)
        });
        goro::time::sleep(Duration::from_millis(30));
        // SAFETY: a write from a local buffer to our pipe.
        assert_eq!(unsafe { libc::write(w, b"abc".as_ptr().cast(), 3) }, 3);
        let (n, b, fl) = reader.join().unwrap();
        assert_eq!((n, &b), (3, b"abc"));
        assert_eq!(fl & libc::O_NONBLOCK, 0);
        // SAFETY: closing our fds.
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    });
}

/// With `GORO_HOOKS=off` the calls are not hooked: sleeping coroutines each hold an
/// OS thread again (retake hands their Ps on), so there are more threads than the
/// budget, and the sleeps still all end.
#[test]
fn goro_hooks_off_turns_them_off() {
    let _s = serial();
    if alone("goro_hooks_off_turns_them_off", &[("GORO_HOOKS", "off")]) {
        return;
    }
    with_timeout(T, || {
        let n = budget() + 20;
        let hs: Vec<_> = (0..n)
            .map(|_| goro::go!(move || std::thread::sleep(Duration::from_millis(300))))
            .collect();
        std::thread::sleep(Duration::from_millis(200));
        let mid = threads();
        for h in hs {
            h.join().unwrap();
        }
        assert!(
            mid > budget(),
            "only {mid} threads: were the sleeps hooked?"
        );
    });
}

/// Across `fork`: the child (one thread, no runtime threads) makes real calls, and a
/// socket the parent's coroutines made non-blocking underneath still blocks there. The
/// child's `close` of it leaves the parent's poller alone: the parent's coroutine
/// still parks on the socket and is woken afterwards.
#[test]
fn a_forked_child_makes_real_calls() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (s, mut peer) = goro::go!(move || {
            let s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(5))).unwrap();
            assert!((&s).read(&mut [0u8; 1]).is_err()); // non-blocking underneath now
            s.set_read_timeout(None).unwrap();
            let (peer, _) = l.accept().unwrap();
            (s, peer)
        })
        .join()
        .unwrap();
        let code = goro::go!(move || {
            // SAFETY: the child only makes system calls and exits with _exit.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                let mut b = [0u8; 2];
                std::thread::sleep(Duration::from_millis(10));
                // SAFETY: a read into a local buffer, then exit without unwinding.
                unsafe {
                    let n = libc::read(s.as_raw_fd(), b.as_mut_ptr().cast(), 2);
                    let closed = libc::close(s.as_raw_fd());
                    libc::_exit(if n == 2 && &b == b"hi" && closed == 0 {
                        0
                    } else {
                        1
                    });
                }
            }
            assert!(pid > 0, "fork failed");
            let mut status = 0;
            // SAFETY: waiting for our child.
            let w = goro::blocking(|| unsafe { libc::waitpid(pid, &mut status, 0) });
            assert_eq!(w, pid);
            status
        });
        std::thread::sleep(Duration::from_millis(100));
        peer.write_all(b"hi").unwrap();
        let status = code.join().unwrap();
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child: {status}"
        );
    });
}

/// A socket that is the process's standard input, inherited rather than made here, is
/// left alone: `O_NONBLOCK` belongs to the open file, which the parent shares, so a
/// coroutine's read of it is the real call and never sets the flag underneath. (The
/// socket is put on fd 0 with a raw `dup2`, which the hooks do not see, as a parent's
/// would be.)
#[test]
fn an_inherited_socket_on_stdin_is_left_alone() {
    let _s = serial();
    with_timeout(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(b"in").unwrap();
        // SAFETY: raw system calls on descriptors we own: save stdin, put the socket
        // there (not through the hooks), and restore it below.
        let saved = unsafe { libc::syscall(libc::SYS_dup, 0) } as i32;
        assert!(saved >= 0);
        // SAFETY: as above.
        let onto = unsafe { libc::syscall(libc::SYS_dup2, s.as_raw_fd(), 0) };
        assert_eq!(onto, 0);
        let (n, b, fl) = goro::go!(|| {
            let mut b = [0u8; 2];
            // SAFETY: a read into a local buffer from fd 0, then F_GETFL through the
            // raw system call (the kernel's own view, not the hooks').
            unsafe {
                let n = libc::read(0, b.as_mut_ptr().cast(), 2);
                let fl = libc::syscall(libc::SYS_fcntl, 0, libc::F_GETFL) as i32;
                (n, b, fl)
            }
        })
        .join()
        .unwrap();
        // SAFETY: restore stdin and drop the saved copy, as above.
        unsafe {
            libc::syscall(libc::SYS_dup2, saved, 0);
            libc::syscall(libc::SYS_close, saved);
        }
        assert_eq!((n, &b), (2, b"in"));
        assert_eq!(
            fl & libc::O_NONBLOCK,
            0,
            "O_NONBLOCK was set on an inherited stdin"
        );
    });
}
