//! Introspection: the coroutine dump, the stack guard in use.

pub use crate::stack::{guard_kind as stack_guard_kind, GuardKind};

/// A dump of every live coroutine, like Go's goroutine dump (SIGQUIT, or a deadlock
/// report): its id, name, state — for a parked coroutine its wait reason (chan receive,
/// chan send, select, mutex, sema, sleep, io read, io write, join, ...) — and how long it
/// has been waiting, measured on the runtime's coarse clock (sysmon's rounds: accurate
/// to a few milliseconds). Stacks are not walked.
pub fn dump() -> String {
    crate::sched::dump::dump()
}
