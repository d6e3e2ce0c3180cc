//! TCP on the netpoller: echo under load with every byte checked, half-close, client
//! aborts, timeouts, close waking waiters, plain-thread clients, UDP. 127.0.0.1 only.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::net::{TcpListener, TcpStream, UdpSocket};

const T: Duration = Duration::from_secs(240);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Echoes every connection until EOF, one coroutine per connection.
fn echo_server() -> (SocketAddr, Arc<TcpListener>) {
    let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = l.local_addr().unwrap();
    let l2 = l.clone();
    goro::go!(move || {
        while let Ok((s, _)) = l2.accept() {
            goro::go!(move || {
                let mut buf = vec![0u8; 64 * 1024];
                let mut s = s;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    (addr, l)
}

fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// Sends `payload` and reads it back, writing and reading concurrently (a payload larger
/// than the socket buffers would deadlock a write-then-read client).
fn echo_check(addr: SocketAddr, payload: Vec<u8>) {
    let s = Arc::new(TcpStream::connect(addr).unwrap());
    let w = s.clone();
    let len = payload.len();
    let writer = goro::go!(move || {
        (&*w).write_all(&payload).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
        payload
    });
    let mut got = Vec::with_capacity(len);
    (&*s).read_to_end(&mut got).unwrap();
    let sent = writer.join().unwrap();
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "echoed bytes differ");
}

/// 1 000 concurrent client coroutines, payloads from 1 byte to 1 MiB (log-uniform),
/// every byte checked.
#[test]
fn thousand_concurrent_clients_echo_every_byte() {
    with_timeout(T, || {
        let (addr, l) = echo_server();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let clients: Vec<_> = (0..1000)
            .map(|i| {
                let size = 1usize << (rng(&mut seed) % 21); // 1 B .. 1 MiB
                let size = (size + (rng(&mut seed) as usize % size.max(1))).clamp(1, 1 << 20);
                let payload: Vec<u8> = (0..size).map(|j| (i * 31 + j * 7) as u8).collect();
                goro::go!(move || echo_check(addr, payload))
            })
            .collect();
        clients.into_iter().for_each(|h| h.join().unwrap());
        l.close();
    });
}

/// Half-close: the client shuts down its write side; the server finishes echoing and
/// closes; the client sees all the data, then EOF.
#[test]
fn half_close_then_eof() {
    with_timeout(T, || {
        let (addr, _l) = echo_server();
        goro::go!(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"hello, half-closed world").unwrap();
            s.shutdown(Shutdown::Write).unwrap();
            let mut back = String::new();
            s.read_to_string(&mut back).unwrap();
            assert_eq!(back, "hello, half-closed world");
            // EOF stays EOF.
            let mut b = [0u8; 8];
            assert_eq!(s.read(&mut b).unwrap(), 0);
        })
        .join()
        .unwrap();
    });
}

/// Data and FIN both arrive before the server's first read: the read is short, and the
/// next one must return EOF at once. (A short read makes the next read wait for a new
/// edge instead of trying; a FIN that came before it raises no new edge, so the
/// descriptor must remember it.) The read timeout turns a regression into a failure.
#[test]
fn data_and_fin_before_the_first_read() {
    with_timeout(T, || {
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        for round in 0..50 {
            let send = |s: &mut TcpStream| {
                s.write_all(b"hello").unwrap();
                s.shutdown(Shutdown::Write).unwrap();
            };
            let settle = Duration::from_millis(round % 3);
            queued_before_first_read(&l, send, settle, move |mut s| {
                let mut buf = vec![0u8; 64 * 1024];
                assert_eq!(s.read(&mut buf).unwrap(), 5, "round {round}");
                assert_eq!(&buf[..5], b"hello");
                let n = s
                    .read(&mut buf)
                    .unwrap_or_else(|e| panic!("round {round}: EOF expected, got {e}"));
                assert_eq!(n, 0, "round {round}");
            });
        }
    });
}

/// Urgent (out-of-band) data makes a read stop short at its mark with more data
/// queued behind it: that short read must not make the next read wait for an edge
/// that will never come.
#[test]
fn urgent_data_does_not_strand_the_rest() {
    with_timeout(T, || {
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let send = |s: &mut TcpStream| {
            s.write_all(b"ab").unwrap();
            socket2::SockRef::from(&*s).send_out_of_band(b"!").unwrap();
            s.write_all(b"cd").unwrap();
        };
        let got = queued_before_first_read(&l, send, Duration::from_millis(20), |mut s| {
            let mut got = Vec::new();
            let mut buf = vec![0u8; 64 * 1024];
            while got.len() < 4 {
                let n = s
                    .read(&mut buf)
                    .unwrap_or_else(|e| panic!("after {:?}: {e}", String::from_utf8_lossy(&got)));
                assert!(n > 0, "EOF after {:?}", String::from_utf8_lossy(&got));
                got.extend_from_slice(&buf[..n]);
            }
            got
        });
        assert_eq!(got, b"abcd");
    });
}

/// Connects to `l`, runs `send` on the client's stream and waits for it, so that what
/// it sent is queued at the server before the server reads. Then, in a coroutine:
/// accepts, sleeps `settle` (its M goes idle and polls, so the registration's edge can
/// reach the descriptor before the first read), sets a 5 s read timeout (a hang
/// becomes a failure) and returns `check` of the server's stream. The client's stream
/// stays open until then.
fn queued_before_first_read<R: Send + 'static>(
    l: &Arc<TcpListener>,
    send: fn(&mut TcpStream),
    settle: Duration,
    check: impl FnOnce(TcpStream) -> R + Send + 'static,
) -> R {
    let addr = l.local_addr().unwrap();
    let client = goro::go!(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        send(&mut s);
        s
    })
    .join()
    .unwrap();
    let l = l.clone();
    let r = goro::go!(move || {
        let (s, _) = l.accept().unwrap();
        goro::time::sleep(settle);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        check(s)
    })
    .join()
    .unwrap_or_else(|p| std::panic::resume_unwind(p));
    drop(client);
    r
}

/// A burst of connects before anyone accepts fits in the listener's backlog (the
/// system's maximum, as Go's): every connect completes at once. With std's backlog of
/// 128 the kernel drops the SYNs beyond it and the clients retry after a second.
#[test]
fn connect_burst_fits_the_backlog() {
    with_timeout(T, || {
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(128);
        let n = somaxconn.min(250); // the bytes below tell the clients apart
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let clients: Vec<_> = (0..n)
            .map(|i| {
                goro::go!(move || {
                    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(800))
                        .unwrap_or_else(|e| panic!("connect {i} of {n}: {e}"));
                    s.write_all(&[i as u8]).unwrap();
                    s
                })
            })
            .collect();
        // Nobody accepts until every client is connected.
        let streams: Vec<_> = clients.into_iter().map(|h| h.join().unwrap()).collect();
        let mut seen = vec![false; n];
        for _ in 0..n {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            assert!(!seen[b[0] as usize], "byte {} twice", b[0]);
            seen[b[0] as usize] = true;
        }
        drop(streams);
    });
}

/// Clients that abort mid-transfer (reset the connection) do not disturb the others.
#[test]
fn client_abort_does_not_disturb_others() {
    with_timeout(T, || {
        let (addr, _l) = echo_server();
        let aborters: Vec<_> = (0..50)
            .map(|_| {
                goro::go!(move || {
                    let s = TcpStream::connect(addr).unwrap();
                    (&s).write_all(&vec![1u8; 300_000]).ok();
                    // SO_LINGER 0: close sends a reset.
                    socket2::SockRef::from(&s)
                        .set_linger(Some(Duration::ZERO))
                        .unwrap();
                    drop(s);
                })
            })
            .collect();
        let good: Vec<_> = (0..50)
            .map(|i| goro::go!(move || echo_check(addr, vec![i as u8; 100_000])))
            .collect();
        aborters.into_iter().for_each(|h| h.join().unwrap());
        good.into_iter().for_each(|h| h.join().unwrap());
        // The server still serves.
        echo_check(addr, b"still here".to_vec());
    });
}

/// A read timeout fires, and the stream still works afterwards.
#[test]
fn read_timeout_fires_and_stream_still_works() {
    with_timeout(T, || {
        let check = move || {
            let (addr, _l) = echo_server();
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
            assert_eq!(s.read_timeout().unwrap(), Some(Duration::from_millis(30)));
            let t = Instant::now();
            let mut b = [0u8; 4];
            let e = s.read(&mut b).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::TimedOut);
            assert!(t.elapsed() >= Duration::from_millis(30));
            s.write_all(b"ping").unwrap();
            s.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"ping");
            assert!(s.set_read_timeout(Some(Duration::ZERO)).is_err());
            s.set_read_timeout(None).unwrap();
        };
        check();
        goro::go!(check).join().unwrap();
    });
}

/// close() from one coroutine wakes another blocked in a read on the same stream, and
/// a closed listener's accept fails.
#[test]
fn close_wakes_blocked_waiters() {
    with_timeout(T, || {
        let (addr, l) = echo_server();
        let s = Arc::new(TcpStream::connect(addr).unwrap());
        let s2 = s.clone();
        let reader = goro::go!(move || {
            let mut b = [0u8; 16];
            (&*s2).read(&mut b)
        });
        std::thread::sleep(Duration::from_millis(20));
        s.close();
        let r = reader.join().unwrap();
        assert!(
            r.is_err() || r.unwrap() == 0,
            "a read on a closed stream succeeded"
        );
        assert!((&*s).write(b"x").is_err());

        let l2 = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let l3 = l2.clone();
        let acceptor = goro::go!(move || l3.accept().map(|_| ()));
        std::thread::sleep(Duration::from_millis(20));
        l2.close();
        assert!(acceptor.join().unwrap().is_err());
        drop(l);
    });
}

/// Plain-thread clients against the coroutine server, and a plain-thread server.
#[test]
fn plain_threads_on_either_side() {
    with_timeout(T, || {
        let (addr, _l) = echo_server();
        let threads: Vec<_> = (0..8)
            .map(|i| {
                std::thread::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    for j in 0..200u32 {
                        let msg = (i * 1000 + j).to_le_bytes();
                        s.write_all(&msg).unwrap();
                        let mut b = [0u8; 4];
                        s.read_exact(&mut b).unwrap();
                        assert_eq!(b, msg);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        // A thread accepts; a coroutine connects.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        let c = goro::go!(move || {
            let mut s = TcpStream::connect(a).unwrap();
            s.write_all(b"from a coroutine").unwrap();
        });
        let (mut s, _) = l.accept().unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "from a coroutine");
        c.join().unwrap();
    });
}

#[test]
fn connect_errors_and_addresses() {
    with_timeout(T, || {
        // Nobody listens on a port we just freed: refused, as an Err.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = goro::go!(move || TcpStream::connect(("127.0.0.1", port)).map(|_| ()))
            .join()
            .unwrap()
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
        let (addr, _l) = echo_server();
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
        assert_eq!(s.peer_addr().unwrap(), addr);
        assert_eq!(s.local_addr().unwrap().ip(), addr.ip());
        s.set_nodelay(true).unwrap();
        assert!(s.nodelay().unwrap());
        assert!(TcpStream::connect_timeout(&addr, Duration::ZERO).is_err());
        // try_clone: the clone reads what the original's peer sends.
        let c = s.try_clone().unwrap();
        (&s).write_all(b"abc").unwrap();
        let mut b = [0u8; 3];
        (&c).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"abc");
    });
}

/// Go's socket defaults (issue 30): the streams goro makes, by `connect`,
/// `connect_timeout` and `accept`, on a coroutine and on a plain thread, have
/// TCP_NODELAY on; `set_nodelay(false)` turns it off; a stream adopted from std keeps
/// its options; keep-alive stays off, as in std (the documented choice).
#[test]
fn streams_goro_makes_have_nodelay_on() {
    common::on_thread_and_coroutine(T, || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        let t = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).unwrap();
        let (u, _) = l.accept().unwrap();
        for stream in [&c, &s, &t, &u] {
            assert!(stream.nodelay().unwrap(), "{stream:?}: Nagle is on");
            let keepalive = socket2::SockRef::from(stream).keepalive().unwrap();
            assert!(!keepalive, "{stream:?}: keep-alive is on");
        }
        c.set_nodelay(false).unwrap();
        assert!(!c.nodelay().unwrap());
        // Small writes still arrive (Nagle on delays, never drops).
        (&c).write_all(b"a").unwrap();
        (&c).write_all(b"b").unwrap();
        let mut buf = [0u8; 2];
        (&s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ab");

        let std_c = std::net::TcpStream::connect(addr).unwrap();
        let adopted = TcpStream::from_std(std_c).unwrap();
        assert!(
            !adopted.nodelay().unwrap(),
            "from_std changed the stream's options"
        );
    });
}

/// Many accept/close cycles do not leak descriptors or registrations.
#[test]
fn connections_come_and_go() {
    with_timeout(T, || {
        let (addr, _l) = echo_server();
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..20)
            .map(|_| {
                let done = done.clone();
                goro::go!(move || {
                    for _ in 0..100 {
                        echo_check(addr, b"x".to_vec());
                        done.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        assert_eq!(done.load(Ordering::SeqCst), 2000);
    });
}

#[test]
fn udp_round_trips() {
    with_timeout(T, || {
        let server = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let saddr = server.local_addr().unwrap();
        let s2 = server.clone();
        let srv = goro::go!(move || {
            let mut buf = [0u8; 1500];
            for _ in 0..400 {
                let (n, from) = s2.recv_from(&mut buf).unwrap();
                s2.send_to(&buf[..n], from).unwrap();
            }
        });
        let clients: Vec<_> = (0..4)
            .map(|i| {
                goro::go!(move || {
                    let c = UdpSocket::bind("127.0.0.1:0").unwrap();
                    c.connect(saddr).unwrap();
                    assert_eq!(c.peer_addr().unwrap(), saddr);
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    for j in 0..100u32 {
                        let msg = (i * 1000 + j).to_be_bytes();
                        c.send(&msg).unwrap();
                        let mut b = [0u8; 16];
                        let n = c.recv(&mut b).unwrap();
                        assert_eq!(&b[..n], &msg);
                    }
                })
            })
            .collect();
        clients.into_iter().for_each(|h| h.join().unwrap());
        srv.join().unwrap();
        // A receive timeout.
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let mut b = [0u8; 4];
        assert_eq!(u.recv_from(&mut b).unwrap_err().kind(), ErrorKind::TimedOut);
    });
}

/// Many short round trips, each read with a timeout, the reader alone on its runtime
/// most of the time: every read parks, its M goes idle and must hand the socket watch
/// to the poller. A lost hand-over (an idle M turned away from the poller by a quick
/// poll in progress) once hung one read in ~200 000 here, with its timeout never
/// firing; the timeout below turns a regression into a failure.
#[test]
fn round_trips_with_read_timeouts_never_stall() {
    with_timeout(T, || {
        let (addr, _l) = echo_server();
        let hs: Vec<_> = (0..4)
            .map(|_| {
                goro::go!(move || {
                    let s = TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                    let mut buf = [7u8; 64];
                    let start = Instant::now();
                    let mut n = 0;
                    while n < 25_000 && start.elapsed() < Duration::from_secs(20) {
                        (&s).write_all(&buf).unwrap();
                        (&s).read_exact(&mut buf)
                            .unwrap_or_else(|e| panic!("round trip {n}: {e} (a stalled read?)"));
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for h in hs {
            assert!(h.join().unwrap() > 0);
        }
    });
}

/// Polls the coroutine dump until every coroutine named in `names` is parked in
/// `[io read]` (bounded: panics after 10 s).
fn wait_parked_in_read(names: &[&str]) {
    let start = Instant::now();
    loop {
        let d = goro::debug::dump_each();
        if names
            .iter()
            .all(|n| d.lines().any(|l| l.contains(&format!("('{n}') [io read"))))
        {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "not all of {names:?} parked in io read:\n{d}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Spawns a named coroutine that runs `f` once and sends its result on `tx`.
fn named<R: Send + 'static>(
    name: &str,
    tx: &goro::chan::Sender<(String, R)>,
    f: impl FnOnce() -> R + Send + 'static,
) -> goro::JoinHandle<()> {
    let tx = tx.clone();
    let me = name.to_string();
    goro::Builder::new()
        .name(name)
        .spawn(move || tx.send((me, f())).unwrap())
        .unwrap()
}

/// Receives `n` results, failing (not hanging) if a waiter was lost.
fn results<R>(rx: &goro::chan::Receiver<(String, R)>, n: usize) -> Vec<(String, R)> {
    (0..n)
        .map(|i| {
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| panic!("result {i} of {n} never came: a lost waiter"))
        })
        .collect()
}

/// Two acceptors parked on one listener, two connections arriving together (often
/// one edge): both acceptors return. Before issue 13 the second waiter overwrote the
/// first's slot and one acceptor stayed parked for good.
#[test]
fn no_lost_waiter_two_acceptors_one_listener() {
    with_timeout(T, || {
        for _ in 0..20 {
            let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
            let addr = l.local_addr().unwrap();
            let (tx, rx) = goro::chan::channel(2);
            let hs: Vec<_> = ["acc-a", "acc-b"]
                .map(|n| {
                    let l = l.clone();
                    named(n, &tx, move || l.accept().map(|(s, _)| s).is_ok())
                })
                .into();
            wait_parked_in_read(&["acc-a", "acc-b"]);
            let c1 = std::net::TcpStream::connect(addr).unwrap();
            let c2 = std::net::TcpStream::connect(addr).unwrap();
            assert!(results(&rx, 2).into_iter().all(|(_, ok)| ok));
            hs.into_iter().for_each(|h| h.join().unwrap());
            drop((c1, c2));
        }
    });
}

/// Two readers parked on one stream, two bytes arriving in one segment: each reader
/// gets one.
#[test]
fn no_lost_waiter_two_readers_one_stream() {
    with_timeout(T, || {
        for _ in 0..20 {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let mut client = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let server = Arc::new(l.accept().unwrap().0);
            let (tx, rx) = goro::chan::channel(2);
            let hs: Vec<_> = ["rd-a", "rd-b"]
                .map(|n| {
                    let s = server.clone();
                    named(n, &tx, move || {
                        let mut b = [0u8; 1];
                        (&*s).read_exact(&mut b).unwrap();
                        b[0]
                    })
                })
                .into();
            wait_parked_in_read(&["rd-a", "rd-b"]);
            client.write_all(b"xy").unwrap();
            let mut got: Vec<u8> = results(&rx, 2).into_iter().map(|(_, b)| b).collect();
            got.sort();
            assert_eq!(got, b"xy");
            hs.into_iter().for_each(|h| h.join().unwrap());
        }
    });
}

/// Two `recv_from` parked on one UDP socket, two datagrams sent back to back: both
/// return.
#[test]
fn no_lost_waiter_two_udp_receivers() {
    with_timeout(T, || {
        for _ in 0..20 {
            let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
            let addr = sock.local_addr().unwrap();
            let (tx, rx) = goro::chan::channel(2);
            let hs: Vec<_> = ["udp-a", "udp-b"]
                .map(|n| {
                    let s = sock.clone();
                    named(n, &tx, move || {
                        let mut b = [0u8; 8];
                        let (n, _) = s.recv_from(&mut b).unwrap();
                        b[..n].to_vec()
                    })
                })
                .into();
            wait_parked_in_read(&["udp-a", "udp-b"]);
            let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            c.send_to(b"1", addr).unwrap();
            c.send_to(b"2", addr).unwrap();
            let mut got: Vec<_> = results(&rx, 2).into_iter().map(|(_, d)| d).collect();
            got.sort();
            assert_eq!(got, [b"1".to_vec(), b"2".to_vec()]);
            hs.into_iter().for_each(|h| h.join().unwrap());
        }
    });
}

/// Waiters on one socket are served in the order they queued: each datagram, sent
/// once the previous one was taken, goes to the longest-waiting receiver.
#[test]
fn waiters_on_one_socket_are_woken_in_order() {
    with_timeout(T, || {
        let sock = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let addr = sock.local_addr().unwrap();
        let (tx, rx) = goro::chan::channel(4);
        let names = ["q0", "q1", "q2", "q3"];
        let mut hs = Vec::new();
        for (i, n) in names.iter().enumerate() {
            let s = sock.clone();
            hs.push(named(n, &tx, move || {
                let mut b = [0u8; 8];
                let (n, _) = s.recv_from(&mut b).unwrap();
                b[..n].to_vec()
            }));
            wait_parked_in_read(&names[..=i]);
        }
        let c = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for (i, n) in names.iter().enumerate() {
            c.send_to(&[i as u8], addr).unwrap();
            let got = results(&rx, 1).pop().unwrap();
            assert_eq!(got, (n.to_string(), vec![i as u8]), "served out of order");
        }
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
}
