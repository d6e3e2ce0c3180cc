//! The thread census of the deadlock check: is every thread of the process that is
//! not goro's own asleep for good?
//!
//! The check counts the plain threads that wait on the runtime, but a thread that has
//! never touched goro may still wake everyone: a producer thread that computes, sleeps
//! or reads a file before its first send on a goro channel. Go has no such threads
//! (every goroutine is its own); goro does, so before it reports a deadlock it looks
//! at every thread the kernel lists for the process (`/proc/self/task`, through the
//! descriptors `procfs` holds, so that it still looks when the process is out of
//! them). A thread that is goro's (an M, sysmon) is the scheduler's business; any
//! other thread must be blocked in a futex wait with no timeout — a std lock,
//! condvar, channel, `park` or `join` with nothing left to wake it — or the report is
//! held back: a thread that runs, sleeps with a deadline, or waits in any other system
//! call (a read, a poll, an accept) may still wake a coroutine. The threads counted as waiting on goro pass the
//! same test, since they sleep in an untimed futex wait too.
//!
//! Threads a bridge to another runtime started on goro's behalf (goro-tokio's workers)
//! sleep in `epoll_wait`, not in a futex, and would hold every report back. The bridge
//! names them ([`set_idle_helpers`]) with a test that says whether such a thread can
//! wake anyone now: when nothing is in flight on that runtime (no task alive, no
//! future of goro's being polled on it), it cannot, and it is skipped like an M.
//!
//! A futex can be woken by another process sharing its memory, and a thread by a
//! signal; the check, like Go's, does not look for either. Where `/proc` cannot be
//! read, nothing is known, and nothing is reported.

use std::sync::OnceLock;

use super::procfs;

/// The bridge's test (see the module doc): true for a thread it started that can wake
/// nobody now. Set once.
static IDLE_HELPERS: OnceLock<fn(i32) -> bool> = OnceLock::new();

/// Installs the bridge's test of its idle threads (see the module doc). Only the first
/// call counts.
pub(crate) fn set_idle_helpers(test: fn(i32) -> bool) {
    let _ = IDLE_HELPERS.set(test);
}

/// Whether `tid` is an idle helper of a bridge (see the module doc).
fn idle_helper(tid: i32) -> bool {
    IDLE_HELPERS.get().is_some_and(|test| test(tid))
}

/// Whether every thread of the process whose id `ours` rejects is blocked in an
/// untimed futex wait (see the module doc). Stops at the first thread that is not.
pub(crate) fn others_asleep_for_good(ours: impl Fn(i32) -> bool) -> bool {
    // Listed and read through the descriptors sysmon holds (see `procfs`), so that a
    // process out of descriptors still gets its report.
    let Some(tids) = procfs::tids() else {
        return false;
    };
    let mut buf = [0u8; 256];
    for tid in tids {
        if ours(tid) || idle_helper(tid) {
            continue;
        }
        // A thread that ended since the listing cannot wake anyone.
        match procfs::read_task_file(tid, "syscall", &mut buf) {
            Ok(n) => match std::str::from_utf8(&buf[..n]) {
                Ok(line) if untimed_futex_wait(line) => {}
                _ => return false,
            },
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ESRCH)) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Whether a line of `/proc/<pid>/task/<tid>/syscall` ("NR arg0 .. arg5 sp pc", or
/// "running", or "-1 sp pc" for a thread blocked outside a system call) is a futex
/// wait without a timeout: `FUTEX_WAIT` or `FUTEX_WAIT_BITSET`, private or shared,
/// with a null timeout pointer (arg 3).
fn untimed_futex_wait(line: &str) -> bool {
    let mut fields = line.split_whitespace();
    let nr = fields.next().and_then(|f| f.parse::<i64>().ok());
    if nr != Some(libc::SYS_futex) {
        return false;
    }
    let args: Vec<u64> = fields
        .take(4)
        .filter_map(|f| u64::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .collect();
    let [_addr, op, _val, timeout] = args[..] else {
        return false;
    };
    let cmd = op as i32 & !(libc::FUTEX_PRIVATE_FLAG | libc::FUTEX_CLOCK_REALTIME);
    (cmd == libc::FUTEX_WAIT || cmd == libc::FUTEX_WAIT_BITSET) && timeout == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Barrier};
    use std::time::{Duration, Instant};

    fn line(nr: i64, op: i32, timeout: u64) -> String {
        format!("{nr} 0x7f00aa 0x{op:x} 0x2 0x{timeout:x} 0x0 0x0 0x7ffd10 0x7f0042")
    }

    #[test]
    fn reads_the_syscall_line() {
        let f = libc::SYS_futex;
        let private = libc::FUTEX_PRIVATE_FLAG;
        assert!(untimed_futex_wait(&line(f, libc::FUTEX_WAIT | private, 0)));
        assert!(untimed_futex_wait(&line(f, libc::FUTEX_WAIT, 0)));
        assert!(untimed_futex_wait(&line(
            f,
            libc::FUTEX_WAIT_BITSET | private,
            0
        )));
        assert!(!untimed_futex_wait(&line(
            f,
            libc::FUTEX_WAIT | private,
            0x7ffd00
        )));
        assert!(!untimed_futex_wait(&line(f, libc::FUTEX_WAKE | private, 0)));
        assert!(!untimed_futex_wait(&line(libc::SYS_read, 0, 0)));
        assert!(!untimed_futex_wait("running\n"));
        assert!(!untimed_futex_wait("-1 0x7ffd10 0x7f0042\n"));
        assert!(!untimed_futex_wait(""));
    }

    /// Waits (bounded) until the census of `mine` alone says `want` (other tests of
    /// this binary have threads of their own: the census passes them as "ours").
    fn census_says(want: bool, mine: &[i32]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while others_asleep_for_good(|t| !mine.contains(&t)) != want {
            assert!(Instant::now() < deadline, "the census never said {want}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Spawns `f` on a thread; returns its handle and its thread id.
    fn spawn(f: impl FnOnce() + Send + 'static) -> (std::thread::JoinHandle<()>, i32) {
        let (tx, rx) = std::sync::mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            f()
        });
        (h, rx.recv().unwrap())
    }

    #[test]
    fn a_thread_in_a_lock_is_asleep_one_that_sleeps_or_runs_is_not() {
        // Blocked on a barrier nobody else reaches (until the end): an untimed futex wait.
        let barrier = Arc::new(Barrier::new(2));
        let b = barrier.clone();
        let (waiter, w) = spawn(move || {
            b.wait();
        });
        census_says(true, &[w]);
        // A thread in a timed sleep may wake someone.
        let (sleeper, s) = spawn(|| std::thread::sleep(Duration::from_millis(300)));
        census_says(false, &[w, s]);
        sleeper.join().unwrap();
        census_says(true, &[w, s]);
        // So may one that computes.
        let stop = Arc::new(AtomicBool::new(false));
        let go_on = stop.clone();
        let (spinner, c) = spawn(move || {
            let t = Instant::now();
            while !go_on.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(10) {
                std::hint::spin_loop();
            }
        });
        census_says(false, &[w, c]);
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        // And a joiner of a thread that waits for good is asleep for good too.
        let (joiner, j) = spawn(move || waiter.join().unwrap());
        census_says(true, &[w, j]);
        barrier.wait();
        joiner.join().unwrap();
    }
}
