//! The coroutine dump (Go's goroutine dump and goroutine profile): for `debug::dump`,
//! SIGQUIT and the deadlock report.
//!
//! Every live coroutine with its state, wait reason and wait time, the M a running one
//! runs on, where it was spawned, and — for one that is not running — its stack, with the
//! runtime's own frames left out (`traceback.rs`). By default coroutines in the same
//! state, parked in the same place and spawned from the same place are one entry with
//! their count and the range of their wait times (Go's goroutine profile, `debug=1`);
//! `Each` prints every coroutine on its own (`debug=2`). `GORO_DUMP=each` makes SIGQUIT
//! and the deadlock report print each, and `GORO_TRACEBACK=all` keeps the runtime's
//! frames (Go's `GOTRACEBACK=system`).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt::Write;
use std::panic::Location;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::g::{GRef, GStatus};
use super::m::{current_g_ptr, LOST_BLOCKED};
use super::traceback::{self, Frame, StackId, Symbols, Unwalked, Walk, Walker};
use crate::wait::WaitReason;

/// How a dump lays its entries out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// One entry per group of alike coroutines.
    Grouped,
    /// One entry per coroutine.
    Each,
}

impl Layout {
    /// What SIGQUIT and the deadlock report use: `GORO_DUMP=each`, else grouped.
    pub(crate) fn from_env() -> Layout {
        match std::env::var("GORO_DUMP") {
            Ok(v) if v == "each" => Layout::Each,
            _ => Layout::Grouped,
        }
    }
}

/// Whether `GORO_TRACEBACK=all` asks for the runtime's frames too.
fn all_frames() -> bool {
    std::env::var("GORO_TRACEBACK").is_ok_and(|v| v == "all")
}

/// One coroutine, as the dump shows it.
struct Entry {
    id: u64,
    name: Option<std::sync::Arc<str>>,
    /// Its state and wait reason (without the time): a static string for a parked
    /// coroutine (most of a large dump), so that an entry allocates nothing.
    state: Cow<'static, str>,
    waited_ns: Option<i64>,
    /// The stack its walk recorded, if any (its frames: `Named::of`).
    stack: Option<StackId>,
    /// Why its stack is not shown, or not all of it.
    not_walked: Option<Unwalked>,
    spawned_at: Option<&'static Location<'static>>,
}

/// Dumps are made one at a time (each holds its batch of coroutines' scan claims).
static SERIAL: Mutex<()> = Mutex::new(());

/// The dump (see the module doc). Called on a coroutine, it runs on a stack of its own
/// (`traceback::off_coroutine_stack`): a coroutine with a small stack may dump.
pub(crate) fn dump(layout: Layout) -> String {
    traceback::off_coroutine_stack(|| dump_here(layout))
}

/// The frames of each stack a dump's walks recorded, by `StackId`, named: shared by
/// every coroutine with the same frames (`Symbols`), so that grouping compares
/// pointers.
struct Named {
    frames: Vec<Arc<[Frame]>>,
    /// For an entry without a stack.
    none: Arc<[Frame]>,
    gave_up: bool,
}

impl Named {
    fn new(walker: &Walker) -> Named {
        let all = all_frames();
        let mut symbols = Symbols::name(walker.stacks());
        let frames = walker
            .stacks()
            .iter()
            .map(|ips| symbols.frames(ips, all))
            .collect();
        Named {
            frames,
            none: Arc::from([]),
            gave_up: symbols.gave_up(),
        }
    }

    /// The frames of `e`'s stack (none if its stack was not walked).
    fn of(&self, e: &Entry) -> &Arc<[Frame]> {
        e.stack.map_or(&self.none, |id| &self.frames[id as usize])
    }
}

fn dump_here(layout: Layout) -> String {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let rt = super::rt();
    let now = crate::timers::nanotime();
    let mut gs = rt.allgs.collect();
    gs.sort_by_key(|g| g.id);
    let mut walker = Walker::new();
    let walks = walker.walk_all(&gs, current_g_ptr());
    let ms = ms_by_coroutine();
    // The states as the walks left them; the names after (looking them up may wait).
    // Sized once: a Vec grown by doubling would hold up to three times the entries
    // for a moment (the peak a dump of 100 000 coroutines is held to, issue 39).
    let mut entries: Vec<Entry> = Vec::with_capacity(gs.len());
    entries.extend(
        gs.iter()
            .zip(walks)
            .filter_map(|(g, walk)| entry(g, walk, now, &ms)),
    );
    drop(gs);
    let named = Named::new(&walker);
    drop(walker);
    let mut out = String::new();
    let groups = match layout {
        Layout::Each => Vec::new(),
        Layout::Grouped => group(&entries, &named),
    };
    let _ = writeln!(
        out,
        "coroutine dump: {} coroutines{}, {} Ps, {} threads",
        entries.len(),
        match layout {
            Layout::Grouped => format!(" in {} groups", groups.len()),
            Layout::Each => String::new(),
        },
        rt.procs(),
        // Relaxed: a count for display (see the field).
        rt.nm_alive.load(Ordering::Relaxed)
    );
    if layout == Layout::Grouped {
        out.push_str(
            "(coroutines alike in state, stack and spawn site are one entry; \
             GORO_DUMP=each or goro::debug::dump_each() shows each)\n",
        );
    }
    let _ = writeln!(
        out,
        "retake barrier: {}",
        if crate::membarrier::expedited() {
            "membarrier (expedited)"
        } else {
            "SeqCst fence on every goro call (membarrier registration refused)"
        }
    );
    // Plain threads waiting on goro (a `main` blocked on a channel): the coroutines
    // alone would not say who waits for them.
    let threads = crate::wait::ThreadWait::waiting();
    if !threads.is_empty() {
        let _ = writeln!(out, "\n{} threads waiting on goro:", threads.len());
        for (name, reason, since) in threads {
            let _ = writeln!(
                out,
                "thread {name} [{reason}, {}]",
                human((now - since).max(0))
            );
        }
    }
    if named.gave_up {
        let _ = writeln!(
            out,
            "(some frames are addresses: looking up their names waited {}s on a lock, \
             the unwinder's, which a parked coroutine may hold)",
            traceback::NAMING_STALL.as_secs()
        );
    }
    let cwd = std::env::current_dir().ok();
    match layout {
        Layout::Grouped => {
            for group in groups {
                out.push('\n');
                write_group(&mut out, &group, &named, cwd.as_deref());
            }
        }
        Layout::Each => {
            for e in &entries {
                out.push('\n');
                write_group(&mut out, &[e], &named, cwd.as_deref());
            }
        }
    }
    out
}

/// The coroutine's entry, or None if it has just ended. `ms`: `ms_by_coroutine`.
fn entry(g: &GRef, walk: Walk, now: i64, ms: &RunningMs) -> Option<Entry> {
    let status = g.status();
    // Relaxed: informational timestamps and ids (see the fields); a stale one only
    // skews what is printed.
    let since = g.wait_since.load(Ordering::Relaxed);
    let running_on = ms.get(&g.id);
    let lost = running_on.and_then(|&(_, lost)| lost);
    let m = running_on.map_or_else(|| "an M".to_string(), |(m, _)| format!("M {m}"));
    let (state, waited) = match status {
        GStatus::Dead => return None,
        GStatus::Running if std::ptr::eq(&**g, current_g_ptr()) => {
            ("running, making this dump".into(), None)
        }
        GStatus::Running => match lost {
            Some((why, at)) => {
                let state = if why == LOST_BLOCKED {
                    "blocked outside goro, P retaken"
                } else {
                    "computing outside goro, P retaken"
                };
                (format!("{state}, on {m}").into(), Some(now - at))
            }
            None => (format!("running on {m}").into(), None),
        },
        GStatus::Waiting => {
            let reason = match g.wait_reason() {
                WaitReason::None => "waiting",
                r => r.as_str(),
            };
            (reason.into(), Some(now - since))
        }
        GStatus::Syscall => (
            format!("{}, on {m}", WaitReason::BlockingCall.as_str()).into(),
            Some(now - since),
        ),
        GStatus::Runnable => ("runnable".into(), None),
    };
    let not_started = matches!(walk, Walk::NotStarted);
    let (stack, not_walked) = match walk {
        Walk::Frames(id, cut) => (Some(id), cut),
        Walk::OnCpu | Walk::NotStarted => (None, None),
        Walk::Skipped(why) => (None, Some(why)),
    };
    // A runnable coroutine that has never run has no stack yet.
    let state = match status {
        GStatus::Runnable if not_started => "runnable, not started".into(),
        _ => state,
    };
    Some(Entry {
        id: g.id,
        name: g.guard.name.clone(),
        state,
        waited_ns: waited,
        stack,
        not_walked,
        spawned_at: g.spawned_at,
    })
}

/// By coroutine id: the M running that coroutine's code now (its `outside` word names
/// the coroutine while it runs the coroutine's code, not while that code is inside a
/// goro call), and, if that M lost its P while the coroutine was outside goro, why and
/// since when.
type RunningMs = HashMap<u64, (usize, Option<(u8, i64)>)>;

/// [`RunningMs`], read once per dump.
fn ms_by_coroutine() -> RunningMs {
    let rt = super::rt();
    let ms = rt.allm.lock();
    ms.iter()
        .filter_map(|m| {
            // Relaxed: informational (see the fields).
            let id = m.outside.load(Ordering::Relaxed);
            let at = m.lost_p_at.load(Ordering::Relaxed);
            let lost = (at != 0).then(|| (m.lost_p_why.load(Ordering::Relaxed), at));
            (id != 0).then_some((id, (m.id, lost)))
        })
        .collect()
}

/// Groups entries alike in state, frames and spawn site, largest group first, then by
/// lowest id.
fn group<'a>(entries: &'a [Entry], named: &Named) -> Vec<Vec<&'a Entry>> {
    // Frames by pointer: `Symbols` gives equal stacks one `Arc`.
    type Key<'a> = (&'a str, *const Frame, Option<&'static Location<'static>>);
    let mut index: HashMap<Key<'_>, usize> = HashMap::new();
    let mut groups: Vec<Vec<&Entry>> = Vec::new();
    for e in entries {
        let frames = named.of(e);
        let key = (&*e.state, frames.as_ptr(), e.spawned_at);
        // Running coroutines, and those whose stack was not walked, are shown alone.
        if frames.is_empty() || e.not_walked.is_some() {
            groups.push(vec![e]);
            continue;
        }
        match index.get(&key) {
            Some(&i) => groups[i].push(e),
            None => {
                index.insert(key, groups.len());
                groups.push(vec![e]);
            }
        }
    }
    groups.sort_by_key(|g| (std::cmp::Reverse(g.len()), g[0].id));
    groups
}

/// The ids a group's header lists before "and N more".
const IDS_SHOWN: usize = 8;

fn write_group(out: &mut String, group: &[&Entry], named: &Named, cwd: Option<&Path>) {
    let first = group[0];
    if group.len() == 1 {
        let _ = write!(out, "coroutine {}", first.id);
        if let Some(n) = &first.name {
            let _ = write!(out, " ('{n}')");
        }
        let _ = write!(out, " [{}", first.state);
        if let Some(ns) = first.waited_ns {
            let _ = write!(out, ", {}", human(ns.max(0)));
        }
        out.push_str("]:\n");
    } else {
        let _ = write!(out, "{} coroutines [{}", group.len(), first.state);
        let waits: Vec<i64> = group.iter().filter_map(|e| e.waited_ns).collect();
        if let (Some(lo), Some(hi)) = (waits.iter().min(), waits.iter().max()) {
            if human(*lo) == human(*hi) {
                let _ = write!(out, ", {}", human((*lo).max(0)));
            } else {
                let _ = write!(out, ", {} to {}", human((*lo).max(0)), human((*hi).max(0)));
            }
        }
        out.push_str("]: ");
        for (i, e) in group.iter().take(IDS_SHOWN).enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{}", e.id);
            if let Some(n) = &e.name {
                let _ = write!(out, " ('{n}')");
            }
        }
        if group.len() > IDS_SHOWN {
            let _ = write!(out, " and {} more", group.len() - IDS_SHOWN);
        }
        out.push('\n');
    }
    let frames = named.of(first);
    write_frames(out, frames, cwd);
    match first.not_walked {
        Some(why) if frames.is_empty() => {
            let _ = writeln!(out, "    (stack not shown: {})", why.as_str());
        }
        Some(why) => {
            let _ = writeln!(out, "    ({})", why.as_str());
        }
        None => {}
    }
    match first.spawned_at {
        Some(at) => write_created(out, at, cwd),
        None => out.push_str("    created by the runtime\n"),
    }
}

/// The spawn site's line of an entry.
fn write_created(out: &mut String, at: &Location<'_>, cwd: Option<&Path>) {
    let at = short_path(at.file(), at.line(), Some(at.column()), cwd);
    let _ = writeln!(out, "    created at {at}");
}

/// Frames as the dump prints them: the function, then where, indented; files relative
/// to `cwd` where they are under it.
pub(crate) fn write_frames(out: &mut String, frames: &[Frame], cwd: Option<&Path>) {
    for f in frames {
        let _ = writeln!(out, "    {}", f.function);
        if let Some(file) = &f.file {
            let at = short_path(&file.to_string_lossy(), f.line.unwrap_or(0), f.column, cwd);
            let _ = writeln!(out, "        at {at}");
        }
    }
}

/// `file:line[:column]`, the file relative to `cwd` when it is under it.
fn short_path(file: &str, line: u32, column: Option<u32>, cwd: Option<&Path>) -> String {
    let rel = cwd
        .and_then(|d| Path::new(file).strip_prefix(d).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| file.to_string());
    match column {
        Some(c) if c > 0 => format!("{rel}:{line}:{c}"),
        _ => format!("{rel}:{line}"),
    }
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

/// One coroutine's stack, on request (`debug::stack`).
///
/// Fields may be added: build one only through `debug::stack`.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackTrace {
    /// The coroutine's id.
    pub id: u64,
    /// Its name, if it has one.
    pub name: Option<String>,
    /// Its frames, innermost first, the runtime's own left out (all of them with
    /// `GORO_TRACEBACK=all`). Empty when the stack could not be walked.
    pub frames: Vec<Frame>,
    /// Why `frames` is empty or incomplete, if it is: the coroutine was running
    /// (`running on M 2`), in a blocking call, not started yet, or its stack could not
    /// be walked (or not all of it: `stack not walkable: ...`).
    pub unavailable: Option<String>,
    /// Where it was spawned (see `CoroutineInfo::spawned_at`).
    pub spawned_at: Option<&'static Location<'static>>,
}

impl std::fmt::Display for StackTrace {
    /// As the dump prints one coroutine: a header line, the frames, where it was spawned.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "coroutine {}", self.id)?;
        if let Some(n) = &self.name {
            write!(f, " ('{n}')")?;
        }
        match &self.unavailable {
            Some(why) => writeln!(f, " [{why}]:")?,
            None => writeln!(f, ":")?,
        }
        let cwd = std::env::current_dir().ok();
        let mut out = String::new();
        write_frames(&mut out, &self.frames, cwd.as_deref());
        if let Some(at) = self.spawned_at {
            write_created(&mut out, at, cwd.as_deref());
        }
        f.write_str(&out)
    }
}

/// The stack of the live coroutine `id` (see [`StackTrace`]), or None if there is none.
pub(crate) fn stack(id: u64) -> Option<StackTrace> {
    traceback::off_coroutine_stack(|| stack_here(id))
}

fn stack_here(id: u64) -> Option<StackTrace> {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let g = super::rt().allgs.get(id)?;
    let mut walker = Walker::new();
    let walk = walker
        .walk_all(std::slice::from_ref(&g), current_g_ptr())
        .pop()?;
    let e = entry(&g, walk, crate::timers::nanotime(), &ms_by_coroutine())?;
    let named = Named::new(&walker);
    let frames = named.of(&e).to_vec();
    let unavailable = match (frames.is_empty(), e.not_walked) {
        (_, Some(why)) if !frames.is_empty() => Some(why.as_str().to_string()),
        (false, _) => None,
        (true, Some(why)) => Some(format!("{}; stack not shown: {}", e.state, why.as_str())),
        (true, None) => Some(e.state.into_owned()),
    };
    Some(StackTrace {
        id,
        name: e.name.map(|n| n.to_string()),
        frames,
        unavailable,
        spawned_at: e.spawned_at,
    })
}
