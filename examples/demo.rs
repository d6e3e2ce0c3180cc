//! A tour of what goro does today, with timings: spawning, joining, yielding, parking
//! and waking across coroutines and threads, sleeping and timers, panics, and the stack
//! guard in use.
//!
//! `cargo run --release --example demo`

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use goro::park::{self, Unparker, WaitReason};

fn main() {
    println!(
        "goro: {} Ps, stacks guarded by {:?}",
        goro::maxprocs(),
        goro::debug::stack_guard_kind()
    );

    // 1. A hundred thousand coroutines, spawned from main and joined.
    let t = Instant::now();
    let hs: Vec<_> = (0..100_000u64).map(|i| goro::go!(move || i)).collect();
    let sum: u64 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    println!(
        "100 000 coroutines spawned and joined from main in {:?} (sum {sum})",
        t.elapsed()
    );

    // 2. Spawn + join from inside a coroutine: the cheap path.
    let n = 200_000;
    let per = goro::go!(move || {
        let t = Instant::now();
        for i in 0..n {
            goro::go!(move || i).join().unwrap();
        }
        t.elapsed() / n
    })
    .join()
    .unwrap();
    println!("spawn + join from a coroutine: {per:?} each");

    // 3. Yield.
    let n = 2_000_000;
    let per = goro::go!(move || {
        let t = Instant::now();
        for _ in 0..n {
            goro::yield_now();
        }
        t.elapsed() / n
    })
    .join()
    .unwrap();
    println!("yield_now: {per:?} each");

    // 4. Park and unpark: a thousand coroutines wait, main wakes them all.
    let waiting = Arc::new(Mutex::new(Vec::<Unparker>::new()));
    let parked = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..1000)
        .map(|i| {
            let (waiting, parked) = (waiting.clone(), parked.clone());
            goro::go!(move || {
                waiting.lock().unwrap().push(park::prepare());
                parked.fetch_add(1, Ordering::SeqCst);
                park::park(WaitReason::Park);
                i
            })
        })
        .collect();
    while parked.load(Ordering::SeqCst) < 1000 {
        std::thread::yield_now();
    }
    println!("{} coroutines alive and parked", goro::num_goroutines());
    let t = Instant::now();
    for u in waiting.lock().unwrap().drain(..) {
        u.unpark();
    }
    let s: i32 = hs.into_iter().map(|h| h.join().unwrap()).sum();
    println!("woken from main and joined in {:?} (sum {s})", t.elapsed());

    // 5. Timers: ten thousand coroutines sleep 1..100 ms; a Timer fires a function.
    let t = Instant::now();
    let hs: Vec<_> = (0..10_000u64)
        .map(|i| {
            goro::go!(move || goro::time::sleep(Duration::from_micros(1000 + i * 9973 % 99_000)))
        })
        .collect();
    hs.into_iter().for_each(|h| h.join().unwrap());
    println!(
        "10 000 coroutines slept 1..100 ms each, all done after {:?}",
        t.elapsed()
    );
    let (tx, rx) = std::sync::mpsc::channel();
    let deadline = Instant::now() + Duration::from_millis(5);
    let _timer = goro::time::after_func(Duration::from_millis(5), move || {
        let _ = tx.send(Instant::now().saturating_duration_since(deadline));
    });
    println!(
        "after_func(5 ms) ran its function {:?} late",
        rx.recv().unwrap()
    );

    // 6. Channels: a 10 000-coroutine pipeline, and a select with a timeout.
    let (first, mut rx) = goro::chan::channel::<u64>(0);
    for _ in 0..10_000 {
        let (tx, next) = goro::chan::channel(0);
        goro::go!(move || rx.iter().for_each(|v| tx.send(v + 1).unwrap()));
        rx = next;
    }
    let t = Instant::now();
    for i in 0..100 {
        first.send(i).unwrap();
        assert_eq!(rx.recv().unwrap(), i + 10_000);
    }
    println!(
        "a token through 10 000 coroutines, 100 times: {:?} per hop",
        t.elapsed() / 1_000_000
    );
    let (_quiet, never_sent) = goro::chan::channel::<u64>(0);
    let t = Instant::now();
    goro::select! {
        recv(never_sent) -> _ => unreachable!(),
        default(Duration::from_millis(10)) => println!("select with a 10 ms timeout returned after {:?}", t.elapsed()),
    }

    // 7. A panic is delivered to join; the runtime keeps going.
    std::panic::set_hook(Box::new(|_| {}));
    let r = goro::go!(|| panic!("boom")).join();
    let _ = std::panic::take_hook();
    println!("a panicking coroutine's join returned Err: {}", r.is_err());
}
