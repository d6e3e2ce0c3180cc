//! Go by Example: Stateful Goroutines.
//!
//! Go's readers and writers loop for ever and end with the process. Here the
//! program is a function that returns, so they loop until `stop` is set, and the
//! state goroutine until `quit` closes. `rand.Intn` is a small xorshift (no crates).

use crate::out::Out;
use goro::chan::Chan;
use goro::sync::WaitGroup;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct ReadOp {
    key: i32,
    resp: Chan<i32>,
}

struct WriteOp {
    key: i32,
    val: i32,
    resp: Chan<bool>,
}

/// `rand.Intn(n)`, from a per-goroutine xorshift state.
fn intn(state: &mut u64, n: i32) -> i32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state % n as u64) as i32
}

pub fn main(out: &Out) {
    let read_ops = Arc::new(AtomicU64::new(0));
    let write_ops = Arc::new(AtomicU64::new(0));

    let reads = Chan::<ReadOp>::new(0);
    let writes = Chan::<WriteOp>::new(0);
    let quit = Chan::<()>::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let workers = WaitGroup::new();

    let (r, w, q) = (reads.clone(), writes.clone(), quit.clone());
    goro::go!(move || {
        let mut state = std::collections::HashMap::<i32, i32>::new();
        loop {
            goro::select! {
                recv(r) -> read => {
                    let read = read.unwrap();
                    read.resp.send(state.get(&read.key).copied().unwrap_or(0));
                }
                recv(w) -> write => {
                    let write = write.unwrap();
                    state.insert(write.key, write.val);
                    write.resp.send(true);
                }
                recv(q) -> _ => return,
            }
        }
    });

    for i in 0..100 {
        let (reads, read_ops, stop) = (reads.clone(), read_ops.clone(), stop.clone());
        workers.go(move || {
            let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ (i + 1);
            while !stop.load(Ordering::Relaxed) {
                let read = ReadOp {
                    key: intn(&mut seed, 5),
                    resp: Chan::new(0),
                };
                let resp = read.resp.clone();
                reads.send(read);
                resp.recv();
                read_ops.fetch_add(1, Ordering::Relaxed);
                goro::time::sleep(Duration::from_millis(1));
            }
        });
    }

    for i in 0..10 {
        let (writes, write_ops, stop) = (writes.clone(), write_ops.clone(), stop.clone());
        workers.go(move || {
            let mut seed = 0x2545_f491_4f6c_dd1d_u64 ^ (i + 1);
            while !stop.load(Ordering::Relaxed) {
                let write = WriteOp {
                    key: intn(&mut seed, 5),
                    val: intn(&mut seed, 100),
                    resp: Chan::new(0),
                };
                let resp = write.resp.clone();
                writes.send(write);
                resp.recv();
                write_ops.fetch_add(1, Ordering::Relaxed);
                goro::time::sleep(Duration::from_millis(1));
            }
        });
    }

    // Go's second, scaled down.
    goro::time::sleep(Duration::from_millis(100));

    let read_ops_final = read_ops.load(Ordering::Relaxed);
    out.println(format!("readOps: {read_ops_final}"));
    let write_ops_final = write_ops.load(Ordering::Relaxed);
    out.println(format!("writeOps: {write_ops_final}"));

    // What the process's exit does in Go.
    stop.store(true, Ordering::Relaxed);
    workers.wait();
    quit.close();
}
