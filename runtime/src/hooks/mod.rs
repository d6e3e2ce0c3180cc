//! The `hooks` feature: libc's blocking calls, defined in the final binary, park the
//! calling coroutine instead of blocking its thread.
//!
//! std (and every crate and statically linked C library in the program) reaches the
//! kernel through libc's `read`, `recv`, `connect`, `poll`, `clock_nanosleep`... The
//! functions below define those symbols, so the linker binds every such call in the
//! executable to them rather than to glibc (a definition in an object beats one in a
//! shared library). Each makes the real call with `syscall(2)` (`crate::sys`), never
//! through `dlsym`: nothing to resolve, nothing that allocates or locks. The decision
//! and its risks: docs/decisions/0002-hooks.md.
//!
//! # Who is hooked
//!
//! - A plain thread (also a coroutine inside `blocking`, the scheduler, sysmon, a
//!   forked child): the real call. If it fails with `EAGAIN` on a socket the hooks
//!   made non-blocking underneath (and the user did not), the call waits in `poll(2)`
//!   and retries, so the thread still sees a blocking socket.
//! - A coroutine, for a socket the user sees as blocking: the socket is switched to
//!   `O_NONBLOCK` underneath (once) and remembered in the fd table (`fdtable`); the
//!   call is tried, and `EAGAIN` parks the coroutine on the netpoller (the same poll
//!   descriptors and turn protocol as goro's own sockets, `net::poll`), until the
//!   socket's `SO_RCVTIMEO` / `SO_SNDTIMEO`.
//! - A coroutine, for anything else (a file, a pipe, a tty, a socket in non-blocking
//!   mode): the real call. Retake keeps the runtime going if it blocks.
//! - `nanosleep`, `clock_nanosleep` (the realtime, monotonic and boot clocks), `usleep`,
//!   `sleep` on a coroutine: a runtime timer.
//! - `poll` / `ppoll` on a coroutine, when the set holds a socket and the call would
//!   block: the set goes into a private epoll instance, which parks on the netpoller.
//!
//! # std's semantics
//!
//! The caller must not be able to tell: a blocking send returns once everything is
//! queued (or at the timeout or an error, with the partial count if any went), as
//! does a receive with `MSG_WAITALL`; an expired timeout is `EAGAIN` (std:
//! `WouldBlock`), a connect's `EINPROGRESS`; connect reports `SO_ERROR`; `F_GETFL`
//! does not show the `O_NONBLOCK` set underneath, and `FIONBIO` / `F_SETFL` by the user
//! are recorded and passed on (clearing `O_NONBLOCK` keeps it underneath).
//! `setsockopt` goes to the kernel as well, so `getsockopt` needs no hook.
//!
//! goro's own descriptors never reach a hook: the runtime makes its calls through
//! `crate::sys`.

mod fdtable;
mod io;

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use libc::{c_int, c_uint, c_ulong, c_void, size_t, sockaddr, socklen_t, ssize_t};

use self::fdtable::{entry, entry_or_init, parking, timeval_ns, OUR_NB, USER_NB};
use self::io::{blocking_call, Call, Raw};
use crate::net::poll::{Dir, PollDesc};
use crate::sys::{self, raw6, set_errno};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("goro's `hooks` feature supports Linux on x86_64 and aarch64 only");

/// A raw result as libc returns it: the value, or -1 with `errno` set.
#[inline]
fn ret(r: Raw) -> ssize_t {
    match r {
        Ok(n) => n as ssize_t,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// [`ret`] for the calls that return an `int`.
#[inline]
fn ret_int(r: Raw) -> c_int {
    ret(r) as c_int
}

/// A pointer or integer argument as `syscall` takes it.
#[inline]
fn a<T: Into<u64>>(v: T) -> usize {
    v.into() as usize
}

/// An fd (or any `int`) argument, sign-extended as the kernel reads it.
#[inline]
fn i(v: c_int) -> usize {
    v as isize as usize
}

// ---------------------------------------------------------------------------------
// Reads and writes.

/// `read(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    ret(blocking_call(fd, Dir::Read, 0, n, Some(false), |_| {
        // SAFETY: the caller's buffer.
        unsafe { raw6(libc::SYS_read, [i(fd), buf as usize, n, 0, 0, 0]) }
    }))
}

/// `write(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    ret(blocking_call(fd, Dir::Write, 0, n, None, |done| {
        // SAFETY: the caller's buffer, from byte `done < n` on.
        unsafe {
            raw6(
                libc::SYS_write,
                [i(fd), buf as usize + done, n - done, 0, 0, 0],
            )
        }
    }))
}

/// `readv(2)`.
///
/// # Safety
///
/// libc's contract: `iov` holds `cnt` valid iovecs.
#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    ret(blocking_call(fd, Dir::Read, 0, 0, Some(false), |_| {
        // SAFETY: the caller's iovecs.
        unsafe { raw6(libc::SYS_readv, [i(fd), iov as usize, i(cnt), 0, 0, 0]) }
    }))
}

/// `writev(2)`.
///
/// # Safety
///
/// libc's contract: `iov` holds `cnt` valid iovecs.
#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const libc::iovec, cnt: c_int) -> ssize_t {
    // SAFETY: the caller's iovecs.
    let len = unsafe { iov_len(iov, cnt) };
    ret(blocking_call(fd, Dir::Write, 0, len, None, |done| {
        // SAFETY: the caller's iovecs, from byte `done` on.
        unsafe {
            with_iov_after(iov, cnt, done, |v, n| {
                raw6(libc::SYS_writev, [i(fd), v as usize, n, 0, 0, 0])
            })
        }
    }))
}

/// `recv(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract, passed on.
    unsafe {
        recvfrom(
            fd,
            buf,
            n,
            flags,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    }
}

/// `recvfrom(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes, `addr` and `len` null or valid.
#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    let all = (flags & libc::MSG_WAITALL == 0).then_some(false);
    ret(blocking_call(fd, Dir::Read, flags, n, all, |done| {
        // SAFETY: the caller's buffer, from byte `done < n` on, and address.
        unsafe {
            raw6(
                libc::SYS_recvfrom,
                [
                    i(fd),
                    buf as usize + done,
                    n - done,
                    i(flags),
                    addr as usize,
                    len as usize,
                ],
            )
        }
    }))
}

/// `recvmsg(2)` (`MSG_WAITALL` is not emulated: one message's worth).
///
/// # Safety
///
/// libc's contract: `msg` is a valid msghdr.
#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    ret(blocking_call(fd, Dir::Read, flags, 0, Some(false), |_| {
        // SAFETY: the caller's msghdr.
        unsafe { raw6(libc::SYS_recvmsg, [i(fd), msg as usize, i(flags), 0, 0, 0]) }
    }))
}

/// `send(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes.
#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the caller's contract, passed on.
    unsafe { sendto(fd, buf, n, flags, std::ptr::null(), 0) }
}

/// `sendto(2)`.
///
/// # Safety
///
/// libc's contract: `buf` is valid for `n` bytes, `addr` null or valid for `len`.
#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    ret(blocking_call(fd, Dir::Write, flags, n, None, |done| {
        // SAFETY: the caller's buffer, from byte `done < n` on, and address.
        unsafe {
            raw6(
                libc::SYS_sendto,
                [
                    i(fd),
                    buf as usize + done,
                    n - done,
                    i(flags),
                    addr as usize,
                    a(len),
                ],
            )
        }
    }))
}

/// `sendmsg(2)`: on a stream, everything is queued; control data goes with the first
/// part only.
///
/// # Safety
///
/// libc's contract: `msg` is a valid msghdr.
#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    // SAFETY: the caller's msghdr.
    let m = unsafe { &*msg };
    // SAFETY: its iovecs.
    let len = unsafe { iov_len(m.msg_iov, m.msg_iovlen as c_int) };
    ret(blocking_call(fd, Dir::Write, flags, len, None, |done| {
        if done == 0 {
            // SAFETY: the caller's msghdr.
            return unsafe { raw6(libc::SYS_sendmsg, [i(fd), msg as usize, i(flags), 0, 0, 0]) };
        }
        // SAFETY: the caller's iovecs, from byte `done` on.
        unsafe {
            with_iov_after(m.msg_iov, m.msg_iovlen as c_int, done, |v, n| {
                let mut rest = *m;
                rest.msg_iov = v as *mut libc::iovec;
                rest.msg_iovlen = n as _;
                rest.msg_control = std::ptr::null_mut();
                rest.msg_controllen = 0;
                raw6(
                    libc::SYS_sendmsg,
                    [
                        i(fd),
                        &rest as *const libc::msghdr as usize,
                        i(flags),
                        0,
                        0,
                        0,
                    ],
                )
            })
        }
    }))
}

/// The total length of `cnt` iovecs (saturating; 0 for a bad count).
///
/// # Safety
///
/// `iov` holds `cnt` valid iovecs.
unsafe fn iov_len(iov: *const libc::iovec, cnt: c_int) -> usize {
    if iov.is_null() || cnt <= 0 {
        return 0;
    }
    // SAFETY: the caller's contract.
    let v = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    v.iter().fold(0usize, |s, x| s.saturating_add(x.iov_len))
}

/// At most this many iovecs go into one call of a send that continues after a part.
const IOV_WINDOW: usize = 64;

/// Calls `f` with the iovecs of `iov[..cnt]` from byte `skip` on (a copy of at most
/// [`IOV_WINDOW`] on the stack, the first one shortened), or with the caller's own
/// when `skip` is 0.
///
/// # Safety
///
/// `iov` holds `cnt` valid iovecs.
unsafe fn with_iov_after(
    iov: *const libc::iovec,
    cnt: c_int,
    skip: usize,
    f: impl FnOnce(*const libc::iovec, usize) -> Raw,
) -> Raw {
    if skip == 0 || iov.is_null() || cnt <= 0 {
        return f(iov, cnt.max(0) as usize);
    }
    // SAFETY: the caller's contract.
    let v = unsafe { std::slice::from_raw_parts(iov, cnt as usize) };
    let mut window = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; IOV_WINDOW];
    let mut left = skip;
    let mut n = 0;
    for x in v {
        if left >= x.iov_len {
            left -= x.iov_len;
            continue;
        }
        if n == IOV_WINDOW {
            break;
        }
        window[n] = libc::iovec {
            iov_base: (x.iov_base as usize + left) as *mut c_void,
            iov_len: x.iov_len - left,
        };
        left = 0;
        n += 1;
    }
    f(window.as_ptr(), n)
}

// ---------------------------------------------------------------------------------
// Connections.

/// `accept(2)`.
///
/// # Safety
///
/// libc's contract: `addr` and `len` null or valid.
#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { accept4(fd, addr, len, 0) }
}

/// `accept4(2)`. The new socket inherits the listener's timeouts (as Linux copies
/// them) and is blocking unless `SOCK_NONBLOCK`.
///
/// # Safety
///
/// libc's contract: `addr` and `len` null or valid.
#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    let op = || {
        // SAFETY: the caller's address buffer.
        unsafe {
            raw6(
                libc::SYS_accept4,
                [i(fd), addr as usize, len as usize, i(flags), 0, 0],
            )
        }
    };
    let r = if parking() {
        match Call::on_coroutine(fd, Dir::Read) {
            Some(call) => call.io(op, |_| false),
            None => op(),
        }
    } else {
        // A plain thread: the real call first, the table only after an EAGAIN.
        match op() {
            Err(libc::EAGAIN) => match Call::on_thread(fd, Dir::Read) {
                Some(call) => call.io(op, |_| false),
                None => Err(libc::EAGAIN),
            },
            r => r,
        }
    };
    if let Ok(nfd) = r {
        if let Some(e) = entry_or_init(nfd as RawFd) {
            let (rcv, snd) = entry(fd).map_or((0, 0), |l| {
                let ns = |t: Option<Duration>| t.map_or(0, |t| t.as_nanos() as u64);
                (ns(l.timeout(true)), ns(l.timeout(false)))
            });
            e.born_socket(
                nfd as RawFd,
                libc::SOCK_STREAM | (flags & libc::SOCK_NONBLOCK),
                rcv,
                snd,
            );
        }
    }
    ret_int(r)
}

/// `connect(2)`: waits for the connection and reports its outcome.
///
/// # Safety
///
/// libc's contract: `addr` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    let op = || {
        // SAFETY: the caller's address.
        unsafe { raw6(libc::SYS_connect, [i(fd), addr as usize, a(len), 0, 0, 0]) }
    };
    let call = if parking() {
        match Call::on_coroutine(fd, Dir::Write) {
            Some(call) => call,
            None => return ret_int(op()),
        }
    } else {
        let r = op();
        if r != Err(libc::EINPROGRESS) {
            return ret_int(r);
        }
        match Call::on_thread(fd, Dir::Write) {
            Some(call) => return ret_int(call.connected()),
            None => return ret_int(r),
        }
    };
    ret_int(match op() {
        Err(libc::EINPROGRESS) => call.connected(),
        // A Unix socket whose listener's backlog is full: retry when writable.
        Err(libc::EAGAIN) => call.io(op, |_| false),
        r => r,
    })
}

// ---------------------------------------------------------------------------------
// poll.

/// `poll(2)`.
///
/// # Safety
///
/// libc's contract: `fds` holds `nfds` pollfds.
#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    let t = u64::try_from(timeout).ok().map(Duration::from_millis);
    // SAFETY: the caller's contract.
    ret_int(unsafe { poll_for(fds, nfds, t) })
}

/// `ppoll(2)`. With a signal mask it is the real call (the mask cannot be applied
/// to a parked coroutine).
///
/// # Safety
///
/// libc's contract: `fds` holds `nfds` pollfds, `tmo` and `mask` null or valid.
#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    tmo: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    let t = if tmo.is_null() {
        None
    } else {
        // SAFETY: the caller's timespec.
        duration_of(unsafe { &*tmo })
    };
    if !mask.is_null() || (!tmo.is_null() && t.is_none()) {
        // SAFETY: the caller's arguments, passed on (an invalid timespec gets EINVAL).
        return ret_int(unsafe { real_ppoll(fds, nfds, tmo, mask) });
    }
    // SAFETY: the caller's contract.
    ret_int(unsafe { poll_for(fds, nfds, t) })
}

/// The real `ppoll`, with 8 bytes of signal mask as the kernel takes it.
///
/// # Safety
///
/// `fds` holds `nfds` pollfds, `tmo` and `mask` null or valid.
unsafe fn real_ppoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    tmo: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> Raw {
    // SAFETY: the caller's contract.
    unsafe {
        raw6(
            libc::SYS_ppoll,
            [
                fds as usize,
                nfds as usize,
                tmo as usize,
                mask as usize,
                8,
                0,
            ],
        )
    }
}

/// A timespec as a duration; None if it is not a valid one.
fn duration_of(ts: &libc::timespec) -> Option<Duration> {
    if ts.tv_sec < 0 || !(0..1_000_000_000).contains(&ts.tv_nsec) {
        return None;
    }
    Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

/// A poll of `fds` for at most `timeout` (None: no limit). On a coroutine, a set that
/// holds a socket and would block goes into a private epoll instance, level-triggered,
/// whose own descriptor parks on the netpoller; every wake-up is checked with a real
/// poll of the set.
///
/// # Safety
///
/// `fds` holds `nfds` pollfds.
unsafe fn poll_for(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: Option<Duration>) -> Raw {
    let real = |t: Option<Duration>| {
        let ts = t.map(sys::timespec);
        let tp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: the caller's pollfds and a timespec of ours.
        unsafe { real_ppoll(fds, nfds, tp, std::ptr::null()) }
    };
    if !parking() || timeout == Some(Duration::ZERO) {
        return real(timeout);
    }
    if nfds == 0 {
        return match timeout {
            Some(t) => {
                sleep_for(t);
                Ok(0)
            }
            None => real(None),
        };
    }
    let n = real(Some(Duration::ZERO))?;
    if n > 0 {
        return Ok(n);
    }
    // SAFETY: the caller's contract.
    let set = unsafe { std::slice::from_raw_parts(fds, nfds as usize) };
    let has_socket = set
        .iter()
        .any(|p| p.fd >= 0 && entry(p.fd).is_some_and(|e| e.known(p.fd).is_socket()));
    if !has_socket {
        return real(timeout);
    }
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    let Some(ep) = private_epoll(set) else {
        return real(timeout);
    };
    let r = match PollDesc::register(ep) {
        Ok(pd) => {
            let r = loop {
                let seq = pd.seq(Dir::Read);
                match real(Some(Duration::ZERO)) {
                    Ok(0) => {}
                    r => break r,
                }
                match pd.wait(Dir::Read, seq, deadline, false) {
                    // The descriptor is ours alone: its turn ends at once.
                    Ok(true) => pd.end_turn(Dir::Read, seq),
                    Ok(false) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::TimedOut => break Ok(0),
                    Err(e) => break Err(e.raw_os_error().unwrap_or(libc::EINTR)),
                }
            };
            pd.deregister();
            r
        }
        Err(_) => real(timeout),
    };
    let _ = sys::close(ep);
    r
}

/// An epoll instance watching `set` (level-triggered), or None if one cannot be made.
fn private_epoll(set: &[libc::pollfd]) -> Option<RawFd> {
    // SAFETY: no memory is passed.
    let ep = unsafe {
        raw6(
            libc::SYS_epoll_create1,
            [i(libc::EPOLL_CLOEXEC), 0, 0, 0, 0, 0],
        )
    };
    let ep = ep.ok()? as RawFd;
    let wanted = (libc::POLLIN | libc::POLLOUT | libc::POLLPRI | libc::POLLRDHUP) as u32;
    for (k, p) in set.iter().enumerate() {
        if p.fd < 0 {
            continue;
        }
        // A descriptor listed twice watches the union of its entries' events.
        let events = set[..=k]
            .iter()
            .filter(|q| q.fd == p.fd)
            .fold(0u32, |s, q| s | (q.events as u16 as u32 & wanted));
        let mut ev = libc::epoll_event { events, u64: 0 };
        let first = set[..k].iter().all(|q| q.fd != p.fd);
        let op = if first {
            libc::EPOLL_CTL_ADD
        } else {
            libc::EPOLL_CTL_MOD
        };
        // SAFETY: an epoll_event of ours. A descriptor epoll refuses (a regular file
        // is always ready, so the first poll already returned) is left out.
        let _ = unsafe {
            raw6(
                libc::SYS_epoll_ctl,
                [i(ep), i(op), i(p.fd), &mut ev as *mut _ as usize, 0, 0],
            )
        };
    }
    Some(ep)
}

// ---------------------------------------------------------------------------------
// Descriptors: keeping the table true.

/// `socket(2)`.
#[no_mangle]
pub extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: no memory is passed.
    let r = unsafe { raw6(libc::SYS_socket, [i(domain), i(ty), i(protocol), 0, 0, 0]) };
    if let Ok(fd) = r {
        if let Some(e) = entry_or_init(fd as RawFd) {
            e.born_socket(fd as RawFd, ty, 0, 0);
        }
    }
    ret_int(r)
}

/// `socketpair(2)`.
///
/// # Safety
///
/// libc's contract: `sv` is valid for two ints.
#[no_mangle]
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    ty: c_int,
    protocol: c_int,
    sv: *mut c_int,
) -> c_int {
    // SAFETY: the caller's two ints.
    let r = unsafe {
        raw6(
            libc::SYS_socketpair,
            [i(domain), i(ty), i(protocol), sv as usize, 0, 0],
        )
    };
    if r.is_ok() {
        for k in 0..2 {
            // SAFETY: the kernel filled both.
            let fd = unsafe { *sv.add(k) };
            if let Some(e) = entry_or_init(fd) {
                e.born_socket(fd, ty, 0, 0);
            }
        }
    }
    ret_int(r)
}

/// `close(2)`: the entry is emptied (and its registration removed from the poller)
/// while the descriptor is still open.
#[no_mangle]
pub extern "C" fn close(fd: c_int) -> c_int {
    if let Some(e) = entry(fd) {
        e.forget();
    }
    ret_int(sys::close(fd))
}

/// `dup(2)`.
#[no_mangle]
pub extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: no memory is passed.
    let r = unsafe { raw6(libc::SYS_dup, [i(fd), 0, 0, 0, 0, 0]) };
    copied(fd, r)
}

/// `dup2(2)`.
#[no_mangle]
pub extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    if old == new {
        // dup2 onto itself only checks that `old` is open.
        return ret_int(sys::fcntl(old, libc::F_GETFD, 0).map(|_| new as usize));
    }
    dup3(old, new, 0)
}

/// `dup3(2)`.
#[no_mangle]
pub extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    if old != new {
        if let Some(e) = entry(new) {
            e.forget(); // `new` is closed by the call
        }
    }
    // SAFETY: no memory is passed.
    let r = unsafe { raw6(libc::SYS_dup3, [i(old), i(new), i(flags), 0, 0, 0]) };
    copied(old, r)
}

/// A successful duplication of `old` into `r`'s descriptor copies its entry.
fn copied(old: c_int, r: Raw) -> c_int {
    if let Ok(new) = r {
        if let (Some(src), Some(dst)) = (entry(old), entry(new as RawFd)) {
            src.copy_to(dst);
        }
    }
    ret_int(r)
}

/// `fcntl(2)`. Declared with one integer argument: on the Linux x86_64 and aarch64
/// ABIs a variadic argument travels as a fixed one would, and a command that takes a
/// pointer gets it back unchanged.
///
/// # Safety
///
/// libc's contract for `cmd`'s argument.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let real = |arg: c_ulong| {
        // SAFETY: the caller's argument, under its contract for `cmd`.
        unsafe { raw6(libc::SYS_fcntl, [i(fd), i(cmd), arg as usize, 0, 0, 0]) }
    };
    match cmd {
        libc::F_GETFL => {
            let r = real(arg);
            match (r, entry(fd)) {
                (Ok(fl), Some(e)) if e.state().emulated() => {
                    ret_int(Ok(fl & !(libc::O_NONBLOCK as usize)))
                }
                _ => ret_int(r),
            }
        }
        libc::F_SETFL => {
            let mut arg = arg;
            if let Some(e) = entry(fd) {
                let st = e.state();
                if st.is_socket() {
                    let on = arg & libc::O_NONBLOCK as c_ulong != 0;
                    e.set(USER_NB, on);
                    if !on && st.has(OUR_NB) {
                        arg |= libc::O_NONBLOCK as c_ulong; // stays underneath
                    }
                }
            }
            ret_int(real(arg))
        }
        libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => copied(fd, real(arg)),
        _ => ret_int(real(arg)),
    }
}

/// `fcntl64`: glibc's name for `fcntl` in code built with 64-bit file offsets.
///
/// # Safety
///
/// As [`fcntl`].
#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { fcntl(fd, cmd, arg) }
}

/// `ioctl(2)`, declared as [`fcntl`] is. `FIONBIO` is recorded; turning non-blocking
/// mode off on a socket the hooks made non-blocking underneath leaves it on there.
///
/// # Safety
///
/// libc's contract for `req`'s argument.
#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if req == libc::FIONBIO as c_ulong && !arg.is_null() {
        if let Some(e) = entry(fd) {
            let st = e.state();
            if st.is_socket() {
                // SAFETY: FIONBIO's argument is an int.
                let on = unsafe { *(arg as *const c_int) } != 0;
                e.set(USER_NB, on);
                if !on && st.has(OUR_NB) {
                    return 0;
                }
            }
        }
    }
    // SAFETY: the caller's argument, under its contract for `req`.
    ret_int(unsafe {
        raw6(
            libc::SYS_ioctl,
            [i(fd), req as usize, arg as usize, 0, 0, 0],
        )
    })
}

/// `SO_RCVTIMEO_NEW` / `SO_SNDTIMEO_NEW` (asm-generic and x86: the 64-bit-time forms;
/// on 64-bit targets their struct is a timeval).
const SO_RCVTIMEO_NEW: c_int = 66;
const SO_SNDTIMEO_NEW: c_int = 67;

/// `setsockopt(2)`: the kernel gets every option (so `getsockopt` answers truly);
/// the socket timeouts are recorded for the emulated blocking calls.
///
/// # Safety
///
/// libc's contract: `val` is valid for `len` bytes.
#[no_mangle]
pub unsafe extern "C" fn setsockopt(
    fd: c_int,
    level: c_int,
    name: c_int,
    val: *const c_void,
    len: socklen_t,
) -> c_int {
    // SAFETY: the caller's option value.
    let r = unsafe {
        raw6(
            libc::SYS_setsockopt,
            [i(fd), i(level), i(name), val as usize, a(len), 0],
        )
    };
    let read = match name {
        libc::SO_RCVTIMEO | SO_RCVTIMEO_NEW => Some(true),
        libc::SO_SNDTIMEO | SO_SNDTIMEO_NEW => Some(false),
        _ => None,
    };
    if let (Ok(_), libc::SOL_SOCKET, Some(read)) = (r, level, read) {
        if len as usize >= std::mem::size_of::<libc::timeval>() {
            if let Some(e) = entry(fd) {
                // SAFETY: the kernel just read a timeval from `val`.
                let tv = unsafe { std::ptr::read_unaligned(val as *const libc::timeval) };
                e.set_timeout(read, timeval_ns(&tv));
            }
        }
    }
    ret_int(r)
}

// ---------------------------------------------------------------------------------
// Sleeping.

/// `nanosleep(2)`: on a coroutine, a runtime timer (never interrupted, so `rem` is
/// not written).
///
/// # Safety
///
/// libc's contract: `req` valid, `rem` null or valid.
#[no_mangle]
pub unsafe extern "C" fn nanosleep(req: *const libc::timespec, rem: *mut libc::timespec) -> c_int {
    if parking() && !req.is_null() {
        // SAFETY: the caller's timespec.
        return match duration_of(unsafe { &*req }) {
            Some(d) => {
                sleep_for(d);
                0
            }
            None => ret_int(Err(libc::EINVAL)),
        };
    }
    // SAFETY: the caller's arguments.
    ret_int(unsafe {
        raw6(
            libc::SYS_nanosleep,
            [req as usize, rem as usize, 0, 0, 0, 0],
        )
    })
}

/// `clock_nanosleep(2)` (returns the error number, as POSIX says): on a coroutine, for
/// the realtime, monotonic and boot clocks, a runtime timer; an absolute time is
/// turned into a duration once (a realtime clock set meanwhile is not followed).
///
/// # Safety
///
/// libc's contract: `req` valid, `rem` null or valid.
#[no_mangle]
pub unsafe extern "C" fn clock_nanosleep(
    clock: libc::clockid_t,
    flags: c_int,
    req: *const libc::timespec,
    rem: *mut libc::timespec,
) -> c_int {
    let ours = matches!(
        clock,
        libc::CLOCK_REALTIME | libc::CLOCK_MONOTONIC | libc::CLOCK_BOOTTIME
    );
    if parking() && ours && !req.is_null() {
        // SAFETY: the caller's timespec.
        let Some(d) = duration_of(unsafe { &*req }) else {
            return libc::EINVAL;
        };
        let d = if flags & libc::TIMER_ABSTIME != 0 {
            let mut now = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime writes the timespec we pass.
            unsafe { libc::clock_gettime(clock, &mut now) };
            let now = duration_of(&now).unwrap_or_default();
            d.saturating_sub(now)
        } else {
            d
        };
        sleep_for(d);
        return 0;
    }
    // SAFETY: the caller's arguments.
    match unsafe {
        raw6(
            libc::SYS_clock_nanosleep,
            [i(clock), i(flags), req as usize, rem as usize, 0, 0],
        )
    } {
        Ok(_) => 0,
        Err(e) => e,
    }
}

/// `usleep(3)`.
#[no_mangle]
pub extern "C" fn usleep(us: libc::useconds_t) -> c_int {
    let d = Duration::from_micros(us.into());
    if parking() {
        sleep_for(d);
        return 0;
    }
    real_sleep(d).map_or(-1, |_| 0)
}

/// `sleep(3)`: returns the seconds left if a signal cut a thread's sleep short.
#[no_mangle]
pub extern "C" fn sleep(secs: c_uint) -> c_uint {
    let d = Duration::from_secs(secs.into());
    if parking() {
        sleep_for(d);
        return 0;
    }
    match real_sleep(d) {
        Ok(()) => 0,
        Err(left) => left.as_secs() as c_uint + (left.subsec_nanos() > 0) as c_uint,
    }
}

/// A coroutine's sleep: a runtime timer, or for a zero duration a yield (what a
/// thread's zero `nanosleep` amounts to, and what `usleep(0)` loops rely on).
fn sleep_for(d: Duration) {
    if d.is_zero() {
        crate::yield_now();
    } else {
        crate::time::sleep(d);
    }
}

/// A thread's `nanosleep` for `d`; the time left if a signal interrupted it (errno
/// set).
fn real_sleep(d: Duration) -> Result<(), Duration> {
    let req = sys::timespec(d);
    let mut rem = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: two timespecs of ours.
    match unsafe {
        raw6(
            libc::SYS_nanosleep,
            [
                &req as *const _ as usize,
                &mut rem as *mut _ as usize,
                0,
                0,
                0,
                0,
            ],
        )
    } {
        Ok(_) => Ok(()),
        Err(_) => Err(duration_of(&rem).unwrap_or_default()),
    }
}
