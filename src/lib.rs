//! Go's concurrency for Rust: goroutines, channels and `select!`, on stackful
//! coroutines that a Go-style scheduler multiplexes over a few OS threads.
//!
//! Write each task as plain blocking code — a loop that receives, computes and sends —
//! spawn it with [`go!`], and let channels carry the values. A coroutine that blocks
//! (on a channel, a lock, a socket, a sleep) parks, and its thread runs other
//! coroutines meanwhile; a parked coroutine costs about 5 KiB, so a program can have a
//! million.
//!
//! ```
//! use goro::chan::{after, channel};
//! use std::time::Duration;
//!
//! // Workers square numbers from one channel onto another.
//! let (jobs, inbox) = channel::<u64>(0);
//! let (results, outbox) = channel::<u64>(16);
//! for _ in 0..4 {
//!     let (inbox, results) = (inbox.clone(), results.clone());
//!     goro::go!(move || {
//!         for n in inbox.iter() {
//!             results.send(n * n).unwrap();
//!         }
//!     });
//! }
//! drop(results); // the workers hold the senders now
//! goro::go!(move || (1..=10).for_each(|n| jobs.send(n).unwrap())); // then closes
//!
//! let mut sum = 0;
//! let deadline = after(Duration::from_secs(10));
//! loop {
//!     goro::select! {
//!         recv(outbox) -> r => match r {
//!             Ok(sq) => sum += sq,
//!             Err(_) => break, // every worker is done
//!         },
//!         recv(deadline) -> _ => panic!("too slow"),
//!     }
//! }
//! assert_eq!(sum, 385);
//! ```
//!
//! # Where things are
//!
//! - Spawning, shaped like `std::thread`: [`go!`] / [`spawn`] / [`Builder`] and
//!   [`JoinHandle`] (with [`JoinHandle::join_timeout`]), [`scope`] for coroutines that
//!   borrow from the caller, [`JoinSet`] to join in completion order,
//!   [`coroutine_local!`] for what `thread_local!` cannot be on a coroutine that moves
//!   between threads. [`block_on`] runs a `Future` on the calling coroutine or thread.
//! - [`chan`] and [`select!`]: Go's channels, timer channels; [`sync`]: `Mutex`,
//!   `RwLock`, `WaitGroup`, `Once`, `Cond`, `Semaphore` and std's cells; [`time`]:
//!   sleeping and timers.
//! - [`net`], [`io`], [`process`], [`signal`], [`fs`]: sockets, pipes, child processes
//!   and signals that park the coroutine instead of its thread; [`blocking`] for any
//!   other call that blocks. The `hooks` feature does the same for std's own sleep and
//!   sockets, in crates that never heard of goro.
//! - [`debug`]: the coroutine dump and the scheduler's counts; [`Config`] sets the
//!   runtime up in code (otherwise the `GORO_*` environment variables do, at the
//!   first goro call).
//! - Pages: the [guide] (goro for a Go programmer), the [caveats] (the rules a goro
//!   user must know: thread-bound values across a blocking call, stack sizes, what
//!   blocks a thread), the [benchmarks] and the design [decisions].
//!
//! ```
//! use std::cell::Cell;
//! use std::time::Duration;
//!
//! goro::coroutine_local! { static HITS: Cell<u32> = Cell::new(0); }
//!
//! let mut words = vec![String::from("a"), String::from("b")];
//! goro::scope(|s| {
//!     for w in words.iter_mut() {
//!         s.spawn(move || {
//!             HITS.with(|h| h.set(h.get() + 1)); // this coroutine's own
//!             w.push('!');
//!         });
//!     }
//! });
//! assert_eq!(words, ["a!", "b!"]);
//!
//! let mut set = goro::JoinSet::new();
//! set.spawn(|| { goro::time::sleep(Duration::from_millis(20)); "slow" });
//! set.spawn(|| "fast");
//! assert_eq!(set.join_next().unwrap().unwrap(), "fast");
//!
//! let h = goro::Builder::new().name("late").spawn(|| {
//!     goro::time::sleep(Duration::from_millis(20));
//!     goro::current_name()
//! }).unwrap();
//! let h = h.join_timeout(Duration::ZERO).unwrap_err(); // not finished: handle back
//! assert_eq!(h.name(), Some("late"));
//! assert_eq!(h.join().unwrap().as_deref(), Some("late"));
//! ```
//!
//! # Using it
//!
//! The package is `goro-rt` (crates.io's `goro` is another project's); its library
//! is `goro`, so `goro-rt = "0.1"` in `[dependencies]` and `goro::` in code. This crate
//! is the facade, the [`go!`] macro and re-exports; the runtime lives in
//! `goro-runtime`, the locks and channels in `goro-sync`.
//!
//! # Requirements
//!
//! Linux only (x86_64 and aarch64): goro needs epoll, eventfd and timerfd, and uses
//! `membarrier` (4.14+), `pidfd_open` (5.3+) and guard-page installs (6.13+) where the
//! kernel has them, with a slower fallback where not. Below 6.13 each stack's guard is
//! a separate mapping, so `vm.max_map_count` (65 530 by default) caps a process near
//! 32 000 live coroutines; allocation beyond it is a typed error.

mod macros;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

// docs/guide.md, docs/caveats.md, docs/benchmarks.md and the decision records, as
// pages of these docs. Their links to each other are reference-style; the definitions
// here come first, so they win over the files' own (which serve readers of the
// repository) and every link resolves on docs.rs. Every Rust block of the guide is a
// doc test of this module.

pub mod guide {
    #![doc = "[caveats]: crate::caveats\n\
              [benchmarks]: crate::benchmarks\n\
              [hooks-decision]: crate::decisions::hooks"]
    #![doc = include_str!("../docs/guide.md")]
}

pub mod caveats {
    #![doc = "[hooks-decision]: crate::decisions::hooks\n\
              [migrate-decision]: crate::decisions::migrate\n\
              [benchmarks]: crate::benchmarks\n\
              [guide-async]: crate::guide#async-rust-from-coroutines"]
    #![doc = include_str!("../docs/caveats.md")]
}

/// Measured results: goro beside Go, tokio, may and OS threads, with the commands
/// that made each table.
pub mod benchmarks {
    // The tables' footnote marks (`[4]`) are compare's output, not links.
    #![allow(rustdoc::broken_intra_doc_links)]
    #![doc = include_str!("../docs/benchmarks.md")]
}

/// Why goro is built the way it is: the records of its larger decisions.
pub mod decisions {
    pub mod migrate {
        #![doc = "[caveats]: crate::caveats"]
        #![doc = include_str!("../docs/decisions/0001-coroutines-migrate-between-threads.md")]
    }
    pub mod hooks {
        #![doc = include_str!("../docs/decisions/0002-hooks.md")]
    }
    pub mod stacks {
        #![doc = include_str!("../docs/decisions/0003-coroutine-stacks.md")]
    }
}

pub use goro_runtime::{
    block_on, blocking, current_id, current_name, lock_os_thread, maxprocs, num_goroutines,
    panic_message, preempt_point, scope, set_maxprocs, spawn, yield_now, Builder, Config,
    ConfigError, JoinFuture, JoinHandle, JoinSet, LocalKey, Scope, ScopedJoinHandle,
    DEFAULT_STACK_SIZE, MAX_PROCS, MAX_STACK_SIZE, MIN_STACK_SIZE,
};

/// `#[goro::main]` on `fn main` (also `fn main() -> Result<(), E>`): main's body runs
/// as a coroutine named `"main"`, Go's main goroutine, so its stack is in
/// `debug::dump()`, the SIGQUIT dump and the deadlock report; the program ends when it
/// returns.
///
/// ```
/// #[goro::main]
/// fn main() {
///     let h = goro::go!(|| 6 * 7);
///     assert_eq!(h.join().unwrap(), 42);
///     assert_eq!(goro::current_name().as_deref(), Some("main"));
///     assert!(goro::current_id().is_some()); // a coroutine, not the main thread
/// }
/// ```
pub use goro_macros::main;

#[doc(hidden)]
pub use goro_runtime::__main;

/// Declares coroutine-local statics (`thread_local!` for coroutines): see
/// [`LocalKey`].
pub use goro_runtime::coroutine_local;

/// Parking and unparking coroutines and threads: the primitive every blocking
/// operation in goro is built on.
pub mod park {
    pub use goro_runtime::park::{
        park, park_commit, park_commit_timeout, park_timeout, prepare, Unparker, WaitReason,
    };
}

/// Locks and other synchronisation for coroutines and threads alike: a coroutine that
/// waits parks (its M runs other coroutines), a thread that waits blocks.
pub mod sync {
    pub use goro_sync::{
        Barrier, BarrierWaitResult, Cond, ErrGroup, LazyLock, Mutex, MutexGuard, Notify, Once,
        OnceLock, OnceState, OwnedSemaphorePermit, RwLock, RwLockReadGuard, RwLockWriteGuard,
        Semaphore, SemaphorePermit, WaitGroup, WaitTimeoutResult,
    };
}

/// Cancellation, deadlines and request-scoped values, Go's `context` package:
/// [`background`](context::background), [`Context`](context::Context) with
/// `with_cancel`, `with_timeout`, `with_deadline`, `with_value`, `done` (a channel for
/// `select!`), `err`, `deadline` and `after_func`; [`connect_context`](context::connect_context)
/// (also `goro::net::connect_context`), a connect that gives up with its context.
/// [`sync::ErrGroup`] runs a group of coroutines under one.
pub mod context {
    pub use goro_sync::context::*;
}

/// Go's `time` package: [`sleep`](time::sleep), [`sleep_until`](time::sleep_until),
/// [`after`](time::after) and [`tick`](time::tick) (channels that receive the time),
/// [`Timer`](time::Timer) (Go's `NewTimer`: a channel timer that can be stopped and
/// reset), [`Ticker`](time::Ticker), and [`after_func`](time::after_func) (Go's
/// `AfterFunc`, whose timer is [`AfterFunc`](time::AfterFunc)). The channel timers are
/// the same items as [`chan`]'s.
///
/// ```
/// use std::time::Duration;
///
/// let t = goro::time::Timer::new(Duration::from_millis(1));
/// t.recv();                                   // <-t.C
/// assert!(!t.stop());                         // already fired
/// let tick = goro::time::tick(Duration::from_millis(1));
/// let _ = tick.recv();                        // <-time.Tick(d)
/// let _ = goro::time::after(Duration::ZERO).recv(); // <-time.After(d)
/// ```
pub mod time {
    pub use goro_runtime::time::{after_func, sleep, sleep_until, AfterFunc};
    pub use goro_sync::chan::{after, tick, Ticker, Timer};
}

/// Channels: MPMC, buffered, rendezvous or [`unbounded`](chan::unbounded), for
/// coroutines and threads in any mix, in two shapes: [`Chan`](chan::Chan), Go's
/// `chan T` (one handle, closed only by `close`), and [`channel`](chan::channel)'s
/// `Sender`/`Receiver` (closed when the last `Sender` or `Receiver` goes); the timer channels [`after`](chan::after),
/// [`at`](chan::at), [`tick`](chan::tick) and [`Timer`](chan::Timer) (Go's
/// `time.NewTimer`); Go's nil channels, [`never`](chan::never) for a receive and
/// [`never_sender`](chan::never_sender) for a send. See [`select!`] to wait on several
/// at once. Besides Go's operations: `send_deadline` / `recv_deadline`, `is_full` and
/// `same_channel`.
pub mod chan {
    #[doc(hidden)]
    pub use goro_sync::chan::__private;
    pub use goro_sync::chan::GoChan as Chan;
    pub use goro_sync::chan::{
        after, at, channel, never, never_sender, tick, unbounded, ChanIter, IntoIter, Iter,
        Receiver, RecvError, RecvFuture, RecvTimeoutError, SendError, SendFuture, SendTimeoutError,
        Sender, Timer, TryIter, TryRecvError, TrySendError,
    };
}

pub use goro_sync::select;

/// tokio's async ecosystem from coroutines (the `tokio` feature): [`block_on`](tokio::block_on)
/// runs a future that needs tokio's reactor (reqwest, sqlx, tonic) on the calling
/// coroutine, parking the coroutine, not its thread, between polls;
/// [`handle`](tokio::handle) and [`set_handle`](tokio::set_handle) name the tokio runtime
/// that drives those futures. See the guide's "Async Rust from coroutines".
#[cfg(feature = "tokio")]
pub mod tokio {
    pub use goro_tokio::{block_on, handle, set_handle};
}

/// Sockets on the netpoller: [`TcpListener`](net::TcpListener),
/// [`TcpStream`](net::TcpStream), [`UdpSocket`](net::UdpSocket), and the Unix domain
/// sockets [`UnixListener`](net::UnixListener), [`UnixStream`](net::UnixStream),
/// [`UnixDatagram`](net::UnixDatagram) (with std's unix address type as
/// [`net::unix::SocketAddr`]). Blocking calls park a coroutine (or block a plain
/// thread) until the socket is ready; each type converts from and to std's
/// (`from_std`, `into_std`, descriptors). The TCP streams goro makes have `TCP_NODELAY`
/// on, as Go's do; [`connect_context`](net::connect_context) is a connect that gives up
/// when its [`context`] does (Go's `DialContext`).
pub mod net {
    pub use goro_runtime::net::*;
    pub use goro_sync::context::connect_context;
}

/// Any file descriptor on the netpoller: [`PollFd`](io::PollFd) wraps a pipe, a tty,
/// an eventfd, an inotify or pidfd descriptor (anything epoll takes: not regular
/// files) so that reads and writes that would block park the coroutine (or block a
/// plain thread) until it is ready. [`read_with`](io::PollFd::read_with) and
/// [`write_with`](io::PollFd::write_with) run any non-blocking system call in the
/// poller's try-wait-retry loop; `Read` and `Write` (also on `&PollFd`) are `read(2)`
/// and `write(2)` on the descriptor.
pub mod io {
    pub use goro_runtime::io::*;
}

/// Child processes, shaped like `std::process`: [`Command`](process::Command) spawns
/// with std, and [`Child::wait`](process::Child::wait), [`Command::output`](process::Command::output)
/// and [`Command::status`](process::Command::status) park the coroutine (the child's
/// pidfd on the netpoller; a [`blocking`] wait where the kernel has no pidfds). The
/// child's pipes are on the poller too.
pub mod process {
    pub use goro_runtime::process::*;
}

/// Unix signals on channels: [`notify`](signal::notify) (Go's `signal.Notify`) sends
/// each signal to the channels subscribed to it, [`stop`](signal::stop) ends a
/// subscription. Handlers chain with other libraries' through `signal-hook-registry`;
/// subscribing to SIGQUIT turns off goro's coroutine dump.
pub mod signal {
    pub use goro_sync::signal::*;
}

/// File I/O through [`blocking`]: [`read`](fs::read), [`write`](fs::write),
/// [`File`](fs::File) and friends, mirroring `std::fs`.
pub mod fs {
    pub use goro_runtime::fs::*;
}

/// Introspection: the coroutine [`dump`](debug::dump) (grouped, with stacks and spawn
/// sites; [`dump_each`](debug::dump_each) for one entry per coroutine),
/// [`stack`](debug::stack) (one coroutine's stack), [`stats`](debug::stats) (the
/// scheduler's counts), [`coroutines`](debug::coroutines) (every live coroutine, its
/// state, wait reason and spawn site), the stack guard in use and how a slab's
/// guards are installed.
pub mod debug {
    pub use goro_runtime::debug::{
        coroutines, dump, dump_each, stack, stack_guard_batch, stack_guard_kind, stack_headroom,
        stats, CoroutineInfo, CoroutineState, Frame, GuardBatch, GuardKind, StackTrace, Stats,
    };
}
