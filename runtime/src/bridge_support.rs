//! What a bridge to another runtime (goro-tokio, the facade's `tokio` feature) needs
//! from goro's, and nothing more. Hidden: an interface between goro's own crates, with
//! no stability promise.

/// Tells the deadlock check which threads the bridge started and whether each can wake
/// anyone now (`test(tid)` true: it cannot, so the check skips it as it skips goro's
/// own threads). See `sched/census.rs`. Only the first call counts.
pub fn set_idle_helpers(test: fn(tid: i32) -> bool) {
    crate::sched::census::set_idle_helpers(test);
}

/// The number of worker threads of the tokio runtime goro starts for the bridge
/// (`GORO_TOKIO_WORKERS`, `Config::tokio_workers`; default 1). Starts goro's runtime
/// if it has not started, as any goro call does.
pub fn tokio_workers() -> usize {
    crate::sched::tokio_workers()
}

/// The calling thread's id (`gettid`), for the bridge's record of its threads.
pub fn gettid() -> i32 {
    nix::unistd::gettid().as_raw()
}
