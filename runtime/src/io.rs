//! Any descriptor on the netpoller: [`PollFd`] (pipes, ttys, eventfds, inotify,
//! signalfds, pidfds, sockets made elsewhere).
//!
//! A `PollFd<T>` owns a `T` that has a file descriptor, puts the descriptor in
//! non-blocking mode and registers it with the runtime's poller, as goro's own sockets
//! are. [`PollFd::read_with`] and [`PollFd::write_with`] run the caller's system call
//! and, whenever it fails with `WouldBlock`, wait for the descriptor to be ready and
//! try again: the same try-wait-retry loop, and the same queue of waiters, as
//! [`TcpStream`](crate::net::TcpStream)'s reads and writes. A coroutine that waits
//! parks (its P runs the others); a plain thread blocks.
//!
//! Regular files and directories cannot be polled (epoll refuses them with `EPERM`:
//! they are always "ready", and their reads block in the disk instead); use
//! [`goro::fs`](crate::fs) for those. [`PollFd::new`] returns that error.

use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use crate::net::poll::Dir;
use crate::net::socket::{io_loop, set_nonblocking, Registered};
use crate::sys::{self, os_err};

/// A descriptor on the netpoller: reads and writes that would block park the calling
/// coroutine (or block a plain thread) until the descriptor is ready.
///
/// Made with [`PollFd::new`], which sets `O_NONBLOCK` on the descriptor. Since
/// `O_NONBLOCK` belongs to the open file, which [`dup`](std::os::fd::OwnedFd::try_clone)
/// copies and `fork` shares (a terminal's stdin with the shell that started the
/// program), the mode the descriptor had is put back when the `PollFd` is dropped or
/// [`into_inner`](PollFd::into_inner) is called, if `new` changed it. (tokio's
/// `AsyncFd` leaves it non-blocking.)
///
/// Any number of coroutines and threads may wait on one `PollFd` through `&self`; an
/// edge wakes them one at a time, in arrival order.
///
/// ```
/// use std::io::{Read, Write};
/// use std::os::fd::{FromRawFd, OwnedFd};
///
/// let mut fds = [0; 2];
/// // SAFETY: pipe with a valid two-element array.
/// assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
/// // SAFETY: pipe just made both descriptors, which nothing else owns.
/// let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
/// let r = goro::io::PollFd::new(std::fs::File::from(r)).unwrap();
/// let mut w = goro::io::PollFd::new(std::fs::File::from(w)).unwrap();
///
/// // The reader parks until the writer has written.
/// let reader = goro::go!(move || {
///     let mut buf = [0u8; 5];
///     (&r).read_exact(&mut buf).unwrap();
///     buf
/// });
/// goro::time::sleep(std::time::Duration::from_millis(10));
/// w.write_all(b"hello").unwrap();
/// assert_eq!(&reader.join().unwrap(), b"hello");
/// ```
pub struct PollFd<T: AsFd> {
    reg: std::mem::ManuallyDrop<Registered<T>>,
    /// `new` set `O_NONBLOCK`: clear it again when the descriptor is handed back.
    restore: bool,
}

impl<T: AsFd> PollFd<T> {
    /// Puts `inner`'s descriptor in non-blocking mode and registers it with the poller.
    ///
    /// Fails with the poller's error if the descriptor cannot be polled: a regular
    /// file or a directory gives `EPERM` (`ErrorKind::PermissionDenied`), with a
    /// message that says so; the descriptor is then left as it was.
    ///
    /// ```
    /// let f = std::fs::File::open("Cargo.toml").unwrap();
    /// let e = goro::io::PollFd::new(f).unwrap_err();
    /// assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied);
    /// ```
    pub fn new(inner: T) -> io::Result<PollFd<T>> {
        let fd = inner.as_fd().as_raw_fd();
        let reg = Registered::new(inner).map_err(|e| {
            if e.raw_os_error() == Some(libc::EPERM) {
                io::Error::new(
                    e.kind(),
                    format!(
                        "goro::io::PollFd: fd {fd} cannot be polled ({e}): regular files and \
                         directories are never on a poller, use goro::fs for them"
                    ),
                )
            } else {
                e
            }
        })?;
        // From here on `Registered`'s drop deregisters if setting the mode fails.
        let restore = set_nonblocking(reg.sock.as_fd(), true)?;
        Ok(PollFd {
            reg: std::mem::ManuallyDrop::new(reg),
            restore,
        })
    }

    /// Waits until the descriptor is readable (data, end of file, a hang-up or an
    /// error): parks a coroutine, blocks a thread. Returns at once if it is readable
    /// now (checked with a zero-timeout `poll(2)`).
    pub fn readable(&self) -> io::Result<()> {
        self.ready(Dir::Read)
    }

    /// Waits until the descriptor is writable (or has an error or a hang-up).
    pub fn writable(&self) -> io::Result<()> {
        self.ready(Dir::Write)
    }

    fn ready(&self, dir: Dir) -> io::Result<()> {
        let events = match dir {
            Dir::Read => libc::POLLIN | libc::POLLPRI | libc::POLLRDHUP,
            Dir::Write => libc::POLLOUT,
        };
        let fd = self.as_raw_fd();
        self.reg.io(dir, |_| {
            // A zero-timeout probe: 0 revents is "not yet", the loop's `WouldBlock`.
            match crate::sys::os_err(crate::sys::poll_one(fd, events, Some(Duration::ZERO)))? {
                0 => Err(io::ErrorKind::WouldBlock.into()),
                _ => Ok(()),
            }
        })
    }

    /// Runs `op` on the inner value (a non-blocking read, `recv`, `accept`...) until
    /// it returns something other than `WouldBlock`, waiting for readability in
    /// between; `Interrupted` is retried too. Returns what `op` returned last.
    ///
    /// `op` must make the system call on this descriptor: waiting is driven by the
    /// descriptor's readiness edges, and `op` returning `WouldBlock` without the
    /// descriptor being empty would wait for an edge that never comes.
    ///
    /// ```
    /// use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    ///
    /// // An eventfd: a counter that a write adds to and a read takes.
    /// // SAFETY: eventfd has no memory arguments.
    /// let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    /// assert!(fd >= 0);
    /// // SAFETY: eventfd just made `fd`, which nothing else owns.
    /// let ev = goro::io::PollFd::new(unsafe { OwnedFd::from_raw_fd(fd) }).unwrap();
    /// let ev = std::sync::Arc::new(ev);
    /// let ev2 = ev.clone();
    /// goro::go!(move || {
    ///     goro::time::sleep(std::time::Duration::from_millis(10));
    ///     ev2.write_with(|fd| {
    ///         let one = 3u64.to_ne_bytes();
    ///         // SAFETY: writes the 8 bytes of `one`.
    ///         let n = unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), 8) };
    ///         if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(()) }
    ///     }).unwrap();
    /// });
    /// let got = ev.read_with(|fd| {
    ///     let mut v = [0u8; 8];
    ///     // SAFETY: reads at most 8 bytes into `v`.
    ///     let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 8) };
    ///     if n < 0 { Err(std::io::Error::last_os_error()) } else { Ok(u64::from_ne_bytes(v)) }
    /// }).unwrap();
    /// assert_eq!(got, 3);
    /// ```
    pub fn read_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.reg.io(Dir::Read, op)
    }

    /// [`read_with`](PollFd::read_with) for writes: retries `op` whenever it returns
    /// `WouldBlock`, waiting for writability in between.
    pub fn write_with<R>(&self, op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        self.reg.io(Dir::Write, op)
    }

    /// [`read_with`](PollFd::read_with) with `&mut T`, for types whose operations
    /// need it (`Read for File` does not, `Read for ChildStdout` does).
    pub fn read_with_mut<R>(&mut self, op: impl FnMut(&mut T) -> io::Result<R>) -> io::Result<R> {
        self.io_mut(Dir::Read, op)
    }

    /// [`write_with`](PollFd::write_with) with `&mut T`.
    pub fn write_with_mut<R>(&mut self, op: impl FnMut(&mut T) -> io::Result<R>) -> io::Result<R> {
        self.io_mut(Dir::Write, op)
    }

    fn io_mut<R>(
        &mut self,
        dir: Dir,
        mut op: impl FnMut(&mut T) -> io::Result<R>,
    ) -> io::Result<R> {
        crate::preempt_point();
        let deadline = self.reg.deadline(dir);
        let Registered { pd, sock, .. } = &mut *self.reg;
        io_loop(pd, dir, deadline, || op(sock), |_| false)
    }

    /// Each wait for readability (in `readable`, `read_with`, `read`) lasts at most
    /// `timeout` (`None`: no limit, the default); expiry is `ErrorKind::TimedOut` and
    /// leaves the descriptor usable. `Some(Duration::ZERO)` is an error, as in std.
    ///
    /// ```
    /// # use std::os::fd::{FromRawFd, OwnedFd};
    /// # let mut fds = [0; 2];
    /// # // SAFETY: pipe with a valid two-element array.
    /// # assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    /// # // SAFETY: pipe just made both descriptors, which nothing else owns.
    /// # let (r, _w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    /// let r = goro::io::PollFd::new(r).unwrap();
    /// r.set_read_timeout(Some(std::time::Duration::from_millis(5))).unwrap();
    /// assert_eq!(r.readable().unwrap_err().kind(), std::io::ErrorKind::TimedOut);
    /// ```
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Read, timeout)
    }

    /// Each wait for writability lasts at most `timeout` (`None`: no limit).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> io::Result<()> {
        self.reg.timeouts.set(Dir::Write, timeout)
    }

    /// The read timeout.
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Read))
    }

    /// The write timeout.
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.reg.timeouts.get(Dir::Write))
    }

    /// The inner value.
    pub fn get_ref(&self) -> &T {
        &self.reg.sock
    }

    /// The inner value, mutably. Do not replace its descriptor: the poller watches
    /// the one registered.
    pub fn get_mut(&mut self) -> &mut T {
        &mut self.reg.sock
    }

    /// Deregisters the descriptor and returns the inner value, its descriptor open
    /// and back in the blocking mode it had before [`PollFd::new`].
    pub fn into_inner(self) -> T {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used nor dropped again: `reg` is taken out once.
        let reg = unsafe { std::mem::ManuallyDrop::take(&mut me.reg) };
        let restore = me.restore;
        let inner = reg.into_inner();
        if restore {
            let _ = set_nonblocking(inner.as_fd(), false);
        }
        inner
    }
}

impl<T: AsFd> Drop for PollFd<T> {
    fn drop(&mut self) {
        // SAFETY: `reg` is taken out once, here, and never used again.
        let reg = unsafe { std::mem::ManuallyDrop::take(&mut self.reg) };
        if self.restore {
            // Back to blocking mode before the descriptor closes (see the type's doc: a
            // duplicate may share the open file). Deregistering first keeps the
            // poller's waiters off a descriptor that blocks.
            let inner = reg.into_inner();
            let _ = set_nonblocking(inner.as_fd(), false);
        } else {
            drop(reg);
        }
    }
}

/// `Read` and `Write`, for `PollFd<T>` and `&PollFd<T>` alike, are `read(2)`,
/// `readv(2)`, `write(2)` and `writev(2)` on the descriptor, whatever `T` is (an
/// `OwnedFd` has no `Read` of its own); `T`'s own `Read` is not used, so a `T` that
/// buffers (std's `Stdin`) must not have buffered anything yet. The calls are made
/// directly, never through the `hooks` feature's hooks.
macro_rules! impl_rw {
    ($($self:ty),+) => {$(
        impl<T: AsFd> Read for $self {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let fd = self.as_raw_fd();
                self.reg.io(Dir::Read, |_| os_err(sys::read(fd, buf)))
            }

            fn read_vectored(&mut self, bufs: &mut [io::IoSliceMut<'_>]) -> io::Result<usize> {
                let fd = self.as_raw_fd();
                self.reg.io(Dir::Read, |_| os_err(sys::readv(fd, bufs)))
            }
        }

        impl<T: AsFd> Write for $self {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                let fd = self.as_raw_fd();
                self.reg.io(Dir::Write, |_| os_err(sys::write(fd, buf)))
            }

            fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
                let fd = self.as_raw_fd();
                self.reg.io(Dir::Write, |_| os_err(sys::writev(fd, bufs)))
            }

            /// Nothing to flush: every write is a system call.
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
    )+};
}

impl_rw!(PollFd<T>, &PollFd<T>);

impl<T: AsFd> AsFd for PollFd<T> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.reg.sock.as_fd()
    }
}

impl<T: AsFd> AsRawFd for PollFd<T> {
    fn as_raw_fd(&self) -> RawFd {
        self.reg.sock.as_fd().as_raw_fd()
    }
}

impl<T: AsFd + fmt::Debug> fmt::Debug for PollFd<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PollFd")
            .field("fd", &self.as_raw_fd())
            .field("inner", &self.reg.sock)
            .finish()
    }
}
