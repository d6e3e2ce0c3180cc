//! Scheduler micro-benchmarks: what spawning, yielding and parking cost, next to the
//! floor (a bare corosensei context switch) measured in the same binary.
//!
//! ```text
//! cargo bench -p goro-bench --bench proc
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench proc
//! ```
//!
//! Groups (cited by name in the docs):
//!
//! - `SpawnJoin/from_coroutine`, `SpawnJoin/from_thread`: time per `go!(..).join()`.
//! - `Gosched/alone`, `Gosched/pair`: time per `yield_now`.
//! - `ParkPingPong/coroutines`, `ParkPingPong/thread_to_coroutine`: time per round trip
//!   of a baton passed with the raw `prepare` / `park` / `unpark` API.
//! - `CorosenseiSwitch/resume_suspend`: time per resume+suspend of a bare corosensei
//!   coroutine, the lower bound of any switch goro makes.
//! - `HookedCalls/*`: what the `hooks` feature adds to calls that never block: run once
//!   without and once with `--features hooks` (see `hooked_calls`).
//!
//! Measurements that must run on a coroutine use `iter_custom`: the timed loop runs
//! inside a coroutine spawned once per sample, which returns the time it measured.
//! The number of Ps comes from `GORO_MAXPROCS` (default: the number of CPUs).

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use corosensei::{Coroutine, CoroutineResult, Yielder};
use criterion::Criterion;
use goro::park::{self, Unparker, WaitReason};
use goro_bench::harness::{bench_on_coroutine, in_coroutine};

/// `SpawnJoin`: spawn a coroutine that returns its argument, then join it.
///
/// `from_coroutine` is the number to compare with Go: the loop runs on ONE coroutine,
/// so the join parks a coroutine (and the child runs first, from `runnext`). The closest
/// Go benchmark is `runtime.BenchmarkCreateGoroutines` (proc_test.go: each goroutine
/// does `go f(n-1)` and exits; no join), so goro's figure here also pays for a
/// park/unpark of the joiner that Go's does not.
///
/// `from_thread` does the same from the bench's plain thread: the join blocks the OS
/// thread and the wake-up goes through the global run queue and a thread unpark.
fn spawn_join(c: &mut Criterion) {
    let mut g = c.benchmark_group("SpawnJoin");
    bench_on_coroutine(&mut g, "from_coroutine", |n| {
        for i in 0..n {
            let h = goro::go!(move || black_box(i));
            black_box(h.join().expect("spawned coroutine panicked"));
        }
    });
    g.bench_function("from_thread", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            for i in 0..iters {
                let h = goro::go!(move || black_box(i));
                black_box(h.join().expect("spawned coroutine panicked"));
            }
            start.elapsed()
        })
    });
    g.finish();
}

/// `Gosched`: `goro::yield_now`, Go's `runtime.Gosched`.
///
/// Go's tree has no Gosched benchmark; the Go figure it is compared with was measured
/// with a plain Go loop of `runtime.Gosched()` (one goroutine, and two).
///
/// - `alone`: one coroutine yields in a loop; time per yield. With nothing else to run,
///   each yield goes to the back of the P's queue and is picked again at once.
/// - `pair`: two coroutines each yield `iters` times; time per yield = total / (2 *
///   iters), from the first start to the last end. With `GORO_MAXPROCS=1` they
///   alternate on one P (each yield is a switch to the other); with 2 Ps they may run
///   in parallel, one per P, and the figure is a throughput, not a latency.
fn gosched(c: &mut Criterion) {
    let mut g = c.benchmark_group("Gosched");
    bench_on_coroutine(&mut g, "alone", |n| {
        for _ in 0..n {
            goro::yield_now();
        }
    });
    g.bench_function("pair", |b| {
        b.iter_custom(|iters| {
            // Both coroutines check in, then yield (uncounted) until the other has too,
            // so that neither times the other's spawn.
            let ready = Arc::new(AtomicUsize::new(0));
            let run = |ready: Arc<AtomicUsize>| {
                move || {
                    ready.fetch_add(1, Ordering::AcqRel);
                    while ready.load(Ordering::Acquire) < 2 {
                        goro::yield_now();
                    }
                    let start = Instant::now();
                    for _ in 0..iters {
                        goro::yield_now();
                    }
                    (start, Instant::now())
                }
            };
            let a = goro::go!(run(ready.clone()));
            let b = goro::go!(run(ready));
            let (a_start, a_end) = a.join().expect("yielding coroutine panicked");
            let (b_start, b_end) = b.join().expect("yielding coroutine panicked");
            let total = a_end.max(b_end) - a_start.min(b_start);
            // criterion divides by iters; each of the two made iters yields.
            total / 2
        })
    });
    g.finish();
}

/// The baton of a ping-pong between side 0 (A) and side 1 (B).
///
/// `turn` counts passes: A acts when it is even, B when it is odd, and each pass adds
/// one. `slots[s]` holds side `s`'s unparker for its current wait. The invariant that
/// makes wake-ups unlosable: a side prepares its next wait and publishes its unparker
/// BEFORE it passes the turn, and the peer takes that slot only AFTER it has seen the
/// pass; so the peer always finds the unparker of the wait it must end (or a later one,
/// see [`Baton::wait_turn`]).
struct Baton {
    turn: AtomicU64,
    slots: [Mutex<Option<Unparker>>; 2],
}

impl Baton {
    fn new() -> Self {
        Baton {
            turn: AtomicU64::new(0),
            slots: [Mutex::new(None), Mutex::new(None)],
        }
    }

    fn slot(&self, side: usize) -> std::sync::MutexGuard<'_, Option<Unparker>> {
        self.slots[side].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts a wait of the caller and publishes its unparker as side `me`'s.
    fn prepare(&self, me: usize) {
        let u = park::prepare();
        *self.slot(me) = Some(u);
    }

    /// Passes the turn from `me` (whose turn `from` it is) and wakes the peer.
    fn pass(&self, me: usize, from: u64) {
        // Release: the peer's Acquire load sees everything before, including our
        // published unparker.
        self.turn.store(from + 1, Ordering::Release);
        if let Some(u) = self.slot(1 - me).take() {
            u.unpark();
        }
    }

    /// Sleeps until `turn == target`. The caller has prepared and published a wait.
    fn wait_turn(&self, me: usize, target: u64) {
        loop {
            if self.turn.load(Ordering::Acquire) == target {
                // The peer passed already (and has woken, or will find, our wait; the
                // next prepare makes that unparker stale).
                return;
            }
            park::park(WaitReason::Park);
            if self.turn.load(Ordering::Acquire) == target {
                return;
            }
            // Woken without the turn (should not happen: only the peer's pass wakes
            // us). Start a new wait, publish it, then re-check before sleeping: if the
            // peer took the slot before our publish, its pass happened before its take,
            // which the slot's mutex orders before our re-check.
            self.prepare(me);
        }
    }
}

/// Side A: `rounds` round trips A -> B -> A; returns the time they took.
fn ping(baton: &Baton, rounds: u64) -> Duration {
    let start = Instant::now();
    for r in 0..rounds {
        baton.prepare(0);
        baton.pass(0, 2 * r);
        baton.wait_turn(0, 2 * r + 2);
    }
    start.elapsed()
}

/// Side B: answers `rounds` passes of A.
fn pong(baton: &Baton, rounds: u64) {
    if rounds == 0 {
        return;
    }
    baton.prepare(1);
    baton.wait_turn(1, 1);
    for r in 0..rounds {
        let last = r + 1 == rounds;
        if !last {
            baton.prepare(1);
        }
        baton.pass(1, 2 * r + 1);
        if !last {
            baton.wait_turn(1, 2 * r + 3);
        }
    }
}

/// `ParkPingPong`: a baton passed between two parties with the raw park API: A unparks
/// B then parks, B unparks A then parks. Time per round trip (A -> B -> A, two wakes
/// and two parks).
///
/// - `coroutines`: A and B are coroutines. A wake from a running coroutine puts the
///   peer in this P's `runnext`, so with one P this is two switches through the
///   scheduler per round trip. The closest Go benchmarks are channel-based:
///   `runtime.BenchmarkPingPongHog` (proc_test.go, unbuffered chan ping-pong at
///   GOMAXPROCS=1) and `runtime.BenchmarkChanSync` (chan_test.go).
/// - `thread_to_coroutine`: A is the bench's plain thread, B a coroutine: each round
///   trip pays a thread park/unpark and a wake through the global run queue.
fn park_ping_pong(c: &mut Criterion) {
    let mut g = c.benchmark_group("ParkPingPong");
    for (name, ping_on_coroutine) in [("coroutines", true), ("thread_to_coroutine", false)] {
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let baton = Arc::new(Baton::new());
                let bb = baton.clone();
                let pong_h = goro::go!(move || pong(&bb, iters));
                let elapsed = if ping_on_coroutine {
                    in_coroutine(move || ping(&baton, iters))
                } else {
                    ping(&baton, iters)
                };
                pong_h.join().expect("pong coroutine panicked");
                elapsed
            })
        });
    }
    g.finish();
}

/// `CorosenseiSwitch`: the floor. A corosensei coroutine that only suspends, resumed
/// in a loop on the bench thread: time per resume + suspend round trip, the two stack
/// switches every goro switch is built on (with no scheduler around them).
fn corosensei_switch(c: &mut Criterion) {
    let mut g = c.benchmark_group("CorosenseiSwitch");
    g.bench_function("resume_suspend", |b| {
        let mut co: Coroutine<(), (), ()> = Coroutine::new(|y: &Yielder<(), ()>, ()| loop {
            y.suspend(());
        });
        b.iter(|| match co.resume(()) {
            CoroutineResult::Yield(v) => black_box(v),
            CoroutineResult::Return(()) => unreachable!("the floor coroutine never returns"),
        });
    });
    g.finish();
}

/// `HookedCalls`: a one-byte send and receive on a connected UDP socket pair that
/// never has to wait, so the figures are the calls' own cost. Build once without and
/// once with the `hooks` feature, and compare:
///
/// ```text
/// cargo bench -p goro-bench --bench proc -- HookedCalls --save-baseline plain
/// cargo bench -p goro-bench --features hooks --bench proc -- HookedCalls --baseline plain
/// ```
///
/// - `std_thread`: std's `UdpSocket` on a plain thread (the hook's thread-local check
///   and the real call);
/// - `std_coroutine`: the same on a coroutine (the hook looks the socket up in its fd
///   table; std's sockets here are blocking, so it is made non-blocking underneath);
/// - `goro_thread`, `goro_coroutine`: goro's own `UdpSocket`, whose calls never reach
///   a hook (the figure must not move);
/// - `pipe_thread`: a one-byte write and read on a pipe from a plain thread (libc's
///   `write` and `read`: the hooks' cost for descriptors that are not sockets).
fn hooked_calls(c: &mut Criterion) {
    /// A connected pair of sockets and their one-byte send and receive.
    struct Udp<S> {
        pair: fn() -> (S, S),
        send: fn(&S, &[u8]),
        recv: fn(&S, &mut [u8]),
    }
    impl<S: 'static> Udp<S> {
        fn round(&self, (x, y): &(S, S), iters: u64) -> Duration {
            let mut buf = [0u8; 1];
            let start = Instant::now();
            for i in 0..iters {
                (self.send)(x, &[i as u8]);
                (self.recv)(y, &mut buf);
            }
            start.elapsed()
        }
        fn bench(
            self,
            g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
            name: &str,
            on_coroutine: bool,
        ) where
            S: Send,
        {
            if on_coroutine {
                let u = std::sync::Arc::new(self);
                g.bench_function(name, |b| {
                    b.iter_custom(|iters| {
                        let u = u.clone();
                        in_coroutine(move || u.round(&(u.pair)(), iters))
                    })
                });
            } else {
                let pair = (self.pair)();
                g.bench_function(name, |b| b.iter_custom(|iters| self.round(&pair, iters)));
            }
        }
    }
    /// The `Udp` of a socket type with std's `bind` / `connect` / `send` / `recv`.
    macro_rules! udp {
        ($t:ty) => {
            Udp::<$t> {
                pair: || {
                    let a = <$t>::bind("127.0.0.1:0").expect("bind");
                    let b = <$t>::bind("127.0.0.1:0").expect("bind");
                    a.connect(b.local_addr().unwrap()).expect("connect");
                    b.connect(a.local_addr().unwrap()).expect("connect");
                    (a, b)
                },
                send: |s, m| {
                    s.send(m).expect("send");
                },
                recv: |s, m| {
                    s.recv(m).expect("recv");
                },
            }
        };
    }
    let pipe = Udp {
        pair: || {
            let mut fds = [0; 2];
            // SAFETY: pipe writes two descriptors into the array (kept open for the
            // benchmark's life).
            assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
            (fds[1], fds[0])
        },
        send: |&w, m| {
            // SAFETY: a write of one byte from the caller's slice to our pipe.
            unsafe { libc::write(w, m.as_ptr().cast(), 1) };
        },
        recv: |&r, m| {
            // SAFETY: a read of one byte into the caller's slice from our pipe.
            unsafe { libc::read(r, m.as_mut_ptr().cast(), 1) };
        },
    };
    let mut g = c.benchmark_group("HookedCalls");
    udp!(std::net::UdpSocket).bench(&mut g, "std_thread", false);
    udp!(std::net::UdpSocket).bench(&mut g, "std_coroutine", true);
    udp!(goro::net::UdpSocket).bench(&mut g, "goro_thread", false);
    udp!(goro::net::UdpSocket).bench(&mut g, "goro_coroutine", true);
    pipe.bench(&mut g, "pipe_thread", false);
    g.finish();
}

/// `Syscall`: the cost of a blocking call that returns at once (Go's
/// `BenchmarkSyscall`, runtime/proc_test.go: entersyscall + exitsyscall around
/// nothing), from one coroutine: the fast path, where the P is taken back with one CAS.
/// - `noop`: `goro::blocking(|| ())`;
/// - `getppid`: a real, short system call inside `goro::blocking`;
/// - `getppid_plain`: the same system call without `blocking`, for the difference.
fn syscall(c: &mut Criterion) {
    let mut g = c.benchmark_group("Syscall");
    bench_on_coroutine(&mut g, "noop", |n| {
        for _ in 0..n {
            goro::blocking(|| std::hint::black_box(()));
        }
    });
    fn getppid() -> libc::pid_t {
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() }
    }
    bench_on_coroutine(&mut g, "getppid", |n| {
        for _ in 0..n {
            std::hint::black_box(goro::blocking(getppid));
        }
    });
    bench_on_coroutine(&mut g, "getppid_plain", |n| {
        for _ in 0..n {
            std::hint::black_box(getppid());
        }
    });
    g.finish();
}

goro_bench::bench_main!(
    spawn_join,
    gosched,
    park_ping_pong,
    corosensei_switch,
    syscall,
    hooked_calls
);
