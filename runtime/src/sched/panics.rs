//! Panic reports that name the coroutine: a coroutine's panic says "coroutine 17
//! ('parser') panicked at ...", with where it was spawned, where std's hook would name
//! the M's thread (`goro-m0`), which the program never made.
//!
//! The runtime installs its hook when it starts, around the hook it finds. A panic off
//! a coroutine goes to that hook unchanged. A coroutine's panic is reported by the
//! runtime in std's format if the hook found is std's default, and otherwise announced
//! by one line (the coroutine, where it was spawned) before the program's own hook runs,
//! so a hook the program installed first keeps working. A hook the program installs
//! later replaces this one, as std's `set_hook` does: its choice.
//!
//! std's default hook is recognised by asking std for it (`take_hook` with no hook set
//! gives the default, boxed) and comparing the two boxes' vtables; were the comparison
//! ever to fail for two defaults, the program would see std's report after the line
//! naming the coroutine, never lose a report.

use std::any::Any;
use std::io::Write;
use std::panic::{self, Location};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use super::m::running_g_ptr;
use super::traceback::{self, Symbols, Walk, Walker};

/// Installs the hook, once (from the runtime's start).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let found = panic::take_hook();
        // `found` is gone from std, so this is std's default, boxed anew.
        let default = panic::take_hook();
        // Data pointer and vtable both: two default hooks are one zero-sized function
        // behind std's one vtable; a program's hook has its own vtable.
        let found_is_default = std::ptr::eq(&*found, &*default);
        drop(default);
        panic::set_hook(Box::new(move |info| match coroutine() {
            None => found(info),
            Some((who, spawned)) if found_is_default => {
                report(info.payload(), info.location(), &who, spawned.as_deref())
            }
            Some((who, spawned)) => {
                let line = match &spawned {
                    Some(s) => format!("{who} panicked {s}:\n"),
                    None => format!("{who} panicked:\n"),
                };
                let _ = std::io::stderr().write_all(line.as_bytes());
                found(info)
            }
        }));
    });
}

/// The coroutine whose code runs on this thread, as a report names it ("coroutine 17
/// ('parser')"), and where it was spawned; None off a coroutine.
fn coroutine() -> Option<(String, Option<String>)> {
    let g = running_g_ptr();
    if g.is_null() {
        return None;
    }
    // SAFETY: the G whose code runs on this thread is alive while it runs (its M holds
    // it); its id, name and spawn site never change.
    let g = unsafe { &*g };
    let mut who = format!("coroutine {}", g.id);
    if let Some(name) = &g.guard.name {
        who.push_str(&format!(" ('{name}')"));
    }
    Some((who, g.spawned_at.map(|at| format!("(created at {at})"))))
}

/// std's default report, with the coroutine where std names the thread.
fn report(
    payload: &(dyn Any + Send),
    location: Option<&Location<'_>>,
    who: &str,
    spawned: Option<&str>,
) {
    let msg = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("Box<dyn Any>");
    // The message, where and who first, written before anything is walked: whatever
    // befalls the backtrace, the report's essentials are out.
    let mut out = String::new();
    match location {
        Some(at) => out.push_str(&format!("{who} panicked at {at}:\n{msg}\n")),
        None => out.push_str(&format!("{who} panicked:\n{msg}\n")),
    }
    if let Some(s) = spawned {
        out.push_str(s);
        out.push('\n');
    }
    let _ = std::io::stderr().write_all(out.as_bytes());
    // As std: RUST_BACKTRACE=0 or unset prints a note (once per process), anything else
    // the coroutine's stack as the dump shows one (`full`: the runtime's frames too),
    // walked and named on a stack of its own (a small coroutine's has no room for it).
    static NOTED: AtomicBool = AtomicBool::new(false);
    let tail = match std::env::var("RUST_BACKTRACE").as_deref() {
        // Relaxed: a once-only note, nothing published with it.
        Ok("0") | Err(_) if !NOTED.swap(true, Ordering::Relaxed) => {
            "note: run with `RUST_BACKTRACE=1` environment variable to display a \
             backtrace\n"
                .to_string()
        }
        Ok("0") | Err(_) => String::new(),
        Ok(detail) => traceback::off_coroutine_stack(|| backtrace_text(who, detail == "full")),
    };
    let _ = std::io::stderr().write_all(tail.as_bytes());
}

/// The panicking coroutine's (`who`'s) backtrace, as the report prints it. Named as a
/// dump names its frames (`Symbols::name`: on a helper thread, and not for ever if a
/// parked coroutine holds the unwinder's lock).
fn backtrace_text(who: &str, all: bool) -> String {
    let g = running_g_ptr();
    let mut walker = Walker::new();
    // SAFETY: as in `coroutine`: alive while it runs here.
    let walk = walker.walk_current(unsafe { &*g });
    let mut out = String::new();
    let (id, cut) = match walk {
        Walk::Frames(id, cut) => (id, cut),
        Walk::Skipped(why) => {
            out.push_str(&format!(
                "stack backtrace ({who}) not shown: {}\n",
                why.as_str()
            ));
            return out;
        }
        Walk::OnCpu | Walk::NotStarted => return out,
    };
    let frames = Symbols::name(walker.stacks()).frames(&walker.stacks()[id as usize], all);
    // The report's head and this are two writes: name the coroutine again, for a
    // report that another panic's output came between.
    out.push_str(&format!("stack backtrace ({who}):\n"));
    let cwd = std::env::current_dir().ok();
    super::dump::write_frames(&mut out, &frames, cwd.as_deref());
    if let Some(why) = cut {
        out.push_str(&format!("    ({})\n", why.as_str()));
    }
    out
}

/// A coroutine's panic that no join will take (see "a panic is never lost" in
/// `spawn.rs`): ends the program with exit status 2, as Go's unrecovered panic does,
/// after the panic's own report (printed by the hook when it happened) and a line that
/// says why; unless `GORO_DETACHED_PANIC=ignore`, which keeps std's rule for detached
/// threads (the report only). `id` is the coroutine's, `why` what became of its handle.
pub(crate) fn unjoined_panic(id: Option<u64>, why: &str) {
    if !super::rt().detached_panic_exits {
        return;
    }
    // One report and one `exit` (libc's is not safe to call from two threads at once):
    // a second unjoined panic meanwhile waits for the first to end the process.
    static ENDING: AtomicBool = AtomicBool::new(false);
    // Relaxed: only one caller may pass; nothing is published through the flag.
    if ENDING.swap(true, Ordering::Relaxed) {
        loop {
            std::thread::park();
        }
    }
    let who = match id {
        Some(id) => format!("coroutine {id}"),
        None => String::from("a coroutine"),
    };
    let _ = writeln!(
        std::io::stderr(),
        "goro: {who} panicked and {why}: nobody can take its panic, so the program \
         ends, as an unrecovered panic does in Go (GORO_DETACHED_PANIC=ignore keeps \
         std's rule for detached threads)"
    );
    std::process::exit(2);
}
