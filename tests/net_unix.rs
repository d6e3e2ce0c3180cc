//! Unix domain sockets on the netpoller (`goro::net::{UnixListener, UnixStream,
//! UnixDatagram}`): echo over a path and over `pair`, datagrams, many parked waiters,
//! plain threads, timeouts, close, hang-up, `try_clone`, addresses (paths, abstract
//! names, unnamed peers), a full backlog. Each test body runs on a plain thread and on
//! a coroutine; the binary re-runs itself at 1 and 2 Ps. Socket files live in a
//! per-test directory under `std::env::temp_dir()`, removed afterwards.

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::linux::net::SocketAddrExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::net::unix::SocketAddr;
use goro::net::{UnixDatagram, UnixListener, UnixStream};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// A fresh directory for one test's socket files, removed (with them) on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(test: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "goro-net-unix-{}-{test}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `body` on a plain thread, then on a coroutine (see `common`).
fn both(body: impl Fn() + Send + Sync + 'static) {
    common::on_thread_and_coroutine(T, body);
}

/// Echoes every connection until EOF, one coroutine per connection.
fn echo_server(l: UnixListener) -> Arc<UnixListener> {
    let l = Arc::new(l);
    let l2 = l.clone();
    goro::go!(move || {
        for s in l2.incoming() {
            let Ok(s) = s else { return };
            goro::go!(move || echo(s));
        }
    });
    l
}

fn echo(mut s: UnixStream) {
    let mut buf = [0u8; 4096];
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
}

/// Writes `n` bytes of a pattern from a second coroutine while reading them back, and
/// checks every byte.
fn round_trip(s: UnixStream, n: usize) {
    let payload: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
    let s = Arc::new(s);
    let w = s.clone();
    let sent = payload.clone();
    let writer = goro::go!(move || {
        (&*w).write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut got = Vec::new();
    (&*s).read_to_end(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == payload, "echoed bytes differ ({} of {n})", got.len());
}

/// Echo over a path socket: small and large (above the socket buffers) payloads.
#[test]
fn echo_over_a_path() {
    both(|| {
        let dir = TempDir::new("echo");
        let path = dir.path("echo.sock");
        let l = echo_server(UnixListener::bind(&path).unwrap());
        assert_eq!(l.local_addr().unwrap().as_pathname(), Some(path.as_path()));
        for n in [1, 1000, 1 << 20] {
            let s = UnixStream::connect(&path).unwrap();
            assert_eq!(s.peer_addr().unwrap().as_pathname(), Some(path.as_path()));
            assert!(s.local_addr().unwrap().is_unnamed());
            round_trip(s, n);
        }
        l.close();
    });
}

/// Echo over `pair()`, and an accepted peer's address is unnamed.
#[test]
fn echo_over_a_pair_and_unnamed_peers() {
    both(|| {
        let (a, b) = UnixStream::pair().unwrap();
        goro::go!(move || echo(b));
        round_trip(a, 300_000);

        let dir = TempDir::new("unnamed");
        let path = dir.path("l.sock");
        let l = UnixListener::bind(&path).unwrap();
        let _c = UnixStream::connect(&path).unwrap();
        let (_s, peer) = l.accept().unwrap();
        assert!(peer.is_unnamed(), "peer {peer:?}");
    });
}

/// Abstract names (Linux) through `bind_addr` / `connect_addr` / `send_to_addr`.
#[test]
fn abstract_names() {
    both(|| {
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "goro-net-unix-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let l = UnixListener::bind_addr(&addr).unwrap();
        assert_eq!(
            l.local_addr().unwrap().as_abstract_name(),
            Some(name.as_bytes())
        );
        let mut c = UnixStream::connect_addr(&addr).unwrap();
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"abstract").unwrap();
        let mut buf = [0u8; 8];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"abstract");

        let dname = format!("{name}-dgram");
        let daddr = SocketAddr::from_abstract_name(dname.as_bytes()).unwrap();
        let d = UnixDatagram::bind_addr(&daddr).unwrap();
        let sender = UnixDatagram::bind_addr(
            &SocketAddr::from_abstract_name(format!("{name}-sender").as_bytes()).unwrap(),
        )
        .unwrap();
        assert_eq!(sender.send_to_addr(b"to abstract", &daddr).unwrap(), 11);
        let mut buf = [0u8; 32];
        let (n, from) = d.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"to abstract");
        assert_eq!(
            from.as_abstract_name(),
            Some(format!("{name}-sender").as_bytes())
        );
        sender.connect_addr(&daddr).unwrap();
        sender.send(b"connected").unwrap();
        assert_eq!(d.recv(&mut buf).unwrap(), 9);
    });
}

/// Datagrams: `send_to` / `recv_from` between path sockets, an unbound sender,
/// connected `send` / `recv`, `pair`, and peek.
#[test]
fn datagrams() {
    both(|| {
        let dir = TempDir::new("dgram");
        let (pa, pb) = (dir.path("a.sock"), dir.path("b.sock"));
        let a = UnixDatagram::bind(&pa).unwrap();
        let b = UnixDatagram::bind(&pb).unwrap();
        for i in 0..20u8 {
            assert_eq!(a.send_to(&[i; 3], &pb).unwrap(), 3);
            let mut buf = [0u8; 8];
            let (n, from) = b.recv_from(&mut buf).unwrap();
            assert_eq!(&buf[..n], &[i; 3]);
            assert_eq!(from.as_pathname(), Some(pa.as_path()));
        }
        // An unbound sender's address is unnamed.
        let u = UnixDatagram::unbound().unwrap();
        assert!(u.local_addr().unwrap().is_unnamed());
        u.send_to(b"anon", &pb).unwrap();
        let mut buf = [0u8; 8];
        let (n, from) = b.recv_from(&mut buf).unwrap();
        assert_eq!((&buf[..n], from.is_unnamed()), (&b"anon"[..], true));
        // Connected.
        a.connect(&pb).unwrap();
        b.connect(&pa).unwrap();
        assert_eq!(a.peer_addr().unwrap().as_pathname(), Some(pb.as_path()));
        a.send(b"hello").unwrap();
        assert_eq!(b.peek(&mut buf).unwrap(), 5);
        let (n, from) = b.peek_from(&mut buf).unwrap();
        assert_eq!((n, from.as_pathname()), (5, Some(pa.as_path())));
        assert_eq!(b.recv(&mut buf).unwrap(), 5);
        assert_eq!(&buf[..5], b"hello");
        // A pair.
        let (x, y) = UnixDatagram::pair().unwrap();
        x.send(b"pair").unwrap();
        assert_eq!(y.recv(&mut buf).unwrap(), 4);
        // Sending to nobody is an error, not a hang.
        let e = u.send_to(b"x", dir.path("nobody.sock")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
    });
}

/// A receive parks while nothing is queued, and the datagram that arrives later wakes
/// it; a peek parks the same way and takes nothing.
#[test]
fn receive_and_peek_wait_for_the_datagram() {
    both(|| {
        let (x, y) = UnixDatagram::pair().unwrap();
        let y = Arc::new(y);
        let y2 = y.clone();
        let peeker = goro::go!(move || {
            let mut buf = [0u8; 16];
            let n = y2.peek(&mut buf).unwrap();
            buf[..n].to_vec()
        });
        goro::time::sleep(Duration::from_millis(20));
        x.send(b"later").unwrap();
        assert_eq!(peeker.join().unwrap(), b"later");
        let mut buf = [0u8; 16];
        assert_eq!(y.recv(&mut buf).unwrap(), 5);
    });
}

/// 200 coroutines parked in reads and one in accept do not stop the others: each
/// pair's reader is served as its writer writes, in reverse order of parking.
#[test]
fn many_parked_waiters_do_not_block_the_rest() {
    with_timeout(T, || {
        goro::go!(|| {
            let dir = TempDir::new("many");
            let path = dir.path("l.sock");
            let l = Arc::new(UnixListener::bind(&path).unwrap());
            let l2 = l.clone();
            let acceptor = goro::go!(move || l2.accept().map(|_| ()));
            let mut readers = Vec::new();
            let mut writers = Vec::new();
            for i in 0..200u32 {
                let (a, mut b) = UnixStream::pair().unwrap();
                readers.push(goro::go!(move || {
                    let mut buf = [0u8; 4];
                    b.read_exact(&mut buf).unwrap();
                    assert_eq!(u32::from_le_bytes(buf), i);
                }));
                writers.push(a);
            }
            goro::time::sleep(Duration::from_millis(10));
            for (i, mut a) in writers.into_iter().enumerate().rev() {
                a.write_all(&(i as u32).to_le_bytes()).unwrap();
            }
            readers.into_iter().for_each(|r| r.join().unwrap());
            // The acceptor was parked all along; a connection wakes it.
            let _c = UnixStream::connect(&path).unwrap();
            acceptor.join().unwrap().unwrap();
        })
        .join()
        .unwrap();
    });
}

/// Plain threads as clients of a coroutine server, and a thread accepting from a
/// coroutine client.
#[test]
fn plain_threads_as_callers() {
    with_timeout(T, || {
        let dir = TempDir::new("threads");
        let path = dir.path("echo.sock");
        let l = echo_server(UnixListener::bind(&path).unwrap());
        let threads: Vec<_> = (0..6u32)
            .map(|i| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut s = UnixStream::connect(&path).unwrap();
                    for j in 0..100u32 {
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
        l.close();

        let path2 = dir.path("thread.sock");
        let l = UnixListener::bind(&path2).unwrap();
        let c = goro::go!(move || {
            UnixStream::connect(&path2)
                .unwrap()
                .write_all(b"from a coroutine")
                .unwrap();
        });
        let (mut s, _) = l.accept().unwrap();
        let mut got = String::new();
        s.read_to_string(&mut got).unwrap();
        assert_eq!(got, "from a coroutine");
        c.join().unwrap();
    });
}

/// Read and write timeouts give `TimedOut` after about the timeout and leave the
/// socket usable; a zero timeout is refused.
#[test]
fn timeouts_fire_and_leave_the_socket_usable() {
    both(|| {
        let to = Duration::from_millis(40);
        let (mut a, b) = UnixStream::pair().unwrap();
        a.set_read_timeout(Some(to)).unwrap();
        assert_eq!(a.read_timeout().unwrap(), Some(to));
        let t = Instant::now();
        let e = a.read(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() >= to);
        (&b).write_all(b"ok").unwrap();
        let mut buf = [0u8; 2];
        a.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"ok");

        // A write timeout: fill the socket until a write waits, then times out.
        a.set_write_timeout(Some(to)).unwrap();
        assert_eq!(a.write_timeout().unwrap(), Some(to));
        let chunk = [0u8; 64 * 1024];
        let mut sent = 0usize;
        let e = loop {
            match a.write(&chunk) {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
            assert!(sent < 1 << 30, "a write never waited");
        };
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        // Still usable: drain what was sent and write again.
        let mut drained = 0usize;
        let mut buf = vec![0u8; 64 * 1024];
        while drained < sent {
            drained += (&b).read(&mut buf).unwrap();
        }
        a.write_all(b"again").unwrap();
        let mut five = [0u8; 5];
        (&b).read_exact(&mut five).unwrap();
        assert_eq!(&five, b"again");
        assert_eq!(
            a.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(),
            ErrorKind::InvalidInput
        );

        let (x, _y) = UnixDatagram::pair().unwrap();
        x.set_read_timeout(Some(to)).unwrap();
        let e = x.recv(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    });
}

/// `close` wakes a parked reader, acceptor and datagram receiver with an error.
#[test]
fn close_wakes_a_waiter_with_an_error() {
    both(|| {
        let (a, _b) = UnixStream::pair().unwrap();
        let a = Arc::new(a);
        let a2 = a.clone();
        let reader = goro::go!(move || (&*a2).read(&mut [0u8; 4]));
        goro::time::sleep(Duration::from_millis(20));
        a.close();
        let r = reader.join().unwrap();
        assert!(r.is_err(), "a read on a closed stream gave {r:?}");
        assert!((&*a).write(b"x").is_err());

        let dir = TempDir::new("close");
        let l = Arc::new(UnixListener::bind(dir.path("l.sock")).unwrap());
        let l2 = l.clone();
        let acceptor = goro::go!(move || l2.accept().map(|_| ()));
        goro::time::sleep(Duration::from_millis(20));
        l.close();
        assert!(acceptor.join().unwrap().is_err());

        let (d, _e) = UnixDatagram::pair().unwrap();
        let d = Arc::new(d);
        let d2 = d.clone();
        let receiver = goro::go!(move || d2.recv(&mut [0u8; 4]));
        goro::time::sleep(Duration::from_millis(20));
        d.close();
        assert!(receiver.join().unwrap().is_err());
    });
}

/// The peer's drop or write shutdown is EOF for a parked reader and for later reads.
#[test]
fn peer_hangup_is_eof() {
    both(|| {
        let (a, b) = UnixStream::pair().unwrap();
        let reader = goro::go!(move || {
            let mut b = b;
            let mut got = Vec::new();
            b.read_to_end(&mut got).unwrap();
            assert_eq!(b.read(&mut [0u8; 4]).unwrap(), 0);
            got
        });
        goro::time::sleep(Duration::from_millis(20));
        (&a).write_all(b"last words").unwrap();
        drop(a);
        assert_eq!(reader.join().unwrap(), b"last words");

        let (mut a, b) = UnixStream::pair().unwrap();
        b.shutdown(Shutdown::Write).unwrap();
        assert_eq!(a.read(&mut [0u8; 4]).unwrap(), 0);
        assert_eq!(a.peek(&mut [0u8; 4]).unwrap(), 0);
    });
}

/// A stream's `try_clone` reads in one coroutine while the original writes in another.
#[test]
fn try_clone_reads_and_writes_in_two_coroutines() {
    both(|| {
        let (a, b) = UnixStream::pair().unwrap();
        goro::go!(move || echo(b));
        let mut r = a.try_clone().unwrap();
        let mut w = a;
        let n = 200_000usize;
        let writer = goro::go!(move || {
            let data: Vec<u8> = (0..n).map(|i| i as u8).collect();
            w.write_all(&data).unwrap();
            w.shutdown(Shutdown::Write).unwrap();
        });
        let reader = goro::go!(move || {
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            got
        });
        writer.join().unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got.len(), n);
        assert!(got.iter().enumerate().all(|(i, &b)| b == i as u8));

        let (x, y) = UnixDatagram::pair().unwrap();
        let x2 = x.try_clone().unwrap();
        x2.send(b"via clone").unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(y.recv(&mut buf).unwrap(), 9);
        drop(x);
    });
}

/// Binding where a file is already is `AddrInUse`, for listeners and datagrams; a
/// missing socket is `NotFound`; an over-long path is `InvalidInput`.
#[test]
fn bind_and_connect_errors() {
    both(|| {
        let dir = TempDir::new("errors");
        let path = dir.path("taken.sock");
        let _l = UnixListener::bind(&path).unwrap();
        let e = UnixListener::bind(&path).expect_err("bound a taken path");
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        let e = UnixDatagram::bind(&path).expect_err("bound a taken path");
        assert_eq!(e.kind(), ErrorKind::AddrInUse, "{e}");
        let e = UnixStream::connect(dir.path("missing.sock")).expect_err("connected to nothing");
        assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
        let long = dir.path(&"x".repeat(200));
        let e = UnixStream::connect(&long).expect_err("over-long path");
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
        let e = UnixListener::bind(&long).expect_err("over-long path");
        assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    });
}

/// A connect to a listener whose backlog is full waits until an accept makes room
/// (std's blocking connect waits in the kernel), instead of failing with
/// `WouldBlock`. The listener is made by socket2 with a backlog of 0 (Linux then
/// queues one connection) and adopted with `from_std`.
#[test]
fn connect_waits_for_room_in_the_backlog() {
    both(|| {
        let dir = TempDir::new("backlog");
        let path = dir.path("full.sock");
        let sock =
            socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None).unwrap();
        sock.bind(&socket2::SockAddr::unix(&path).unwrap()).unwrap();
        sock.listen(0).unwrap();
        let l = UnixListener::from_std(std::os::fd::OwnedFd::from(sock).into()).unwrap();
        // Fill the backlog (how many fit is the kernel's business: connect until one
        // waits, which the coroutine below reports by not finishing).
        let mut queued = Vec::new();
        let waiting = loop {
            let p = path.clone();
            let (tx, rx) = goro::chan::channel(1);
            let h = goro::go!(move || tx.send(UnixStream::connect(&p)).unwrap());
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(s) => {
                    queued.push(s.unwrap());
                    h.join().unwrap();
                    assert!(queued.len() < 64, "the backlog never filled");
                }
                Err(_) => break (h, rx),
            }
        };
        // An accept makes room: the waiting connect finishes.
        let _first = l.accept().unwrap();
        let s = waiting.1.recv_timeout(Duration::from_secs(10)).unwrap();
        s.unwrap();
        waiting.0.join().unwrap();
    });
}

/// `Debug` shows std's fields.
#[test]
fn debug_shows_std_fields() {
    both(|| {
        use std::os::fd::AsRawFd;
        let (a, _b) = UnixStream::pair().unwrap();
        let s = format!("{a:?}");
        assert!(s.starts_with("UnixStream {"), "{s}");
        assert!(s.contains(&format!("fd: {}", a.as_raw_fd())), "{s}");
    });
}
