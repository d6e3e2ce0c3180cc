//! `goro::io::PollFd`: pipes and eventfds on the netpoller, from coroutines and plain
//! threads; a parked reader does not hold up its P; regular files are refused;
//! `into_inner` hands back a usable, blocking descriptor; timeouts; a hang-up wakes a
//! parked reader.

mod common;

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::with_timeout;
use goro::io::PollFd;

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// A pipe as two `File`s, blocking (as `pipe(2)` makes them).
fn pipe() -> (File, File) {
    let mut fds = [0; 2];
    // SAFETY: pipe2 with a valid two-element array.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: pipe2 just made both descriptors, which nothing else owns.
    unsafe {
        (
            File::from(OwnedFd::from_raw_fd(fds[0])),
            File::from(OwnedFd::from_raw_fd(fds[1])),
        )
    }
}

fn eventfd() -> OwnedFd {
    // SAFETY: eventfd has no memory arguments.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: eventfd just made `fd`, which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

fn is_nonblocking(fd: &impl AsRawFd) -> bool {
    // SAFETY: F_GETFL touches no memory.
    let fl = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) };
    assert!(fl >= 0);
    fl & libc::O_NONBLOCK != 0
}

/// An eventfd read: the counter, taken (`WouldBlock` at 0).
fn ev_read(fd: &OwnedFd) -> std::io::Result<u64> {
    let mut v = [0u8; 8];
    // SAFETY: reads at most 8 bytes into `v`.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(u64::from_ne_bytes(v))
}

fn ev_write(fd: &OwnedFd, add: u64) -> std::io::Result<()> {
    let b = add.to_ne_bytes();
    // SAFETY: writes the 8 bytes of `b`.
    let n = unsafe { libc::write(fd.as_raw_fd(), b.as_ptr().cast(), 8) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Starts `f` on a plain thread or on a coroutine; the closure returned joins it.
fn start<R: Send + 'static>(
    on_thread: bool,
    f: impl FnOnce() -> R + Send + 'static,
) -> Box<dyn FnOnce() -> R> {
    if on_thread {
        let h = std::thread::spawn(f);
        Box::new(move || h.join().unwrap())
    } else {
        let h = goro::go!(f);
        Box::new(move || h.join().unwrap())
    }
}

/// Sends 4 MiB through a pipe (64 KiB of kernel buffer, so both ends wait many times),
/// writer and reader each on `on_thread` (a plain thread) or a coroutine; every byte
/// is checked.
fn pipe_transfer(reader_on_thread: bool, writer_on_thread: bool) {
    with_timeout(T, move || {
        let (r, w) = pipe();
        let mut r = PollFd::new(r).unwrap();
        let mut w = PollFd::new(w).unwrap();
        const LEN: usize = 4 << 20;
        let data: Vec<u8> = (0..LEN).map(|i| (i * 7 + i / 4096) as u8).collect();
        let expect = data.clone();
        let write = move || {
            for chunk in data.chunks(100_000) {
                w.write_all(chunk).unwrap();
            }
            // Dropped here: the reader sees end of file.
        };
        let read = move || {
            let mut got = Vec::with_capacity(LEN);
            r.read_to_end(&mut got).unwrap();
            got
        };
        let wj = start(writer_on_thread, write);
        let got = start(reader_on_thread, read)();
        wj();
        assert_eq!(got.len(), expect.len());
        assert!(got == expect, "bytes differ");
    });
}

#[test]
fn pipe_coroutine_to_coroutine() {
    pipe_transfer(false, false);
}

#[test]
fn pipe_thread_to_coroutine() {
    pipe_transfer(false, true);
}

#[test]
fn pipe_coroutine_to_thread() {
    pipe_transfer(true, false);
}

#[test]
fn pipe_thread_to_thread() {
    pipe_transfer(true, true);
}

/// `read_with` / `write_with` on an eventfd: 200 increments from writers (coroutines
/// and threads) all arrive at readers (coroutines and threads) waiting on one fd.
#[test]
fn eventfd_read_with_write_with_many_waiters() {
    with_timeout(T, || {
        let ev = Arc::new(PollFd::new(eventfd()).unwrap());
        let total = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let mut readers = Vec::new();
        for i in 0..4 {
            let (ev, total, stop) = (ev.clone(), total.clone(), stop.clone());
            let body = move || {
                ev.set_read_timeout(Some(Duration::from_millis(20)))
                    .unwrap();
                let start = Instant::now();
                while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
                    match ev.read_with(ev_read) {
                        Ok(n) => {
                            total.fetch_add(n as usize, Ordering::SeqCst);
                        }
                        Err(e) if e.kind() == ErrorKind::TimedOut => {}
                        Err(e) => panic!("read_with: {e}"),
                    }
                }
            };
            readers.push(start(i % 2 == 1, body));
        }
        let mut writers = Vec::new();
        for i in 0..10 {
            let ev = ev.clone();
            let body = move || {
                for _ in 0..20 {
                    ev.write_with(|fd| ev_write(fd, 1)).unwrap();
                    goro::time::sleep(Duration::from_micros(200));
                }
            };
            writers.push(start(i % 2 == 1, body));
        }
        for w in writers {
            w();
        }
        common::wait_until("every increment read", || {
            total.load(Ordering::SeqCst) == 200
        });
        stop.store(true, Ordering::SeqCst);
        for r in readers {
            r();
        }
        assert_eq!(total.load(Ordering::SeqCst), 200);
    });
}

/// `readable` and `writable`: a pipe is writable at once, readable only after a write.
#[test]
fn readable_and_writable() {
    with_timeout(T, || {
        let (r, w) = pipe();
        let r = Arc::new(PollFd::new(r).unwrap());
        let w = PollFd::new(w).unwrap();
        w.writable().unwrap();
        r.set_read_timeout(Some(Duration::from_millis(10))).unwrap();
        assert_eq!(r.readable().unwrap_err().kind(), ErrorKind::TimedOut);
        r.set_read_timeout(None).unwrap();
        let r2 = r.clone();
        let h = goro::go!(move || r2.readable());
        goro::time::sleep(Duration::from_millis(10));
        assert!(!h.is_finished());
        (&w).write_all(b"x").unwrap();
        h.join().unwrap().unwrap();
        // Still readable: nothing was read.
        r.readable().unwrap();
        let mut b = [0u8; 1];
        (&*r).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
    });
}

/// A coroutine parked on an empty pipe leaves its P to the others: at one P (the
/// re-run), 100 coroutines tick while the reader waits.
#[test]
fn parked_reader_does_not_hold_its_p() {
    with_timeout(T, || {
        let (r, w) = pipe();
        let r = PollFd::new(r).unwrap();
        let reader = goro::go!(move || {
            let mut b = [0u8; 4];
            (&r).read_exact(&mut b).unwrap();
            b
        });
        let ticks = Arc::new(AtomicUsize::new(0));
        let tickers: Vec<_> = (0..100)
            .map(|_| {
                let ticks = ticks.clone();
                goro::go!(move || {
                    for _ in 0..10 {
                        goro::time::sleep(Duration::from_millis(1));
                        ticks.fetch_add(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in tickers {
            t.join().unwrap();
        }
        assert_eq!(ticks.load(Ordering::SeqCst), 1000);
        assert!(!reader.is_finished());
        (&w).write_all(b"done").unwrap();
        assert_eq!(&reader.join().unwrap(), b"done");
    });
}

/// A regular file cannot be polled: `new` says so, with the OS error's kind.
#[test]
fn regular_file_is_refused() {
    let f = File::open("Cargo.toml").unwrap();
    let e = PollFd::new(f).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::PermissionDenied);
    assert!(e.to_string().contains("cannot be polled"), "{e}");
    // So is a directory.
    let d = File::open(".").unwrap();
    assert!(PollFd::new(d).is_err());
}

/// `into_inner` deregisters, keeps the descriptor open and gives it back blocking as
/// it came; a descriptor that came non-blocking stays so. `Drop` restores too.
#[test]
fn into_inner_keeps_the_fd_usable() {
    with_timeout(T, || {
        let (r, w) = pipe();
        let r = PollFd::new(r).unwrap();
        assert!(is_nonblocking(&r));
        let w = PollFd::new(w).unwrap();
        (&w).write_all(b"ab").unwrap();
        let mut r = r.into_inner();
        assert!(!is_nonblocking(&r), "into_inner restores blocking mode");
        let mut b = [0u8; 2];
        r.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"ab");
        // Registered again, it works again.
        let r = PollFd::new(r).unwrap();
        (&w).write_all(b"c").unwrap();
        let mut b = [0u8; 1];
        (&r).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"c");
        // Drop restores the mode of the open file, which a duplicate shares.
        let dup = r.get_ref().try_clone().unwrap();
        assert!(is_nonblocking(&dup));
        drop(r);
        assert!(!is_nonblocking(&dup));
        // Already non-blocking: left so.
        let ev = eventfd();
        // SAFETY: F_SETFL with an int of flags.
        unsafe { libc::fcntl(ev.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let ev = PollFd::new(ev).unwrap().into_inner();
        assert!(is_nonblocking(&ev));
        assert!(format!("{:?}", PollFd::new(ev).unwrap()).starts_with("PollFd { fd: "));
    });
}

/// A reader parked on a pipe wakes with end of file when the write end closes (from
/// a thread or a coroutine), rather than hanging.
#[test]
fn hang_up_wakes_a_parked_reader() {
    with_timeout(T, || {
        for on_thread in [false, true] {
            let (r, w) = pipe();
            let r = PollFd::new(r).unwrap();
            let body = move || {
                let mut got = Vec::new();
                (&r).read_to_end(&mut got).map(|_| got)
            };
            let h = start(on_thread, body);
            goro::time::sleep(Duration::from_millis(10));
            drop(w);
            assert_eq!(h().unwrap(), b"");
        }
    });
}

/// A write timeout on a full pipe: `TimedOut`, and the pipe is still usable.
#[test]
fn write_timeout_on_a_full_pipe() {
    with_timeout(T, || {
        let (r, w) = pipe();
        let mut r = PollFd::new(r).unwrap();
        let w = PollFd::new(w).unwrap();
        w.set_write_timeout(Some(Duration::from_millis(10)))
            .unwrap();
        assert_eq!(w.write_timeout().unwrap(), Some(Duration::from_millis(10)));
        let chunk = [7u8; 4096];
        let mut sent = 0;
        let err = loop {
            match (&w).write(&chunk) {
                Ok(n) => sent += n,
                Err(e) => break e,
            }
            assert!(sent < 64 << 20, "a pipe that never fills");
        };
        assert_eq!(err.kind(), ErrorKind::TimedOut);
        let mut buf = vec![0u8; sent];
        r.read_exact(&mut buf).unwrap();
        assert!(buf.iter().all(|&b| b == 7));
        (&w).write_all(b"more").unwrap();
    });
}

/// `Read` and `Write` are the descriptor's own calls, so a bare `OwnedFd` (no `Read` of
/// its own) reads and writes, owned or through `&`, vectored too.
#[test]
fn read_and_write_on_a_bare_owned_fd() {
    with_timeout(T, || {
        let (r, w) = pipe();
        let mut r = PollFd::new(OwnedFd::from(r)).unwrap();
        let mut w = PollFd::new(OwnedFd::from(w)).unwrap();
        w.write_all(b"ab").unwrap();
        let n = (&w)
            .write_vectored(&[std::io::IoSlice::new(b"c"), std::io::IoSlice::new(b"de")])
            .unwrap();
        assert_eq!(n, 3);
        w.flush().unwrap();
        let mut a = [0u8; 2];
        let mut b = [0u8; 3];
        let mut bufs = [
            std::io::IoSliceMut::new(&mut a),
            std::io::IoSliceMut::new(&mut b),
        ];
        assert_eq!(r.read_vectored(&mut bufs).unwrap(), 5);
        assert_eq!((&a, &b), (b"ab", b"cde"));
        let reader = goro::go!(move || {
            let mut x = [0u8; 1];
            (&r).read_exact(&mut x).unwrap();
            x
        });
        goro::time::sleep(Duration::from_millis(5));
        w.write_all(b"z").unwrap();
        assert_eq!(&reader.join().unwrap(), b"z");
    });
}
