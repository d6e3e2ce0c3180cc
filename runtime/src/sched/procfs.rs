//! sysmon's view of the process's threads in `/proc`, with the descriptors it needs
//! opened ahead of time.
//!
//! Go's sysmon needs no descriptor; goro's asks `/proc` whether a thread sleeps in the
//! kernel (`MShared::sleeping_in_kernel`) and what the threads that are not goro's
//! wait in (the deadlock census). A program out of descriptors (EMFILE, the state a
//! leaking server ends up in) must not blind it, so:
//!
//! - the census lists `/proc/self/task` through a directory descriptor opened when
//!   sysmon starts ([`init`]), rewound and read with `getdents64` each time;
//! - the files it reads at need, an M's `stat` and a foreign thread's `syscall`
//!   line, are opened relative to that directory, with [`RESERVES`] reserve
//!   descriptors held behind the open: at EMFILE or ENFILE a reserve is closed and
//!   the open retried in the slot it freed (with the next reserve if another thread
//!   took the slot first), and after the read the reserves are taken again (`dup` of
//!   the directory). A thread that takes every freed slot can still leave sysmon
//!   without a reserve until a descriptor frees; then the census holds its report
//!   back (it never reports on what it could not read), and an M whose state cannot be
//!   read counts as asleep (its P is retaken). With one reserve and no retry, a thread
//!   that opened files until EMFILE while sysmon read (`rt_faults`' deadlock scenario,
//!   once in CI) took the reserve for good, and the census never reported again.
//!
//! Why not keep each M's `stat` open from its start (a first version did): opening it
//! costs ~50 µs on an idle machine but took 7-11 ms here while 4 000 sockets came and
//! went (measured at M start in the `hooks` echo test), and an M that started that
//! slowly made the scheduler start others meanwhile: 10 Ms at 2 Ps instead of 4, over
//! that test's thread budget. sysmon's reads at need cost what they did before, only
//! when a thread's CPU clock stood still.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, OnceLock};

/// Reserve descriptors held behind sysmon's opens (see the module doc).
const RESERVES: usize = 2;

/// The directory `/proc/self/task` and the reserve descriptors (see the module doc).
struct TaskDir {
    dir: OwnedFd,
    /// Held to be closed when an open fails for want of a descriptor; `None` while
    /// it could not be taken again. A std lock: sysmon is its only user, and it holds
    /// no other lock around it.
    reserve: Mutex<Vec<OwnedFd>>,
}

/// Set once by [`init`]; `None` inside: `/proc` is not there (nothing is known, and
/// the census reports nothing, as before).
static TASKS: OnceLock<Option<TaskDir>> = OnceLock::new();

/// Opens the task directory and its reserve (from sysmon's start). Err only for a
/// want of descriptors or memory, which the caller treats as fatal: a sysmon that
/// cannot watch must not start half-blind. A `/proc` that is not mounted is Ok.
pub(crate) fn init() -> io::Result<()> {
    let mut err = None;
    TASKS.get_or_init(|| match open_dir() {
        Ok(td) => Some(td),
        Err(e) if scarce(&e) => {
            err = Some(e);
            None
        }
        Err(_) => None,
    });
    err.map_or(Ok(()), Err)
}

fn open_dir() -> io::Result<TaskDir> {
    let dir = open_at(libc::AT_FDCWD, c"/proc/self/task", libc::O_DIRECTORY)?;
    let reserve = (0..RESERVES)
        .map(|_| dir.try_clone())
        .collect::<io::Result<Vec<_>>>()?;
    Ok(TaskDir {
        dir,
        reserve: Mutex::new(reserve),
    })
}

/// Whether `e` says the process (or the system) is out of descriptors or memory.
fn scarce(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
    )
}

fn open_at(dir: RawFd, path: &std::ffi::CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated path; the flags open read-only.
    let fd = unsafe { libc::openat(dir, path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC | flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor we just opened and own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The state letter of a `stat` line: it follows the command name, which is in
/// parentheses and may itself hold spaces or parentheses.
fn state_in(stat: &[u8]) -> Option<char> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    stat[close + 1..]
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .map(|&b| b as char)
}

/// The state letter of thread `tid` of this process (None: none found); `Err` if its
/// `stat` could not be read (ENOENT or ESRCH: the thread has ended).
pub(crate) fn state_of_tid(tid: i32) -> io::Result<Option<char>> {
    let mut buf = [0u8; 512];
    let n = read_task_file(tid, "stat", &mut buf)?;
    Ok(state_in(&buf[..n]))
}

/// Where a thread of this process is, from its `syscall` line (see [`wait_of_tid`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InKernel {
    /// Runnable: on a CPU or waiting for one.
    Runnable,
    /// Asleep in the kernel, not in a futex wait (a sleep, a socket, a disk, a fault).
    Asleep,
    /// Asleep in a futex call on the word at this address.
    Futex(usize),
}

/// What thread `tid` of this process does in the kernel; `Err` if it cannot be read
/// (ENOENT or ESRCH: the thread has ended). From its `syscall` line (the call's number
/// and arguments), which says what `stat`'s state letter says and which futex a
/// waiter waits on (`convoy`); from `stat` where `syscall` is not readable (a kernel
/// without it, or a process made non-dumpable, whose `/proc` files root owns).
pub(crate) fn wait_of_tid(tid: i32) -> io::Result<InKernel> {
    let mut buf = [0u8; 256];
    match read_task_file(tid, "syscall", &mut buf) {
        Ok(n) => Ok(in_kernel(&buf[..n])),
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => Ok(match state_of_tid(tid)? {
            Some('S' | 'D') => InKernel::Asleep,
            _ => InKernel::Runnable,
        }),
        Err(e) => Err(e),
    }
}

/// A `syscall` line: `running`, or the call's number (-1: not in a call, e.g. a page
/// fault) and its arguments in hex, then the stack and instruction pointers.
fn in_kernel(line: &[u8]) -> InKernel {
    let line = std::str::from_utf8(line).unwrap_or("");
    let mut words = line.split_whitespace();
    let nr = match words.next() {
        Some("running") | None => return InKernel::Runnable,
        Some(nr) => nr.parse::<i64>().unwrap_or(-1),
    };
    if nr != libc::SYS_futex {
        return InKernel::Asleep;
    }
    let addr = words
        .next()
        .and_then(|a| a.strip_prefix("0x"))
        .and_then(|a| usize::from_str_radix(a, 16).ok());
    match addr {
        Some(a) if a != 0 => InKernel::Futex(a),
        _ => InKernel::Asleep,
    }
}

/// The ids of the process's threads; None if they cannot be listed.
pub(crate) fn tids() -> Option<Vec<i32>> {
    let td = TASKS.get()?.as_ref()?;
    let fd = td.dir.as_raw_fd();
    // SAFETY: rewinding a directory descriptor we hold.
    if unsafe { libc::lseek(fd, 0, libc::SEEK_SET) } < 0 {
        return None;
    }
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: the kernel writes at most `buf.len()` bytes of dirents into `buf`.
        let n = unsafe { libc::syscall(libc::SYS_getdents64, fd, buf.as_mut_ptr(), buf.len()) };
        if n < 0 {
            return None;
        }
        if n == 0 {
            return Some(out);
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // linux_dirent64: d_ino u64, d_off i64, d_reclen u16, d_type u8, d_name.
            let reclen = u16::from_ne_bytes([buf[at + 16], buf[at + 17]]) as usize;
            if reclen == 0 || at + reclen > n as usize {
                return None;
            }
            let name = &buf[at + 19..at + reclen];
            let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
            if let Some(tid) = std::str::from_utf8(name).ok().and_then(|s| s.parse().ok()) {
                out.push(tid);
            }
            at += reclen;
        }
    }
}

/// Reads `/proc/self/task/TID/NAME` into `buf`, with the reserve descriptors behind
/// the open (see the module doc). `NotFound` (or ESRCH) if the thread has ended.
pub(crate) fn read_task_file(tid: i32, name: &str, buf: &mut [u8]) -> io::Result<usize> {
    let Some(td) = TASKS.get().and_then(Option::as_ref) else {
        return Err(io::Error::from(io::ErrorKind::Unsupported));
    };
    let path = std::ffi::CString::new(format!("{tid}/{name}"))
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let refill = |reserve: &mut Vec<OwnedFd>| {
        while reserve.len() < RESERVES {
            match td.dir.try_clone() {
                Ok(fd) => reserve.push(fd),
                Err(_) => break,
            }
        }
    };
    let mut reserve = td.reserve.lock().unwrap_or_else(|e| e.into_inner());
    let got = loop {
        match open_at(td.dir.as_raw_fd(), &path, 0) {
            // Give a reserve's slot to this open and try again; a thread that took the
            // slot first leaves the next reserve's to the next try.
            Err(e) if scarce(&e) && !reserve.is_empty() => drop(reserve.pop()),
            r => break r.map(File::from).and_then(|f| f.read_at(buf, 0)),
        }
    };
    // The file is closed: take the reserves back (a reserve lost to a race comes back
    // once a descriptor is free again).
    refill(&mut reserve);
    got
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_state_after_the_command_name() {
        assert_eq!(state_in(b"12 (a) b) S 1 2"), Some('S'));
        assert_eq!(state_in(b"12 (goro-m0) R 1"), Some('R'));
        assert_eq!(state_in(b"12 (no close"), None);
    }

    #[test]
    fn reads_the_futex_word_of_a_syscall_line() {
        let futex = format!(
            "{} 0x7f12345678 0x89 0x2 0x0 0x0 0xffffffff 0x7ffd 0x7f01",
            libc::SYS_futex
        );
        assert_eq!(in_kernel(futex.as_bytes()), InKernel::Futex(0x7f12345678));
        assert_eq!(in_kernel(b"running\n"), InKernel::Runnable);
        assert_eq!(
            in_kernel(b"230 0x1 0x0 0x7ffd 0x0 0x0 0x0 0x7ffd 0x7f01\n"),
            InKernel::Asleep
        );
        assert_eq!(in_kernel(b"-1 0x7ffd 0x7f01\n"), InKernel::Asleep);
    }

    #[test]
    fn sees_a_thread_wait_on_a_futex() {
        init().unwrap();
        let lock = std::sync::Arc::new(Mutex::new(()));
        let held = lock.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = {
            let lock = lock.clone();
            std::thread::spawn(move || {
                tx.send(nix::unistd::gettid().as_raw()).unwrap();
                drop(lock.lock().unwrap());
            })
        };
        let tid = rx.recv().unwrap();
        // Bounded: the waiter reaches its futex wait within milliseconds.
        let mut seen = None;
        for _ in 0..2000 {
            if let InKernel::Futex(a) = wait_of_tid(tid).unwrap() {
                seen = Some(a);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(held);
        waiter.join().unwrap();
        // std's futex mutex waits on its state word, the first word of the Mutex.
        let word = &*lock as *const Mutex<()> as usize;
        let a = seen.expect("the waiter never showed in a futex wait");
        assert!(
            a >= word && a < word + std::mem::size_of::<Mutex<()>>(),
            "{a:#x} not in {word:#x}"
        );
    }

    #[test]
    fn lists_this_thread_and_reads_its_state() {
        init().unwrap();
        let me = nix::unistd::gettid().as_raw();
        assert!(tids().unwrap().contains(&me));
        // The reading thread runs.
        assert_eq!(state_of_tid(me).unwrap(), Some('R'));
    }
}
