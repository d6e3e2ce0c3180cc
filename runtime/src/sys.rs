//! The runtime's own system calls on descriptors, made with `syscall(2)` rather than
//! through libc's named wrappers.
//!
//! With the `hooks` feature the final binary defines `read`, `recv`, `send`, `accept4`
//! and the rest itself (see `hooks/`), so a call through the `libc` crate's `read`
//! reaches the hook. goro's own descriptors (its sockets, the poller's eventfd,
//! sysmon's pipe) are non-blocking and already on the poller: they must not pay for a
//! hook, nor be seen by one. So the runtime makes those calls here, which is also
//! what the hooks use for the real call. Without the feature the cost is the same as
//! libc's wrapper (`syscall` is one more plain function call).
//!
//! Each function returns the result or the `errno` the kernel gave (`Err(errno)`),
//! leaving `errno` itself alone.

use std::io;
use std::os::fd::RawFd;

use libc::{c_int, c_long};
use socket2::SockAddr;

/// `errno` of the calling thread.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline]
pub(crate) fn errno() -> c_int {
    // SAFETY: __errno_location returns this thread's errno slot, always valid.
    unsafe { *libc::__errno_location() }
}

/// Sets `errno` of the calling thread.
#[cfg(feature = "hooks")]
#[inline]
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e };
}

/// A raw system call with up to six arguments (unused ones 0): the kernel's result, or
/// the errno it returned. `errno` itself is left alone.
///
/// On x86_64 and aarch64 the `syscall` / `svc` instruction itself, inline (the same
/// instructions as glibc's own wrappers, without their cancellation check); elsewhere
/// libc's `syscall(2)`.
///
/// # Safety
///
/// The arguments must be valid for system call `nr` (pointers to memory of the sizes
/// it reads or writes).
#[inline]
pub(crate) unsafe fn raw6(nr: c_long, a: [usize; 6]) -> Result<usize, c_int> {
    let r: isize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract for the arguments. The kernel clobbers rcx and r11
    // and nothing else; it does not touch our stack; memory it reads or writes is the
    // caller's (the asm is not marked pure or read-only, so the compiler assumes it).
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") nr as isize => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            in("r8") a[4],
            in("r9") a[5],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; the kernel preserves every register but x0.
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") nr as usize,
            inlateout("x0") a[0] as isize => r,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            in("x4") a[4],
            in("x5") a[5],
            options(nostack),
        );
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    // SAFETY: the caller's contract; `syscall` passes the arguments on unchanged.
    let r = unsafe {
        match libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) {
            -1 => -(errno() as isize),
            v => v as isize,
        }
    };
    // The kernel returns -errno for errors, -4095..=-1.
    if (-4095..0).contains(&r) {
        Err(-r as c_int)
    } else {
        Ok(r as usize)
    }
}

/// `read(2)`.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel writes at most `buf.len()` bytes into `buf`.
    unsafe {
        raw6(
            libc::SYS_read,
            [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0, 0, 0],
        )
    }
}

/// `write(2)`.
pub(crate) fn write(fd: RawFd, buf: &[u8]) -> Result<usize, c_int> {
    // SAFETY: the kernel reads at most `buf.len()` bytes from `buf`.
    unsafe {
        raw6(
            libc::SYS_write,
            [fd as usize, buf.as_ptr() as usize, buf.len(), 0, 0, 0],
        )
    }
}

/// `recvfrom(2)` without an address: std's `recv` (and its `read` on sockets).
pub(crate) fn recv(fd: RawFd, buf: &mut [u8], flags: c_int) -> Result<usize, c_int> {
    // SAFETY: as `read`; null address pointers ask for no address.
    unsafe {
        raw6(
            libc::SYS_recvfrom,
            [
                fd as usize,
                buf.as_mut_ptr() as usize,
                buf.len(),
                flags as usize,
                0,
                0,
            ],
        )
    }
}

/// `sendto(2)` without an address: std's `send` (its `write` on sockets passes
/// `MSG_NOSIGNAL`).
pub(crate) fn send(fd: RawFd, buf: &[u8], flags: c_int) -> Result<usize, c_int> {
    // SAFETY: as `write`; a null address sends to the connected peer.
    unsafe {
        raw6(
            libc::SYS_sendto,
            [
                fd as usize,
                buf.as_ptr() as usize,
                buf.len(),
                flags as usize,
                0,
                0,
            ],
        )
    }
}

/// `readv(2)` into `bufs` (an `IoSliceMut` is an `iovec`).
pub(crate) fn readv(fd: RawFd, bufs: &mut [io::IoSliceMut<'_>]) -> Result<usize, c_int> {
    let n = bufs.len().min(1024);
    // SAFETY: `IoSliceMut` is ABI-compatible with `iovec` (std guarantees it), and each
    // names writable memory of its length.
    unsafe {
        raw6(
            libc::SYS_readv,
            [fd as usize, bufs.as_mut_ptr() as usize, n, 0, 0, 0],
        )
    }
}

/// `writev(2)` from `bufs`.
pub(crate) fn writev(fd: RawFd, bufs: &[io::IoSlice<'_>]) -> Result<usize, c_int> {
    let n = bufs.len().min(1024);
    // SAFETY: as `readv`, for readable memory.
    unsafe {
        raw6(
            libc::SYS_writev,
            [fd as usize, bufs.as_ptr() as usize, n, 0, 0, 0],
        )
    }
}

/// `close(2)`.
#[cfg(feature = "hooks")]
pub(crate) fn close(fd: RawFd) -> Result<usize, c_int> {
    // SAFETY: no memory is passed; closing an fd we own.
    unsafe { raw6(libc::SYS_close, [fd as usize, 0, 0, 0, 0, 0]) }
}

/// `fcntl(2)` with an integer argument.
#[cfg(feature = "hooks")]
pub(crate) fn fcntl(fd: RawFd, cmd: c_int, arg: usize) -> Result<usize, c_int> {
    // SAFETY: the commands the runtime uses take an integer, not a pointer (the hooks
    // pass a caller's pointer on under the caller's own contract).
    unsafe { raw6(libc::SYS_fcntl, [fd as usize, cmd as usize, arg, 0, 0, 0]) }
}

/// `getsockopt(2)` of a plain value `T`.
#[cfg(feature = "hooks")]
pub(crate) fn getsockopt<T: Copy>(fd: RawFd, level: c_int, name: c_int) -> Result<T, c_int> {
    let mut v = std::mem::MaybeUninit::<T>::zeroed();
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v` and the length into `len`.
    unsafe {
        raw6(
            libc::SYS_getsockopt,
            [
                fd as usize,
                level as usize,
                name as usize,
                v.as_mut_ptr() as usize,
                &mut len as *mut libc::socklen_t as usize,
                0,
            ],
        )?;
        // SAFETY: zero-initialised, then (partly) written by the kernel: every `T` the
        // runtime asks for (integers, timevals) is valid for any bytes.
        Ok(v.assume_init())
    }
}

/// `ppoll(2)` of one descriptor for `events`, waiting at most `timeout` (None: no
/// limit). Returns the `revents`, 0 on timeout.
pub(crate) fn poll_one(
    fd: RawFd,
    events: libc::c_short,
    timeout: Option<std::time::Duration>,
) -> Result<libc::c_short, c_int> {
    let mut pfd = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    let ts = timeout.map(timespec);
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: one pollfd, a timespec or null, no signal mask.
    let n = unsafe {
        raw6(
            libc::SYS_ppoll,
            [
                &mut pfd as *mut libc::pollfd as usize,
                1,
                tsp as usize,
                0,
                0,
                0,
            ],
        )?
    };
    Ok(if n == 0 { 0 } else { pfd.revents })
}

/// A duration as a `timespec` (seconds saturating).
pub(crate) fn timespec(d: std::time::Duration) -> libc::timespec {
    libc::timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: d.subsec_nanos() as c_long,
    }
}

/// An `Err(errno)` as an `io::Error`.
#[inline]
pub(crate) fn os_err<T>(r: Result<T, c_int>) -> io::Result<T> {
    r.map_err(io::Error::from_raw_os_error)
}

/// A call that fills in a socket address: `call(storage, len)` gets the addresses of
/// zeroed storage and its length, as `syscall` arguments.
fn with_addr(
    call: impl FnOnce(usize, usize) -> Result<usize, c_int>,
) -> Result<(usize, SockAddr), c_int> {
    // SAFETY: `try_init` hands `call` zeroed storage and its length for the kernel to
    // fill, and builds the address from what the kernel wrote.
    let r = unsafe {
        SockAddr::try_init(|storage, len| {
            call(storage as usize, len as usize).map_err(io::Error::from_raw_os_error)
        })
    };
    r.map_err(|e| e.raw_os_error().unwrap_or(libc::EINVAL))
}

/// `accept4(2)` with `flags`: the new descriptor and the peer's address.
pub(crate) fn accept4(fd: RawFd, flags: c_int) -> Result<(RawFd, SockAddr), c_int> {
    let (n, addr) = with_addr(|storage, len| {
        // SAFETY: the kernel writes the address into `storage`, at most `*len` bytes.
        unsafe {
            raw6(
                libc::SYS_accept4,
                [fd as usize, storage, len, flags as usize, 0, 0],
            )
        }
    })?;
    Ok((n as RawFd, addr))
}

/// `recvfrom(2)`: a datagram and who sent it.
pub(crate) fn recv_from(
    fd: RawFd,
    buf: &mut [u8],
    flags: c_int,
) -> Result<(usize, SockAddr), c_int> {
    with_addr(|storage, len| {
        // SAFETY: as in `accept4` for the address; the kernel writes at most
        // `buf.len()` bytes into `buf`.
        unsafe {
            raw6(
                libc::SYS_recvfrom,
                [
                    fd as usize,
                    buf.as_mut_ptr() as usize,
                    buf.len(),
                    flags as usize,
                    storage,
                    len,
                ],
            )
        }
    })
}

/// `sendto(2)` to `addr`.
pub(crate) fn send_to(
    fd: RawFd,
    buf: &[u8],
    addr: &SockAddr,
    flags: c_int,
) -> Result<usize, c_int> {
    // SAFETY: the kernel reads `buf.len()` bytes from `buf` and `addr.len()` from the
    // address.
    unsafe {
        raw6(
            libc::SYS_sendto,
            [
                fd as usize,
                buf.as_ptr() as usize,
                buf.len(),
                flags as usize,
                addr.as_ptr() as usize,
                addr.len() as usize,
            ],
        )
    }
}
