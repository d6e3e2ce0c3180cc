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
    blocking, current_id, maxprocs, num_goroutines, panic_message, preempt_point, set_maxprocs,
    spawn, yield_now, Builder, JoinHandle, DEFAULT_STACK_SIZE, MAX_PROCS, MAX_STACK_SIZE,
    MIN_STACK_SIZE,
};

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
        Cond, Mutex, MutexGuard, Once, RwLock, RwLockReadGuard, RwLockWriteGuard, Semaphore,
        SemaphorePermit, WaitGroup,
    };
}

/// Sleeping and timers: [`sleep`](time::sleep), [`sleep_until`](time::sleep_until),
/// [`Timer`](time::Timer) (Go's `time.AfterFunc`) and [`Ticker`](time::Ticker).
pub mod time {
    pub use goro_runtime::time::{sleep, sleep_until, Timer};
    pub use goro_sync::chan::Ticker;
}

/// Channels: MPMC, buffered or rendezvous, for coroutines and threads in any mix, and
/// the timer channels [`after`](chan::after), [`tick`](chan::tick),
/// [`never`](chan::never). See [`select!`] to wait on several at once.
pub mod chan {
    #[doc(hidden)]
    pub use goro_sync::chan::__private;
    pub use goro_sync::chan::{
        after, channel, never, tick, IntoIter, Iter, Receiver, RecvError, RecvTimeoutError,
        SendError, SendTimeoutError, Sender, TryIter, TryRecvError, TrySendError,
    };
}

pub use goro_sync::select;

/// Sockets on the netpoller: [`TcpListener`](net::TcpListener),
/// [`TcpStream`](net::TcpStream), [`UdpSocket`](net::UdpSocket). Blocking calls park
/// a coroutine (or block a plain thread) until the socket is ready.
pub mod net {
    pub use goro_runtime::net::*;
}

/// File I/O through [`blocking`]: [`read`](fs::read), [`write`](fs::write),
/// [`File`](fs::File) and friends, mirroring `std::fs`.
pub mod fs {
    pub use goro_runtime::fs::*;
}

/// Introspection: the coroutine dump, the stack guard in use.
pub mod debug {
    pub use goro_runtime::debug::{dump, stack_guard_kind, GuardKind};
}
