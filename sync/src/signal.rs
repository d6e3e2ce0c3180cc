//! Unix signals as channel values: [`notify`] (Go's `signal.Notify`), [`stop`], and
//! [`notify_context`] (Go's `signal.NotifyContext`).
//!
//! ```no_run
//! use goro::signal::{self, Signal};
//!
//! let sigs = signal::notify(&[Signal::INT, Signal::TERM]);
//! // ... start the server's coroutines ...
//! let sig = sigs.recv().unwrap(); // parks until Ctrl-C or SIGTERM
//! eprintln!("{sig}: shutting down");
//! ```
//!
//! # How a signal travels
//!
//! The handlers are registered through `signal-hook-registry`, so they chain with the
//! program's and other libraries' handlers for the same signal (each registered
//! action runs) instead of replacing them. The handler does only async-signal-safe
//! work: it sets the signal's bit in a pending mask (an atomic) and writes to an
//! eventfd. A dispatcher coroutine, parked on that eventfd through
//! [`goro::io::PollFd`](goro_runtime::io::PollFd), takes the mask and sends each
//! signal to every subscribed channel with `try_send`: as in Go ("Package signal will
//! not block sending to c"), a subscriber whose buffer is full misses that signal,
//! and several arrivals of one signal before the dispatcher runs arrive as one.
//!
//! A coroutine rather than a thread: it costs no OS thread, and while it waits its
//! eventfd is registered with the poller, so a program whose coroutines all wait for
//! a signal is not reported as deadlocked (Go's signal loop has the same effect).
//! The dispatcher starts with the first `notify` and lives as long as the process.
//!
//! # Stopping
//!
//! [`stop`] (or [`stop_sender`]) ends a subscription at once: no signal is sent to
//! the channel after it returns. Dropping every [`Receiver`] of a channel also ends
//! it, noticed at the next delivery. A signal whose last subscription has ended gets
//! its default action back, as after Go's `signal.Stop`: the process terminates on
//! SIGINT, stops on SIGTSTP, and so on, if the signal was at its default when goro
//! first subscribed to it (a signal the program had ignored, such as SIGPIPE, which
//! Rust ignores, stays ignored). goro emulates the default from its handler (it
//! resets the disposition and raises the signal again), since signal-hook-registry
//! cannot uninstall one.
//!
//! # SIGQUIT
//!
//! Unsubscribed, SIGQUIT makes goro print the dump of every coroutine on stderr and
//! exit with status 2, as Go does. While any channel is subscribed to SIGQUIT the dump
//! is off and SIGQUIT is the program's (as with Go's `Notify`); it is on again after
//! the last subscription ends. A program that installed its own SIGQUIT handler
//! before goro started gets no dump at all.

use std::fmt;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::OnceLock;

use goro_runtime::io::PollFd;
use libc::c_int;

use crate::chan::{channel, Receiver, Sender, TrySendError};
use crate::context::{CancelFunc, Context};
use crate::Mutex;

/// A catchable signal: one of the constants, or any other number [`Signal::new`]
/// accepts.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Signal(c_int);

impl Signal {
    /// Hang-up of the controlling terminal; by convention, reload the configuration.
    pub const HUP: Signal = Signal(libc::SIGHUP);
    /// Interrupt from the keyboard (Ctrl-C).
    pub const INT: Signal = Signal(libc::SIGINT);
    /// Quit from the keyboard (Ctrl-\\); unsubscribed, goro's coroutine dump.
    pub const QUIT: Signal = Signal(libc::SIGQUIT);
    /// Abort (`abort(3)`).
    pub const ABRT: Signal = Signal(libc::SIGABRT);
    /// User-defined signal 1.
    pub const USR1: Signal = Signal(libc::SIGUSR1);
    /// User-defined signal 2.
    pub const USR2: Signal = Signal(libc::SIGUSR2);
    /// A write to a pipe with no reader (Rust programs ignore it by default).
    pub const PIPE: Signal = Signal(libc::SIGPIPE);
    /// A timer from `alarm(2)`.
    pub const ALRM: Signal = Signal(libc::SIGALRM);
    /// Termination request (`kill`'s default, systemd's stop).
    pub const TERM: Signal = Signal(libc::SIGTERM);
    /// A child stopped or exited.
    pub const CHLD: Signal = Signal(libc::SIGCHLD);
    /// Continue after a stop.
    pub const CONT: Signal = Signal(libc::SIGCONT);
    /// Stop from the keyboard (Ctrl-Z).
    pub const TSTP: Signal = Signal(libc::SIGTSTP);
    /// A background read from the terminal.
    pub const TTIN: Signal = Signal(libc::SIGTTIN);
    /// A background write to the terminal.
    pub const TTOU: Signal = Signal(libc::SIGTTOU);
    /// Urgent data on a socket.
    pub const URG: Signal = Signal(libc::SIGURG);
    /// CPU time limit exceeded.
    pub const XCPU: Signal = Signal(libc::SIGXCPU);
    /// File size limit exceeded.
    pub const XFSZ: Signal = Signal(libc::SIGXFSZ);
    /// Virtual timer expired.
    pub const VTALRM: Signal = Signal(libc::SIGVTALRM);
    /// Profiling timer expired.
    pub const PROF: Signal = Signal(libc::SIGPROF);
    /// The terminal's window size changed.
    pub const WINCH: Signal = Signal(libc::SIGWINCH);
    /// I/O possible (`O_ASYNC`).
    pub const IO: Signal = Signal(libc::SIGIO);
    /// Power failure.
    pub const PWR: Signal = Signal(libc::SIGPWR);
    /// Bad system call (seccomp's `SECCOMP_RET_TRAP`).
    pub const SYS: Signal = Signal(libc::SIGSYS);

    /// The signal numbered `raw`, if a program may catch it: any from 1 to `SIGRTMAX`
    /// except SIGKILL and SIGSTOP (which nobody can catch), SIGSEGV, SIGBUS, SIGILL and
    /// SIGFPE (faults of the thread that raised them, which a channel cannot answer;
    /// goro's stack-overflow handler owns SIGSEGV and SIGBUS), and the real-time
    /// signals the C library keeps for itself (below `SIGRTMIN`). Anything else is an
    /// `ErrorKind::InvalidInput` error that names the rule.
    ///
    /// ```
    /// use goro::signal::Signal;
    ///
    /// assert_eq!(Signal::new(libc::SIGUSR1).unwrap(), Signal::USR1);
    /// let e = Signal::new(libc::SIGKILL).unwrap_err();
    /// assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    /// assert!(e.to_string().contains("SIGKILL"));
    /// assert_eq!(Signal::new(libc::SIGRTMIN() + 1).unwrap().name(), "SIGRTMIN+1");
    /// ```
    pub fn new(raw: c_int) -> io::Result<Signal> {
        let why = match raw {
            libc::SIGKILL | libc::SIGSTOP => Some("no process can catch it"),
            libc::SIGSEGV | libc::SIGBUS | libc::SIGILL | libc::SIGFPE => Some(
                "it reports a fault of the thread that caused it, which must be handled \
                 there (goro's stack-overflow handler owns SIGSEGV and SIGBUS)",
            ),
            r if r < 1 || r > libc::SIGRTMAX() || r > 64 => Some("there is no such signal"),
            r if r > 31 && r < libc::SIGRTMIN() => {
                Some("the C library keeps it for itself (below SIGRTMIN)")
            }
            _ => None,
        };
        match why {
            None => Ok(Signal(raw)),
            Some(why) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "goro::signal: {} cannot be subscribed to: {why}",
                    Signal(raw).name()
                ),
            )),
        }
    }

    /// The signal's number.
    pub fn as_raw(self) -> c_int {
        self.0
    }

    fn bit(self) -> u64 {
        1u64 << (self.0 - 1)
    }

    /// The signal's C name: `SIGINT`, `SIGRTMIN+3`, or `signal 40` for a number with
    /// no name. (`Display` prints Go's text instead: `interrupt`.)
    ///
    /// ```
    /// use goro::signal::Signal;
    ///
    /// assert_eq!(Signal::INT.name(), "SIGINT");
    /// assert_eq!(Signal::INT.to_string(), "interrupt");
    /// assert_eq!(Signal::USR1.to_string(), "user defined signal 1");
    /// ```
    pub fn name(self) -> String {
        match self.c_name() {
            Some(n) => n.to_owned(),
            None if self.0 >= libc::SIGRTMIN() && self.0 <= libc::SIGRTMAX() => {
                format!("SIGRTMIN+{}", self.0 - libc::SIGRTMIN())
            }
            None => format!("signal {}", self.0),
        }
    }

    /// Go's text for the signal (`syscall.Signal`'s `String` on Linux), which
    /// `Display` prints; None for a number Go has no text for (it prints `signal N`).
    fn go_text(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::SIGHUP => "hangup",
            libc::SIGINT => "interrupt",
            libc::SIGQUIT => "quit",
            libc::SIGILL => "illegal instruction",
            libc::SIGTRAP => "trace/breakpoint trap",
            libc::SIGABRT => "aborted",
            libc::SIGBUS => "bus error",
            libc::SIGFPE => "floating point exception",
            libc::SIGKILL => "killed",
            libc::SIGUSR1 => "user defined signal 1",
            libc::SIGSEGV => "segmentation fault",
            libc::SIGUSR2 => "user defined signal 2",
            libc::SIGPIPE => "broken pipe",
            libc::SIGALRM => "alarm clock",
            libc::SIGTERM => "terminated",
            libc::SIGSTKFLT => "stack fault",
            libc::SIGCHLD => "child exited",
            libc::SIGCONT => "continued",
            libc::SIGSTOP => "stopped (signal)",
            libc::SIGTSTP => "stopped",
            libc::SIGTTIN => "stopped (tty input)",
            libc::SIGTTOU => "stopped (tty output)",
            libc::SIGURG => "urgent I/O condition",
            libc::SIGXCPU => "CPU time limit exceeded",
            libc::SIGXFSZ => "file size limit exceeded",
            libc::SIGVTALRM => "virtual timer expired",
            libc::SIGPROF => "profiling timer expired",
            libc::SIGWINCH => "window changed",
            libc::SIGIO => "I/O possible",
            libc::SIGPWR => "power failure",
            libc::SIGSYS => "bad system call",
            _ => return None,
        })
    }

    fn c_name(self) -> Option<&'static str> {
        Some(match self.0 {
            libc::SIGHUP => "SIGHUP",
            libc::SIGINT => "SIGINT",
            libc::SIGQUIT => "SIGQUIT",
            libc::SIGILL => "SIGILL",
            libc::SIGTRAP => "SIGTRAP",
            libc::SIGABRT => "SIGABRT",
            libc::SIGBUS => "SIGBUS",
            libc::SIGFPE => "SIGFPE",
            libc::SIGKILL => "SIGKILL",
            libc::SIGUSR1 => "SIGUSR1",
            libc::SIGSEGV => "SIGSEGV",
            libc::SIGUSR2 => "SIGUSR2",
            libc::SIGPIPE => "SIGPIPE",
            libc::SIGALRM => "SIGALRM",
            libc::SIGTERM => "SIGTERM",
            libc::SIGSTKFLT => "SIGSTKFLT",
            libc::SIGCHLD => "SIGCHLD",
            libc::SIGCONT => "SIGCONT",
            libc::SIGSTOP => "SIGSTOP",
            libc::SIGTSTP => "SIGTSTP",
            libc::SIGTTIN => "SIGTTIN",
            libc::SIGTTOU => "SIGTTOU",
            libc::SIGURG => "SIGURG",
            libc::SIGXCPU => "SIGXCPU",
            libc::SIGXFSZ => "SIGXFSZ",
            libc::SIGVTALRM => "SIGVTALRM",
            libc::SIGPROF => "SIGPROF",
            libc::SIGWINCH => "SIGWINCH",
            libc::SIGIO => "SIGIO",
            libc::SIGPWR => "SIGPWR",
            libc::SIGSYS => "SIGSYS",
            _ => return None,
        })
    }

    /// What the signal does when nobody handles it.
    fn default_action(self) -> Action {
        match self.0 {
            libc::SIGCHLD | libc::SIGCONT | libc::SIGURG | libc::SIGWINCH => Action::Ignore,
            libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU => Action::Stop,
            _ => Action::Terminate,
        }
    }
}

#[derive(PartialEq)]
enum Action {
    Ignore,
    Stop,
    Terminate,
}

impl fmt::Display for Signal {
    /// Go's text, as `fmt.Println(sig)` prints it: `interrupt`, `terminated`,
    /// `hangup`, `user defined signal 1`; `signal 40` for a number Go has no text for
    /// (the real-time signals). [`Signal::name`] gives `SIGINT`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.go_text() {
            Some(t) => f.write_str(t),
            None => write!(f, "signal {}", self.0),
        }
    }
}

impl fmt::Debug for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Signal({})", self.name())
    }
}

impl From<Signal> for c_int {
    fn from(s: Signal) -> c_int {
        s.0
    }
}

/// Subscribes a new channel to `signals` and returns its receiving end: each of these
/// signals that the process receives from now on is sent to it (Go's
/// `signal.Notify`). The channel has room for one of each of the signals given; a
/// signal that finds it full is dropped, never waited for (see the module doc). Use
/// [`notify_with`] to choose the buffer.
///
/// Ends with [`stop`], or when every `Receiver` of the channel is dropped.
///
/// # Panics
///
/// If `signals` is empty (Go's `Notify` with no signals means all of them; here,
/// name them), or if the system refuses the eventfd or a handler (out of
/// descriptors).
///
/// ```
/// use goro::signal::{self, Signal};
///
/// let sigs = signal::notify(&[Signal::USR1]);
/// // SAFETY: raise has no memory arguments.
/// unsafe { libc::raise(libc::SIGUSR1) };
/// assert_eq!(sigs.recv().unwrap(), Signal::USR1);
/// signal::stop(&sigs);
/// ```
#[track_caller]
pub fn notify(signals: &[Signal]) -> Receiver<Signal> {
    let distinct = mask_of(signals).count_ones() as usize;
    let (tx, rx) = channel(distinct.max(1));
    subscribe(tx, signals);
    rx
}

/// Subscribes the channel of `tx` to `signals`, as Go's `signal.Notify(c, ...)`: its
/// buffer decides how many signals can wait (a rendezvous channel gets a signal only
/// if a receiver is waiting right then). Calling it again for the same channel adds
/// to its set. Panics as [`notify`] does.
///
/// ```
/// use goro::signal::{self, Signal};
///
/// let (tx, rx) = goro::chan::channel(8);
/// signal::notify_with(&tx, &[Signal::USR2]);
/// // SAFETY: raise has no memory arguments.
/// unsafe { libc::raise(libc::SIGUSR2) };
/// assert_eq!(rx.recv().unwrap(), Signal::USR2);
/// signal::stop_sender(&tx);
/// ```
#[track_caller]
pub fn notify_with(tx: &Sender<Signal>, signals: &[Signal]) {
    subscribe(tx.clone(), signals);
}

/// Ends the subscription of `rx`'s channel: once this returns, no signal is sent to
/// it. Signals left with no subscription get their default action back (see the
/// module doc). Does nothing for a channel that is not subscribed.
///
/// A channel made by [`notify`] is closed by it (the subscription held its only
/// sender): signals already buffered can still be received, then `recv` fails and
/// iteration ends.
///
/// ```
/// use goro::signal::{self, Signal};
///
/// let sigs = signal::notify(&[Signal::HUP]);
/// let r = sigs.clone();
/// let reloads = goro::go!(move || r.iter().count()); // one reload per SIGHUP
/// signal::stop(&sigs);
/// assert_eq!(reloads.join().unwrap(), 0); // no SIGHUP came; the loop has ended
/// ```
pub fn stop(rx: &Receiver<Signal>) {
    unsubscribe(rx.chan_id());
}

/// A context that is cancelled when one of `signals` arrives (Go's
/// `signal.NotifyContext`; its [`cause`](Context::cause) is then "interrupt signal
/// received", as Go 1.26's), and its `CancelFunc`, Go's `stop`: calling it (or dropping
/// it) cancels the context and ends the subscription at once, so the signals get their
/// default action back (see "stopping"). Until then a signal arriving again is caught,
/// not acted on: call `stop` once the program has begun to shut down, so a second
/// Ctrl-C kills it, as Go's documentation advises.
///
/// ```no_run
/// use goro::context::background;
/// use goro::signal::{self, Signal};
///
/// let (ctx, stop) = signal::notify_context(&background(), &[Signal::INT, Signal::TERM]);
/// // ... serve until the context ends ...
/// ctx.done().recv().ok();
/// stop.cancel(); // a second Ctrl-C now terminates
/// ```
///
/// # Panics
///
/// As [`notify`]: with no signals.
#[track_caller]
pub fn notify_context(parent: &Context, signals: &[Signal]) -> (Context, CancelFunc) {
    let (ctx, cancel) = parent.with_cancel();
    let (tx, rx) = channel::<Signal>(1);
    notify_with(&tx, signals);
    let (watched, done, signalled) = (ctx.clone(), ctx.done(), rx.clone());
    // Cancels the context when a signal comes. It holds the context, not the
    // CancelFunc (whose drop would cancel): a signal cancels through the context's
    // own node, which `cancel_for_signal` reaches.
    let watcher = goro_runtime::Builder::new()
        .name("signal.NotifyContext")
        .spawned_at(std::panic::Location::caller())
        .spawn(move || {
            crate::select! {
                recv(signalled) -> s => if let Ok(s) = s { watched.cancel_for_signal(&s) },
                recv(done) -> _ => {},
            }
        });
    if let Err(e) = watcher {
        panic!("goro::signal::notify_context: cannot start its coroutine: {e}");
    }
    // The stop keeps a receiver: a channel whose receivers are all gone counts as
    // unsubscribed at the next signal, which would then kill before `stop`.
    (
        ctx,
        cancel.with_also(move || {
            stop_sender(&tx);
            let _ = &rx;
        }),
    )
}

/// [`stop`] for a channel given by its sending end (one passed to [`notify_with`]).
pub fn stop_sender(tx: &Sender<Signal>) {
    unsubscribe(tx.chan_id());
}

fn mask_of(signals: &[Signal]) -> u64 {
    signals.iter().fold(0, |m, s| m | s.bit())
}

/// One channel's subscription.
struct Sub {
    tx: Sender<Signal>,
    /// Its signals, by bit (`Signal::bit`).
    mask: u64,
}

struct State {
    subs: Vec<Sub>,
    /// Signals whose handler is registered (never removed: signal-hook-registry
    /// cannot uninstall a handler).
    registered: u64,
}

/// The subscriptions. Changed by `subscribe` / `unsubscribe`; the dispatcher delivers
/// under it, so a `stop` that returned has no delivery in flight.
static STATE: Mutex<State> = Mutex::new(State {
    subs: Vec::new(),
    registered: 0,
});

/// Signals the handler has seen and the dispatcher has not yet delivered, by bit.
/// Set by the handler, taken by the dispatcher (SeqCst: the handler's set and its
/// eventfd write, and the dispatcher's eventfd read and its take, must not pass each
/// other, or a signal would wait for the next one).
static PENDING: AtomicU64 = AtomicU64::new(0);
/// Signals with a subscription now, by bit: the handler forwards these and gives the
/// others their default action. Written under `STATE`'s lock; read by the handler
/// (SeqCst: a `subscribe` that returned is seen by every signal after it).
static SUBSCRIBED: AtomicU64 = AtomicU64::new(0);
/// Signals that were at their default disposition when goro first registered a
/// handler for them, and whose default does something (terminate, stop): the handler
/// emulates it when they have no subscription. Written under `STATE`'s lock before
/// the signal's handler is registered; read by the handler (SeqCst, as `SUBSCRIBED`).
static TAKE_DEFAULT: AtomicU64 = AtomicU64::new(0);
/// The eventfd the handler writes to, -1 before the dispatcher starts. Written once,
/// before any handler is registered; read by the handler (SeqCst, as above).
static WAKE_FD: AtomicI32 = AtomicI32::new(-1);

/// The signal handler's action for `sig` (async-signal-safe: atomics and system
/// calls only; signal-hook-registry saves and restores `errno` around it).
fn on_signal(sig: Signal) {
    let bit = sig.bit();
    if SUBSCRIBED.load(Ordering::SeqCst) & bit != 0 {
        PENDING.fetch_or(bit, Ordering::SeqCst);
        let fd = WAKE_FD.load(Ordering::SeqCst);
        let one = 1u64.to_ne_bytes();
        // SAFETY: write(2) of the 8 bytes of `one` to our eventfd, through `syscall`
        // (never a hook of the `hooks` feature, which is not async-signal-safe). A
        // failure (the counter saturated) still leaves the eventfd readable.
        unsafe { libc::syscall(libc::SYS_write, fd, one.as_ptr(), 8usize) };
    } else if TAKE_DEFAULT.load(Ordering::SeqCst) & bit != 0 {
        take_default(sig);
    }
}

/// Does what `sig` does unhandled: terminates the process (resetting the disposition
/// and sending the signal again, so the exit status names it), stops it, or nothing.
/// Async-signal-safe.
fn take_default(sig: Signal) {
    match sig.default_action() {
        Action::Ignore => {}
        // SAFETY: kill(2) of our own process; no memory arguments.
        Action::Stop => unsafe {
            libc::kill(libc::getpid(), libc::SIGSTOP);
        },
        // SAFETY: signal(2) back to the default, then kill(2) of our own process; no
        // memory arguments. In a handler the signal is blocked until it returns, and
        // then it terminates the process.
        Action::Terminate => unsafe {
            libc::signal(sig.0, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig.0);
        },
    }
}

/// Starts the dispatcher, once: the eventfd, its coroutine, and sysmon (so that the
/// SIGQUIT dump's installer runs before any handler of ours is registered). The
/// coroutine is attributed to the first subscription, the call that made it.
#[track_caller]
fn start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    let at = std::panic::Location::caller();
    STARTED.get_or_init(|| {
        // SAFETY: eventfd has no memory arguments.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            panic!(
                "goro::signal: cannot create the dispatcher's eventfd: {}",
                io::Error::last_os_error()
            );
        }
        // SAFETY: eventfd just made `fd`, which nothing else owns.
        let ev = PollFd::new(unsafe { OwnedFd::from_raw_fd(fd) })
            .unwrap_or_else(|e| panic!("goro::signal: cannot poll the eventfd: {e}"));
        WAKE_FD.store(ev.as_raw_fd(), Ordering::SeqCst);
        goro_runtime::Builder::new()
            .name("goro-signal")
            .spawned_at(at)
            .spawn(move || dispatch(ev))
            .unwrap_or_else(|e| panic!("goro::signal: cannot start the dispatcher: {e}"));
        goro_runtime::sync_support::start_sysmon();
    });
}

/// The dispatcher coroutine: waits on the eventfd, delivers what is pending.
fn dispatch(ev: PollFd<OwnedFd>) {
    loop {
        // PollFd's own read: parks until the eventfd is readable, and is the runtime's
        // raw read(2), which the `hooks` feature never intercepts.
        let r = (&ev).read(&mut [0u8; 8]);
        if let Err(e) = r {
            // Not expected of an eventfd; do not spin on it.
            eprintln!("goro::signal: the dispatcher's eventfd failed: {e}");
            goro_runtime::time::sleep(std::time::Duration::from_millis(100));
        }
        let pending = PENDING.swap(0, Ordering::SeqCst);
        if pending != 0 {
            deliver(pending);
        }
    }
}

/// Sends each signal in `pending` to its subscribers.
fn deliver(pending: u64) {
    let mut st = STATE.lock();
    let mut orphaned = Vec::new();
    for n in 1..=64 {
        let sig = Signal(n);
        if pending & sig.bit() == 0 {
            continue;
        }
        let (mut had, mut live) = (false, false);
        st.subs.retain(|s| {
            if s.mask & sig.bit() == 0 {
                return true;
            }
            had = true;
            match s.tx.try_send(sig) {
                Ok(()) | Err(TrySendError::Full(_)) => {
                    live = true;
                    true
                }
                // Every receiver is gone: the subscription ends.
                Err(TrySendError::Closed(_)) => false,
            }
        });
        if had && !live {
            orphaned.push(sig);
        }
    }
    publish(&st);
    drop(st);
    // A signal that found only dropped subscribers: what it would have done unhandled.
    for sig in orphaned {
        if sig == Signal::QUIT {
            goro_runtime::sync_support::sigquit_dump_now();
        } else if TAKE_DEFAULT.load(Ordering::SeqCst) & sig.bit() != 0 {
            take_default(sig);
        }
    }
}

/// Publishes the subscribed set to the handler and the SIGQUIT dump. Under the lock.
fn publish(st: &State) {
    let mask = st.subs.iter().fold(0, |m, s| m | s.mask);
    SUBSCRIBED.store(mask, Ordering::SeqCst);
    goro_runtime::sync_support::set_sigquit_dump(mask & Signal::QUIT.bit() == 0);
}

#[track_caller]
fn subscribe(tx: Sender<Signal>, signals: &[Signal]) {
    assert!(
        !signals.is_empty(),
        "goro::signal::notify: no signals given (Go's Notify with none means all of \
         them; name the ones wanted)"
    );
    start();
    let mask = mask_of(signals);
    let mut st = STATE.lock();
    let id = tx.chan_id();
    match st.subs.iter_mut().find(|s| s.tx.chan_id() == id) {
        Some(s) => s.mask |= mask,
        None => st.subs.push(Sub { tx, mask }),
    }
    // Subscribed before the handler exists: a signal from the moment it is registered
    // is delivered, never taken for unhandled.
    publish(&st);
    for &sig in signals {
        if st.registered & sig.bit() != 0 {
            continue;
        }
        if sig.default_action() != Action::Ignore && at_default(sig) {
            TAKE_DEFAULT.fetch_or(sig.bit(), Ordering::SeqCst);
        }
        // SAFETY: `on_signal` is async-signal-safe (see it) and never panics.
        let r = unsafe { signal_hook_registry::register(sig.0, move || on_signal(sig)) };
        if let Err(e) = r {
            panic!(
                "goro::signal: cannot install a handler for {}: {e}",
                sig.name()
            );
        }
        st.registered |= sig.bit();
    }
}

/// Whether `sig`'s disposition is the default now.
fn at_default(sig: Signal) -> bool {
    // SAFETY: querying the action into a zeroed struct we own.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig.0, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_DFL
    }
}

fn unsubscribe(id: usize) {
    let mut st = STATE.lock();
    st.subs.retain(|s| s.tx.chan_id() != id);
    publish(&st);
}
