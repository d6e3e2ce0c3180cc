//! The coroutine dump (Go's goroutine dump): for `debug::dump`, SIGQUIT and the
//! deadlock report.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use super::g::GStatus;
use super::m::LOST_BLOCKED;
use crate::wait::WaitReason;

/// One coroutine in a [`dump`].
#[derive(Clone, Debug)]
struct Entry {
    id: u64,
    name: Option<std::sync::Arc<str>>,
    state: String,
    waited_ns: Option<i64>,
}

/// A dump of every live coroutine, like Go's goroutine dump (SIGQUIT, or a deadlock
/// report): its id, name, state — for a parked coroutine its wait reason (chan receive,
/// chan send, select, mutex, sema, sleep, io read, io write, join, ...) — and how long it
/// has been waiting, or, for one whose thread sysmon took the P from while it ran
/// outside goro, whether it sat in the kernel or computed, and for how long; measured on the runtime's coarse clock (sysmon's rounds: accurate
/// to a few milliseconds). Stacks are not walked.
pub(crate) fn dump() -> String {
    let rt = super::rt();
    let now = crate::timers::nanotime();
    // The coroutines whose Ms run them without a P: sysmon took it while they were
    // outside goro (blocked in the kernel, or computing past their slice).
    let mut outside = std::collections::HashMap::new();
    for m in rt.allm.lock().iter() {
        // Relaxed: informational (see the fields).
        let at = m.lost_p_at.load(Ordering::Relaxed);
        if at != 0 {
            let why = m.lost_p_why.load(Ordering::Relaxed);
            outside.insert(m.outside.load(Ordering::Relaxed), (why, at));
        }
    }
    let mut entries = Vec::new();
    rt.allgs.for_each(|g| {
        let status = g.status();
        let (state, waited) = match status {
            GStatus::Running if outside.contains_key(&g.id) => {
                let (why, at) = outside[&g.id];
                let state = if why == LOST_BLOCKED {
                    "blocked outside goro, P retaken"
                } else {
                    "computing outside goro, P retaken"
                };
                (state.to_string(), Some(now - at))
            }
            GStatus::Waiting => {
                let reason = match g.wait_reason() {
                    WaitReason::None => "waiting".to_string(),
                    r => r.as_str().to_string(),
                };
                // Relaxed: an informational timestamp, written by the G when it parks; a stale one
                // only skews the printed duration.
                (reason, Some(now - g.wait_since.load(Ordering::Relaxed)))
            }
            GStatus::Syscall => (
                WaitReason::BlockingCall.as_str().to_string(),
                // Relaxed: informational, as above.
                Some(now - g.wait_since.load(Ordering::Relaxed)),
            ),
            s => (s.as_str().to_string(), None),
        };
        entries.push(Entry {
            id: g.id,
            name: g.guard.name.clone(),
            state,
            waited_ns: waited,
        });
    });
    entries.sort_by_key(|e| e.id);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "coroutine dump: {} coroutines, {} Ps, {} threads",
        entries.len(),
        rt.procs(),
        // Relaxed: a count for display (see the field).
        rt.nm_alive.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        out,
        "retake barrier: {}",
        if crate::membarrier::expedited() {
            "membarrier (expedited)"
        } else {
            "SeqCst fence on every goro call (membarrier registration refused)"
        }
    );
    for e in entries {
        let _ = write!(out, "\ncoroutine {}", e.id);
        if let Some(n) = &e.name {
            let _ = write!(out, " ('{n}')");
        }
        let _ = write!(out, " [{}", e.state);
        if let Some(ns) = e.waited_ns {
            let _ = write!(out, ", {}", human(ns.max(0)));
        }
        out.push(']');
    }
    out.push('\n');
    out
}

fn human(ns: i64) -> String {
    let s = ns as f64 / 1e9;
    if s >= 120.0 {
        format!("{} minutes", (s / 60.0) as u64)
    } else if s >= 1.0 {
        format!("{s:.1}s")
    } else {
        format!("{}ms", ns / 1_000_000)
    }
}
