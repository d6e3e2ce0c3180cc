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
//!
//! The helpers here read Linux's `/proc` files (memory and mapping counts), give every
//! wait of a measurement tool a bound, so that a runtime bug shows up as a clear panic
//! instead of a hang, and provide the small synchronisation pieces the timer benchmarks
//! need ([`WaitGroup`], [`TickSlot`], [`do_work`]), built on the raw park API only.
//! Nothing here uses `unsafe`.

use std::fmt;
use std::fs;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use goro::park::{self, Unparker, WaitReason};

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
    let stat = fs::read_to_string("/proc/stat")?;
    let ticks = parse_stat_steal(&stat).ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidData, "no steal column in /proc/stat")
    })?;
    Ok(Duration::from_millis(ticks.saturating_mul(10)))
}

/// The `steal` field (the 8th number) of the aggregate `cpu` line of `/proc/stat`.
pub fn parse_stat_steal(stat: &str) -> Option<u64> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace().nth(8)?.parse().ok()
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
    let started = std::sync::Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let started = started.clone();
            goro::go!(move || {
                started.fetch_add(1, Ordering::AcqRel);
                spin_until(
                    Duration::from_secs(10),
                    || format!("warmup_scheduler: not all {n} coroutines ran at once"),
                    || started.load(Ordering::Acquire) >= n,
                );
                do_work(Duration::from_millis(1));
            })
        })
        .collect();
    for h in handles {
        if let Err(payload) = h.join() {
            panic!(
                "warmup coroutine panicked: {}",
                panic_message(payload.as_ref())
            );
        }
    }
}

/// The single waiter slot of [`WaitGroup`] and [`TickSlot`].
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

/// A capacity-1 tick "channel" for a ticker port: what Go's `Ticker.C` (a channel of
/// capacity 1 the runtime sends to without blocking) is to a ticker.
///
/// [`post`](Self::post) never blocks (it may run in a `RawTimer` function, on the
/// scheduler's stack): it sets the "tick pending" flag, dropping the tick if one is
/// pending already (a slow reader misses ticks, as with Go's channel), and wakes the
/// reader if it sleeps. [`recv`](Self::recv) takes a pending tick or parks for one.
#[derive(Default)]
pub struct TickSlot {
    pending: AtomicBool,
    waiter: WaiterSlot,
}

impl TickSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// Delivers a tick. Returns false if it was dropped (a tick was still pending).
    pub fn post(&self) -> bool {
        let fresh = !self.pending.swap(true, Ordering::AcqRel);
        self.waiter.wake();
        fresh
    }

    /// Takes the pending tick, parking until there is one. One reader at a time.
    pub fn recv(&self) {
        self.waiter.wait(WaitReason::ChanReceive, || {
            self.pending.swap(false, Ordering::AcqRel)
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
    fn tick_slot_keeps_one_tick() {
        let s = TickSlot::new();
        assert!(s.post());
        assert!(!s.post(), "a second tick while one is pending is dropped");
        s.recv();
        assert!(s.post());
        s.recv();
    }

    #[test]
    fn tick_slot_and_wait_group_wake_coroutines() {
        use std::sync::Arc;
        let slot = Arc::new(TickSlot::new());
        let wg = Arc::new(WaitGroup::new());
        wg.add(1);
        let (s2, w2) = (slot.clone(), wg.clone());
        let h = goro::go!(move || {
            for _ in 0..100 {
                s2.recv();
            }
            w2.done();
        });
        // A poster thread ticks until the reader is done (or 10 s have passed); this
        // thread parks in `wait` meanwhile.
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let poster = thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop2.load(Ordering::Acquire) && Instant::now() < deadline {
                slot.post();
                thread::sleep(Duration::from_micros(50));
            }
        });
        wg.wait();
        stop.store(true, Ordering::Release);
        poster.join().unwrap();
        h.join().unwrap();
    }

    #[test]
    fn wait_until_is_bounded() {
        assert!(!wait_until(Duration::from_millis(20), || false));
        assert!(wait_until(Duration::from_secs(1), || true));
    }
}
