//! Configuration read from the environment when the runtime starts.
//!
//! - `GORO_MAXPROCS`: the number of Ps (default: `std::thread::available_parallelism`),
//!   at most [`MAX_PROCS`](crate::MAX_PROCS).
//! - `GORO_STACK_SIZE`: the default coroutine stack size in bytes, with an optional
//!   `k`/`K`/`KiB` or `m`/`M`/`MiB` suffix (default 256 KiB).
//! - `GORO_STACK_GUARD=mprotect`: use `mprotect` guard pages even where
//!   `MADV_GUARD_INSTALL` works (for testing the fallback).
//! - `GORO_SCHEDTRACE=N`: sysmon prints a scheduler state line on stderr every N ms
//!   (N ≥ 1; unset: never).
//! - `GORO_DEADLOCK`: `ignore` turns deadlock detection off; `detect` (the default)
//!   keeps it on.
//! - `GORO_IDLE_M_EXIT_MS`: how long an idle thread beyond the pool's needs waits
//!   before it exits (ms ≥ 1, default 5000).
//! - `GORO_MAX_THREADS`: the most threads the runtime starts to run coroutines (its
//!   Ms), default [`DEFAULT_MAX_THREADS`], as Go's `debug.SetMaxThreads`: past it the
//!   process stops with a message naming the cause and the setting. Threads blocked in
//!   calls that have lost their P (`blocking`) count, so a runaway of blocked calls
//!   ends in a clear error, not in the kernel's thread limit.
//! - `GORO_MEMBARRIER=off`: do not register for `membarrier`'s expedited barrier, so
//!   the retake handshake uses its fallback, a SeqCst fence on every entry into goro
//!   (for testing the fallback; `on`, the default, registers).
//! - `GORO_HOOKS=off`: with the `hooks` feature, leave std's blocking calls alone (they
//!   block the thread, as without the feature); `on`, the default, parks coroutines.
//!
//! A value that does not parse stops the program with a message naming the variable:
//! a typo in a tuning knob should not silently fall back to a default.

use crate::stack;

/// The most Ps a runtime can have (Go's limit is higher, but a machine with more
/// hardware threads than this is not what goro is tuned for).
pub const MAX_PROCS: usize = 256;

/// The default limit on the runtime's threads (Go's: 10 000).
pub const DEFAULT_MAX_THREADS: usize = 10_000;

/// The default coroutine stack size (virtual; only touched pages cost memory).
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

pub(crate) struct Config {
    pub(crate) maxprocs: usize,
    pub(crate) stack_usable: usize,
    pub(crate) schedtrace_ms: Option<u64>,
    pub(crate) deadlock_check: bool,
    pub(crate) idle_m_exit_ms: u64,
    pub(crate) max_threads: usize,
    pub(crate) membarrier: bool,
    /// Used only with the `hooks` feature.
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))]
    pub(crate) hooks: bool,
}

impl Config {
    pub(crate) fn from_env() -> Config {
        let maxprocs = match std::env::var("GORO_MAXPROCS") {
            Ok(v) => parse_maxprocs(&v).unwrap_or_else(|e| panic!("GORO_MAXPROCS: {e}")),
            Err(_) => std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(MAX_PROCS),
        };
        let stack_size = match std::env::var("GORO_STACK_SIZE") {
            Ok(v) => parse_size(&v).unwrap_or_else(|e| panic!("GORO_STACK_SIZE: {e}")),
            Err(_) => DEFAULT_STACK_SIZE,
        };
        let stack_usable =
            stack::usable_size(stack_size).unwrap_or_else(|e| panic!("GORO_STACK_SIZE: {e}"));
        let schedtrace_ms = std::env::var("GORO_SCHEDTRACE")
            .ok()
            .map(|v| parse_millis(&v).unwrap_or_else(|e| panic!("GORO_SCHEDTRACE: {e}")));
        let deadlock_check = match std::env::var("GORO_DEADLOCK") {
            Ok(v) => parse_deadlock(&v).unwrap_or_else(|e| panic!("GORO_DEADLOCK: {e}")),
            Err(_) => true,
        };
        let idle_m_exit_ms = match std::env::var("GORO_IDLE_M_EXIT_MS") {
            Ok(v) => parse_millis(&v).unwrap_or_else(|e| panic!("GORO_IDLE_M_EXIT_MS: {e}")),
            Err(_) => 5_000,
        };
        let max_threads = match std::env::var("GORO_MAX_THREADS") {
            Ok(v) => parse_max_threads(&v).unwrap_or_else(|e| panic!("GORO_MAX_THREADS: {e}")),
            Err(_) => DEFAULT_MAX_THREADS,
        };
        let membarrier = match std::env::var("GORO_MEMBARRIER") {
            Ok(v) => parse_on_off(&v).unwrap_or_else(|e| panic!("GORO_MEMBARRIER: {e}")),
            Err(_) => true,
        };
        let hooks = match std::env::var("GORO_HOOKS") {
            Ok(v) => parse_on_off(&v).unwrap_or_else(|e| panic!("GORO_HOOKS: {e}")),
            Err(_) => true,
        };
        Config {
            membarrier,
            hooks,
            maxprocs,
            stack_usable,
            schedtrace_ms,
            deadlock_check,
            idle_m_exit_ms,
            max_threads,
        }
    }
}

/// A whole number of milliseconds, at least 1.
pub(crate) fn parse_millis(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "must be a whole number of milliseconds, at least 1, got {s:?}"
        )),
    }
}

/// `on` or `off`.
pub(crate) fn parse_on_off(s: &str) -> Result<bool, String> {
    match s.trim() {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("must be `on` or `off`, got {s:?}")),
    }
}

/// `ignore` (off) or `detect` (on).
pub(crate) fn parse_deadlock(s: &str) -> Result<bool, String> {
    match s.trim() {
        "ignore" => Ok(false),
        "detect" => Ok(true),
        _ => Err(format!("must be `ignore` or `detect`, got {s:?}")),
    }
}

/// At least one thread per P is needed; 2 is the smallest limit that lets one P run
/// beside a blocked call.
pub(crate) fn parse_max_threads(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 2 => Ok(n),
        _ => Err(format!("must be a whole number, at least 2, got {s:?}")),
    }
}

pub(crate) fn parse_maxprocs(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_PROCS).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_PROCS}, got {s:?}"
        )),
    }
}

pub(crate) fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: usize = match unit.trim() {
        "" => 1,
        "k" | "K" | "KiB" | "kiB" => 1024,
        "m" | "M" | "MiB" => 1024 * 1024,
        _ => {
            return Err(format!(
                "unknown unit in {s:?} (use bytes, or a k/KiB or m/MiB suffix)"
            ))
        }
    };
    num.parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maxprocs_parses_and_rejects() {
        assert_eq!(parse_maxprocs("2"), Ok(2));
        assert_eq!(parse_maxprocs(" 1 "), Ok(1));
        assert!(parse_maxprocs("0").is_err());
        assert!(parse_maxprocs("-1").is_err());
        assert!(parse_maxprocs("two").is_err());
        assert!(parse_maxprocs(&(MAX_PROCS + 1).to_string()).is_err());
    }

    #[test]
    fn max_threads_parses_and_rejects() {
        assert_eq!(parse_max_threads("10000"), Ok(10_000));
        assert_eq!(parse_max_threads(" 2 "), Ok(2));
        assert!(parse_max_threads("1").is_err());
        assert!(parse_max_threads("lots").is_err());
    }

    #[test]
    fn millis_and_deadlock_parse_and_reject() {
        assert_eq!(parse_millis("50"), Ok(50));
        assert!(parse_millis("0").is_err());
        assert!(parse_millis("abc").is_err());
        assert!(parse_millis("-5").is_err());
        assert_eq!(parse_deadlock("ignore"), Ok(false));
        assert_eq!(parse_deadlock("detect"), Ok(true));
        assert!(parse_deadlock("off").is_err());
        assert_eq!(parse_on_off(" off "), Ok(false));
        assert_eq!(parse_on_off("on"), Ok(true));
        assert!(parse_on_off("0").is_err());
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(65536));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert!(parse_size("1G").is_err());
        assert!(parse_size("k").is_err());
        assert!(parse_size("99999999999999999999999").is_err());
    }
}
