//! The runtime's configuration: [`Config`], read from the environment when the
//! runtime starts by itself, or built in code and applied by `Config::init`.
//!
//! When both set something, the code wins: `Config::from_env()` reads the variables
//! below as the starting point, and the builder methods called on it replace those
//! values. The implicit start (the first goro call without an `init`) uses
//! `from_env()` as it is.
//!
//! - `GORO_MAXPROCS`: the number of Ps (default: `std::thread::available_parallelism`),
//!   at most [`MAX_PROCS`](crate::MAX_PROCS).
//! - `GORO_STACK_SIZE`: the default coroutine stack size in bytes, with an optional
//!   `k`/`K`/`KiB` or `m`/`M`/`MiB` suffix (default 256 KiB).
//! - `GORO_STACK_GUARD=mprotect`: use `mprotect` guard pages even where
//!   `MADV_GUARD_INSTALL` works; `madvise`: guard installs, but one `madvise` per
//!   stack instead of one `process_madvise` per slab of 64; `pidfd`: batched through a
//!   pidfd of the process opened once, not `PIDFD_SELF` (for testing the fallbacks
//!   that older kernels get; `auto`, the default, detects).
//! - `GORO_DUMP=each`: the SIGQUIT dump and the deadlock report print every coroutine
//!   on its own (`grouped`, the default, folds alike ones into one entry).
//! - `GORO_TRACEBACK=all`: the dumps keep goro's own frames (`user`, the default,
//!   leaves them out).
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
//! - `GORO_PIDFD=off`: `goro::process` waits for children with a blocking `wait`
//!   instead of a pidfd on the poller (for testing the fallback that kernels before
//!   5.3 get).
//! - `GORO_DETACHED_PANIC`: `exit` (the default): a panic in a coroutine whose
//!   `JoinHandle` was dropped ends the program with status 2, as Go's does; `ignore`:
//!   it is reported and the program goes on, as std's detached threads.
//! - `GORO_TOKIO_WORKERS`: with the facade's `tokio` feature, the worker threads of the
//!   tokio runtime that `goro::tokio` starts (1 to 1024, default 1).
//! - `GORO_HOOKS=off`: with the `hooks` feature, leave std's blocking calls alone (they
//!   block the thread, as without the feature); `on`, the default, parks coroutines.
//!
//! A value that does not parse stops the program at the implicit start with a message
//! naming the variable (a typo in a tuning knob should not silently fall back to a
//! default); `Config::from_env` returns it as a `ConfigError::Invalid` instead, and
//! `Config::init` too for the variables the runtime reads later (`GORO_STACK_GUARD`,
//! `GORO_DUMP`, `GORO_TRACEBACK`, `GORO_PIDFD`), which no builder method replaces.

use crate::stack;

/// The most Ps a runtime can have (Go's limit is higher, but a machine with more
/// hardware threads than this is not what goro is tuned for).
pub const MAX_PROCS: usize = 256;

/// The default limit on the runtime's threads (Go's: 10 000).
pub const DEFAULT_MAX_THREADS: usize = 10_000;

/// The default coroutine stack size (virtual; only touched pages cost memory).
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// The runtime's configuration: start from [`Config::from_env`] (the `GORO_*`
/// variables, as the implicit start reads them) or [`Config::new`] (the built-in
/// defaults), change what the code wants with the builder methods, then
/// [`init`](Config::init) starts the runtime with it.
///
/// **Which wins**: what the builder sets. `from_env` is only the starting point, so
/// `Config::from_env()?.maxprocs(1).init()` runs one P whatever `GORO_MAXPROCS` says,
/// and a setting the code does not touch keeps its environment value. Out-of-range
/// builder values are reported by `init` as [`ConfigError::Invalid`], with the same
/// ranges the environment's parsers enforce.
///
/// The runtime starts once per process: on the first goro call (a spawn, a channel
/// operation, `maxprocs`, ...), from the environment, or at `init`. `init` after that
/// is [`ConfigError::AlreadyStarted`], so call it first thing in `main`.
///
/// ```
/// goro::Config::from_env()
///     .expect("GORO_* variables")
///     .maxprocs(2)
///     .init()
///     .expect("the runtime had not started");
/// assert_eq!(goro::maxprocs(), 2);
/// assert_eq!(goro::Config::new().init(), Err(goro::ConfigError::AlreadyStarted));
/// ```
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) maxprocs: usize,
    /// The requested size; checked (and rounded to pages) by [`Config::stack_usable`].
    pub(crate) stack_size: usize,
    pub(crate) schedtrace: Option<std::time::Duration>,
    pub(crate) deadlock_check: bool,
    pub(crate) idle_m_exit_ms: u64,
    pub(crate) max_threads: usize,
    pub(crate) membarrier: bool,
    /// `GORO_DETACHED_PANIC` (see `panics::unjoined_panic`).
    pub(crate) detached_panic_exits: bool,
    /// Used only by the facade's `tokio` feature (`bridge_support::tokio_workers`).
    pub(crate) tokio_workers: usize,
    /// Used only with the `hooks` feature.
    #[cfg_attr(not(feature = "hooks"), allow(dead_code))]
    pub(crate) hooks: bool,
}

/// Why a [`Config`] was refused.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The runtime had already started (a goro call, or an earlier `init`, started it):
    /// its configuration can no longer change.
    AlreadyStarted,
    /// A setting is out of range or does not parse.
    Invalid {
        /// The builder method (`"maxprocs"`) or environment variable
        /// (`"GORO_MAXPROCS"`) that holds the bad value.
        setting: &'static str,
        /// What is wrong with it, and the allowed range.
        reason: String,
    },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::AlreadyStarted => f.write_str(
                "the goro runtime has already started (Config::init must come before any \
                 other goro call)",
            ),
            ConfigError::Invalid { setting, reason } => write!(f, "{setting}: {reason}"),
        }
    }
}

impl std::error::Error for ConfigError {}

fn invalid(setting: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        setting,
        reason: reason.into(),
    }
}

/// The variables the runtime reads where it needs them, not into a [`Config`] (a
/// diagnostic's layout, a fallback for testing), with the values each takes: checked
/// with the rest before anything starts, from the environment as `from_env` or the
/// code's `Config` would leave them, since neither replaces them.
const READ_LATER: [(&str, &[&str]); 4] = [
    (
        "GORO_STACK_GUARD",
        &["mprotect", "madvise", "pidfd", "auto"],
    ),
    ("GORO_DUMP", &["each", "grouped"]),
    ("GORO_TRACEBACK", &["all", "user"]),
    ("GORO_PIDFD", &["on", "off"]),
];

/// Checks the [`READ_LATER`] variables that are set.
fn check_read_later() -> Result<(), ConfigError> {
    for (name, values) in READ_LATER {
        env_var(name, |v| {
            if values.contains(&v) {
                Ok(())
            } else {
                Err(format!("must be one of {values:?}, got {v:?}"))
            }
        })?;
    }
    Ok(())
}

/// Reads variable `name` with `parse`; `None` if it is unset.
fn env_var<T>(
    name: &'static str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, ConfigError> {
    match std::env::var(name) {
        Ok(v) => parse(&v).map(Some).map_err(|e| invalid(name, e)),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(v)) => {
            Err(invalid(name, format!("not valid UTF-8: {v:?}")))
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self::new()
    }
}

impl Config {
    /// The built-in defaults, ignoring the environment: as many Ps as
    /// `std::thread::available_parallelism` (at most `MAX_PROCS`), 256 KiB stacks, no
    /// schedtrace, deadlock detection on, at most 10 000 threads.
    pub fn new() -> Config {
        Config {
            maxprocs: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .min(MAX_PROCS),
            stack_size: DEFAULT_STACK_SIZE,
            schedtrace: None,
            deadlock_check: true,
            idle_m_exit_ms: 5_000,
            max_threads: DEFAULT_MAX_THREADS,
            membarrier: true,
            tokio_workers: 1,
            detached_panic_exits: true,
            hooks: true,
        }
    }

    /// The defaults, overridden by the `GORO_*` variables that are set (see the
    /// module doc of `config.rs`, and docs/guide.md). A variable that does not parse
    /// is an [`ConfigError::Invalid`] naming it.
    pub fn from_env() -> Result<Config, ConfigError> {
        check_read_later()?;
        let mut c = Config::new();
        if let Some(n) = env_var("GORO_MAXPROCS", parse_maxprocs)? {
            c.maxprocs = n;
        }
        if let Some(n) = env_var("GORO_STACK_SIZE", parse_size)? {
            c.stack_size = n;
            c.stack_usable_as("GORO_STACK_SIZE")?;
        }
        if let Some(ms) = env_var("GORO_SCHEDTRACE", parse_millis)? {
            c.schedtrace = Some(std::time::Duration::from_millis(ms));
        }
        if let Some(on) = env_var("GORO_DEADLOCK", parse_deadlock)? {
            c.deadlock_check = on;
        }
        if let Some(ms) = env_var("GORO_IDLE_M_EXIT_MS", parse_millis)? {
            c.idle_m_exit_ms = ms;
        }
        if let Some(n) = env_var("GORO_MAX_THREADS", parse_max_threads)? {
            c.max_threads = n;
        }
        if let Some(on) = env_var("GORO_MEMBARRIER", parse_on_off)? {
            c.membarrier = on;
        }
        if let Some(exits) = env_var("GORO_DETACHED_PANIC", parse_detached_panic)? {
            c.detached_panic_exits = exits;
        }
        if let Some(n) = env_var("GORO_TOKIO_WORKERS", parse_tokio_workers)? {
            c.tokio_workers = n;
        }
        if let Some(on) = env_var("GORO_HOOKS", parse_on_off)? {
            c.hooks = on;
        }
        Ok(c)
    }

    /// The number of Ps, 1 to [`MAX_PROCS`](crate::MAX_PROCS) (checked by `init`).
    /// [`set_maxprocs`](crate::set_maxprocs) can still change it later.
    pub fn maxprocs(mut self, n: usize) -> Config {
        self.maxprocs = n;
        self
    }

    /// The default coroutine stack size in bytes, from
    /// [`MIN_STACK_SIZE`](crate::MIN_STACK_SIZE) to
    /// [`MAX_STACK_SIZE`](crate::MAX_STACK_SIZE) (checked by `init`; rounded up to
    /// whole pages).
    pub fn stack_size(mut self, bytes: usize) -> Config {
        self.stack_size = bytes;
        self
    }

    /// Whether sysmon reports a deadlock (every coroutine and every thread waiting on
    /// the runtime, nothing that could wake them) and stops the program.
    pub fn deadlock_detection(mut self, on: bool) -> Config {
        self.deadlock_check = on;
        self
    }

    /// Every `period`, sysmon prints a line of the scheduler's state on stderr
    /// (`None`: never). At least 1 ms, in whole milliseconds (checked by `init`).
    pub fn schedtrace(mut self, period: Option<std::time::Duration>) -> Config {
        self.schedtrace = period;
        self
    }

    /// The most threads the runtime starts to run coroutines, at least 2 (checked by
    /// `init`); past it the process stops with a message (Go's `debug.SetMaxThreads`).
    pub fn max_threads(mut self, n: usize) -> Config {
        self.max_threads = n;
        self
    }

    /// Whether a panic that no join will take (a coroutine whose `JoinHandle` was
    /// dropped, or dropped after it panicked) ends the program, with status 2 after the
    /// panic's report, as in Go (`true`, the default); `false` keeps std's rule for
    /// detached threads: reported, then lost.
    pub fn detached_panic_exits(mut self, exits: bool) -> Config {
        self.detached_panic_exits = exits;
        self
    }

    /// With the facade's `tokio` feature: the worker threads of the tokio runtime
    /// `goro::tokio` starts on first use (1 to 1024, checked by `init`; default 1).
    /// A program that supplies its own with `goro::tokio::set_handle` ignores it.
    pub fn tokio_workers(mut self, n: usize) -> Config {
        self.tokio_workers = n;
        self
    }

    /// Checks every setting; returns the usable stack size. `init` calls it.
    pub(crate) fn check(&self) -> Result<usize, ConfigError> {
        check_read_later()?;
        if !(1..=MAX_TOKIO_WORKERS).contains(&self.tokio_workers) {
            return Err(invalid(
                "tokio_workers",
                format!(
                    "must be from 1 to {MAX_TOKIO_WORKERS}, got {}",
                    self.tokio_workers
                ),
            ));
        }
        if !(1..=MAX_PROCS).contains(&self.maxprocs) {
            return Err(invalid(
                "maxprocs",
                format!("must be from 1 to {MAX_PROCS}, got {}", self.maxprocs),
            ));
        }
        if self.max_threads < 2 {
            return Err(invalid(
                "max_threads",
                format!("must be at least 2, got {}", self.max_threads),
            ));
        }
        self.schedtrace_ms()?;
        self.stack_usable_as("stack_size")
    }

    /// The schedtrace period in whole milliseconds (at least 1).
    pub(crate) fn schedtrace_ms(&self) -> Result<Option<u64>, ConfigError> {
        match self.schedtrace {
            None => Ok(None),
            Some(d) if d.as_millis() >= 1 => Ok(Some(d.as_millis().min(u64::MAX as u128) as u64)),
            Some(d) => Err(invalid(
                "schedtrace",
                format!("must be at least 1 ms, got {d:?}"),
            )),
        }
    }

    fn stack_usable_as(&self, setting: &'static str) -> Result<usize, ConfigError> {
        stack::usable_size(self.stack_size).map_err(|e| invalid(setting, e.to_string()))
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

/// `exit` (true) or `ignore` (false).
pub(crate) fn parse_detached_panic(s: &str) -> Result<bool, String> {
    match s.trim() {
        "exit" => Ok(true),
        "ignore" => Ok(false),
        _ => Err(format!("must be `exit` or `ignore`, got {s:?}")),
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

/// The most worker threads `tokio_workers` takes.
const MAX_TOKIO_WORKERS: usize = 1024;

pub(crate) fn parse_tokio_workers(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_TOKIO_WORKERS).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number from 1 to {MAX_TOKIO_WORKERS}, got {s:?}"
        )),
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
