//! Used by `std_echo_server` (the example that shows std code unchanged): stopping on
//! SIGINT / SIGTERM with a raw `sigwait`. goro code uses `goro::signal::notify`
//! instead, as `echo_server` does.

/// Blocks SIGINT and SIGTERM in the calling thread; threads started afterwards (the
/// runtime's Ms included) inherit the mask, so only `wait_for_signal` sees them.
pub fn block_stop_signals() -> libc::sigset_t {
    // SAFETY: sigset manipulation on a zeroed set we own; pthread_sigmask on this thread.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits for one of the signals in `set` (blocked by [`block_stop_signals`]).
pub fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is a valid signal set; sigwait writes the signal number.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}
