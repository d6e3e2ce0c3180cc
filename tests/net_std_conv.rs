//! Conversions between goro's sockets and std's (`from_std`, `into_std`, `OwnedFd`,
//! raw descriptors), sockets made by socket2, and the std methods goro added for them:
//! peek, `peek_from`, ttl, `take_error`, multicast membership. Every test body runs on
//! a plain thread and on a coroutine; the binary re-runs itself at 1 and 2 Ps.
//! 127.0.0.1 / ::1 only. (The std test suite's own peek, ttl and `try_clone` tests are
//! ported in tests/net_std.rs.)

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro::net::{TcpListener, TcpStream, UdpSocket, UnixDatagram, UnixListener, UnixStream};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Runs `body` on a plain thread, then on a coroutine (see `common`).
fn both(body: impl Fn() + Send + Sync + 'static) {
    common::on_thread_and_coroutine(T, body);
}

/// Whether `fd` is in non-blocking mode as its user sees it (`F_GETFL`; with the
/// `hooks`, the mode the user set, not one set underneath).
fn nonblocking(fd: &impl AsRawFd) -> bool {
    // SAFETY: F_GETFL takes no argument and only reads the descriptor's flags.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(fl >= 0, "F_GETFL: {}", std::io::Error::last_os_error());
    fl & libc::O_NONBLOCK != 0
}

/// A connected goro pair: (client, accepted).
fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (s, _) = l.accept().unwrap();
    (c, s)
}

/// A std stream handed back by `into_std` is blocking: a read with a std timeout
/// waits for it (a non-blocking one would fail at once), then gives std's
/// `WouldBlock`.
fn assert_std_read_blocks(mut s: impl Read + AsRawFd, set_timeout: impl Fn(Duration)) {
    assert!(!nonblocking(&s), "into_std left the socket non-blocking");
    let to = Duration::from_millis(30);
    set_timeout(to);
    let t = Instant::now();
    let e = s.read(&mut [0u8; 4]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
    assert!(
        t.elapsed() >= to,
        "a blocking read returned after {:?}",
        t.elapsed()
    );
}

/// TCP: from goro to std and back with bytes in flight both ways; nothing is lost,
/// the std stream blocks, the adopted one is non-blocking and parks.
#[test]
fn tcp_stream_round_trip_with_data_in_flight() {
    both(|| {
        let (mut c, s) = tcp_pair();
        c.write_all(b"before into_std").unwrap();
        let mut std_s = s.into_std().unwrap();
        let mut buf = [0u8; 15];
        std_s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"before into_std");
        c.write_all(b"while std").unwrap();
        std_s.write_all(b"from std").unwrap();
        let mut buf = [0u8; 8];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"from std");
        // Back to goro: the queued bytes are read from the adopted stream.
        let s = TcpStream::from_std(std_s).unwrap();
        assert!(nonblocking(&s));
        let mut buf = [0u8; 9];
        (&s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"while std");
        // A read that waits parks (or blocks a thread) and is woken by the data.
        let s = Arc::new(s);
        let s2 = s.clone();
        let reader = goro::go!(move || {
            let mut b = [0u8; 5];
            (&*s2).read_exact(&mut b).unwrap();
            b
        });
        goro::time::sleep(Duration::from_millis(10));
        c.write_all(b"later").unwrap();
        assert_eq!(&reader.join().unwrap(), b"later");

        let (_c, s) = tcp_pair();
        let std_s = s.into_std().unwrap();
        let r = std_s.try_clone().unwrap();
        assert_std_read_blocks(r, |t| std_s.set_read_timeout(Some(t)).unwrap());
    });
}

/// A listener to std and back keeps the connections in its backlog.
#[test]
fn tcp_listener_round_trip_keeps_the_backlog() {
    both(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"queued").unwrap();
        let std_l = l.into_std().unwrap();
        assert!(!nonblocking(&std_l));
        let l = TcpListener::from_std(std_l).unwrap();
        assert!(nonblocking(&l));
        let (mut s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        let mut buf = [0u8; 6];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"queued");
        // The std listener accepts in blocking mode (one connection is waiting).
        let _c2 = TcpStream::connect(addr).unwrap();
        let std_l = l.into_std().unwrap();
        let (_s2, _) = std_l.accept().unwrap();
    });
}

/// UDP: a queued datagram survives both conversions.
#[test]
fn udp_round_trip_keeps_queued_datagrams() {
    both(|| {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        a.send_to(b"one", ba).unwrap();
        let std_b = b.into_std().unwrap();
        assert!(!nonblocking(&std_b));
        a.send_to(b"two", ba).unwrap();
        let b = UdpSocket::from_std(std_b).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(b.recv_from(&mut buf).unwrap(), (3, aa));
        assert_eq!(&buf[..3], b"one");
        assert_eq!(b.recv_from(&mut buf).unwrap(), (3, aa));
        assert_eq!(&buf[..3], b"two");
        let std_b = b.into_std().unwrap();
        std_b
            .set_read_timeout(Some(Duration::from_millis(30)))
            .unwrap();
        let t = Instant::now();
        let e = std_b.recv_from(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        assert!(t.elapsed() >= Duration::from_millis(30));
    });
}

/// Unix streams and datagrams: the same round trips.
#[test]
fn unix_round_trips() {
    both(|| {
        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"in flight").unwrap();
        let mut std_b = b.into_std().unwrap();
        let mut buf = [0u8; 2];
        std_b.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"in");
        let b = UnixStream::from_std(std_b).unwrap();
        let mut rest = [0u8; 7];
        (&b).read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b" flight");
        let std_b = b.into_std().unwrap();
        let r = std_b.try_clone().unwrap();
        assert_std_read_blocks(r, |t| std_b.set_read_timeout(Some(t)).unwrap());

        let (x, y) = UnixDatagram::pair().unwrap();
        x.send(b"dgram").unwrap();
        let y = UnixDatagram::from_std(y.into_std().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(y.recv(&mut buf).unwrap(), 5);

        let dir = std::env::temp_dir().join(format!(
            "goro-net-std-conv-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("l.sock");
        let l = UnixListener::bind(&path).unwrap();
        let _c = UnixStream::connect(&path).unwrap();
        let std_l = l.into_std().unwrap();
        assert!(!nonblocking(&std_l));
        let l = UnixListener::from_std(std_l).unwrap();
        l.accept().unwrap();
        drop(l);
        std::fs::remove_dir_all(&dir).unwrap();
    });
}

/// `OwnedFd` out and `TryFrom<OwnedFd>` back, and raw descriptors both ways, with
/// bytes in flight; the descriptor number is kept.
#[test]
fn owned_and_raw_fd_round_trips() {
    both(|| {
        let (mut c, s) = tcp_pair();
        let n = s.as_raw_fd();
        c.write_all(b"abc").unwrap();
        let fd = OwnedFd::from(s);
        assert_eq!(fd.as_raw_fd(), n);
        assert!(
            !nonblocking(&fd),
            "OwnedFd::from left the socket non-blocking"
        );
        let s = TcpStream::try_from(fd).unwrap();
        assert_eq!(s.as_raw_fd(), n);
        let raw = s.into_raw_fd();
        assert_eq!(raw, n);
        // SAFETY: `raw` was just released by `into_raw_fd` and nothing else owns it.
        let mut s = unsafe { TcpStream::from_raw_fd(raw) };
        let mut buf = [0u8; 3];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"abc");

        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = u.local_addr().unwrap();
        u.send_to(b"x", addr).unwrap();
        let u = UdpSocket::try_from(OwnedFd::from(u)).unwrap();
        assert_eq!(u.recv_from(&mut [0u8; 4]).unwrap(), (1, addr));
        let l = TcpListener::try_from(OwnedFd::from(TcpListener::bind("127.0.0.1:0").unwrap()))
            .unwrap();
        assert!(l.local_addr().unwrap().port() != 0);
        let (a, b) = UnixStream::pair().unwrap();
        let a = UnixStream::try_from(OwnedFd::from(a)).unwrap();
        (&b).write_all(b"u").unwrap();
        assert_eq!((&a).read(&mut [0u8; 4]).unwrap(), 1);
        let (x, _y) = UnixDatagram::pair().unwrap();
        // SAFETY: as above.
        let x = unsafe { UnixDatagram::from_raw_fd(x.into_raw_fd()) };
        assert!(x.local_addr().unwrap().is_unnamed());
    });
}

/// A descriptor the poller refuses (`/dev/null` has no poll support: EPERM) is an
/// `Err` from `TryFrom<OwnedFd>` and `from_std`, and a panic naming the type and the
/// error from `FromRawFd`, whose signature cannot fail.
#[test]
fn unpollable_descriptor_is_an_error_or_a_named_panic() {
    both(|| {
        let null = || OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let e = TcpStream::try_from(null()).expect_err("adopted /dev/null");
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        let e = UdpSocket::from_std(null().into()).expect_err("adopted /dev/null");
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        let raw = null().into_raw_fd();
        let p = std::panic::catch_unwind(|| {
            // SAFETY: `raw` is an open descriptor owned by nothing else; the call takes
            // it over (and closes it when the adoption fails).
            drop(unsafe { UnixStream::from_raw_fd(raw) })
        })
        .expect_err("from_raw_fd adopted /dev/null");
        let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            msg.contains("UnixStream::from_raw_fd") && msg.contains("could not be adopted"),
            "panic message: {msg:?}"
        );
    });
}

/// Sockets made by socket2 (options set before goro sees them) adopted through
/// `from_std` and `TryFrom<OwnedFd>`.
#[test]
fn socket2_sockets_adopted() {
    use socket2::{Domain, Protocol, SockAddr, Socket, Type};
    both(|| {
        let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).unwrap();
        sock.set_reuse_address(true).unwrap();
        sock.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
            .unwrap();
        sock.listen(16).unwrap();
        let l = TcpListener::from_std(sock.into()).unwrap();
        let addr = l.local_addr().unwrap();
        let c = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        c.set_nodelay(true).unwrap();
        c.connect(&SockAddr::from(addr)).unwrap();
        let mut c = TcpStream::try_from(OwnedFd::from(c)).unwrap();
        assert!(c.nodelay().unwrap(), "an option set by socket2 was lost");
        let (mut s, _) = l.accept().unwrap();
        c.write_all(b"s2").unwrap();
        let mut buf = [0u8; 2];
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"s2");

        let u = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
        u.bind(&SockAddr::from(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))))
            .unwrap();
        let u = UdpSocket::from_std(u.into()).unwrap();
        let ua = u.local_addr().unwrap();
        u.send_to(b"d", ua).unwrap();
        assert_eq!(u.recv_from(&mut [0u8; 2]).unwrap(), (1, ua));
    });
}

/// A peek that finds nothing waits like a read, and takes nothing: the read after it
/// sees the same bytes; with a read timeout it times out like a read.
#[test]
fn peek_waits_and_does_not_consume() {
    both(|| {
        let (mut c, s) = tcp_pair();
        let s = Arc::new(s);
        let s2 = s.clone();
        let peeker = goro::go!(move || {
            let mut b = [0u8; 16];
            let n = s2.peek(&mut b).unwrap();
            b[..n].to_vec()
        });
        goro::time::sleep(Duration::from_millis(20));
        c.write_all(b"peeked").unwrap();
        let got = peeker.join().unwrap();
        assert!(!got.is_empty() && b"peeked".starts_with(&got), "{got:?}");
        let mut buf = [0u8; 6];
        (&*s).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"peeked");
        s.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        let e = s.peek(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        // After a short read (the drained hint), a peek still sees new bytes.
        c.write_all(b"ab").unwrap();
        let mut big = [0u8; 64];
        assert_eq!((&*s).read(&mut big).unwrap(), 2);
        c.write_all(b"cd").unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        assert_eq!(s.peek(&mut big).unwrap(), 2);
        assert_eq!((&*s).read(&mut big).unwrap(), 2);
        assert_eq!(&big[..2], b"cd");

        let (a, b) = UnixStream::pair().unwrap();
        (&a).write_all(b"unix").unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.peek(&mut buf).unwrap(), 4);
        assert_eq!(b.peek(&mut buf).unwrap(), 4);
        (&b).read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"unix");
    });
}

/// `peek_from` waits for a datagram, reports its sender, and leaves it queued.
#[test]
fn udp_peek_from_waits_and_leaves_the_datagram() {
    both(|| {
        let a = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
        let a2 = a.clone();
        let peeker = goro::go!(move || {
            let mut buf = [0u8; 16];
            let (n, from) = a2.peek_from(&mut buf).unwrap();
            (buf[..n].to_vec(), from)
        });
        goro::time::sleep(Duration::from_millis(20));
        b.send_to(b"datagram", aa).unwrap();
        assert_eq!(peeker.join().unwrap(), (b"datagram".to_vec(), ba));
        let mut buf = [0u8; 16];
        assert_eq!(a.peek_from(&mut buf).unwrap(), (8, ba));
        assert_eq!(a.recv_from(&mut buf).unwrap(), (8, ba));
        a.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        let e = a.peek_from(&mut buf).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
    });
}

/// ttl, broadcast and the multicast options set and read back; `take_error` is None
/// on a healthy socket.
#[test]
fn socket_options_set_and_get() {
    both(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_ttl(42).unwrap();
        assert_eq!(l.ttl().unwrap(), 42);
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        c.set_ttl(17).unwrap();
        assert_eq!(c.ttl().unwrap(), 17);
        assert!(c.take_error().unwrap().is_none());
        assert!(l.take_error().unwrap().is_none());

        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_ttl(99).unwrap();
        assert_eq!(u.ttl().unwrap(), 99);
        assert!(!u.broadcast().unwrap());
        u.set_broadcast(true).unwrap();
        assert!(u.broadcast().unwrap());
        u.set_multicast_ttl_v4(5).unwrap();
        assert_eq!(u.multicast_ttl_v4().unwrap(), 5);
        u.set_multicast_loop_v4(false).unwrap();
        assert!(!u.multicast_loop_v4().unwrap());
        u.set_multicast_loop_v4(true).unwrap();
        assert!(u.multicast_loop_v4().unwrap());
        assert!(u.take_error().unwrap().is_none());
        let e = u.set_ttl(0).err();
        // Linux refuses a TTL of 0 (valid: 1..=255, or -1 for the default).
        assert_eq!(e.and_then(|e| e.raw_os_error()), Some(libc::EINVAL));

        if let Ok(u6) = UdpSocket::bind("[::1]:0") {
            u6.set_multicast_loop_v6(false).unwrap();
            assert!(!u6.multicast_loop_v6().unwrap());
        } else {
            println!("note: no IPv6 loopback: the v6 multicast-loop half is skipped");
        }
    });
}

/// A connected UDP socket's ICMP error shows in `take_error` once, then it is None.
#[test]
fn udp_take_error_reports_an_icmp_error_once() {
    both(|| {
        // A port nobody listens on: bind one, note it, close it.
        let dead = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.connect(dead).unwrap();
        u.send(b"anyone?").unwrap();
        let mut err = None;
        common::wait_until("the ICMP port unreachable", || {
            err = u.take_error().unwrap();
            err.is_some()
        });
        assert_eq!(err.unwrap().kind(), ErrorKind::ConnectionRefused);
        assert!(u.take_error().unwrap().is_none());
    });
}

/// Joins and leaves a multicast group on the loopback interface (v4 by its address
/// 127.0.0.1, v6 by the index of `lo`); the kernel's membership table shows the join,
/// and leaving a group not joined is EADDRNOTAVAIL, as with std.
#[test]
fn multicast_join_and_leave_on_loopback() {
    both(|| {
        let pid = std::process::id();
        let group = Ipv4Addr::new(239, 255, (pid >> 8) as u8, pid as u8);
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        match u.join_multicast_v4(&group, &Ipv4Addr::LOCALHOST) {
            Ok(()) => {
                // /proc/net/igmp lists groups as the address's bytes in host order, hex.
                let hex = format!("{:08X}", u32::from_ne_bytes(group.octets()));
                let igmp = std::fs::read_to_string("/proc/net/igmp").unwrap();
                assert!(
                    igmp.contains(&hex),
                    "{group} ({hex}) not in /proc/net/igmp:\n{igmp}"
                );
                u.leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST).unwrap();
            }
            // A kernel without multicast on lo refuses the join with ENODEV; that is
            // the only refusal accepted.
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => {
                println!("note: the kernel refused multicast on lo: {e}")
            }
            Err(e) => panic!("join_multicast_v4 on 127.0.0.1: {e}"),
        }
        let e = u
            .leave_multicast_v4(&group, &Ipv4Addr::LOCALHOST)
            .unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{e}");

        let Ok(u6) = UdpSocket::bind("[::1]:0") else {
            println!("note: no IPv6 loopback: the v6 half is skipped");
            return;
        };
        // SAFETY: a NUL-terminated name; if_nametoindex only reads it.
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        assert_ne!(lo, 0, "no interface lo");
        let group6 = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0x1f, pid as u16);
        u6.join_multicast_v6(&group6, lo).unwrap();
        u6.leave_multicast_v6(&group6, lo).unwrap();
        let e = u6.leave_multicast_v6(&group6, lo).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL), "{e}");
    });
}

/// With the `hooks`, a std stream a coroutine has blocked on is on the poller already
/// (the hooks registered it); `from_std` still adopts it (under a duplicate
/// descriptor, the original closed, which ends the hooks' registration), and the
/// adopted stream parks and reads what was queued. `into_std` then gives a stream the
/// hooks take over again.
#[cfg(feature = "hooks")]
#[test]
fn from_std_after_the_hooks_registered_the_socket() {
    common::with_timeout(T, || {
        goro::go!(|| {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            let (mut s, _) = l.accept().unwrap();
            // A std read that parks: the hooks register `s` with the poller.
            let writer = goro::go!(move || {
                goro::time::sleep(Duration::from_millis(20));
                c.write_all(b"1").unwrap();
                goro::time::sleep(Duration::from_millis(20));
                c.write_all(b"23").unwrap();
                c
            });
            let mut b = [0u8; 1];
            s.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"1");
            let n = s.as_raw_fd();
            let s = TcpStream::from_std(s).unwrap();
            // The duplicate: proof the poller held the original.
            assert_ne!(s.as_raw_fd(), n, "adopted under the hooks' registration");
            let mut b = [0u8; 2];
            (&s).read_exact(&mut b).unwrap();
            assert_eq!(&b, b"23");
            let mut c = writer.join().unwrap();
            let mut std_s = s.into_std().unwrap();
            c.write_all(b"4").unwrap();
            let mut b = [0u8; 1];
            std_s.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"4");
        })
        .join()
        .unwrap();
    });
}

/// After a connected UDP socket's ICMP error (an error edge on the poller, reported
/// once), a receive that finds nothing waits: it times out at its deadline, and a
/// datagram that comes later wakes it. (The error edge used to leave the slot ready
/// for good: every wait returned at once, a busy loop past the deadline.)
#[test]
fn udp_receive_after_an_icmp_error_waits() {
    both(|| {
        let dead = std::net::UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let u = Arc::new(UdpSocket::bind("127.0.0.1:0").unwrap());
        u.connect(dead).unwrap();
        u.send(b"anyone?").unwrap();
        // Wait for the ICMP error without taking it (poll(2) leaves it pending), then
        // give goro's poller a moment to see its edge: a receive that took the error
        // first would leave the poller no edge to see.
        common::wait_until("the ICMP error", || {
            let mut pfd = libc::pollfd {
                fd: u.as_raw_fd(),
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd, no timeout.
            let n = unsafe { libc::poll(&mut pfd, 1, 0) };
            n == 1 && pfd.revents & libc::POLLERR != 0
        });
        goro::time::sleep(Duration::from_millis(20));
        let e = u.recv(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ConnectionRefused, "{e}");
        u.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let t = Instant::now();
        let e = u.recv(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TimedOut, "{e}");
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        // A datagram from the peer wakes a parked receive.
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        u.connect(peer.local_addr().unwrap()).unwrap();
        u.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let u2 = u.clone();
        let receiver = goro::go!(move || u2.recv(&mut [0u8; 4]).unwrap());
        goro::time::sleep(Duration::from_millis(20));
        peer.send_to(b"yes", u.local_addr().unwrap()).unwrap();
        assert_eq!(receiver.join().unwrap(), 3);
    });
}
