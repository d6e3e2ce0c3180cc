//! A fault trap for the dump's stack walks: a SIGSEGV or SIGBUS raised by code run
//! under [`catch_faults`] ends that code and makes `catch_faults` return
//! `Err(Faulted)`, where it would otherwise kill the process.
//!
//! The system unwinder follows a stack by its frames' unwind tables; a frame whose
//! tables are wrong (hand-written assembly, JIT code, C built without `.eh_frame`
//! that calls back into Rust that parks) gives it a bogus canonical frame address,
//! and its next read is of wild memory. A dump walks every parked coroutine's stack,
//! so one such frame anywhere would kill the program being diagnosed. Bounding the
//! unwinder's reads would mean writing our own unwinder; trapping its faults does not.
//!
//! `catch_faults` saves the callee-saved registers, the stack pointer and its return
//! address in a [`Landing`] (a `setjmp` of our own: Rust cannot call `setjmp`, whose
//! second return the compiler does not know about), arms this thread's trap, and calls
//! the code. The SIGSEGV/SIGBUS handler (`overflow::handler`) asks [`escape`] first: if
//! the faulting thread's trap is armed, it rewrites the interrupted context so that
//! the return from the handler lands as `catch_faults`' own return with 1 (the kernel's
//! `rt_sigreturn` restores every register from that context, and the signal mask with
//! them). The frames skipped are the unwinder's and the walk's, which hold no lock
//! and own nothing with a destructor: the unwinder reads the faulting memory in
//! `uw_update_context` or its fallback frame check, never inside its object-list lock
//! (glibc 2.35+ finds objects lock-free with `_dl_find_object`), and the walk's
//! address buffer is allocated before it starts and never grows during it.
//!
//! x86-64 only; elsewhere `catch_faults` calls the code without a trap, and a fault
//! there ends the process as before (docs/decisions/0003-coroutine-stacks.md).

use std::cell::Cell;
use std::ffi::c_void;
use std::ptr;

/// The code under the trap faulted, and was abandoned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) struct Faulted;

/// What `catch_faults` saved to land on: rbx, rbp, r12-r15, the stack pointer after
/// its return, and its return address.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Landing {
    regs: [usize; 8],
}

thread_local! {
    /// The landing of this thread's armed trap, or null. Const-initialised and without
    /// a destructor: a plain load from the signal handler.
    static ARMED: Cell<*mut Landing> = const { Cell::new(ptr::null_mut()) };
}

/// Runs `f`; a SIGSEGV or SIGBUS it raises ends it, and gives `Err(Faulted)`.
///
/// `f` must tolerate being abandoned at any point: no lock taken, nothing allocated or
/// owned that a destructor would release, no state left half-written that outlives it.
#[cfg(target_arch = "x86_64")]
pub(crate) fn catch_faults<F: FnOnce()>(f: F) -> Result<(), Faulted> {
    let mut f = Some(f);
    let mut landing = Landing::default();
    // One pointer for the slot and the call: `enter` writes through it, the handler
    // reads through it.
    let at: *mut Landing = &raw mut landing;
    let before = ARMED.with(|a| a.replace(at));
    // The landing's zeroes before the slot's store, for the handler on this thread.
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    // SAFETY: `trampoline::<F>` is given a pointer to `f`, alive across the call; the
    // landing is ours, armed above and disarmed below, and outlives the call.
    let faulted = unsafe { enter(at, trampoline::<F>, (&mut f as *mut Option<F>).cast()) };
    ARMED.with(|a| a.set(before));
    if faulted == 0 {
        Ok(())
    } else {
        // `f` was abandoned, not dropped: leave it so (it owns nothing, caller's rule).
        std::mem::forget(f);
        Err(Faulted)
    }
}

#[cfg(target_arch = "x86_64")]
/// Calls the closure behind `arg` (an `Option<F>` it takes). A panic must not cross
/// into `enter`'s frame (it has no unwind landing): it aborts, as any panic across an
/// `extern "C"` function does.
extern "C" fn trampoline<F: FnOnce()>(arg: *mut c_void) {
    // SAFETY: `catch_faults` passes a pointer to its `Option<F>`, alive during the call.
    let f = unsafe { &mut *arg.cast::<Option<F>>() };
    if let Some(f) = f.take() {
        f();
    }
}

/// Saves the landing, then calls `f(arg)`; returns 0, or 1 when the signal handler
/// lands here after a fault in `f`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
unsafe extern "C" fn enter(
    landing: *mut Landing,
    f: extern "C" fn(*mut c_void),
    arg: *mut c_void,
) -> u32 {
    // rdi: landing, rsi: f, rdx: arg. At entry rsp points at our return address.
    core::arch::naked_asm!(
        ".cfi_startproc",
        "mov [rdi], rbx",
        "mov [rdi + 8], rbp",
        "mov [rdi + 16], r12",
        "mov [rdi + 24], r13",
        "mov [rdi + 32], r14",
        "mov [rdi + 40], r15",
        "lea rax, [rsp + 8]",
        "mov [rdi + 48], rax",
        "mov rax, [rsp]",
        "mov [rdi + 56], rax",
        // Realign to 16 for the call (rsp is 8 past a multiple of 16 at entry).
        "sub rsp, 8",
        ".cfi_adjust_cfa_offset 8",
        "mov rdi, rdx",
        "call rsi",
        "add rsp, 8",
        ".cfi_adjust_cfa_offset -8",
        "xor eax, eax",
        "ret",
        ".cfi_endproc",
    )
}

/// Without a trap: runs `f`, and a fault in it ends the process as it would anyway.
#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn catch_faults<F: FnOnce()>(f: F) -> Result<(), Faulted> {
    f();
    Ok(())
}

/// For the SIGSEGV/SIGBUS handler, with its `info` and `ctx`: if this thread's trap is
/// armed and the fault is the code's own, disarms it and points the interrupted
/// context at its landing (returning from the handler then
/// returns from `enter` with 1). Returns whether it did. Async-signal-safe: a
/// thread-local load and stores into the context.
pub(crate) fn escape(info: *const libc::siginfo_t, ctx: *mut c_void) -> bool {
    let landing = ARMED.with(|a| a.get());
    if landing.is_null() || ctx.is_null() || info.is_null() {
        return false;
    }
    // SAFETY: the kernel passes a valid siginfo; an armed landing lives in
    // `catch_faults`' frame, still live (the fault happened below it).
    let (code, saved) = unsafe { ((*info).si_code, (*landing).regs[7]) };
    // Only a fault the code raised (si_code > 0; a signal sent with kill has
    // SI_USER, 0, or less), and only once `enter` has saved where to land.
    if code <= 0 || saved == 0 {
        return false;
    }
    ARMED.with(|a| a.set(ptr::null_mut()));
    land(landing, ctx);
    true
}

#[cfg(target_arch = "x86_64")]
fn land(landing: *mut Landing, ctx: *mut c_void) {
    // SAFETY: an armed landing lives in `catch_faults`' frame, below which the fault
    // happened (that frame is still live); `ctx` is the ucontext the kernel passed to
    // an SA_SIGINFO handler, ours to change until the handler returns.
    unsafe {
        let r = &(*landing).regs;
        let g = &mut (*ctx.cast::<libc::ucontext_t>()).uc_mcontext.gregs;
        g[libc::REG_RBX as usize] = r[0] as i64;
        g[libc::REG_RBP as usize] = r[1] as i64;
        g[libc::REG_R12 as usize] = r[2] as i64;
        g[libc::REG_R13 as usize] = r[3] as i64;
        g[libc::REG_R14 as usize] = r[4] as i64;
        g[libc::REG_R15 as usize] = r[5] as i64;
        g[libc::REG_RSP as usize] = r[6] as i64;
        g[libc::REG_RIP as usize] = r[7] as i64;
        g[libc::REG_RAX as usize] = 1;
        // The ABI's direction flag is clear at a call's return.
        g[libc::REG_EFL as usize] &= !(1 << 10);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn land(_landing: *mut Landing, _ctx: *mut c_void) {
    unreachable!("no trap is armed on this target (`catch_faults` arms none)");
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn a_fault_under_the_trap_is_caught_and_the_next_call_runs() {
        super::super::overflow::install();
        use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
        let reached = AtomicUsize::new(0);
        let r = catch_faults(|| {
            reached.store(1, Relaxed);
            // SAFETY: deliberately reads an address that is never mapped (below
            // `vm.mmap_min_addr`), to fault under the trap.
            let v = unsafe { (0x1000 as *const usize).read_volatile() };
            reached.store(v + 2, Relaxed);
        });
        assert_eq!(r, Err(Faulted));
        assert_eq!(reached.load(Relaxed), 1);
        // Disarmed, and reusable.
        assert!(ARMED.with(|a| a.get()).is_null());
        assert_eq!(catch_faults(|| reached.store(7, Relaxed)), Ok(()));
        assert_eq!(reached.load(Relaxed), 7);
    }
}
