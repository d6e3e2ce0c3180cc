//! Fair scheduling: a time slice that a readied coroutine inherits ends on time, a
//! preempted or yielding coroutine goes behind the global queue, and nothing waits in
//! that queue for long behind a busy P. Go's runtime tests `TestPingPongHog`,
//! `TestTimerFairness` and `TestTimerFairness2` (runtime/proc_test.go), rewritten, and
//! a probe of how long a coroutine readied from a plain thread waits beside a busy pair.
//!
//! The measuring tests each run alone in a child process (`common::alone`), so that
//! no other test's coroutines share their Ps; the bounds are generous (Go's own factor
//! of 20 for the ping-pong, 200 ms for a wake-up that Go bounds by its 10 ms slice).

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::pingpong_hog::{pair, units_per};
use common::{alone, with_timeout, Lost};
use goro::chan::{after, channel};

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Go's `TestPingPongHog`: a "hog" pair doing 10⁶ units of work per hand-off and a
/// "light" pair doing 10³ share the Ps for 100 ms. Each pair hands its P to its buddy
/// within a time slice, so both get CPU: their counts stay within a factor of 20 (Go's
/// bound; were the light pair starved, the gap would be ~1000x). Returns hog / light.
fn hog_light_ratio() -> f64 {
    let (stop, done) = channel::<()>(0);
    let hog = Arc::new(AtomicU64::new(0));
    let light = Arc::new(AtomicU64::new(0));
    // Go's 10⁶ units are about a millisecond; here the units are measured, so that a
    // debug build's slower loop keeps the shape (a hog hand-off well under a slice).
    let hog_units = units_per(Duration::from_millis(1));
    let mut pairs = pair(hog_units, &hog, &done);
    pairs.extend(pair(hog_units / 1000, &light, &done));
    std::thread::sleep(Duration::from_millis(100));
    drop(stop);
    for p in pairs {
        p.join().unwrap();
    }
    // Relaxed: the joins ordered the counts before these reads.
    let (h, l) = (hog.load(Ordering::Relaxed), light.load(Ordering::Relaxed));
    let ratio = h as f64 / l.max(1) as f64;
    eprintln!(
        "ping_pong_hog at {} P: hog {h}, light {l}, ratio {ratio:.2}",
        goro::maxprocs()
    );
    assert!(
        h / 20 <= l && l / 20 <= h,
        "want hog/light in [1/20, 20]; got {h}/{l} = {ratio:.1}: a pair kept its P past \
         its time slice"
    );
    ratio
}

#[test]
fn ping_pong_hog() {
    if alone("ping_pong_hog", &[]) {
        return;
    }
    with_timeout(T, || {
        hog_light_ratio();
    });
}

/// Go's test shrinks the runtime to one P first, which sends the retired P's
/// coroutines to the global queue: they must not wait there behind the hog pair.
#[test]
fn ping_pong_hog_after_shrinking_to_one_p() {
    if alone(
        "ping_pong_hog_after_shrinking_to_one_p",
        &[("GORO_MAXPROCS", "2")],
    ) {
        return;
    }
    with_timeout(T, || {
        assert_eq!(goro::set_maxprocs(1), 2);
        hog_light_ratio();
    });
}

/// Go's `TestTimerFairness`: two coroutines send on a channel in a loop; a timer's
/// channel in the receiver's `select!` must still get its turn.
#[test]
fn timer_fairness() {
    with_timeout(T, || {
        let (stop, done) = channel::<()>(0);
        let (c, rx) = channel::<bool>(0);
        let senders: Vec<_> = (0..2)
            .map(|_| {
                let (c, done) = (c.clone(), done.clone());
                goro::go!(move || loop {
                    goro::select! {
                        send(c, true) -> _ => {},
                        recv(done) -> _ => return,
                    }
                })
            })
            .collect();
        let timer = after(Duration::from_millis(20));
        let start = Instant::now();
        loop {
            goro::select! {
                recv(rx) -> _ => assert!(start.elapsed() < Duration::from_secs(30), "the timer never won"),
                recv(timer) -> _ => break,
            }
        }
        drop(stop);
        senders.into_iter().for_each(|s| s.join().unwrap());
    });
}

/// Go's `TestTimerFairness2`: two coroutines each make a system call and then select
/// between sending to, receiving from one another, and their own timer; both timers
/// must fire. (Go's system call is a zero-byte read of stdin; here a zero-byte read of
/// a socket the coroutine owns, through `goro::blocking`, which hands the P off as
/// Go's entersyscall does.)
#[test]
fn timer_fairness2() {
    with_timeout(T, || {
        let (c, rx) = channel::<bool>(0);
        let (done, finished) = channel::<()>(0);
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (c, rx, done) = (c.clone(), rx.clone(), done.clone());
                goro::go!(move || {
                    let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
                    a.set_nonblocking(true).unwrap();
                    let timer = after(Duration::from_millis(20));
                    let start = Instant::now();
                    loop {
                        goro::blocking(|| {
                            use std::io::Read;
                            let _ = (&a).read(&mut []);
                        });
                        goro::select! {
                            send(c, true) -> _ => {},
                            recv(rx) -> _ => {},
                            recv(timer) -> _ => {
                                done.send(()).unwrap();
                                return;
                            },
                        }
                        assert!(
                            start.elapsed() < Duration::from_secs(30),
                            "the timer never won"
                        );
                    }
                })
            })
            .collect();
        finished.recv().unwrap();
        finished.recv().unwrap();
        hs.into_iter().for_each(|h| h.join().unwrap());
    });
}

/// A coroutine readied from a plain thread, while `pairs` pairs of coroutines
/// ping-pong 1 ms of CPU per hand-off, runs within a slice or two: it waits in the
/// global queue only until the running pair's slice ends (Go bounds it by its 10 ms
/// slice; before the fix here it waited 0.3-0.7 s at 1 P beside one pair). Returns the
/// waits.
fn wakeups_beside_busy_pairs(pairs: usize, rounds: usize) -> Vec<Duration> {
    let (stop, done) = channel::<()>(0);
    let counter = Arc::new(AtomicU64::new(0));
    let units = units_per(Duration::from_millis(1));
    let players: Vec<_> = (0..pairs)
        .flat_map(|_| pair(units, &counter, &done))
        .collect();
    std::thread::sleep(Duration::from_millis(30));
    let mut waits = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (tx, rx) = channel::<Instant>(0);
        let (report, reported) = channel::<Duration>(1);
        let probe = goro::go!(move || {
            let sent = rx.recv().unwrap();
            report.send(sent.elapsed()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(15)); // the probe parks
        tx.send(Instant::now()).unwrap(); // from this plain thread: the global queue
        waits.push(reported.recv().unwrap());
        probe.join().unwrap();
    }
    drop(stop);
    players.into_iter().for_each(|h| h.join().unwrap());
    waits
}

/// Runs [`wakeups_beside_busy_pairs`] and fails if a wait passes 200 ms (plus what
/// the machine took from us meanwhile).
fn assert_wakeups_beside_busy_pairs(pairs: usize) {
    let lost = Lost::now();
    let mut waits = wakeups_beside_busy_pairs(pairs, 20);
    waits.sort();
    eprintln!(
        "wake-up beside {pairs} busy pair(s) at {} P: median {:?}, max {:?}",
        goro::maxprocs(),
        waits[waits.len() / 2],
        waits[waits.len() - 1]
    );
    let bound = Duration::from_millis(200) + lost.since();
    assert!(
        waits[waits.len() - 1] < bound,
        "a coroutine readied from a thread waited {:?} (bound {bound:?}) behind {pairs} \
         busy pair(s): {waits:?}",
        waits[waits.len() - 1]
    );
}

#[test]
fn readied_from_a_thread_beside_a_busy_pair_runs_within_a_slice_or_two() {
    if alone(
        "readied_from_a_thread_beside_a_busy_pair_runs_within_a_slice_or_two",
        &[],
    ) {
        return;
    }
    with_timeout(T, || assert_wakeups_beside_busy_pairs(1));
}

/// With three pairs, the P's own queue never empties (the pairs take turns): the
/// coroutine in the global queue still runs once the running pair's slice ends, as
/// sysmon's preemption sends the P to the global queue first.
#[test]
fn readied_from_a_thread_beside_three_busy_pairs_runs_within_a_slice_or_two() {
    if alone(
        "readied_from_a_thread_beside_three_busy_pairs_runs_within_a_slice_or_two",
        &[],
    ) {
        return;
    }
    with_timeout(T, || assert_wakeups_beside_busy_pairs(3));
}
