//! Child processes whose waits park the coroutine: [`Command`], [`Child`] and its pipes
//! [`ChildStdin`], [`ChildStdout`], [`ChildStderr`], shaped like `std::process`.
//!
//! A [`Command`] wraps `std::process::Command`, and spawning is std's (run as a
//! [`blocking`](crate::blocking) call: a spawn waits in the kernel until the child has
//! called `exec`). What waits afterwards is goro's:
//!
//! - the child's pipes are [`PollFd`]s: their reads and writes park a coroutine (or
//!   block a plain thread) until the pipe is ready;
//! - [`Child::wait`] waits on a pidfd (`pidfd_open(2)`, Linux 5.3 and later) on the
//!   netpoller, which is readable once the child has exited, and then reaps it with
//!   std's `try_wait`. Where `pidfd_open` fails (an older kernel, a sandbox that
//!   refuses it: `ENOSYS`, `EPERM`), or with `GORO_PIDFD=off` in the environment, it
//!   calls std's `wait` inside [`blocking`](crate::blocking) instead, which costs a
//!   thread for as long as the child runs;
//! - [`Child::wait_with_output`] and [`Command::output`] read stdout and stderr at
//!   the same time (stderr on a coroutine of its own), so a child that fills both
//!   pipes does not deadlock.
//!
//! [`Stdio`], [`ExitStatus`] and [`Output`] are std's.
//!
//! With the `hooks` feature, std's own `Child::wait` from a coroutine still blocks its
//! thread (the hooks do not cover `waitpid`); this module's does not.

use std::ffi::OsStr;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::OnceLock;

pub use std::process::{ExitStatus, Output, Stdio};

use crate::io::PollFd;

/// A process builder, as `std::process::Command`, whose [`spawn`](Command::spawn)
/// returns a goro [`Child`].
///
/// ```
/// let out = goro::process::Command::new("sh")
///     .args(["-c", "echo $GREETING; exit 3"])
///     .env("GREETING", "hi")
///     .output()
///     .unwrap();
/// assert_eq!(out.stdout, b"hi\n");
/// assert_eq!(out.status.code(), Some(3));
/// ```
pub struct Command {
    inner: std::process::Command,
    /// Which of stdin, stdout, stderr the caller set (std's `output` defaults the
    /// others).
    set: [bool; 3],
}

impl Command {
    /// A command that runs `program` (searched for in `PATH` if it has no `/`), with no
    /// arguments, the parent's environment and working directory, and (for
    /// [`spawn`](Command::spawn) and [`status`](Command::status)) the parent's stdio.
    pub fn new(program: impl AsRef<OsStr>) -> Command {
        Command {
            inner: std::process::Command::new(program),
            set: [false; 3],
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Command {
        self.inner.arg(arg);
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.inner.args(args);
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(&mut self, key: impl AsRef<OsStr>, val: impl AsRef<OsStr>) -> &mut Command {
        self.inner.env(key, val);
        self
    }

    /// Sets environment variables for the child.
    pub fn envs<I, K, V>(&mut self, vars: I) -> &mut Command
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        self.inner.envs(vars);
        self
    }

    /// Removes a variable from the child's environment.
    pub fn env_remove(&mut self, key: impl AsRef<OsStr>) -> &mut Command {
        self.inner.env_remove(key);
        self
    }

    /// Starts the child with an empty environment (plus what `env` adds later).
    pub fn env_clear(&mut self) -> &mut Command {
        self.inner.env_clear();
        self
    }

    /// The child's working directory.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Command {
        self.inner.current_dir(dir);
        self
    }

    /// The child's stdin. [`Stdio::piped`] gives [`Child::stdin`].
    pub fn stdin(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stdin(cfg);
        self.set[0] = true;
        self
    }

    /// The child's stdout. [`Stdio::piped`] gives [`Child::stdout`].
    pub fn stdout(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stdout(cfg);
        self.set[1] = true;
        self
    }

    /// The child's stderr. [`Stdio::piped`] gives [`Child::stderr`].
    pub fn stderr(&mut self, cfg: impl Into<Stdio>) -> &mut Command {
        self.inner.stderr(cfg);
        self.set[2] = true;
        self
    }

    /// std's command inside, for what this type does not repeat (`get_args`, the
    /// `CommandExt` methods: `uid`, `process_group`, `pre_exec`...).
    pub fn as_std_mut(&mut self) -> &mut std::process::Command {
        &mut self.inner
    }

    /// std's command inside.
    pub fn as_std(&self) -> &std::process::Command {
        &self.inner
    }

    /// Starts the child. Its piped stdio ends are on the netpoller. A program that is
    /// not found is `ErrorKind::NotFound`, as with std.
    pub fn spawn(&mut self) -> io::Result<Child> {
        let inner = &mut self.inner;
        let child = crate::blocking(|| inner.spawn())?;
        Child::from_std(child)
    }

    /// Runs the child with the parent's stdio (unless set otherwise) and waits for it.
    ///
    /// ```
    /// let st = goro::process::Command::new("false").status().unwrap();
    /// assert_eq!(st.code(), Some(1));
    /// ```
    pub fn status(&mut self) -> io::Result<ExitStatus> {
        self.spawn()?.wait()
    }

    /// Runs the child and collects its output: stdout and stderr are piped and stdin is
    /// [`Stdio::null`], unless set otherwise, as with std. (Unlike std, those defaults
    /// stay set on this `Command` for later spawns: std's builder cannot unset them.)
    #[track_caller]
    pub fn output(&mut self) -> io::Result<Output> {
        if !self.set[0] {
            self.stdin(Stdio::null());
        }
        if !self.set[1] {
            self.stdout(Stdio::piped());
        }
        if !self.set[2] {
            self.stderr(Stdio::piped());
        }
        self.spawn()?.wait_with_output()
    }
}

impl From<std::process::Command> for Command {
    /// Adopts std's command; its stdio settings count as unset for `output`.
    fn from(inner: std::process::Command) -> Command {
        Command {
            inner,
            set: [false; 3],
        }
    }
}

impl fmt::Debug for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

/// A running or exited child process, as `std::process::Child`; its waits park the
/// coroutine.
///
/// Dropping a `Child` neither kills nor reaps it (as std's: call [`wait`](Child::wait)).
///
/// ```
/// use std::io::{Read, Write};
/// use goro::process::{Command, Stdio};
///
/// let mut child = Command::new("tr")
///     .arg("a-z")
///     .arg("A-Z")
///     .stdin(Stdio::piped())
///     .stdout(Stdio::piped())
///     .spawn()
///     .unwrap();
/// let mut stdin = child.stdin.take().unwrap();
/// stdin.write_all(b"shout\n").unwrap();
/// drop(stdin); // end of file for `tr`
/// let mut out = String::new();
/// child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
/// assert_eq!(out, "SHOUT\n");
/// assert!(child.wait().unwrap().success());
/// ```
pub struct Child {
    /// The child's stdin, if piped.
    pub stdin: Option<ChildStdin>,
    /// The child's stdout, if piped.
    pub stdout: Option<ChildStdout>,
    /// The child's stderr, if piped.
    pub stderr: Option<ChildStderr>,
    /// std's child, its pipes taken out.
    inner: std::process::Child,
    /// The child's pidfd on the poller; None: waits fall back to a blocking `wait`.
    pidfd: Option<PollFd<OwnedFd>>,
}

impl Child {
    fn from_std(mut inner: std::process::Child) -> io::Result<Child> {
        let pidfd = pidfd_open(inner.id());
        let stdin = inner.stdin.take().map(PollFd::new).transpose()?;
        let stdout = inner.stdout.take().map(PollFd::new).transpose()?;
        let stderr = inner.stderr.take().map(PollFd::new).transpose()?;
        Ok(Child {
            stdin: stdin.map(|p| ChildStdin { p }),
            stdout: stdout.map(|p| ChildStdout { p }),
            stderr: stderr.map(|p| ChildStderr { p }),
            inner,
            pidfd,
        })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.inner.id()
    }

    /// Kills the child (`SIGKILL`), as std's `kill`: an error if it has already been
    /// reaped. [`wait`](Child::wait) then gives a status with
    /// `ExitStatusExt::signal() == Some(9)`.
    pub fn kill(&mut self) -> io::Result<()> {
        self.inner.kill()
    }

    /// The child's status if it has exited (reaping it), `None` if it still runs. Never
    /// waits.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.inner.try_wait()
    }

    /// Waits for the child to exit and reaps it: parks a coroutine on the child's pidfd
    /// (or, without one, waits in a [`blocking`](crate::blocking) call). Closes the
    /// child's stdin first, as std does, so a child that reads to the end finishes.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        drop(self.stdin.take());
        if let Some(st) = self.inner.try_wait()? {
            return Ok(st);
        }
        let Some(pidfd) = &self.pidfd else {
            let inner = &mut self.inner;
            return crate::blocking(|| inner.wait());
        };
        loop {
            // Readable once the child has exited (and stays so).
            pidfd.readable()?;
            if let Some(st) = self.inner.try_wait()? {
                return Ok(st);
            }
            // A readable pidfd whose child is not yet reapable: not something Linux
            // does, but waiting once more is right if it ever happens.
            crate::time::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Waits for the child and collects what it wrote to its piped stdout and stderr
    /// (both read at the same time; one not piped comes back empty). Closes stdin
    /// first.
    #[track_caller]
    pub fn wait_with_output(mut self) -> io::Result<Output> {
        drop(self.stdin.take());
        let (stdout, stderr) = (self.stdout.take(), self.stderr.take());
        let (stdout, stderr) = match (stdout, stderr) {
            (None, None) => (Vec::new(), Vec::new()),
            (Some(o), None) => (read_all(o)?, Vec::new()),
            (None, Some(e)) => (Vec::new(), read_all(e)?),
            (Some(o), Some(e)) => {
                let err = crate::spawn(move || read_all(e));
                let out = read_all(o);
                let err = err.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
                (out?, err?)
            }
        };
        let status = self.wait()?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

fn read_all(mut r: impl Read) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    r.read_to_end(&mut v)?;
    Ok(v)
}

impl fmt::Debug for Child {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Child")
            .field("pid", &self.id())
            .field("pidfd", &self.pidfd.as_ref().map(|p| p.as_raw_fd()))
            .field("stdin", &self.stdin)
            .field("stdout", &self.stdout)
            .field("stderr", &self.stderr)
            .finish()
    }
}

/// A pidfd for `pid` on the poller, None if the kernel or the sandbox refuses one (or
/// `GORO_PIDFD=off`).
fn pidfd_open(pid: u32) -> Option<PollFd<OwnedFd>> {
    static OFF: OnceLock<bool> = OnceLock::new();
    let off = *OFF.get_or_init(|| match std::env::var("GORO_PIDFD").as_deref() {
        Ok("off") => true,
        // Checked with the other settings when the runtime started (config.rs), before
        // any child could be started and left unreaped by a panic here; a value the
        // program set since then is not a setting goro reads.
        _ => false,
    });
    if off {
        return None;
    }
    // SAFETY: pidfd_open takes a pid and flags, no memory. Its descriptor is
    // close-on-exec.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        return None; // ENOSYS before 5.3, EPERM under some seccomp filters
    }
    // SAFETY: the kernel just made `fd`, which nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    PollFd::new(fd).ok()
}

/// Read/Write/AsFd/Debug for the three pipe types: reads and writes through `&self`
/// too, with the raw system call on the pipe (std's pipe types take `&mut self`).
macro_rules! pipe_type {
    ($name:ident, $std:ty, $what:literal) => {
        #[doc = concat!("The child's ", $what, " pipe, on the netpoller: ")]
        #[doc = "operations that would block park the coroutine (or block a plain thread)."]
        ///
        /// Turns into a [`Stdio`] (blocking again) to hand to another child.
        pub struct $name {
            p: PollFd<$std>,
        }

        impl $name {
            #[doc = concat!("std's ", $what, " pipe, back in blocking mode.")]
            pub fn into_std(self) -> $std {
                self.p.into_inner()
            }
        }

        impl From<$name> for Stdio {
            fn from(p: $name) -> Stdio {
                Stdio::from(p.into_std())
            }
        }

        impl AsFd for $name {
            fn as_fd(&self) -> BorrowedFd<'_> {
                self.p.as_fd()
            }
        }

        impl AsRawFd for $name {
            fn as_raw_fd(&self) -> RawFd {
                self.p.as_raw_fd()
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("fd", &self.p.as_raw_fd())
                    .finish()
            }
        }
    };
}

pipe_type!(ChildStdin, std::process::ChildStdin, "stdin");
pipe_type!(ChildStdout, std::process::ChildStdout, "stdout");
pipe_type!(ChildStderr, std::process::ChildStderr, "stderr");

/// `read(2)` on a pipe in `p`'s loop.
fn pipe_read<T: AsFd>(p: &PollFd<T>, buf: &mut [u8]) -> io::Result<usize> {
    p.read_with(|t| crate::sys::os_err(crate::sys::read(t.as_fd().as_raw_fd(), buf)))
}

/// `write(2)` on a pipe in `p`'s loop.
fn pipe_write<T: AsFd>(p: &PollFd<T>, buf: &[u8]) -> io::Result<usize> {
    p.write_with(|t| crate::sys::os_err(crate::sys::write(t.as_fd().as_raw_fd(), buf)))
}

macro_rules! impl_read {
    ($($t:ty),+) => {$(
        impl Read for $t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                pipe_read(&self.p, buf)
            }
        }

        impl Read for &$t {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                pipe_read(&self.p, buf)
            }
        }
    )+};
}

impl_read!(ChildStdout, ChildStderr);

impl Write for ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        pipe_write(&self.p, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &ChildStdin {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        pipe_write(&self.p, buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
