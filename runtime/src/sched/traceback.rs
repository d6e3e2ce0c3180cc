//! Coroutine stacks for the dump: walking a suspended coroutine's stack, naming the
//! frames, and leaving out the runtime's own (docs/decisions/0003-coroutine-stacks.md).
//!
//! A dump walks a suspended coroutine's stack by resuming it in an inspection mode: it
//! claims the G (the scan handshake, `scan.rs`), resumes it with a capture to fill, and
//! the G, back in `G::suspend`, walks its own stack from there with the system
//! unwinder (`backtrace::trace`: libgcc's `_Unwind_Backtrace`, driven by the binary's
//! unwind tables, present in release builds too), stops where the frames leave its
//! stack (the next frame is the dump's, through corosensei's trampoline), and suspends
//! again. It records return addresses only; the dump names each distinct address once
//! (`Symbols`, through the binary's debug info, or its symbol table where there is
//! none), so 100 000 coroutines parked in a few places cost a few hundred lookups.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use super::g::{GRef, G};
use crate::stack::overflow::{self, GuardInfo};

/// The most frames a walk records (innermost first).
const MAX_FRAMES: usize = 96;
/// A coroutine with less stack than this left below where it was suspended is not
/// walked: the unwinder itself needs a few KiB, and running out would be reported as
/// the coroutine's stack overflow (see `room_to_walk`).
const MIN_HEADROOM: usize = 32 * 1024;
/// Coroutines claimed per barrier (see `walk_all`): a batch is walked in well under a
/// millisecond, which is as long as an M that wants to run one of them waits.
const BATCH: usize = 256;

/// What a walk leaves: return addresses, or why there are none.
pub(crate) struct Capture {
    ips: Vec<usize>,
    skipped: Option<&'static str>,
}

/// What became of one coroutine's walk.
#[derive(Clone, Debug)]
pub(crate) enum Walk {
    /// Its stack's return addresses, innermost first.
    Frames(Vec<usize>),
    /// It was running (or about to run) on an M: its stack was not walked.
    OnCpu,
    /// Its coroutine has not started: it has no stack to walk yet.
    NotStarted,
    /// Not walked, and why.
    Skipped(&'static str),
}

/// What a G that was not walked for want of stack says.
const NO_ROOM: &str = "too little stack left to walk it";

/// Whether a G suspended with its frame at `here` has the stack a walk needs
/// (`MIN_HEADROOM` above its guard). Asked in `G::suspend`'s own frame, before the walk
/// pushes anything.
#[inline(always)]
pub(crate) fn room_to_walk(here: usize, guard: &GuardInfo) -> bool {
    here.saturating_sub(guard.guard_hi) >= MIN_HEADROOM
}

/// Answers a dump's resume without a walk: the G has too little stack left.
///
/// # Safety
///
/// `cap` is the Capture a dump passed in with the resume, untouched by the dump until
/// the G suspends again.
#[inline(always)]
pub(crate) unsafe fn refuse(cap: *mut Capture) {
    // SAFETY: the caller's contract.
    unsafe { (*cap).skipped = Some(NO_ROOM) };
}

/// Runs on the inspected G's own stack, in `G::suspend`, when a dump resumed it with
/// `cap`: records the return addresses of the frames on the G's stack.
/// Must not unwind (a panic is caught) and must not call into the scheduler: the G runs
/// on the dump's thread, as a nested coroutine.
#[inline(never)]
pub(crate) fn capture(cap: *mut Capture, guard: &GuardInfo) {
    // SAFETY: the dump passes a Capture that it does not touch until this G suspends
    // again (`inspect_one`).
    let cap = unsafe { &mut *cap };
    let (lo, hi) = (guard.guard_hi, guard.guard_hi + guard.usable);
    let walked = catch_unwind(AssertUnwindSafe(|| walk_stack(lo, hi, &mut cap.ips)));
    if walked.is_err() {
        cap.ips.clear();
        cap.skipped = Some("the unwinder panicked");
    }
}

/// The return addresses of the calling thread's frames whose stack pointer lies in
/// `[lo, hi)`, innermost first (those of the current coroutine's stack, or of any).
///
/// Without the `backtrace` crate's process-wide lock (`trace_unsynchronized`): a walk
/// runs inside an inspection, where the coroutine walked is claimed and an M that
/// wants it waits, holding its P; a coroutine parked while it held that lock (a goro
/// call inside an unwinder's callback) would make the walk wait for ever, and with it
/// the M, its P and every later dump. The dump's symbolisation, after the walks, still
/// takes the lock, but it holds no claim then.
fn walk_stack(lo: usize, hi: usize, ips: &mut Vec<usize>) {
    // SAFETY: the lock serialises what is not thread-safe on some platforms (dbghelp
    // on Windows); on Linux the walk is libgcc's `_Unwind_Backtrace`, which is safe
    // to call from several threads at once. Dumps are serialised among themselves
    // (`dump::SERIAL`); a panic's report may walk beside one, as std's own
    // backtraces do.
    unsafe {
        backtrace::trace_unsynchronized(|frame| {
            let sp = frame.sp() as usize;
            if sp != 0 && (sp < lo || sp >= hi) {
                // Out of the coroutine's stack: the frames beyond are its resumer's.
                return ips.is_empty();
            }
            ips.push(frame.ip() as usize);
            ips.len() < MAX_FRAMES
        })
    };
}

/// The current stack, for the dumping coroutine itself and for a panicking one.
pub(crate) fn walk_current(g: &G) -> Walk {
    let mut ips = Vec::with_capacity(MAX_FRAMES);
    walk_stack(
        g.guard.guard_hi,
        g.guard.guard_hi + g.guard.usable,
        &mut ips,
    );
    Walk::Frames(ips)
}

/// Walks every G of `gs` that is suspended (under the scan handshake, a batch of
/// claims per barrier); `me` is the calling coroutine (walked in place), if any.
pub(crate) fn walk_all(gs: &[GRef], me: *const G) -> Vec<Walk> {
    let mut out = Vec::with_capacity(gs.len());
    let mut claimed = Vec::with_capacity(BATCH);
    for batch in gs.chunks(BATCH) {
        claimed.clear();
        claimed.extend(
            batch
                .iter()
                .map(|g| !std::ptr::eq(&**g, me) && g.scan.claim()),
        );
        // The dump's side of the scan handshake: one barrier for the batch.
        crate::membarrier::sysmon_side();
        for (g, &held) in batch.iter().zip(&claimed) {
            let walk = if std::ptr::eq(&**g, me) {
                walk_current(g)
            } else if !held {
                Walk::Skipped("another dump is walking it")
            } else if g.status_off_cpu() {
                inspect_one(g)
            } else {
                Walk::OnCpu
            };
            if held {
                g.scan.release();
            }
            out.push(walk);
        }
    }
    out
}

/// Walks one claimed, suspended G on this thread.
fn inspect_one(g: &G) -> Walk {
    let mut cap = Capture {
        ips: Vec::with_capacity(MAX_FRAMES),
        skipped: None,
    };
    // The G runs on this thread for the walk: a fault on its guard page is its overflow.
    let before = overflow::running();
    overflow::set_running(&g.guard);
    // SAFETY: `walk_all` holds the G's claim and observed it off its CPU.
    let walked = unsafe { g.inspect(&mut cap) };
    overflow::set_running(before);
    match (walked, cap.skipped) {
        (false, _) => Walk::NotStarted,
        (true, Some(why)) => Walk::Skipped(why),
        (true, None) => Walk::Frames(cap.ips),
    }
}

/// One frame of a coroutine's stack: the function, and where in the source if the
/// binary has the debug info for it (release builds of goro's default profile do).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function's name, demangled, without its hash (`chat::serve_client`).
    pub function: String,
    /// Its source file, if known.
    pub file: Option<PathBuf>,
    /// The line in it, if known.
    pub line: Option<u32>,
    /// The column in that line, if known.
    pub column: Option<u32>,
}

impl fmt::Display for Frame {
    /// `function` on one line, `    at file:line:column` on the next if known.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.function)?;
        if let Some(file) = &self.file {
            write!(f, "\n    at {}", file.display())?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
                if let Some(col) = self.column {
                    write!(f, ":{col}")?;
                }
            }
        }
        Ok(())
    }
}

/// Names return addresses, each distinct one once, and each distinct stack once: every
/// coroutine parked in the same place gets the same `Arc` of frames, so that grouping
/// compares pointers.
#[derive(Default)]
pub(crate) struct Symbols {
    by_ip: HashMap<usize, Vec<Frame>>,
    by_stack: HashMap<Vec<usize>, Arc<[Frame]>>,
    shown: HashSet<Arc<[Frame]>>,
}

impl Symbols {
    /// The frames of `ips` (several per address where calls were inlined), innermost
    /// first; with `all` false, as [`user_frames`] leaves them.
    pub(crate) fn frames(&mut self, ips: &[usize], all: bool) -> Arc<[Frame]> {
        if let Some(f) = self.by_stack.get(ips) {
            return f.clone();
        }
        let mut frames = Vec::new();
        for &ip in ips {
            let named = self.by_ip.entry(ip).or_insert_with(|| resolve(ip));
            frames.extend(named.iter().cloned());
        }
        let frames: Arc<[Frame]> = if all { frames } else { user_frames(frames) }.into();
        let frames = match self.shown.get(&frames) {
            Some(same) => same.clone(),
            None => {
                self.shown.insert(frames.clone());
                frames
            }
        };
        self.by_stack.insert(ips.to_vec(), frames.clone());
        frames
    }
}

fn resolve(ip: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    backtrace::resolve(ip as *mut std::ffi::c_void, |sym| {
        let function = match sym.name() {
            // `{:#}`: demangled, without the hash.
            Some(name) => format!("{name:#}"),
            None => format!("{ip:#x}"),
        };
        frames.push(Frame {
            function,
            file: sym.filename().map(|p| p.to_path_buf()),
            line: sym.lineno(),
            column: sym.colno(),
        });
    });
    if frames.is_empty() {
        frames.push(Frame {
            function: format!("{ip:#x}"),
            file: None,
            line: None,
            column: None,
        });
    }
    frames
}

/// Whether a frame is the runtime's machinery: the walk itself, the park, the
/// scheduler's entry into a coroutine, corosensei, and the std and core glue that calls
/// a closure or catches its panic. Never shown, unless `GORO_TRACEBACK=all`.
fn machinery(f: &Frame) -> bool {
    const PREFIXES: &[&str] = &[
        "backtrace::",
        "goro_runtime::sched::",
        "goro_runtime::park::",
        "goro_runtime::spawn::",
        "goro_runtime::scope::",
        "goro_runtime::join_set::",
        "corosensei::",
        "std::panicking::",
        "std::panic::",
        "std::sys::backtrace::",
        "core::ops::function::",
        "core::panic::",
        "core::panicking::",
        "rust_begin_unwind",
        "__rustc::",
        "<core::panic::unwind_safe::AssertUnwindSafe<",
        "<alloc::boxed::Box<",
        "__rust_try",
        "stack_init_trampoline",
        "_Unwind_",
    ];
    PREFIXES.iter().any(|p| f.function.starts_with(p))
}

/// Whether a frame is a library's the program called rather than the program's own:
/// goro's API (a channel receive, a sleep, a lock) or the standard library's (an
/// iterator adapter, a closure call).
fn library(f: &Frame) -> bool {
    const PREFIXES: &[&str] = &[
        "goro_runtime::",
        "goro_sync::",
        "goro::",
        "std::",
        "core::",
        "alloc::",
        "<goro_",
        "<std::",
        "<core::",
        "<alloc::",
    ];
    PREFIXES.iter().any(|p| f.function.starts_with(p))
}

/// The frames a dump shows, innermost first: from the program's innermost frame to its
/// outermost, whatever lies between (as Go hides its runtime's frames in a traceback).
/// A stack with no frame of the program's (the goro call it made was the last thing
/// its function did, or it is one of goro's own coroutines) shows the libraries'
/// frames, the machinery left out.
pub(crate) fn user_frames(frames: Vec<Frame>) -> Vec<Frame> {
    let program = |f: &Frame| !machinery(f) && !library(f);
    match (
        frames.iter().position(program),
        frames.iter().rposition(program),
    ) {
        (Some(a), Some(b)) => frames[a..=b].to_vec(),
        _ => frames.into_iter().filter(|f| !machinery(f)).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(name: &str) -> Frame {
        Frame {
            function: name.into(),
            file: None,
            line: None,
            column: None,
        }
    }

    #[test]
    fn runtime_frames_are_left_out_at_either_end_only() {
        let stack = vec![
            f("backtrace::backtrace::trace"),
            f("goro_runtime::sched::traceback::capture"),
            f("goro_sync::chan::Receiver<T>::recv"),
            f("app::worker"),
            f("core::ops::function::FnOnce::call_once"),
            f("app::main::{{closure}}"),
            f("goro_runtime::spawn::run"),
            f("std::panicking::catch_unwind"),
            f("stack_init_trampoline"),
        ];
        let names: Vec<String> = user_frames(stack).into_iter().map(|f| f.function).collect();
        assert_eq!(
            names,
            [
                "app::worker",
                "core::ops::function::FnOnce::call_once",
                "app::main::{{closure}}"
            ]
        );
        // Nothing of the program's: goro's own frames, without the machinery.
        let runtime_only = vec![
            f("goro_runtime::park::park"),
            f("goro_runtime::time::sleep_when"),
            f("goro_sync::signal::dispatch"),
            f("goro_runtime::spawn::run"),
            f("stack_init_trampoline"),
        ];
        let names: Vec<String> = user_frames(runtime_only)
            .into_iter()
            .map(|f| f.function)
            .collect();
        assert_eq!(
            names,
            [
                "goro_runtime::time::sleep_when",
                "goro_sync::signal::dispatch"
            ]
        );
    }

    #[test]
    fn this_stack_names_this_function() {
        let mut ips = Vec::new();
        walk_stack(0, usize::MAX, &mut ips);
        let frames = Symbols::default().frames(&ips, true);
        let frames: &[Frame] = &frames;
        assert!(
            frames
                .iter()
                .any(|f| f.function.contains("this_stack_names_this_function")),
            "{frames:#?}"
        );
    }
}
