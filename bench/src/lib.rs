//! Shared helpers for goro's benchmarks and measurement tools.
//!
//! - `benches/proc.rs`: criterion benchmarks of the scheduler's basic operations
//!   (spawn+join, yield, park/unpark ping-pong) next to the floor, a bare corosensei
//!   context switch.
//! - `src/bin/rss.rs`: resident memory per parked coroutine.
//!
//! The helpers here read Linux's `/proc` files (memory and mapping counts) and give
//! every wait of a measurement tool a bound, so that a runtime bug shows up as a clear
//! panic instead of a hang. Nothing here uses `unsafe`.

use std::fs;
use std::io;
use std::thread;
use std::time::{Duration, Instant};

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

/// Formats a KiB count as MiB with one decimal.
pub fn kib_to_mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
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
    fn wait_until_is_bounded() {
        assert!(!wait_until(Duration::from_millis(20), || false));
        assert!(wait_until(Duration::from_secs(1), || true));
    }
}
