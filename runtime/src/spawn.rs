//! Spawning coroutines: [`Builder`], [`spawn`], [`JoinHandle`].
//!
//! # The join handshake
//!
//! A [`JoinHandle`] and its coroutine share a packet: the result slot, the joiner's
//! unparker, and a [`JoinState`] word, `RUNNING -> WAITING -> DONE` or
//! `RUNNING -> DONE`. The coroutine writes its result, then swaps in `DONE`; if it
//! found `WAITING`, a joiner is parked and it unparks it. The joiner writes its
//! unparker, then CASes `RUNNING -> WAITING` and parks; if the CAS finds `DONE`, the
//! result is already there. Each side writes its half before its atomic step and reads
//! the other's only after seeing it, so neither the result nor the wake-up is lost.
//! `tests/loom_join.rs` checks the state machine.

use std::cell::UnsafeCell;
use std::fmt;
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use crate::loom::{AtomicU8, Ordering};
use crate::park::{self, Unparker, WaitReason};
use crate::sched;
pub use crate::sched::panic_message;

const RUNNING: u8 = 0;
const WAITING: u8 = 1;
const DONE: u8 = 2;

/// The join handshake word (see the module doc). Written by the coroutine (`finish`)
/// and by the joiner (`begin_wait`); read by the joiner (`is_done`).
pub struct JoinState {
    state: AtomicU8,
}

impl JoinState {
    /// The coroutine is running and nobody waits.
    pub fn new() -> Self {
        JoinState {
            state: AtomicU8::new(RUNNING),
        }
    }

    /// Coroutine side, after writing the result: returns true if a joiner is parked
    /// and must be unparked (its unparker is then readable).
    pub fn finish(&self) -> bool {
        // AcqRel: Release publishes the result to the joiner; Acquire makes the
        // joiner's unparker, written before its CAS, visible to us.
        self.state.swap(DONE, Ordering::AcqRel) == WAITING
    }

    /// Joiner side, after writing its unparker: returns true if it must park (the
    /// coroutine will unpark it), false if the result is already there.
    pub fn begin_wait(&self) -> bool {
        // Release on success publishes the unparker; Acquire on failure pairs with
        // `finish` so the result is visible.
        self.state
            .compare_exchange(RUNNING, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Whether the coroutine has finished (Acquire: its result is then visible).
    pub fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }
}

struct Packet<T> {
    state: JoinState,
    result: UnsafeCell<Option<thread::Result<T>>>,
    joiner: UnsafeCell<Option<Unparker>>,
}

// SAFETY: `result` is written by the coroutine before `finish` and read by the joiner
// only after it saw DONE; `joiner` is written by the joiner before `begin_wait` and read
// by the coroutine only after `finish` saw WAITING (the join handshake). T must be Send
// to cross from the coroutine to the joiner.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    fn complete(&self, r: thread::Result<T>) {
        // SAFETY: only the coroutine writes `result`, and only here, before `finish`.
        unsafe { *self.result.get() = Some(r) };
        if self.state.finish() {
            // SAFETY: `finish` saw WAITING, so the joiner wrote its unparker before its
            // CAS and will not touch it again until it is woken.
            if let Some(u) = unsafe { (*self.joiner.get()).take() } {
                u.unpark();
            }
        }
    }
}

/// Configures a coroutine before spawning it.
#[derive(Debug, Default)]
#[must_use = "a Builder does nothing until spawn is called"]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    pinned: bool,
}

impl Builder {
    /// A builder with the default name (none) and stack size (`GORO_STACK_SIZE`).
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the coroutine; the name appears in the stack overflow message and the
    /// coroutine dump.
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = Some(name.into());
        self
    }

    /// Sets the stack size in bytes (virtual: only the pages used cost memory). Rounded
    /// up to whole pages; outside 16 KiB..=1 GiB, `spawn` returns `InvalidInput`.
    pub fn stack_size(mut self, size: usize) -> Builder {
        self.stack_size = Some(size);
        self
    }

    /// Pins the coroutine to one OS thread (Go: `runtime.LockOSThread` for the whole
    /// life of a goroutine). A pinned coroutine always runs on the M that first runs
    /// it: when it parks, that M hands its P to another M and waits; when it is
    /// readied, the P is handed back to it. For code that needs thread affinity
    /// (thread-locals, thread-bound FFI state). Each switch to or from a pinned
    /// coroutine costs an OS thread wake-up, so pin only what needs it.
    pub fn pinned(mut self, pinned: bool) -> Builder {
        self.pinned = pinned;
        self
    }

    /// Spawns the coroutine. Fails, without running anything, if the stack size is out
    /// of range or a stack cannot be mapped (the error then names `vm.max_map_count`
    /// when that limit is the likely cause).
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        // A loop that spawns is a loop of goro calls: it yields when sysmon asks (as
        // Go's newproc, a function call, checks for preemption), rather than lose its
        // P to a retake and spawn without one.
        crate::preempt_point();
        let packet = Arc::new(Packet {
            state: JoinState::new(),
            result: UnsafeCell::new(None),
            joiner: UnsafeCell::new(None),
        });
        let theirs = packet.clone();
        let id = sched::spawn_g(self.name, self.stack_size, self.pinned, move || {
            let r = catch_unwind(AssertUnwindSafe(f));
            theirs.complete(r);
        })?;
        Ok(JoinHandle { id, packet })
    }
}

/// Spawns a coroutine running `f` and returns its handle (the function form of `go!`).
///
/// # Panics
///
/// If no stack can be allocated; use [`Builder::spawn`] to get the error instead.
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new()
        .spawn(f)
        .unwrap_or_else(|e| panic!("failed to spawn coroutine: {e}"))
}

/// An owned permission to join a coroutine: wait for it to end and take its result.
///
/// Dropping the handle detaches the coroutine, which keeps running. A panic in a
/// detached coroutine is reported by the panic hook, like a thread's, and does not
/// affect the runtime.
pub struct JoinHandle<T> {
    id: u64,
    packet: Arc<Packet<T>>,
}

impl<T> JoinHandle<T> {
    /// Waits for the coroutine to end: parks the calling coroutine, or blocks the
    /// calling thread. Returns its result, or `Err` with the panic payload if it
    /// panicked.
    pub fn join(self) -> thread::Result<T> {
        let packet = &self.packet;
        if !packet.state.is_done() {
            let u = park::prepare();
            // SAFETY: only the joiner writes `joiner`, and only before begin_wait.
            unsafe { *packet.joiner.get() = Some(u) };
            if packet.state.begin_wait() {
                park::park(WaitReason::Join);
                if !packet.state.is_done() {
                    // Only this wait's unparker can wake it, and the coroutine uses it
                    // only after setting DONE: the join handshake is broken.
                    sched::fatal!(
                        "JoinHandle::join: woken before coroutine {} finished",
                        self.id
                    );
                }
            }
        }
        // SAFETY: the state is DONE, so the coroutine wrote the result and will not
        // touch it again; we are the only joiner (join takes self).
        match unsafe { (*packet.result.get()).take() } {
            Some(r) => r,
            None => sched::fatal!("JoinHandle::join: coroutine {} left no result", self.id),
        }
    }

    /// Whether the coroutine has ended (its result can be taken without waiting).
    pub fn is_finished(&self) -> bool {
        self.packet.state.is_done()
    }

    /// The coroutine's id (what `current_id` returns inside it).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id)
            .field("finished", &self.is_finished())
            .finish()
    }
}
