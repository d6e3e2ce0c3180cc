//! Shared helpers for goro's benchmarks and measurement tools.
//!
//! - `benches/proc.rs`: criterion benchmarks of the scheduler's basic operations
//!   (spawn+join, yield, park/unpark ping-pong) next to the floor, a bare corosensei
//!   context switch.
//! - `src/bin/rss.rs`: resident memory per parked coroutine.
//! - `benches/time.rs`: criterion ports of Go's `time` package benchmarks (AfterFunc,
//!   Stop, Reset, Sleep).
//! - `src/bin/timer_latency.rs`: timer lateness (avg / max / percentiles), ports of Go's
//!   `BenchmarkParallelTimerLatency` and `BenchmarkStaggeredTickerLatency`.
//! - `benches/sync.rs`, `src/bin/sync_compare.rs` and `go/`: ports of Go's `Sema*` and
//!   `Mutex*` benchmarks ([`sync_workloads`]), next to std's and parking_lot's mutexes
//!   and to Go itself.
//! - [`tools`]: what the comparison tools (`sync_compare`, `chan_compare`,
//!   `echo_compare`, `compare`) share: a child process run under a timeout, the load
//!   average, the median, building the Go side.
//!
//! The helpers here read Linux's `/proc` files (memory and mapping counts), give every
//! wait of a measurement tool a bound, so that a runtime bug shows up as a clear panic
//! instead of a hang, and provide the small synchronisation pieces the timer benchmarks
//! need ([`WaitGroup`], [`do_work`]), built on the raw park API only.
//! Nothing here uses `unsafe`.

use std::fmt;
use std::fs;
use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use goro::park::{self, Unparker, WaitReason};

pub mod tools;

/// Reads a `kB` field (such as `VmRSS` or `VmPTE`) of `/proc/self/status`, in KiB.
///
/// Fails if the file cannot be read (not Linux) or has no such field.
pub fn proc_status_kib(field: &str) -> io::Result<u64> {
    let status = fs::read_to_string("/proc/self/status")?;
    parse_status_kib(&status, field).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("no numeric `{field}` line in /proc/self/status"),
        )
    })
}

/// Resident set size of this process in KiB: the `VmRSS` line of `/proc/self/status`.
///
/// This counts the pages actually backed by memory (touched stack pages, heap), not
/// address space, and not the kernel's page tables (see `VmPTE` for those).
pub fn vm_rss_kib() -> io::Result<u64> {
    proc_status_kib("VmRSS")
}

/// Finds `field:   <number> kB` in the text of a `/proc/<pid>/status` file.
///
/// Returns `None` if the field is missing or its value is not a number.
pub fn parse_status_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// Number of memory mappings (VMAs) of this process: the lines of `/proc/self/maps`.
///
/// This is the figure `vm.max_map_count` limits. With `mprotect` guard pages every
/// coroutine stack costs two mappings; with `MADV_GUARD_INSTALL` neighbouring stacks
/// merge and the count stays small.
pub fn map_count() -> io::Result<usize> {
    let maps = fs::read("/proc/self/maps")?;
    Ok(maps.iter().filter(|&&b| b == b'\n').count())
}

/// The kernel's per-process mapping limit, `/proc/sys/vm/max_map_count`.
pub fn max_map_count() -> io::Result<u64> {
    let s = fs::read_to_string("/proc/sys/vm/max_map_count")?;
    s.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("max_map_count: {e}")))
}

/// Polls `cond` until it returns true or `timeout` has passed; returns whether it did.
///
/// Meant for plain threads (the measurement tools' main thread): between polls it
/// yields, then sleeps up to a millisecond, which would block a coroutine's worker
/// thread if called from a coroutine.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut spins = 0u32;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        if spins < 100 {
            spins += 1;
            thread::yield_now();
        } else {
            thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Joins `handle` if the coroutine ends within `timeout`; gives the handle back
/// otherwise. From a plain thread (see [`wait_until`]).
pub fn join_timeout<T>(
    handle: goro::JoinHandle<T>,
    timeout: Duration,
) -> Result<thread::Result<T>, goro::JoinHandle<T>> {
    if wait_until(timeout, || handle.is_finished()) {
        Ok(handle.join())
    } else {
        Err(handle)
    }
}

/// Runs `f` in a fresh coroutine, waits for it and returns its result.
///
/// # Panics
///
/// If the coroutine panicked (the panic is re-raised here with its message).
pub fn in_coroutine<T, F>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    match goro::go!(f).join() {
        Ok(v) => v,
        Err(payload) => panic!(
            "benchmark coroutine panicked: {}",
            panic_message(payload.as_ref())
        ),
    }
}

/// The message of a panic payload.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "Box<dyn Any>"
    }
}

/// CPU time the hypervisor took from this (virtual) machine, all CPUs together: the
/// `steal` column of the `cpu` line of `/proc/stat`.
///
/// Timer lateness on a VM whose host is overcommitted is dominated by these stalls (the
/// whole guest stops for milliseconds), so the latency tools print it next to their
/// figures. The kernel counts in USER_HZ ticks, which is 100 on Linux (this assumes so).
pub fn steal_time() -> io::Result<Duration> {
    proc_stat_ticks(parse_stat_steal, "no steal column in /proc/stat")
}

/// Reads `/proc/stat`, takes a tick count from it with `parse` and converts it (at
/// USER_HZ = 100) to a duration; `missing` is the error if `parse` finds nothing.
fn proc_stat_ticks(parse: fn(&str) -> Option<u64>, missing: &str) -> io::Result<Duration> {
    let stat = fs::read_to_string("/proc/stat")?;
    let ticks = parse(&stat).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, missing))?;
    Ok(Duration::from_millis(ticks.saturating_mul(10)))
}

/// The `steal` field (the 8th number) of the aggregate `cpu` line of `/proc/stat`.
pub fn parse_stat_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
}

/// CPU time the whole machine spent busy, all CPUs together: every column of the
/// `cpu` line of `/proc/stat` but idle, iowait and steal (USER_HZ ticks, 100 on Linux,
/// as [`steal_time`] assumes).
pub fn machine_busy() -> io::Result<Duration> {
    proc_stat_ticks(parse_stat_busy, "no cpu line in /proc/stat")
}

/// The busy ticks of the aggregate `cpu` line: user, nice, system, irq, softirq (guest
/// time is already inside user).
pub fn parse_stat_busy(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal ...
    (f.len() >= 7).then(|| f[0] + f[1] + f[2] + f[5] + f[6])
}

/// The user and system CPU time of process `pid` so far (`/proc/PID/stat`, all its
/// threads; USER_HZ ticks as above).
pub fn process_cpu(pid: u32) -> io::Result<(Duration, Duration)> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (u, s) = parse_pid_stat_cpu(&stat).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no utime/stime in /proc/PID/stat",
        )
    })?;
    Ok((
        Duration::from_millis(u.saturating_mul(10)),
        Duration::from_millis(s.saturating_mul(10)),
    ))
}

/// `utime` and `stime` (fields 14 and 15) of a `/proc/PID/stat` line. The command
/// name (field 2) may contain spaces and parentheses, so fields are counted from the
/// last `)`.
pub fn parse_pid_stat_cpu(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut f = rest.split_whitespace().skip(11); // field 3 is the first after ')'
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// Formats a KiB count as MiB with one decimal.
pub fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Runs `f` in a fresh coroutine and returns its result, waiting at most `timeout`.
///
/// Call it from a plain thread. The wait itself does not poll: the coroutine hands its
/// result over a std channel and this thread blocks in `recv_timeout`, so the watchdog
/// costs nothing while the measurement runs (no thread waking up every millisecond
/// next to the Ps being measured).
///
/// # Panics
///
/// If `f` panicked (with its message), or if it is not done after `timeout` (then the
/// coroutine is left running; the panic is meant to end the process).
pub fn run_bounded<T, F>(timeout: Duration, what: &str, f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let (tx, rx) = mpsc::channel();
    let h = goro::go!(move || {
        // An unbounded std channel's send never blocks.
        let _ = tx.send(f());
    });
    match rx.recv_timeout(timeout) {
        Ok(v) => {
            if let Err(payload) = h.join() {
                panic!(
                    "{what}: coroutine panicked: {}",
                    panic_message(payload.as_ref())
                );
            }
            v
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: not done after {timeout:?} (hang? lost wake-up? timer never fired?)")
        }
        // The sender was dropped without a send: `f` panicked.
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Err(payload) => panic!(
                "{what}: coroutine panicked: {}",
                panic_message(payload.as_ref())
            ),
            Ok(()) => unreachable!("{what}: the coroutine ended without sending its result"),
        },
    }
}

/// Spins on the CPU for `dur` without yielding (Go's `doWork` in `sleep_test.go`): the
/// calling coroutine keeps its P the whole time, as a CPU-bound goroutine does.
pub fn do_work(dur: Duration) {
    let start = Instant::now();
    while start.elapsed() < dur {}
}

/// Spins without yielding until `cond` holds, as Go's benchmarks do with
/// `for atomic.Load(..) < n {}`; panics with `what()` if it has not after `timeout`.
///
/// The clock is read only every 1024 polls, so the loop stays a tight atomic poll.
pub fn spin_until<M: fmt::Display>(
    timeout: Duration,
    what: impl FnOnce() -> M,
    mut cond: impl FnMut() -> bool,
) {
    let start = Instant::now();
    let mut polls = 0u32;
    while !cond() {
        std::hint::spin_loop();
        polls = polls.wrapping_add(1);
        if polls & 1023 == 0 && start.elapsed() > timeout {
            panic!("not done after spinning {timeout:?}: {}", what());
        }
    }
}

/// Go's `warmupScheduler` (`sleep_test.go`): starts `n` coroutines that each spin until
/// all `n` have started, then spin 1 ms more, and waits for them. With `n` = the number
/// of Ps this gets every P an M running a coroutine at the same time, so that starting
/// threads does not pollute the measurement that follows.
///
/// Call it from a coroutine (as Go calls it from the benchmark goroutine) or a thread.
/// No coroutine yields while spinning, so with fewer than `n` Ps free this would spin
/// until the 10 s bound panics.
pub fn warmup_scheduler(n: usize) {
    all_at_once(n, "warmup_scheduler", || do_work(Duration::from_millis(1)));
}

/// Spawns `n` coroutines that each wait (spinning, bounded by 10 s) until all `n` run
/// at the same time, then call `f`; joins them and returns what they returned. With
/// `n` = the number of Ps this runs `f` once on every P. `what` names the caller in a
/// panic. The same conditions as [`warmup_scheduler`] apply.
pub fn all_at_once<R: Send + 'static>(
    n: usize,
    what: &'static str,
    f: impl Fn() -> R + Send + Sync + 'static,
) -> Vec<R> {
    let started = std::sync::Arc::new(AtomicUsize::new(0));
    let f = std::sync::Arc::new(f);
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let started = started.clone();
            let f = f.clone();
            goro::go!(move || {
                started.fetch_add(1, Ordering::AcqRel);
                spin_until(
                    Duration::from_secs(10),
                    || format!("{what}: not all {n} coroutines ran at once"),
                    || started.load(Ordering::Acquire) >= n,
                );
                f()
            })
        })
        .collect();
    handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|payload| {
                panic!(
                    "{what}: a coroutine panicked: {}",
                    panic_message(payload.as_ref())
                )
            })
        })
        .collect()
}

/// The single waiter slot of [`WaitGroup`].
#[derive(Default)]
struct WaiterSlot(Mutex<Option<Unparker>>);

impl WaiterSlot {
    fn lock(&self) -> MutexGuard<'_, Option<Unparker>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the published waiter, if any.
    fn wake(&self) {
        let u = self.lock().take();
        if let Some(u) = u {
            u.unpark();
        }
    }

    /// Sleeps the caller (coroutine or thread) until `ready()` holds, with the
    /// publish-then-recheck protocol: the waker makes `ready()` true BEFORE it calls
    /// [`wake`](Self::wake), and the waiter publishes its unparker BEFORE it re-checks,
    /// so the slot's mutex orders one after the other and no wake-up is lost.
    ///
    /// Unbounded: the benchmarks bound it from outside ([`run_bounded`]), so that no
    /// timeout timer disturbs the timer heaps being measured.
    fn wait(&self, reason: WaitReason, mut ready: impl FnMut() -> bool) {
        loop {
            if ready() {
                return;
            }
            let u = park::prepare();
            *self.lock() = Some(u);
            if ready() {
                // Withdraw the unparker; if a waker took it already, its unpark hits a
                // wait we abandon (the next prepare makes it stale).
                self.lock().take();
                return;
            }
            park::park(reason);
        }
    }
}

/// A minimal Go `sync.WaitGroup` for ONE waiter, on the raw park API.
#[derive(Default)]
pub struct WaitGroup {
    count: AtomicUsize,
    waiter: WaiterSlot,
}

impl WaitGroup {
    /// A group with a count of zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `n` to the count.
    pub fn add(&self, n: usize) {
        self.count.fetch_add(n, Ordering::AcqRel);
    }

    /// Subtracts one from the count; the call that brings it to zero wakes the waiter.
    ///
    /// # Panics
    ///
    /// If the count was already zero.
    pub fn done(&self) {
        let prev = self.count.fetch_sub(1, Ordering::AcqRel);
        assert!(prev > 0, "WaitGroup::done called more often than add");
        if prev == 1 {
            self.waiter.wake();
        }
    }

    /// Sleeps (parks the coroutine or thread) until the count is zero. One waiter at a
    /// time.
    pub fn wait(&self) {
        self.waiter.wait(WaitReason::WaitGroup, || {
            self.count.load(Ordering::Acquire) == 0
        });
    }
}

/// Summary of a set of lateness samples, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Lateness {
    /// Number of samples.
    pub n: usize,
    /// Mean.
    pub avg: f64,
    /// Median (nearest rank).
    pub p50: u64,
    /// 99th percentile (nearest rank).
    pub p99: u64,
    /// Maximum.
    pub max: u64,
}

impl Lateness {
    /// Summarises `samples` (sorted in place). `None` if there are none.
    pub fn of(samples: &mut [u64]) -> Option<Lateness> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let n = samples.len();
        let rank = |p: f64| samples[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        let sum: u128 = samples.iter().map(|&s| u128::from(s)).sum();
        Some(Lateness {
            n,
            avg: sum as f64 / n as f64,
            p50: rank(0.50),
            p99: rank(0.99),
            max: samples[n - 1],
        })
    }
}

/// Ports of Go's runtime-semaphore benchmarks (`Sema*`, Go 1.19
/// `sync/runtime_sema_test.go`) and `sync.Mutex` benchmarks (`Mutex*`,
/// `sync/mutex_test.go`): the workloads that `benches/sync.rs` (criterion) and
/// `src/bin/sync_compare.rs` (the table next to Go, `bench/go/`) both time.
///
/// [`run`](sync_workloads::run) is Go's `b.RunParallel`: `maxprocs()` workers (ten times as many for the
/// `*Slack` benchmarks, Go's `b.SetParallelism(10)`) share `iters` iterations, which
/// they take from a common budget in batches (Go's `testing.PB`). Coroutines for
/// goro, plain threads for the `std` and `parking_lot` peers. The clock starts when
/// every worker is running and waiting at a start gate, and stops when the last one
/// is done, so spawning is not timed (Go times it; it is small next to its runs).
///
/// Every `Mutex*` critical section adds one to a counter in the mutex, and every run
/// checks the total afterwards: a lost update (two holders at once) panics. Go's
/// benchmarks have empty critical sections; `bench/go/` does the same counting.
pub mod sync_workloads {
    use std::hint::black_box;
    use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{mpsc, Arc};
    use std::thread;
    use std::time::{Duration, Instant};

    use goro::park::WaitReason;
    use goro_sync::{backoff, sema};

    /// Bound of one timed run (spawning to the last join); a run that takes longer
    /// panics (hang, lost wake-up).
    pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);
    /// Bound of the wait for every worker to reach the start gate.
    const START_TIMEOUT: Duration = Duration::from_secs(10);
    /// Length of the local work loop of the `*Work*` benchmarks (Go's 100).
    pub const WORK_ITERS: u32 = 100;
    /// Workers per P in the `*Slack` benchmarks (Go's `b.SetParallelism(10)`).
    pub const SLACK: usize = 10;

    /// The benchmarks, named as Go's without `Benchmark`.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Bench {
        /// Every worker releases then acquires its own (padded) semaphore: never waits.
        SemaUncontended,
        /// One shared semaphore; each op a release then an acquire. No work.
        SemaSyntNonblock,
        /// As `SemaSyntNonblock`, plus a taker that keeps `maxprocs() / 2` units, so
        /// that some acquires must wait (none with one P).
        SemaSyntBlock,
        /// `SemaSyntNonblock` with the local work between release and acquire.
        SemaWorkNonblock,
        /// `SemaSyntBlock` with the local work between release and acquire.
        SemaWorkBlock,
        /// Every worker locks and unlocks its own (padded) mutex.
        MutexUncontended,
        /// One shared mutex, lock+unlock per op.
        Mutex,
        /// `Mutex` with ten workers per P.
        MutexSlack,
        /// `Mutex` with the local work after each unlock.
        MutexWork,
        /// `MutexWork` with ten workers per P.
        MutexWorkSlack,
        /// Not in Go's tree: the local work alone, per op (`bench/go/` has it too), to
        /// compare what the two compilers make of it.
        WorkOnly,
    }

    impl Bench {
        /// Every benchmark, in report order.
        pub const ALL: [Bench; 11] = [
            Bench::SemaUncontended,
            Bench::SemaSyntNonblock,
            Bench::SemaSyntBlock,
            Bench::SemaWorkNonblock,
            Bench::SemaWorkBlock,
            Bench::MutexUncontended,
            Bench::Mutex,
            Bench::MutexSlack,
            Bench::MutexWork,
            Bench::MutexWorkSlack,
            Bench::WorkOnly,
        ];

        /// Go's name without `Benchmark`: the criterion group's name.
        pub fn name(self) -> &'static str {
            match self {
                Bench::SemaUncontended => "SemaUncontended",
                Bench::SemaSyntNonblock => "SemaSyntNonblock",
                Bench::SemaSyntBlock => "SemaSyntBlock",
                Bench::SemaWorkNonblock => "SemaWorkNonblock",
                Bench::SemaWorkBlock => "SemaWorkBlock",
                Bench::MutexUncontended => "MutexUncontended",
                Bench::Mutex => "Mutex",
                Bench::MutexSlack => "MutexSlack",
                Bench::MutexWork => "MutexWork",
                Bench::MutexWorkSlack => "MutexWorkSlack",
                Bench::WorkOnly => "WorkOnly",
            }
        }

        /// The benchmark named `name` (as [`name`](Self::name) spells it).
        pub fn from_name(name: &str) -> Option<Bench> {
            Bench::ALL.into_iter().find(|b| b.name() == name)
        }

        /// Who runs it: goro both ways for everything, the thread mutexes for the
        /// `Mutex*` benchmarks, goro alone for the work floor.
        pub fn contenders(self) -> &'static [Contender] {
            match self {
                Bench::MutexUncontended
                | Bench::Mutex
                | Bench::MutexSlack
                | Bench::MutexWork
                | Bench::MutexWorkSlack => &Contender::ALL,
                Bench::WorkOnly => &[Contender::Goro],
                _ => &[Contender::Goro, Contender::GoroNoBackoff],
            }
        }

        fn work(self) -> bool {
            matches!(
                self,
                Bench::SemaWorkNonblock
                    | Bench::SemaWorkBlock
                    | Bench::MutexWork
                    | Bench::MutexWorkSlack
            )
        }

        fn block(self) -> bool {
            matches!(self, Bench::SemaSyntBlock | Bench::SemaWorkBlock)
        }

        /// Workers per P.
        fn parallelism(self) -> usize {
            match self {
                Bench::MutexSlack | Bench::MutexWorkSlack => SLACK,
                _ => 1,
            }
        }
    }

    /// What runs a benchmark.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub enum Contender {
        /// goro (`goro_sync::sema`, `goro::sync::Mutex`) on coroutines.
        Goro,
        /// The same with `backoff::set_randomized(false)` for the run.
        GoroNoBackoff,
        /// `std::sync::Mutex` on plain threads.
        Std,
        /// `parking_lot::Mutex` on plain threads.
        ParkingLot,
    }

    impl Contender {
        /// Every contender, in report order.
        pub const ALL: [Contender; 4] = [
            Contender::Goro,
            Contender::GoroNoBackoff,
            Contender::Std,
            Contender::ParkingLot,
        ];

        /// The criterion function's name.
        pub fn name(self) -> &'static str {
            match self {
                Contender::Goro => "goro",
                Contender::GoroNoBackoff => "goro_no_backoff",
                Contender::Std => "std",
                Contender::ParkingLot => "parking_lot",
            }
        }

        /// The contender named `name`.
        pub fn from_name(name: &str) -> Option<Contender> {
            Contender::ALL.into_iter().find(|c| c.name() == name)
        }
    }

    /// The local work of the `*Work*` benchmarks: Go's loop of `foo *= 2; foo /= 2`,
    /// [`WORK_ITERS`] times. `black_box` on every step keeps LLVM from folding the
    /// loop (without it, the loop becomes one sign extension); it adds a store and a
    /// load per step, which Go's code does not have, while Go's signed division by 2
    /// is a longer sequence than LLVM's: `WorkOnly` shows the net difference. (In Go's
    /// own benchmarks the result is dead and Go 1.19 deletes the loop's body, leaving
    /// an empty 100-step loop; `bench/go/` keeps the result so that both do the work.)
    #[inline]
    pub fn local_work(mut acc: i64) -> i64 {
        for _ in 0..WORK_ITERS {
            acc = black_box(acc.wrapping_mul(2));
            acc /= 2;
        }
        acc
    }

    /// Runs `iters` iterations of `bench` with `contender` and returns the time they
    /// took, all workers together (time per op = the result / `iters`).
    ///
    /// Call it from a plain thread (the thread peers' start gate sleeps).
    ///
    /// # Panics
    ///
    /// If `contender` does not run `bench`, if a run exceeds [`RUN_TIMEOUT`], if a
    /// worker panicked, or if a correctness check failed (a lost mutex update, a
    /// semaphore count off at the end).
    pub fn run(bench: Bench, contender: Contender, iters: u64) -> Duration {
        assert!(
            bench.contenders().contains(&contender),
            "{} does not run {}",
            contender.name(),
            bench.name()
        );
        if iters == 0 {
            return Duration::ZERO;
        }
        let workers = goro::maxprocs() * bench.parallelism();
        match contender {
            Contender::Goro | Contender::GoroNoBackoff => {
                let _setting = BackoffSetting::set(contender == Contender::Goro);
                crate::run_bounded(RUN_TIMEOUT, bench.name(), move || {
                    on_coroutines(bench, workers, iters)
                })
            }
            Contender::Std => {
                mutex_bench::<std::sync::Mutex<u64>>(bench, Runner::Threads, workers, iters)
            }
            Contender::ParkingLot => {
                mutex_bench::<parking_lot::Mutex<u64>>(bench, Runner::Threads, workers, iters)
            }
        }
    }

    /// Sets the back-off mode and restores the previous one when dropped (also on a
    /// panic).
    struct BackoffSetting(bool);

    impl BackoffSetting {
        fn set(randomized: bool) -> BackoffSetting {
            let old = backoff::randomized();
            backoff::set_randomized(randomized);
            BackoffSetting(old)
        }
    }

    impl Drop for BackoffSetting {
        fn drop(&mut self) {
            backoff::set_randomized(self.0);
        }
    }

    /// Go's `testing.PB`: a worker's view of the shared iteration budget.
    pub struct Pb<'a> {
        gate: &'a Gate,
        left: u64,
    }

    impl Pb<'_> {
        /// Whether the worker should run one more iteration (Go's `pb.Next`).
        #[inline]
        pub fn next_op(&mut self) -> bool {
            if self.left > 0 {
                self.left -= 1;
                return true;
            }
            let g = self.gate;
            let first = g.next.fetch_add(g.grain, Ordering::Relaxed);
            if first >= g.total {
                return false;
            }
            self.left = g.grain.min(g.total - first) - 1;
            true
        }
    }

    /// The shared state of one parallel run: the iteration budget, the start gate and
    /// the clock.
    struct Gate {
        total: u64,
        /// Iterations a worker takes at a time. Go sizes batches to ~100 µs from the
        /// previous run (at most 10,000); with no previous run, this is 1/100 of each
        /// worker's share, at most 1,000 (tens of µs for the fastest ops here).
        grain: u64,
        next: AtomicU64,
        workers: usize,
        ready: AtomicUsize,
        open: AtomicBool,
        finished: AtomicUsize,
        base: Instant,
        start_ns: AtomicU64,
        end_ns: AtomicU64,
    }

    impl Gate {
        fn new(workers: usize, iters: u64) -> Arc<Gate> {
            Arc::new(Gate {
                total: iters,
                grain: (iters / (100 * workers as u64)).clamp(1, 1000),
                next: AtomicU64::new(0),
                workers,
                ready: AtomicUsize::new(0),
                open: AtomicBool::new(false),
                finished: AtomicUsize::new(0),
                base: Instant::now(),
                start_ns: AtomicU64::new(0),
                end_ns: AtomicU64::new(0),
            })
        }

        fn now_ns(&self) -> u64 {
            self.base.elapsed().as_nanos() as u64
        }

        /// A worker: says it is ready, then waits for the gate to open, calling
        /// `pause` between polls (a yield: workers may outnumber Ps or cores).
        fn arrive_and_wait(&self, pause: fn()) {
            self.ready.fetch_add(1, Ordering::AcqRel);
            let t0 = Instant::now();
            let mut polls = 0u32;
            while !self.open.load(Ordering::Acquire) {
                pause();
                polls = polls.wrapping_add(1);
                if polls & 255 == 0 && t0.elapsed() > START_TIMEOUT {
                    panic!("a worker waited {START_TIMEOUT:?} at the start gate");
                }
            }
        }

        /// The coordinator: starts the clock and lets the workers go.
        fn open(&self) {
            self.start_ns.store(self.now_ns(), Ordering::Relaxed);
            self.open.store(true, Ordering::Release);
        }

        fn all_ready(&self) -> bool {
            self.ready.load(Ordering::Acquire) == self.workers
        }

        /// A worker is done; the last one stops the clock (and gets `true`).
        fn finish(&self) -> bool {
            if self.finished.fetch_add(1, Ordering::AcqRel) + 1 == self.workers {
                self.end_ns.store(self.now_ns(), Ordering::Release);
                true
            } else {
                false
            }
        }

        fn elapsed(&self) -> Duration {
            let start = self.start_ns.load(Ordering::Relaxed);
            let end = self.end_ns.load(Ordering::Acquire);
            assert!(end >= start, "the clock stopped before it started");
            Duration::from_nanos(end - start)
        }
    }

    /// How the workers of a run are run.
    #[derive(Clone, Copy)]
    enum Runner {
        /// Coroutines, spawned from the coordinator, itself a coroutine.
        Coroutines,
        /// Plain threads, spawned from the coordinator, a plain thread.
        Threads,
    }

    type Body = Arc<dyn Fn(&mut Pb<'_>) + Send + Sync>;

    /// Go's `b.RunParallel(body)`: runs `body` on `workers` workers behind the gate
    /// and returns the time from the gate's opening to the last worker's end.
    fn run_parallel(runner: Runner, workers: usize, iters: u64, body: Body) -> Duration {
        let gate = Gate::new(workers, iters);
        match runner {
            Runner::Coroutines => {
                let handles: Vec<_> = (0..workers)
                    .map(|_| {
                        let (gate, body) = (gate.clone(), body.clone());
                        goro::go!(move || {
                            gate.arrive_and_wait(goro::yield_now);
                            body(&mut Pb {
                                gate: &gate,
                                left: 0,
                            });
                            gate.finish();
                        })
                    })
                    .collect();
                // The coordinator is a coroutine: it yields its P while it waits, and
                // parks in the joins (the whole run is bounded by `run_bounded`).
                let t0 = Instant::now();
                while !gate.all_ready() {
                    goro::yield_now();
                    if t0.elapsed() > START_TIMEOUT {
                        panic!("not all {workers} workers reached the start gate");
                    }
                }
                gate.open();
                for h in handles {
                    if let Err(p) = h.join() {
                        std::panic::resume_unwind(p);
                    }
                }
            }
            Runner::Threads => {
                let (done_tx, done_rx) = mpsc::channel();
                let handles: Vec<_> = (0..workers)
                    .map(|_| {
                        let (gate, body, done_tx) = (gate.clone(), body.clone(), done_tx.clone());
                        thread::spawn(move || {
                            gate.arrive_and_wait(thread::yield_now);
                            body(&mut Pb {
                                gate: &gate,
                                left: 0,
                            });
                            if gate.finish() {
                                let _ = done_tx.send(());
                            }
                        })
                    })
                    .collect();
                drop(done_tx);
                if !crate::wait_until(START_TIMEOUT, || gate.all_ready()) {
                    panic!("not all {workers} threads reached the start gate");
                }
                gate.open();
                // Blocks without polling while the workers run.
                match done_rx.recv_timeout(RUN_TIMEOUT) {
                    Ok(()) => {}
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        panic!("thread workers not done after {RUN_TIMEOUT:?}")
                    }
                    // Every sender is gone without the last one's send: a worker
                    // panicked; the joins below re-raise it.
                    Err(mpsc::RecvTimeoutError::Disconnected) => {}
                }
                for h in handles {
                    if let Err(p) = h.join() {
                        std::panic::resume_unwind(p);
                    }
                }
            }
        }
        gate.elapsed()
    }

    /// A value on its own cache lines (Go pads with 128 bytes).
    #[repr(align(128))]
    struct Padded<T>(T);

    /// The coordinator of a goro run (a coroutine).
    fn on_coroutines(bench: Bench, workers: usize, iters: u64) -> Duration {
        let run = |body: Body| run_parallel(Runner::Coroutines, workers, iters, body);
        match bench {
            // Go's BenchmarkSemaUncontended. Same, but each worker's semaphore lives
            // on the heap in a 128-byte-aligned box (Go: 4 + 128 bytes from `new`).
            Bench::SemaUncontended => {
                let left = Arc::new(AtomicU64::new(0));
                let left2 = left.clone();
                let t = run(Arc::new(move |pb| {
                    let sem = Box::new(Padded(AtomicU32::new(0)));
                    while pb.next_op() {
                        sema::release(&sem.0, false);
                        sema::acquire(&sem.0, false, WaitReason::Sema);
                    }
                    left2.fetch_add(u64::from(sem.0.load(Ordering::Acquire)), Ordering::AcqRel);
                }));
                assert_eq!(left.load(Ordering::Acquire), 0, "units left over");
                t
            }
            // Go's benchmarkSema (SemaSynt*/SemaWork*): a release, the work if any, an
            // acquire; with `block`, the taker coroutine keeps maxprocs()/2 units (it
            // is spawned before the workers, as in Go, and joined after the clock
            // stopped). Each worker releases once more at the end.
            Bench::SemaSyntNonblock
            | Bench::SemaSyntBlock
            | Bench::SemaWorkNonblock
            | Bench::SemaWorkBlock => {
                let sem = Arc::new(AtomicU32::new(0));
                let keep = if bench.block() {
                    goro::maxprocs() / 2
                } else {
                    0
                };
                let taker = (keep > 0).then(|| {
                    let sem = sem.clone();
                    goro::go!(move || {
                        for _ in 0..keep {
                            sema::acquire(&sem, false, WaitReason::Sema);
                        }
                    })
                });
                let work = bench.work();
                let sem2 = sem.clone();
                let t = run(Arc::new(move |pb| {
                    let mut acc = 0i64;
                    while pb.next_op() {
                        sema::release(&sem2, false);
                        if work {
                            acc = local_work(acc);
                        }
                        sema::acquire(&sem2, false, WaitReason::Sema);
                    }
                    black_box(acc);
                    sema::release(&sem2, false);
                }));
                if let Some(h) = taker {
                    if let Err(p) = h.join() {
                        std::panic::resume_unwind(p);
                    }
                }
                let left = sem.load(Ordering::Acquire) as usize;
                assert_eq!(left, workers - keep, "semaphore count off at the end");
                t
            }
            // Not in Go's tree: the work alone.
            Bench::WorkOnly => run(Arc::new(|pb| {
                let mut acc = 0i64;
                while pb.next_op() {
                    acc = local_work(acc);
                }
                black_box(acc);
            })),
            _ => mutex_bench::<goro::sync::Mutex<u64>>(bench, Runner::Coroutines, workers, iters),
        }
    }

    /// A mutex around the counter its holders increment.
    trait CountingMutex: Send + Sync + 'static {
        fn with_zero() -> Self;
        /// Locks, adds one, unlocks.
        fn increment(&self);
        fn count(&self) -> u64;
    }

    impl CountingMutex for goro::sync::Mutex<u64> {
        fn with_zero() -> Self {
            goro::sync::Mutex::new(0)
        }
        #[inline]
        fn increment(&self) {
            *self.lock() += 1;
        }
        fn count(&self) -> u64 {
            *self.lock()
        }
    }

    impl CountingMutex for std::sync::Mutex<u64> {
        fn with_zero() -> Self {
            std::sync::Mutex::new(0)
        }
        #[inline]
        fn increment(&self) {
            *self.lock().expect("poisoned") += 1;
        }
        fn count(&self) -> u64 {
            *self.lock().expect("poisoned")
        }
    }

    impl CountingMutex for parking_lot::Mutex<u64> {
        fn with_zero() -> Self {
            parking_lot::Mutex::new(0)
        }
        #[inline]
        fn increment(&self) {
            *self.lock() += 1;
        }
        fn count(&self) -> u64 {
            *self.lock()
        }
    }

    /// The `Mutex*` benchmarks with mutex type `M` on `runner`'s workers.
    fn mutex_bench<M: CountingMutex>(
        bench: Bench,
        runner: Runner,
        workers: usize,
        iters: u64,
    ) -> Duration {
        match bench {
            // Go's BenchmarkMutexUncontended: each worker its own padded mutex (on its
            // stack, as Go's does not escape), plus the counting.
            Bench::MutexUncontended => {
                let total = Arc::new(AtomicU64::new(0));
                let total2 = total.clone();
                let t = run_parallel(
                    runner,
                    workers,
                    iters,
                    Arc::new(move |pb| {
                        let m = Padded(M::with_zero());
                        while pb.next_op() {
                            m.0.increment();
                        }
                        total2.fetch_add(m.0.count(), Ordering::AcqRel);
                    }),
                );
                let total = total.load(Ordering::Acquire);
                assert_eq!(total, iters, "lost updates under the mutex");
                t
            }
            // Go's benchmarkMutex (Mutex, MutexSlack, MutexWork, MutexWorkSlack): one
            // shared mutex; lock+unlock, then the work if any. Slack: ten workers per
            // P, all of them in the loop, as Go's SetParallelism(10).
            Bench::Mutex | Bench::MutexSlack | Bench::MutexWork | Bench::MutexWorkSlack => {
                let m = Arc::new(M::with_zero());
                let m2 = m.clone();
                let work = bench.work();
                let t = run_parallel(
                    runner,
                    workers,
                    iters,
                    Arc::new(move |pb| {
                        let mut acc = 0i64;
                        while pb.next_op() {
                            m2.increment();
                            if work {
                                acc = local_work(acc);
                            }
                        }
                        black_box(acc);
                    }),
                );
                assert_eq!(m.count(), iters, "lost updates under the mutex");
                t
            }
            _ => unreachable!("{} is not a Mutex benchmark", bench.name()),
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        /// Every benchmark with every contender, briefly: its checks (counts, no lost
        /// update) hold, and nothing hangs.
        #[test]
        fn every_workload_runs_and_checks() {
            for bench in Bench::ALL {
                for &c in bench.contenders() {
                    for iters in [1, 7, 3000] {
                        run(bench, c, iters);
                    }
                }
            }
        }

        #[test]
        fn budget_hands_out_exactly_iters() {
            let gate = Gate::new(3, 1234);
            let mut pbs: Vec<Pb<'_>> = (0..3)
                .map(|_| Pb {
                    gate: &gate,
                    left: 0,
                })
                .collect();
            let mut n = 0u64;
            let mut live = true;
            while live {
                live = false;
                for pb in &mut pbs {
                    if pb.next_op() {
                        n += 1;
                        live = true;
                    }
                }
            }
            assert_eq!(n, 1234);
        }

        #[test]
        fn names_round_trip() {
            for b in Bench::ALL {
                assert_eq!(Bench::from_name(b.name()), Some(b));
            }
            for c in Contender::ALL {
                assert_eq!(Contender::from_name(c.name()), Some(c));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_fields() {
        let status = "Name:\tx\nVmPeak:\t  10 kB\nVmRSS:\t    2048 kB\nVmPTE:\t  12 kB\n";
        assert_eq!(parse_status_kib(status, "VmRSS"), Some(2048));
        assert_eq!(parse_status_kib(status, "VmPTE"), Some(12));
        assert_eq!(parse_status_kib(status, "VmSwap"), None);
        // A field whose name is a prefix of another's must not match it.
        assert_eq!(parse_status_kib(status, "Vm"), None);
    }

    #[test]
    fn reads_this_process() {
        assert!(vm_rss_kib().unwrap() > 0);
        assert!(map_count().unwrap() > 0);
    }

    #[test]
    fn parses_cpu_times() {
        let stat = "cpu  100 2 30 400 5 6 7 8 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_stat_busy(stat), Some(100 + 2 + 30 + 6 + 7));
        assert_eq!(parse_stat_busy("cpu  1 2 3\n"), None);
        let pid = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0";
        assert_eq!(parse_pid_stat_cpu(pid), Some((250, 75)));
        assert_eq!(parse_pid_stat_cpu("42 (x) S 1"), None);
        let (u, s) = process_cpu(std::process::id()).unwrap();
        assert!(u + s < Duration::from_secs(3600));
        assert!(machine_busy().unwrap() > Duration::ZERO);
    }

    #[test]
    fn parses_steal() {
        let stat = "cpu  123039 0 46079 315571 549 0 143 5925 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
        assert_eq!(parse_stat_steal(stat), Some(5925));
        assert_eq!(parse_stat_steal("cpu0 1 2 3\n"), None);
    }

    #[test]
    fn lateness_summary() {
        let mut v: Vec<u64> = (1..=100).rev().collect();
        let l = Lateness::of(&mut v).unwrap();
        assert_eq!((l.n, l.p50, l.p99, l.max), (100, 50, 99, 100));
        assert!((l.avg - 50.5).abs() < 1e-9);
        assert_eq!(Lateness::of(&mut []), None);
        assert_eq!(Lateness::of(&mut [7]).unwrap().p99, 7);
    }

    #[test]
    fn wait_group_wakes_a_thread_waiting_on_coroutines() {
        use std::sync::Arc;
        let wg = Arc::new(WaitGroup::new());
        wg.add(10);
        for _ in 0..10 {
            let w = wg.clone();
            goro::go!(move || {
                goro::time::sleep(Duration::from_millis(5));
                w.done();
            });
        }
        // This thread parks in `wait` until the last coroutine is done.
        wg.wait();
    }

    #[test]
    fn wait_until_is_bounded() {
        assert!(!wait_until(Duration::from_millis(20), || false));
        assert!(wait_until(Duration::from_secs(1), || true));
    }
}
