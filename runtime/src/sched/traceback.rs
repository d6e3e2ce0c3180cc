//! Coroutine stacks for the dump: walking a suspended coroutine's stack, naming the
//! frames, and leaving out the runtime's own (docs/decisions/0003-coroutine-stacks.md).
//!
//! A dump walks a suspended coroutine's stack by resuming it in an inspection mode: it
//! claims the G (the scan handshake, `scan.rs`), resumes it with a capture to fill, and
//! the G, back in `G::suspend`, switches to the dump's walk stack and runs the system
//! unwinder from there (libgcc's `_Unwind_Backtrace`, driven by the binary's unwind
//! tables, present in release builds too), under the fault trap (`stack/trap.rs`). The
//! walk passes over its own frames, records those on the coroutine's stack, stops where
//! they leave it (the next frame is the dump's, through corosensei's trampoline), and
//! the G suspends again. It records return addresses only, into one buffer per dump;
//! each distinct stack is kept once (`Walker`), and the dump names each distinct
//! address once (`Symbols`, through the binary's debug info, or its symbol table where
//! there is none), so 100 000 coroutines parked in a few places cost a few hundred
//! lookups.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use corosensei::stack::DefaultStack;

use super::g::{GRef, G};
use super::procfs::InKernel;
use crate::stack::overflow::{self, GuardInfo};
use crate::stack::trap;

/// The most frames a walk records (innermost first).
const MAX_FRAMES: usize = 96;
/// A coroutine with less stack than this left below where it was suspended is not
/// walked. The walk itself runs on a stack of its own (`WALK_STACK`); the coroutine's
/// stack holds only the frames from `capture` to the fault trap's, a few hundred bytes
/// (more in a debug build; a fault in them, before the trap is set, would be the
/// coroutine's overflow), and the switch (see `room_to_walk`).
const MIN_HEADROOM: usize = if cfg!(debug_assertions) { 4 } else { 2 } * 1024;
/// The stack the unwinder runs on during a dump's walks (its frames take a few KiB).
const WALK_STACK: usize = 64 * 1024;
/// Coroutines claimed per barrier (see `walk_all`): a batch is walked in well under a
/// millisecond, which is as long as an M that wants to run one of them waits.
const BATCH: usize = 256;

/// Why a coroutine's stack is not shown, or not all of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unwalked {
    /// It was parked with less than `MIN_HEADROOM` of stack left.
    NoRoom,
    /// Another dump held its claim.
    Busy,
    /// The unwinder faulted: a frame's unwind information led it out of the stack.
    Faulted,
    /// The dump could not map a stack for its walks.
    NoWalkStack,
}

impl Unwalked {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Unwalked::NoRoom => "too little stack left to walk it",
            Unwalked::Busy => "another dump is walking it",
            Unwalked::Faulted => {
                "stack not walkable past here: a frame's unwind information is wrong \
                 (the unwinder faulted)"
            }
            Unwalked::NoWalkStack => "no memory for the dump's walk stack",
        }
    }
}

/// A stack the walks recorded, by its index in `Walker::stacks` (each distinct list of
/// return addresses once).
pub(crate) type StackId = u32;

/// What became of one coroutine's walk.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Walk {
    /// Its stack's return addresses, innermost first; with why the walk stopped short,
    /// if it did.
    Frames(StackId, Option<Unwalked>),
    /// It was running (or about to run) on an M: its stack was not walked.
    OnCpu,
    /// Its coroutine has not started: it has no stack to walk yet.
    NotStarted,
    /// Not walked, and why.
    Skipped(Unwalked),
}

/// What a dump passes to an inspected G with its resume: the buffer the walk fills
/// (allocated once per dump, `MAX_FRAMES` long: a walk never grows it, so a walk cut
/// short by a fault leaves no allocation half-made), the stack the walk runs on, and
/// the outcome.
pub(crate) struct Capture {
    ips: Vec<usize>,
    cut: Option<Unwalked>,
    stack: *mut DefaultStack,
}

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
    unsafe {
        (*cap).ips.clear();
        (*cap).cut = Some(Unwalked::NoRoom);
    }
}

/// Runs on the inspected G's own stack, in `G::suspend`, when a dump resumed it with
/// `cap`: records the return addresses of the frames on the G's stack. The unwinder
/// runs on the dump's walk stack, under the fault trap (`walk_on`). Must not unwind
/// and must not call into the scheduler: the G runs on the dump's thread, as a nested
/// coroutine.
#[inline(never)]
pub(crate) fn capture(cap: *mut Capture, guard: &GuardInfo) {
    // SAFETY: the dump passes a Capture that it does not touch until this G suspends
    // again (`inspect_one`), and a walk stack (a separate allocation) that only this
    // walk uses meanwhile.
    let (stack, cap) = unsafe { (&mut *(*cap).stack, &mut *cap) };
    let (lo, hi) = (guard.guard_hi, guard.guard_hi + guard.usable);
    cap.cut = walk_on(stack, lo, hi, &mut cap.ips);
}

/// Walks this thread's frames whose stack pointer lies in `[lo, hi)` into `ips` (cleared
/// first; at most `MAX_FRAMES`, its capacity), with the unwinder's own frames on
/// `stack`, under the fault trap. Returns why the walk stopped short, if it did (the
/// frames before that point are kept).
fn walk_on(
    stack: &mut DefaultStack,
    lo: usize,
    hi: usize,
    ips: &mut Vec<usize>,
) -> Option<Unwalked> {
    ips.clear();
    ips.reserve_exact(MAX_FRAMES);
    // What the trap may abandon: `on_stack`'s switch (nothing to undo but the stack
    // pointer, which the landing restores), the unwinder's frames (no lock held where
    // it reads a stack) and `walk_stack`'s (pushes into a buffer that never grows). No
    // `catch_unwind`: `walk_stack`'s callback cannot panic (it pushes within the
    // buffer's capacity), and the `backtrace` crate aborts on a panic in a callback
    // anyway, before it could reach here.
    match trap::catch_faults(|| corosensei::on_stack(&mut *stack, || walk_stack(lo, hi, ips))) {
        Err(trap::Faulted) => Some(Unwalked::Faulted),
        Ok(()) => None,
    }
}

/// The return addresses of the calling thread's frames whose stack pointer lies in
/// `[lo, hi)`, innermost first (those of the current coroutine's stack, or of any);
/// frames outside it before the first inside (the walk's own, on its own stack) are
/// passed over, and the first outside it after them ends the walk. (So a coroutine
/// suspended on a stack of its own making, a dump's body stack that `hooks` parked it
/// on, shows the frames on its own stack only.)
///
/// Without the `backtrace` crate's process-wide lock (`trace_unsynchronized`): a walk
/// runs inside an inspection, where the coroutine walked is claimed and an M that
/// wants it waits, holding its P; a coroutine parked while it held that lock (a goro
/// call inside an unwinder's callback) would make the walk wait for ever, and with it
/// the M, its P and every later dump. The names are looked up after the walks, off
/// every claim, and with a deadline (`Symbols::name`).
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
                // Out of the coroutine's stack: the walk's own frames before it, its
                // resumer's beyond it.
                return ips.is_empty();
            }
            ips.push(frame.ip() as usize);
            ips.len() < MAX_FRAMES
        })
    };
}

/// The stack a dump, or a panic report's backtrace, runs on when it is asked for on a
/// coroutine: looking names up and formatting them take more than a small coroutine
/// stack has (`MIN_STACK_SIZE` is 16 KiB). Touched only as far as it is used.
const BODY_STACK: usize = 1024 * 1024;

/// Runs `f` on a stack of its own (`BODY_STACK`) when called on a coroutine, or in
/// place on a thread's (or where no such stack can be mapped).
pub(crate) fn off_coroutine_stack<R>(f: impl FnOnce() -> R) -> R {
    // The running G, not the current one: inside `blocking` the coroutine has no P
    // (no current G) but still runs on its own stack.
    if super::m::running_g_ptr().is_null() {
        return f();
    }
    match DefaultStack::new(BODY_STACK) {
        // A panic in `f` comes back out of `on_stack`, as from a plain call.
        Ok(mut stack) => corosensei::on_stack(&mut stack, f),
        Err(_) => f(),
    }
}

/// The walks of one dump (or one panic report): the stack the unwinder runs on, the
/// buffer one walk fills, and each distinct stack recorded, once.
pub(crate) struct Walker {
    stack: Option<DefaultStack>,
    cap: Vec<usize>,
    ids: HashMap<Box<[usize]>, StackId>,
    stacks: Vec<Box<[usize]>>,
}

impl Walker {
    pub(crate) fn new() -> Walker {
        Walker {
            stack: DefaultStack::new(WALK_STACK).ok(),
            cap: Vec::with_capacity(MAX_FRAMES),
            ids: HashMap::new(),
            stacks: Vec::new(),
        }
    }

    /// The distinct stacks recorded, by `StackId`.
    pub(crate) fn stacks(&self) -> &[Box<[usize]>] {
        &self.stacks
    }

    /// The id of the stack in the capture buffer (interned: a hundred thousand
    /// coroutines parked in a few places keep a few stacks).
    fn intern(&mut self) -> StackId {
        if let Some(&id) = self.ids.get(self.cap.as_slice()) {
            return id;
        }
        let id = self.stacks.len() as StackId;
        let ips: Box<[usize]> = self.cap.as_slice().into();
        self.ids.insert(ips.clone(), id);
        self.stacks.push(ips);
        id
    }

    /// The current coroutine's stack (the dumping coroutine itself, a panicking one).
    pub(crate) fn walk_current(&mut self, g: &G) -> Walk {
        let Some(stack) = self.stack.as_mut() else {
            return Walk::Skipped(Unwalked::NoWalkStack);
        };
        let (lo, hi) = (g.guard.guard_hi, g.guard.guard_hi + g.guard.usable);
        let cut = walk_on(stack, lo, hi, &mut self.cap);
        Walk::Frames(self.intern(), cut)
    }

    /// Walks every G of `gs` that is suspended (under the scan handshake, a batch of
    /// claims per barrier); `me` is the calling coroutine (walked in place), if any.
    pub(crate) fn walk_all(&mut self, gs: &[GRef], me: *const G) -> Vec<Walk> {
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
                    self.walk_current(g)
                } else if !held {
                    Walk::Skipped(Unwalked::Busy)
                } else if g.status_off_cpu() {
                    self.inspect_one(g)
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
    fn inspect_one(&mut self, g: &G) -> Walk {
        let Some(stack) = self.stack.as_mut() else {
            return Walk::Skipped(Unwalked::NoWalkStack);
        };
        let mut cap = Capture {
            ips: std::mem::take(&mut self.cap),
            cut: None,
            stack: stack as *mut DefaultStack,
        };
        // The G runs on this thread for the walk: a fault on its guard page is its
        // overflow (the walk's own faults are trapped).
        let before = overflow::running();
        overflow::set_running(&g.guard);
        // SAFETY: `walk_all` holds the G's claim and observed it off its CPU.
        let walked = unsafe { g.inspect(&mut cap) };
        overflow::set_running(before);
        self.cap = cap.ips;
        match (walked, cap.cut) {
            (false, _) => Walk::NotStarted,
            (true, Some(Unwalked::NoRoom)) => Walk::Skipped(Unwalked::NoRoom),
            (true, cut) => Walk::Frames(self.intern(), cut),
        }
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

/// Names return addresses, each distinct one once, and each distinct list of frames
/// once: every coroutine parked in the same place gets the same `Arc` of frames, so
/// that grouping compares pointers.
#[derive(Default)]
pub(crate) struct Symbols {
    by_ip: HashMap<usize, Vec<Frame>>,
    shown: HashSet<Arc<[Frame]>>,
    /// The lookup waited on a lock for `NAMING_STALL` (`name`): addresses it had not
    /// named by then stay addresses.
    gave_up: bool,
}

/// How long `Symbols::name` lets its helper wait on a lock before it gives up.
pub(crate) const NAMING_STALL: Duration = Duration::from_secs(5);
/// How long it lets its helper work without naming one more address (the first loads
/// the binary's debug info: well under a second here, even for a large debug build).
const NAMING_SLOW: Duration = Duration::from_secs(60);
/// How often it looks at what its helper does, while it names nothing.
const NAMING_LOOK: Duration = Duration::from_millis(250);

/// What the naming helper tells the dump.
enum Naming {
    /// Its thread id, first (for `procfs::wait_of_tid`).
    Tid(i32),
    /// The frames of an address.
    Named(usize, Vec<Frame>),
}

impl Symbols {
    /// Names every address of `stacks` on a helper thread. A lookup takes the
    /// `backtrace` crate's process-wide lock, which a parked coroutine may hold for
    /// ever (a goro call inside one of the crate's callbacks), and a dump must still
    /// print, SIGQUIT still quit: while the helper names nothing, the dump looks at it
    /// every `NAMING_LOOK`, and gives up once it has slept in a futex wait (a lock) for
    /// `NAMING_STALL` on end, or worked for `NAMING_SLOW` without naming an address.
    /// Then the addresses not named are shown as addresses, and `gave_up` says so. The
    /// helper's own stack also spares a small coroutine's. Without a thread (none can
    /// be started), the names are looked up here.
    pub(crate) fn name(stacks: &[Box<[usize]>]) -> Symbols {
        let mut ips: Vec<usize> = stacks.iter().flat_map(|s| s.iter().copied()).collect();
        ips.sort_unstable();
        ips.dedup();
        let mut me = Symbols::default();
        if ips.is_empty() {
            return me;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let todo = ips.clone();
        let helper = std::thread::Builder::new()
            .name("goro-symbols".into())
            .spawn(move || {
                // SAFETY: gettid has no preconditions.
                let _ = tx.send(Naming::Tid(unsafe { libc::gettid() }));
                for ip in todo {
                    if tx.send(Naming::Named(ip, resolve(ip))).is_err() {
                        return;
                    }
                }
            });
        if helper.is_err() {
            for ip in ips {
                me.by_ip.insert(ip, resolve(ip));
            }
            return me;
        }
        let (mut tid, mut locked, mut quiet) = (None, Duration::ZERO, Duration::ZERO);
        loop {
            match rx.recv_timeout(NAMING_LOOK) {
                Ok(Naming::Tid(t)) => tid = Some(t),
                Ok(Naming::Named(ip, frames)) => {
                    me.by_ip.insert(ip, frames);
                    (locked, quiet) = (Duration::ZERO, Duration::ZERO);
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return me,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    quiet += NAMING_LOOK;
                    // Unknown (no /proc): counted as waiting on a lock.
                    let waiting = tid.map_or(Ok(InKernel::Futex(0)), super::procfs::wait_of_tid);
                    match waiting {
                        Ok(InKernel::Futex(_)) | Err(_) => locked += NAMING_LOOK,
                        Ok(_) => locked = Duration::ZERO,
                    }
                    if locked >= NAMING_STALL || quiet >= NAMING_SLOW {
                        me.gave_up = true;
                        return me;
                    }
                }
            }
        }
    }

    /// Whether `name` gave up waiting for names (see there).
    pub(crate) fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// The frames of `ips` (several per address where calls were inlined), innermost
    /// first; with `all` false, as [`user_frames`] leaves them. An address not named
    /// yet is looked up here, unless `name` gave up (then it stays an address).
    pub(crate) fn frames(&mut self, ips: &[usize], all: bool) -> Arc<[Frame]> {
        let mut frames = Vec::new();
        for &ip in ips {
            match self.by_ip.get(&ip) {
                Some(named) => frames.extend(named.iter().cloned()),
                None if self.gave_up => frames.push(Frame::address(ip)),
                None => {
                    let named = self.by_ip.entry(ip).or_insert_with(|| resolve(ip));
                    frames.extend(named.iter().cloned());
                }
            }
        }
        let frames: Arc<[Frame]> = if all { frames } else { user_frames(frames) }.into();
        match self.shown.get(&frames) {
            Some(same) => same.clone(),
            None => {
                self.shown.insert(frames.clone());
                frames
            }
        }
    }
}

impl Frame {
    /// A frame known by its address only.
    fn address(ip: usize) -> Frame {
        Frame {
            function: format!("{ip:#x}"),
            file: None,
            line: None,
            column: None,
        }
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
        frames.push(Frame::address(ip));
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
        "goro_runtime::stack::trap::",
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
        let mut ips = Vec::with_capacity(MAX_FRAMES);
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
