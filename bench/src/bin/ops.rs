//! One hot-path operation in a loop, for counting instructions per operation:
//!
//! ```text
//! ops yield|spawnjoin|pingpong|chain|mutex|udp_thread|udp_coroutine|goro_udp|pipe_thread N
//! ```
//!
//! runs N operations on one coroutine (`chain`: N values through 100 links, so one
//! operation is 100 hops). The I/O modes are one one-byte send and receive each, for
//! what the `hooks` feature adds to a call that never waits (build with and without
//! it): `udp_thread` std's `UdpSocket` on the main thread, `udp_coroutine` the same on a
//! coroutine, `goro_udp` goro's own on a coroutine (never hooked), `pipe_thread` libc's
//! `write` and `read` on a pipe from the main thread. `bench/instructions.sh` runs it under callgrind at N and 2N
//! and divides the difference by N, which cancels the start-up. `pingpong` and `chain`
//! are the comparison's own types (`workloads::tasks`).

use std::process::ExitCode;

use goro_bench::workloads::tasks::{now, Chain, Coroutines};

/// `n` one-byte sends and receives on a connected pair of UDP sockets of type `$t`
/// (std's or goro's: the same API).
macro_rules! udp {
    ($t:ty, $n:expr) => {{
        let a = <$t>::bind("127.0.0.1:0").expect("bind");
        let b = <$t>::bind("127.0.0.1:0").expect("bind");
        a.connect(b.local_addr().unwrap()).expect("connect");
        let mut buf = [0u8; 1];
        for i in 0..$n {
            a.send(&[i as u8]).expect("send");
            b.recv(&mut buf).expect("recv");
        }
    }};
}

fn run(mode: &str, n: u64) -> bool {
    let h = match mode {
        "yield" => goro::go!(move || (0..n).for_each(|_| goro::yield_now())),
        "spawnjoin" => goro::go!(move || {
            for i in 0..n {
                assert_eq!(goro::go!(move || i).join().expect("child"), i);
            }
        }),
        "pingpong" => goro::go!(move || {
            // Ping-pong is a chain of one link (the echo).
            let mut pp = now(Chain::<Coroutines>::new(1, 0)).expect("the echo starts");
            now(pp.pass(n)).expect("echo alive");
            now(pp.shutdown()).expect("echo");
        }),
        "chain" => goro::go!(move || {
            let mut chain = now(Chain::<Coroutines>::new(100, 0)).expect("the links start");
            now(chain.pass(n)).expect("chain alive");
            now(chain.shutdown()).expect("links");
        }),
        "mutex" => goro::go!(move || {
            let m = goro::sync::Mutex::new(0u64);
            (0..n).for_each(|_| *m.lock() += 1);
            assert_eq!(*m.lock(), n);
        }),
        "udp_thread" => {
            udp!(std::net::UdpSocket, n);
            return true;
        }
        "udp_coroutine" => goro::go!(move || udp!(std::net::UdpSocket, n)),
        "goro_udp" => goro::go!(move || udp!(goro::net::UdpSocket, n)),
        "pipe_thread" => {
            let mut fds = [0; 2];
            // SAFETY: pipe writes two descriptors into the array.
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            let mut buf = [0u8; 1];
            for _ in 0..n {
                // SAFETY: one byte from / into a local buffer, on our pipe.
                unsafe {
                    assert_eq!(libc::write(fds[1], buf.as_ptr().cast(), 1), 1);
                    assert_eq!(libc::read(fds[0], buf.as_mut_ptr().cast(), 1), 1);
                }
            }
            return true;
        }
        _ => return false,
    };
    h.join().expect("the loop panicked");
    true
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let n = args.get(2).and_then(|n| n.parse().ok());
    match (args.get(1), n) {
        (Some(mode), Some(n)) if run(mode, n) => ExitCode::SUCCESS,
        _ => {
            eprintln!(
                "usage: ops yield|spawnjoin|pingpong|chain|mutex|udp_thread|udp_coroutine|goro_udp|pipe_thread N"
            );
            ExitCode::from(2)
        }
    }
}
