//! One hot-path operation in a loop, for counting instructions per operation:
//!
//! ```text
//! ops yield|spawnjoin|pingpong|chain|mutex N
//! ```
//!
//! runs N operations on one coroutine (`chain`: N values through 100 links, so one
//! operation is 100 hops). `bench/instructions.sh` runs it under callgrind at N and 2N
//! and divides the difference by N, which cancels the start-up.

use std::process::ExitCode;

fn run(mode: &str, n: u64) -> bool {
    let h = match mode {
        "yield" => goro::go!(move || (0..n).for_each(|_| goro::yield_now())),
        "spawnjoin" => goro::go!(move || {
            for i in 0..n {
                assert_eq!(goro::go!(move || i).join().expect("child"), i);
            }
        }),
        "pingpong" => goro::go!(move || {
            let (ping, pinged) = goro::chan::channel::<u64>(0);
            let (pong, ponged) = goro::chan::channel::<u64>(0);
            let echo = goro::go!(move || {
                while let Ok(v) = pinged.recv() {
                    if pong.send(v).is_err() {
                        break;
                    }
                }
            });
            for i in 0..n {
                ping.send(i).expect("echo alive");
                assert_eq!(ponged.recv().expect("echo alive"), i);
            }
            drop(ping);
            echo.join().expect("echo");
        }),
        "chain" => goro::go!(move || {
            let (first, mut rx) = goro::chan::channel::<u64>(0);
            let links: Vec<_> = (0..100)
                .map(|_| {
                    let (tx, next) = goro::chan::channel::<u64>(0);
                    let from = std::mem::replace(&mut rx, next);
                    goro::go!(move || {
                        while let Ok(v) = from.recv() {
                            if tx.send(v + 1).is_err() {
                                break;
                            }
                        }
                    })
                })
                .collect();
            for i in 0..n {
                first.send(i).expect("chain alive");
                assert_eq!(rx.recv().expect("chain alive"), i + 100);
            }
            drop(first);
            links.into_iter().for_each(|l| l.join().expect("link"));
        }),
        "mutex" => goro::go!(move || {
            let m = goro::sync::Mutex::new(0u64);
            (0..n).for_each(|_| *m.lock() += 1);
            assert_eq!(*m.lock(), n);
        }),
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
            eprintln!("usage: ops yield|spawnjoin|pingpong|chain|mutex N");
            ExitCode::from(2)
        }
    }
}
