//! goro: Go-style M:N green threads for Rust.
//!
//! Stackful coroutines ("goroutines") multiplexed over OS threads by a G/M/P scheduler
//! built the way Go's runtime is built. Write `go!(move || ...)`, block as if on
//! threads, pay coroutine prices.
//!
//! ```
//! let h = goro::go!(move || 6 * 7);
//! assert_eq!(h.join().unwrap(), 42);
//! ```
//!
//! This crate is the facade: the [`go!`] macro and re-exports. The runtime lives in
//! `goro-runtime`; see `docs/` for the guide, the architecture and the caveats.
//!
//! Spawning, shaped like `std::thread`: [`go!`] / [`spawn`] / [`Builder`] and
//! [`JoinHandle`] (with [`JoinHandle::join_timeout`]), [`scope`] for coroutines that
//! borrow from the caller, [`JoinSet`] to join in completion order,
//! [`coroutine_local!`] for what `thread_local!` cannot be on a coroutine that moves
//! between threads, [`current_id`] and [`current_name`]. [`block_on`] runs a `Future`
//! on the calling coroutine or thread. [`Config`] sets the runtime up in code before
//! it starts (otherwise the `GORO_*` environment variables do, at the first goro call).
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

mod macros;

/// The README's examples, compiled and run as doc tests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The user guide's examples (`docs/guide.md`), compiled and run as doc tests.
#[doc = include_str!("../docs/guide.md")]
#[cfg(doctest)]
pub struct GuideDoctests;

pub use goro_runtime::{
    block_on, blocking, current_id, current_name, maxprocs, num_goroutines, panic_message,
    preempt_point, scope, set_maxprocs, spawn, yield_now, Builder, Config, ConfigError, JoinHandle,
    JoinSet, LocalKey, Scope, ScopedJoinHandle, DEFAULT_STACK_SIZE, MAX_PROCS, MAX_STACK_SIZE,
    MIN_STACK_SIZE,
};

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
        Barrier, BarrierWaitResult, Cond, LazyLock, Mutex, MutexGuard, Notify, Once, OnceLock,
        RwLock, RwLockReadGuard, RwLockWriteGuard, Semaphore, SemaphorePermit, WaitGroup,
        WaitTimeoutResult,
    };
}

/// Sleeping and timers: [`sleep`](time::sleep), [`sleep_until`](time::sleep_until),
/// [`Timer`](time::Timer) (Go's `time.AfterFunc`) and [`Ticker`](time::Ticker).
pub mod time {
    pub use goro_runtime::time::{sleep, sleep_until, Timer};
    pub use goro_sync::chan::Ticker;
}

/// Channels: MPMC, buffered, rendezvous or [`unbounded`](chan::unbounded), for
/// coroutines and threads in any mix, and the timer channels [`after`](chan::after),
/// [`at`](chan::at), [`tick`](chan::tick), [`never`](chan::never). See [`select!`] to
/// wait on several at once. Besides Go's operations: `send_deadline` / `recv_deadline`,
/// `is_full` and `same_channel`.
pub mod chan {
    #[doc(hidden)]
    pub use goro_sync::chan::__private;
    pub use goro_sync::chan::{
        after, at, channel, never, tick, unbounded, IntoIter, Iter, Receiver, RecvError,
        RecvTimeoutError, SendError, SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError,
    };
}

pub use goro_sync::select;

/// Sockets on the netpoller: [`TcpListener`](net::TcpListener),
/// [`TcpStream`](net::TcpStream), [`UdpSocket`](net::UdpSocket), and the Unix domain
/// sockets [`UnixListener`](net::UnixListener), [`UnixStream`](net::UnixStream),
/// [`UnixDatagram`](net::UnixDatagram) (with std's unix address type as
/// [`net::unix::SocketAddr`]). Blocking calls park a coroutine (or block a plain
/// thread) until the socket is ready; each type converts from and to std's
/// (`from_std`, `into_std`, descriptors).
pub mod net {
    pub use goro_runtime::net::*;
}

/// File I/O through [`blocking`]: [`read`](fs::read), [`write`](fs::write),
/// [`File`](fs::File) and friends, mirroring `std::fs`.
pub mod fs {
    pub use goro_runtime::fs::*;
}

/// Introspection: the coroutine dump, [`stats`](debug::stats) (the scheduler's counts),
/// [`coroutines`](debug::coroutines) (every live coroutine, its state and wait
/// reason), the stack guard in use.
pub mod debug {
    pub use goro_runtime::debug::{
        coroutines, dump, stack_guard_kind, stats, CoroutineInfo, CoroutineState, GuardKind, Stats,
    };
}
