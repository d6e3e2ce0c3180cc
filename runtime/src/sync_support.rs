//! What goro-sync needs from the scheduler, and nothing more (Go: the `sync_runtime_*`
//! functions of proc.go and sema.go).

use std::sync::atomic::Ordering;

use crate::sched;

/// Spins a mutex may make before it queues (Go: active_spin).
pub const ACTIVE_SPIN: u32 = 4;
/// Pause instructions per spin (Go: active_spin_cnt).
pub const ACTIVE_SPIN_CNT: u32 = 30;

/// Whether spinning on a contended mutex can pay off (Go: sync_runtime_canSpin):
/// only a few times, only with more than one CPU, only while another P is running
/// (the holder may be on it) and no P is idle or spinning to pick up work, and only
/// while the caller's own run queue is empty (else it should run that work instead).
pub fn can_spin(iter: u32) -> bool {
    if iter >= ACTIVE_SPIN || ncpu() <= 1 {
        return false;
    }
    sched::can_spin_now()
}

/// One spin: a few dozen pause instructions (Go: sync_runtime_doSpin).
#[inline]
pub fn do_spin() {
    for _ in 0..ACTIVE_SPIN_CNT {
        std::hint::spin_loop();
    }
}

/// The runtime's monotonic clock in nanoseconds (positive).
#[inline]
pub fn nanotime() -> i64 {
    crate::timers::nanotime()
}

fn ncpu() -> usize {
    // The CPU count, 0 until the first call computes it; written and read here only.
    static NCPU: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    // Relaxed: a cached constant (see the store below).
    let n = NCPU.load(Ordering::Relaxed);
    if n != 0 {
        return n;
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Relaxed: a cached constant; racing initialisers store the same value.
    NCPU.store(n, Ordering::Relaxed);
    n
}

/// Starts sysmon (its wake pipe and the SIGQUIT dump's handler) now, if the runtime
/// has not yet: `goro::signal` calls it before it registers its own handlers, so the
/// dump's installer sees SIGQUIT's action as the program left it.
pub fn start_sysmon() {
    sched::sysmon::start();
}

/// Turns the SIGQUIT coroutine dump off (`goro::signal` has a SIGQUIT subscriber, so
/// the signal is the program's, as in Go) or back on.
pub fn set_sigquit_dump(on: bool) {
    sched::sysmon::set_sigquit_dump(on);
}

/// The SIGQUIT dump and exit, now (a SIGQUIT that found only dropped subscribers).
pub fn sigquit_dump_now() {
    sched::sysmon::sigquit_dump_now();
}
