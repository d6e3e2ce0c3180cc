//! Stack overflow detection: a SIGSEGV/SIGBUS handler that recognises a hit in the
//! guard page of the coroutine running on the faulting thread.
//!
//! Before every resume, the M publishes the coroutine's [`GuardInfo`] in a thread-local
//! slot ([`set_running`]); the handler, running on the M's alternate signal stack
//! (every M makes sure it has one, [`ensure_altstack`]), compares the fault address
//! with that guard range. A hit prints
//! `coroutine <id> ('<name>') overflowed its <N> KiB stack` with `write(2)` and aborts:
//! never a silent segfault, never a jump back into a broken stack. Any other fault goes
//! to the handler that was installed before ours (std's, which reports overflows of its
//! own thread stacks), or to the default action. A fault in a dump's stack walk, which
//! runs under a fault trap (`trap.rs`), ends that walk instead. The handler uses only async-signal-safe
//! calls: `write`, `sigaction`, `abort`.

use std::cell::Cell;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::OnceLock;

/// What the overflow handler needs to know about a running coroutine. Immutable for
/// the coroutine's life; lives inside its G.
pub(crate) struct GuardInfo {
    pub(crate) guard_lo: usize,
    pub(crate) guard_hi: usize,
    pub(crate) usable: usize,
    pub(crate) id: u64,
    pub(crate) name: Option<std::sync::Arc<str>>,
}

impl GuardInfo {
    /// The guard of the coroutine `id` (named `name`) that runs on `stack`.
    #[inline(always)]
    pub(crate) fn of(stack: &super::Stack, id: u64, name: Option<std::sync::Arc<str>>) -> Self {
        let (guard_lo, guard_hi) = stack.guard_range();
        GuardInfo {
            guard_lo,
            guard_hi,
            usable: stack.usable(),
            id,
            name,
        }
    }
}

thread_local! {
    /// The guard of the coroutine running on this thread, or null. Const-initialised
    /// and without a destructor, so reading it from a signal handler is a plain load.
    static RUNNING: Cell<*const GuardInfo> = const { Cell::new(ptr::null()) };
}

/// Publishes the guard of the coroutine about to run on this thread (null: none).
#[inline]
pub(crate) fn set_running(info: *const GuardInfo) {
    RUNNING.with(|r| r.set(info));
}

/// The guard published on this thread (for a dump that runs another coroutine here for
/// a moment and then puts it back).
pub(crate) fn running() -> *const GuardInfo {
    RUNNING.with(|r| r.get())
}

struct Previous {
    segv: libc::sigaction,
    bus: libc::sigaction,
}

// SAFETY: plain old data (function pointers and flags), written once before the
// handler is installed and only read afterwards.
unsafe impl Sync for Previous {}
// SAFETY: as above.
unsafe impl Send for Previous {}

static PREVIOUS: OnceLock<Previous> = OnceLock::new();

/// Installs the handler for SIGSEGV and SIGBUS, once per process.
pub(crate) fn install() {
    PREVIOUS.get_or_init(|| {
        // SAFETY: sigaction with a zeroed struct and a handler of the right signature;
        // the previous actions are saved before ours can run (get_or_init publishes
        // them before returning, and the handler reads them only after a fault).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut act.sa_mask);
            let mut segv = MaybeUninit::<libc::sigaction>::zeroed();
            let mut bus = MaybeUninit::<libc::sigaction>::zeroed();
            libc::sigaction(libc::SIGSEGV, ptr::null(), segv.as_mut_ptr());
            libc::sigaction(libc::SIGBUS, ptr::null(), bus.as_mut_ptr());
            let prev = Previous {
                segv: segv.assume_init(),
                bus: bus.assume_init(),
            };
            libc::sigaction(libc::SIGSEGV, &act, ptr::null_mut());
            libc::sigaction(libc::SIGBUS, &act, ptr::null_mut());
            prev
        }
    });
}

/// An alternate signal stack this thread installed: dropping it (on the thread, as it
/// ends) uninstalls and unmaps it.
pub(crate) struct AltStack {
    map: *mut libc::c_void,
    len: usize,
}

impl Drop for AltStack {
    fn drop(&mut self) {
        let off = libc::stack_t {
            ss_sp: ptr::null_mut(),
            ss_flags: libc::SS_DISABLE,
            ss_size: 0,
        };
        // SAFETY: the thread is done running coroutines (its M has left the pool), so
        // no signal handler runs on this stack any more once it is disabled; then the
        // mapping, ours alone, is unmapped.
        unsafe {
            libc::sigaltstack(&off, ptr::null_mut());
            libc::munmap(self.map, self.len);
        }
    }
}

/// Gives this thread an alternate signal stack if it has none (std gives its own
/// threads one only when its handler is installed). The returned guard keeps it: an M
/// holds it for its thread's life and drops it when it leaves the pool.
pub(crate) fn ensure_altstack() -> Option<AltStack> {
    // SAFETY: querying the current alternate stack into a zeroed struct.
    let mut old: libc::stack_t = unsafe { std::mem::zeroed() };
    // SAFETY: `old` is a valid out-pointer.
    if unsafe { libc::sigaltstack(ptr::null(), &mut old) } != 0
        || old.ss_flags & libc::SS_DISABLE == 0
    {
        return None;
    }
    let page = super::page_size();
    let size = 64 * 1024;
    // SAFETY: a fresh anonymous mapping: one guard page below the signal stack.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            size + page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    // SAFETY: protecting the first page of our own mapping; then registering the rest
    // as this thread's signal stack, which stays mapped until the guard is dropped.
    unsafe {
        libc::mprotect(p, page, libc::PROT_NONE);
        let ss = libc::stack_t {
            ss_sp: p.cast::<u8>().add(page).cast(),
            ss_flags: 0,
            ss_size: size,
        };
        libc::sigaltstack(&ss, ptr::null_mut());
    }
    Some(AltStack {
        map: p,
        len: size + page,
    })
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    // A dump's walk under its fault trap: the walk ends there, the process goes on.
    if super::trap::escape(info, ctx) {
        return;
    }
    let running = RUNNING.with(|r| r.get());
    if !running.is_null() {
        // SAFETY: the M publishes a pointer to the running G's GuardInfo, and the G is
        // kept alive by its M while it runs.
        let g = unsafe { &*running };
        if addr >= g.guard_lo && addr < g.guard_hi {
            report(g);
            // SAFETY: abort is async-signal-safe.
            unsafe { libc::abort() };
        }
    }
    chain(sig, info, ctx);
}

/// Writes the overflow message without allocating.
fn report(g: &GuardInfo) {
    let mut buf = [0u8; 384];
    let mut n = 0;
    let mut put = |bytes: &[u8]| {
        let k = bytes.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&bytes[..k]);
        n += k;
    };
    let mut digits = [0u8; 20];
    put(b"coroutine ");
    put(fmt_u64(g.id, &mut digits));
    put(b" ('");
    match &g.name {
        Some(name) => put(&name.as_bytes()[..name.len().min(200)]),
        None => put(b"<unnamed>"),
    }
    put(b"') overflowed its ");
    put(fmt_u64((g.usable / 1024) as u64, &mut digits));
    put(b" KiB stack\n");
    // write(2) on stderr through `syscall`: async-signal-safe, and never a hook.
    let _ = crate::sys::write(2, &buf[..n]);
}

fn fmt_u64(mut v: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &out[i..]
}

/// Passes a fault that is not ours to the previous handler, or restores the default
/// action so that the faulting instruction, re-executed on return, kills the process as
/// it would have without us.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let Some(prev) = PREVIOUS.get() else {
        reset_default(sig);
        return;
    };
    let act = if sig == libc::SIGBUS {
        &prev.bus
    } else {
        &prev.segv
    };
    let h = act.sa_sigaction;
    if h == libc::SIG_DFL || h == libc::SIG_IGN {
        reset_default(sig);
    } else if act.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
        // signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(h) };
        f(sig, info, ctx);
    } else {
        // SAFETY: a plain sa_handler.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
        f(sig);
    }
}

fn reset_default(sig: libc::c_int) {
    // SAFETY: installing SIG_DFL with a zeroed sigaction; async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_numbers() {
        let mut d = [0u8; 20];
        assert_eq!(super::fmt_u64(0, &mut d), b"0");
        assert_eq!(super::fmt_u64(256, &mut d), b"256");
        assert_eq!(super::fmt_u64(u64::MAX, &mut d), b"18446744073709551615");
    }

    /// Whether some mapping of this process starts at `addr`.
    fn mapped_at(addr: usize) -> bool {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let want = format!("{addr:x}-");
        maps.lines().any(|l| l.starts_with(&want))
    }

    /// A thread without a signal stack gets one, and dropping the guard uninstalls and
    /// unmaps it (before issue 14 it stayed mapped after the M's thread ended).
    #[test]
    fn altstack_is_unmapped_when_dropped() {
        std::thread::spawn(|| {
            // Take away the stack std gave this thread (if any) so goro makes one.
            let off = libc::stack_t {
                ss_sp: std::ptr::null_mut(),
                ss_flags: libc::SS_DISABLE,
                ss_size: 0,
            };
            // SAFETY: disabling this thread's alternate stack; no handler runs on it.
            assert_eq!(unsafe { libc::sigaltstack(&off, std::ptr::null_mut()) }, 0);
            let alt = super::ensure_altstack().expect("a thread without one gets one");
            let addr = alt.map as usize;
            assert!(mapped_at(addr));
            assert!(super::ensure_altstack().is_none(), "a second one");
            drop(alt);
            assert!(!mapped_at(addr), "the signal stack outlived its guard");
            // SAFETY: querying into a zeroed struct.
            let mut now: libc::stack_t = unsafe { std::mem::zeroed() };
            // SAFETY: `now` is a valid out-pointer.
            unsafe { libc::sigaltstack(std::ptr::null(), &mut now) };
            assert_ne!(now.ss_flags & libc::SS_DISABLE, 0, "still installed");
        })
        .join()
        .unwrap();
    }
}
