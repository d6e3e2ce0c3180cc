//! One hot-path operation in a loop, for counting instructions per operation
//! (`bench/instructions.sh` runs it under callgrind at N and 2N and divides the
//! difference by N, which cancels the start-up):
//!
//! ```text
//! ops yield|spawnjoin|pingpong|chain|mutex|udp_thread|udp_coroutine|goro_udp|pipe_thread N
//! ```
//!
//! N operations on one coroutine (`chain`: N values through 100 links of the
//! comparison's `Chain`). The I/O modes, one one-byte send and receive each, show what
//! the `hooks` feature adds to a call that never waits: std's `UdpSocket` on the main
//! thread and on a coroutine, goro's own (never hooked), libc's `write` and `read` on a
//! pipe from the main thread.

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
        // Ping-pong is a chain of one link (the echo).
        "pingpong" | "chain" => {
            let hops = if mode == "chain" { 100 } else { 1 };
            goro::go!(move || {
                let mut chain = now(Chain::<Coroutines>::new(hops, 0)).expect("links start");
                now(chain.pass(n)).expect("chain alive");
                now(chain.shutdown()).expect("links");
            })
        }
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
