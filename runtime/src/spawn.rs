//! Spawning coroutines: [`Builder`], [`spawn`], [`JoinHandle`].
//!
//! # How a coroutine ends
//!
//! Every coroutine spawned here (also by a [`JoinSet`](crate::JoinSet) or a
//! [`scope`](crate::scope)) runs [`run`], then hands its result on:
//!
//! 1. its function runs under `catch_unwind`; the values it captured are dropped when
//!    it returns or unwinds;
//! 2. its coroutine-local values are dropped (`local.rs`), on the coroutine, last made
//!    first;
//! 3. its result goes to its owner: a [`JoinHandle`]'s packet (the join handshake), a
//!    `JoinSet`'s queue, or a scoped handle's packet and then the scope's count.
//!
//! So whatever reports a coroutine finished (`join`, `is_finished`, `join_next`, the
//! end of a scope) reports it after 1 and 2.
//!
//! # The join handshake
//!
//! A [`JoinHandle`] and its coroutine share a packet: the result slot, the joiner's
//! unparker, and a [`JoinState`] word:
//!
//! ```text
//! RUNNING --begin_wait--> WAITING --finish--> DONE
//! RUNNING --finish--> DONE
//!                         WAITING --withdraw_wait--> RUNNING   (a timed wait gave up)
//! ```
//!
//! The coroutine writes its result, then swaps in `DONE`; if it found `WAITING`, a
//! joiner is parked and it unparks it. The joiner writes its unparker, then CASes
//! `RUNNING -> WAITING` and parks; if the CAS finds `DONE`, the result is already there.
//! Each side writes its half before its atomic step and reads the other's only after
//! seeing it, so neither the result nor the wake-up is lost. A timed wait
//! ([`JoinHandle::join_timeout`]) whose deadline comes first CASes `WAITING -> RUNNING`:
//! if that wins, the coroutine has not seen the wait and never will (it reads the
//! unparker only after its swap found `WAITING`), so the joiner owns the unparker slot
//! again and a later wait starts over; if it loses, the state is `DONE` and the result
//! is there (the coroutine's unpark of the wait the deadline already ended is a no-op).
//! `tests/loom_join.rs` checks the state machine, withdrawals included.
//!
//! # A panic is never lost
//!
//! A coroutine's panic reaches whoever joins it, or ends the program. A handle that
//! goes without a join (dropped, or its future dropped) or-s `DETACHED` into the word;
//! whichever of the two steps comes second owns the result and looks at it: the
//! coroutine, whose `finish` swap sees `DETACHED`, or the handle, whose `detach` sees
//! `DONE` (Acquire: the result is then visible). If the result is a panic, the program
//! ends there (`panics::unjoined_panic`), with exit status 2 as Go's unrecovered panic,
//! unless `GORO_DETACHED_PANIC=ignore` asks for std's rule (a detached thread's panic
//! is reported and lost). `JoinSet`, `scope` and `ErrGroup` catch their coroutines'
//! panics themselves and hand them to their own joins.

use std::cell::UnsafeCell;
use std::fmt;
use std::future::{Future, IntoFuture};
use std::io;
use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::{Duration, Instant};

use crate::loom::{AtomicU8, Ordering};
use crate::park::{self, Unparker, WaitReason};
use crate::sched;
pub use crate::sched::panic_message;

const RUNNING: u8 = 0;
const WAITING: u8 = 1;
const DONE: u8 = 2;
/// Or'ed in when the handle goes without a join (see "a panic is never lost").
const DETACHED: u8 = 4;

/// What the coroutine's `finish` found: who, if anyone, takes the result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub enum Finished {
    /// A joiner is parked: wake it (its unparker is readable).
    Joiner,
    /// The handle is gone: nobody will take the result; the coroutine owns it again.
    Detached,
    /// The handle is alive and not waiting: it will take the result.
    Handle,
}

/// The join handshake word (see the module doc). Written by the coroutine (`finish`)
/// and by the joiner (`begin_wait`, `withdraw_wait`); read by the joiner (`is_done`).
pub struct JoinState {
    state: AtomicU8,
}

impl Default for JoinState {
    fn default() -> Self {
        Self::new()
    }
}

impl JoinState {
    /// The coroutine is running and nobody waits.
    pub fn new() -> Self {
        JoinState {
            state: AtomicU8::new(RUNNING),
        }
    }

    /// Coroutine side, after writing the result: who takes it. `Joiner`: a joiner is
    /// parked and must be unparked (its unparker is then readable).
    pub fn finish(&self) -> Finished {
        // AcqRel: Release publishes the result to the joiner; Acquire makes the
        // joiner's unparker, written before its CAS, visible to us.
        match self.state.swap(DONE, Ordering::AcqRel) {
            WAITING => Finished::Joiner,
            s if s & DETACHED != 0 => Finished::Detached,
            _ => Finished::Handle,
        }
    }

    /// Handle side, when it goes without a join: true if the coroutine had finished
    /// (its result is then visible, and nobody else will look at it); false if it will
    /// see the handle gone when it finishes (`Finished::Detached`). Called with no wait
    /// registered (never from `WAITING`).
    #[must_use]
    pub fn detach(&self) -> bool {
        // AcqRel: Acquire pairs with `finish`'s Release, so a finished result is
        // visible; Release orders nothing the coroutine reads, but costs nothing more
        // on this read-modify-write.
        self.state.fetch_or(DETACHED, Ordering::AcqRel) == DONE
    }

    /// Joiner side, after writing its unparker: returns true if it must park (the
    /// coroutine will unpark it), false if the result is already there.
    #[must_use]
    pub fn begin_wait(&self) -> bool {
        // Release on success publishes the unparker; Acquire on failure pairs with
        // `finish` so the result is visible.
        self.state
            .compare_exchange(RUNNING, WAITING, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Joiner side, after `begin_wait` returned true and its wait ended without the
    /// coroutine's wake-up (a deadline): takes the wait back. True if it was withdrawn
    /// (the coroutine is still running, has not read the unparker and never will, so
    /// the joiner owns it again); false if the coroutine finished first (the result is
    /// then visible).
    #[must_use]
    pub fn withdraw_wait(&self) -> bool {
        // Success is Relaxed: nothing is published (the joiner takes back a slot the
        // coroutine never read; a later `begin_wait` publishes a new one with its own
        // Release). Failure is Acquire: it read `finish`'s DONE, whose Release
        // published the result.
        self.state
            .compare_exchange(WAITING, RUNNING, Ordering::Relaxed, Ordering::Acquire)
            .is_ok()
    }

    /// Whether the coroutine has finished (Acquire: its result is then visible).
    pub fn is_done(&self) -> bool {
        self.state.load(Ordering::Acquire) == DONE
    }
}

/// What a coroutine and its join handle share (see "the join handshake").
pub(crate) struct Packet<T> {
    state: JoinState,
    result: UnsafeCell<Option<thread::Result<T>>>,
    joiner: UnsafeCell<Option<Unparker>>,
    /// The coroutine's id, stored by the spawner once it is known, while its handle
    /// still holds a reference (Relaxed: read only by `drop`, which the last reference
    /// runs after every other holder's drop has synchronised with it through the
    /// `Arc`'s count), for the report of a result that panics on drop.
    id: std::sync::atomic::AtomicU64,
}

impl<T> Drop for Packet<T> {
    /// A result nobody took (a detached coroutine's, or one whose handle was dropped
    /// unjoined) is dropped here; a value or panic payload whose `Drop` panics ends
    /// the program, as std's "thread result panicked on drop" does, with a message
    /// that names the coroutine (it could unwind nowhere: this often runs on an M's
    /// scheduler stack).
    fn drop(&mut self) {
        // A joined handle took the result: the common case, inline.
        if let Some(r) = self.result.get_mut().take() {
            drop_unclaimed(r, *self.id.get_mut());
        }
    }
}

/// Drops the result of coroutine `id` that no handle took (see `Packet`'s drop).
#[cold]
#[inline(never)]
fn drop_unclaimed<T>(r: thread::Result<T>, id: u64) {
    let panicked = r.is_err();
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(r))).is_err() {
        sched::fatal!(
            "coroutine {id}: its {} panicked on drop, with no JoinHandle to take it (std \
             aborts the same way: \"thread result panicked on drop\")",
            if panicked { "panic payload" } else { "result" }
        );
    }
}

// SAFETY: `result` is written by the coroutine before `finish` and read by the joiner
// only after it saw DONE; `joiner` is written by the joiner while the state is RUNNING
// (before `begin_wait`, or after a successful `withdraw_wait`) and read by the
// coroutine only after `finish` saw WAITING (the join handshake). T must be Send to
// cross from the coroutine to the joiner.
unsafe impl<T: Send> Sync for Packet<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Send for Packet<T> {}

impl<T> Packet<T> {
    pub(crate) fn new() -> Packet<T> {
        Packet {
            state: JoinState::new(),
            result: UnsafeCell::new(None),
            joiner: UnsafeCell::new(None),
            id: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Names the coroutine, for `drop`'s report (see the field).
    pub(crate) fn set_id(&self, id: u64) {
        // Relaxed: see the field.
        self.id.store(id, Ordering::Relaxed);
    }

    /// Coroutine side: publishes the result and wakes a parked joiner; a panic that
    /// no handle will take ends the program (see "a panic is never lost").
    pub(crate) fn complete(&self, r: thread::Result<T>) {
        let panicked = r.is_err();
        // SAFETY: only the coroutine writes `result`, and only here, before `finish`.
        unsafe { *self.result.get() = Some(r) };
        match self.state.finish() {
            Finished::Joiner => {
                // SAFETY: `finish` saw WAITING, so the joiner wrote its unparker before
                // its CAS and will not touch it again until it is woken (or its
                // withdrawal fails, which leaves the slot alone).
                if let Some(u) = unsafe { (*self.joiner.get()).take() } {
                    u.unpark();
                }
            }
            Finished::Detached if panicked => {
                sched::panics::unjoined_panic(sched::current_id(), "its JoinHandle was dropped")
            }
            Finished::Detached | Finished::Handle => {}
        }
    }
}

/// The joiner's side of a packet, shared by [`JoinHandle`] and
/// [`ScopedJoinHandle`](crate::ScopedJoinHandle). Its owner is the only joiner: the
/// methods that wait take `&self` but are called only from methods that consume or
/// exclusively own the handle.
pub(crate) struct JoinInner<T> {
    id: u64,
    name: Option<Arc<str>>,
    packet: Arc<Packet<T>>,
}

impl<T> JoinInner<T> {
    pub(crate) fn new(id: u64, name: Option<Arc<str>>, packet: Arc<Packet<T>>) -> Self {
        JoinInner { id, name, packet }
    }

    /// Waits for the coroutine to finish, until `deadline` if there is one: parks the
    /// calling coroutine, or blocks the calling thread. True once it has finished;
    /// false if the deadline came first (the wait is withdrawn: see the module doc).
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> bool {
        let packet = &*self.packet;
        if packet.state.is_done() {
            return true;
        }
        if deadline.is_some_and(|d| d <= Instant::now()) {
            return false;
        }
        let u = park::prepare();
        if u.coroutine_id() == Some(self.id) {
            // std's `join` of the current thread fails with EDEADLK; waiting would park
            // for ever. (The unparker names the caller: no second look-up.)
            self_join(self.id);
        }
        // SAFETY: the state is RUNNING (not DONE, and WAITING only between our own
        // begin_wait and its end), so the joiner (us) owns `joiner`.
        unsafe { *packet.joiner.get() = Some(u) };
        if !packet.state.begin_wait() {
            return true;
        }
        let by_deadline = match deadline {
            None => {
                park::park(WaitReason::Join);
                false
            }
            Some(d) => park::park_timeout(WaitReason::Join, d),
        };
        if !by_deadline {
            if !packet.state.is_done() {
                // Only this wait's unparker can wake it, and the coroutine uses it
                // only after setting DONE: the join handshake is broken.
                sched::fatal!("JoinHandle: woken before coroutine {} finished", self.id);
            }
            return true;
        }
        if packet.state.withdraw_wait() {
            // SAFETY: withdrawn: the coroutine never saw this wait, so the slot is
            // ours again; drop the stale unparker now rather than with the packet.
            unsafe { *packet.joiner.get() = None };
            return false;
        }
        // The coroutine finished as the deadline fired.
        true
    }

    /// The async form of `wait` (for [`JoinFuture`]): ready once the coroutine has
    /// finished; else registers the task's waker as the joiner (an unparker made by
    /// [`Unparker::from_waker`]: the join handshake is the same) and returns `Pending`.
    /// `registered` is the waker of the wait registered now, if any: polled again by
    /// the same task, nothing changes; by another, the wait is withdrawn and
    /// registered again with the new waker.
    pub(crate) fn poll_wait(
        &self,
        registered: &mut Option<Waker>,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        let packet = &*self.packet;
        if packet.state.is_done() {
            return Poll::Ready(());
        }
        if let Some(w) = registered.take() {
            if w.will_wake(cx.waker()) {
                *registered = Some(w);
                return Poll::Pending;
            }
            if !packet.state.withdraw_wait() {
                return Poll::Ready(()); // finished meanwhile
            }
        }
        let u = Unparker::from_waker(cx.waker().clone());
        // SAFETY: the state is RUNNING (not DONE; no wait of ours registered, or ours
        // just withdrawn), so the joiner (us) owns `joiner`.
        unsafe { *packet.joiner.get() = Some(u) };
        if !packet.state.begin_wait() {
            return Poll::Ready(());
        }
        *registered = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Calls off the async wait `registered` (a [`JoinFuture`] dropped before its
    /// coroutine finished), so the coroutine does not wake a task that left.
    pub(crate) fn cancel_wait(&self, registered: &mut Option<Waker>) {
        if registered.take().is_some() && self.packet.state.withdraw_wait() {
            // SAFETY: withdrawn: the coroutine never saw this wait, so the slot is
            // ours again.
            unsafe { *self.packet.joiner.get() = None };
        }
    }

    /// The handle goes without a join (see "a panic is never lost"): a panic the
    /// coroutine ended with, or will end with, ends the program.
    pub(crate) fn detach(&self) {
        if self.packet.state.detach() {
            // SAFETY: DONE, and the handle (us) was the only one to read the result.
            let panicked =
                unsafe { (*self.packet.result.get()).as_ref() }.is_some_and(|r| r.is_err());
            if panicked {
                sched::panics::unjoined_panic(
                    Some(self.id),
                    "its JoinHandle was dropped after it panicked, without a join",
                );
            }
        }
    }

    /// Takes the result, once `wait` returned true.
    pub(crate) fn take(self) -> thread::Result<T> {
        // SAFETY: the state is DONE (our caller waited for it), so the coroutine wrote
        // the result and will not touch it again; we are the only joiner and this
        // consumes us.
        match unsafe { (*self.packet.result.get()).take() } {
            Some(r) => r,
            None => sched::fatal!("JoinHandle: coroutine {} left no result", self.id),
        }
    }

    pub(crate) fn is_finished(&self) -> bool {
        self.packet.state.is_done()
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
}

/// Runs a coroutine's function, then drops its coroutine-local values (steps 1 and 2
/// of "how a coroutine ends"). A panic in a value's destructor becomes the coroutine's
/// result if the function itself returned (the value it returned is dropped). Must run
/// on the coroutine, as the body of its spawn.
pub(crate) fn run<F, T>(f: F) -> thread::Result<T>
where
    F: FnOnce() -> T,
{
    let r = catch_unwind(AssertUnwindSafe(f));
    match crate::local::drop_coroutine_locals() {
        Some(payload) if r.is_ok() => Err(payload),
        _ => r,
    }
}

/// Configures a coroutine before spawning it.
#[derive(Debug, Default)]
#[must_use = "a Builder does nothing until spawn is called"]
pub struct Builder {
    name: Option<String>,
    stack_size: Option<usize>,
    pinned: bool,
    spawned_at: Option<&'static Location<'static>>,
}

impl Builder {
    /// A builder with the default name (none) and stack size (`GORO_STACK_SIZE`).
    pub fn new() -> Builder {
        Builder::default()
    }

    /// Names the coroutine; the name appears in the stack overflow message and the
    /// coroutine dump, and [`JoinHandle::name`] and [`current_name`](crate::current_name)
    /// return it.
    ///
    /// A name with a NUL byte makes `spawn` return `InvalidInput` ("coroutine name may
    /// not contain interior null bytes"), where std's `Builder::spawn` panics with the
    /// same words for a thread: goro's builder reports every bad setting as a typed
    /// error, and `.unwrap()` turns it into std's panic.
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
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> io::Result<JoinHandle<T>>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let packet = Arc::new(Packet::new());
        let theirs = packet.clone();
        let (id, name) = self.spawn_main(move || theirs.complete(run(f)))?;
        packet.set_id(id);
        Ok(JoinHandle {
            inner: Some(JoinInner::new(id, name, packet)),
        })
    }

    /// Records `at` as the place the coroutine is spawned from, for a goro API that
    /// spawns on a user's behalf later than the user's call (a timer's firing, a
    /// context's `after_func`), so that the dump names the user's call. Without it,
    /// the place is the caller of `spawn` (through `#[track_caller]`).
    #[doc(hidden)]
    pub fn spawned_at(mut self, at: &'static Location<'static>) -> Builder {
        self.spawned_at = Some(at);
        self
    }

    /// Spawns a coroutine whose whole body is `main` (which calls [`run`] and hands
    /// the result on). Returns its id and name.
    #[track_caller]
    pub(crate) fn spawn_main(
        self,
        main: impl FnOnce() + Send + 'static,
    ) -> io::Result<(u64, Option<Arc<str>>)> {
        let spawned_at = match self.spawned_at {
            Some(at) => at,
            None => Location::caller(),
        };
        // A loop that spawns is a loop of goro calls: it yields when sysmon asks (as
        // Go's newproc, a function call, checks for preemption), rather than lose its
        // P to a retake and spawn without one.
        crate::preempt_point();
        if self.name.as_deref().is_some_and(|n| n.contains('\0')) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "coroutine name may not contain interior null bytes",
            ));
        }
        let name: Option<Arc<str>> = self.name.map(Arc::from);
        let id = sched::spawn_g(
            name.clone(),
            Some(spawned_at),
            self.stack_size,
            self.pinned,
            main,
        )?;
        Ok((id, name))
    }
}

/// Spawns a coroutine running `f` and returns its handle (the function form of `go!`).
///
/// # Panics
///
/// If no stack can be allocated; use [`Builder::spawn`] to get the error instead.
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new()
        .spawn(f)
        .unwrap_or_else(|e| panic!("failed to spawn coroutine: {e}"))
}

/// The panic of a coroutine that joins its own handle.
#[cold]
#[inline(never)]
fn self_join(id: u64) -> ! {
    panic!(
        "failed to join coroutine {id}: a coroutine cannot join itself, it would wait for \
         ever (std: Resource deadlock avoided)"
    )
}

/// An owned permission to join a coroutine: wait for it to end and take its result.
///
/// Dropping the handle detaches the coroutine, which keeps running. A panic in a
/// detached coroutine ends the program, as an unrecovered panic does in Go (see "a
/// panic is never lost" in the module doc): after the panic's report, a line says no
/// handle was left to take it, and the process exits with status 2. So does dropping
/// the handle of a coroutine that has panicked, without joining it. A held handle keeps
/// std's rule: `join` returns `Err` with the payload, and the program goes on.
/// `GORO_DETACHED_PANIC=ignore` (or `Config::detached_panic_exits(false)`) restores
/// std's rule for detached threads: the report is printed and the program goes on.
pub struct JoinHandle<T> {
    /// None once joined (or turned into a future).
    inner: Option<JoinInner<T>>,
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            inner.detach();
        }
    }
}

impl<T> JoinHandle<T> {
    /// Waits for the coroutine to end: parks the calling coroutine, or blocks the
    /// calling thread. Returns its result, or `Err` with the panic payload if it
    /// panicked.
    pub fn join(mut self) -> thread::Result<T> {
        let inner = self.take_inner();
        inner.wait(None);
        inner.take()
    }

    /// The handle's part, taken out (so that its drop does not detach it).
    fn take_inner(&mut self) -> JoinInner<T> {
        match self.inner.take() {
            Some(inner) => inner,
            None => unreachable!("a JoinHandle holds its JoinInner until consumed"),
        }
    }

    fn inner(&self) -> &JoinInner<T> {
        match &self.inner {
            Some(inner) => inner,
            None => unreachable!("a JoinHandle holds its JoinInner until consumed"),
        }
    }

    /// Waits like [`join`](JoinHandle::join), but for at most `timeout`. Returns
    /// `Ok(result)` if the coroutine ended in time, and `Err(self)`, the handle back,
    /// if it had not: the coroutine keeps running, and the handle can be joined (or
    /// waited on again) later. A timeout too long to represent as an `Instant` waits
    /// for ever.
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let h = goro::spawn(|| {
    ///     goro::time::sleep(Duration::from_millis(50));
    ///     7
    /// });
    /// let h = h.join_timeout(Duration::from_millis(1)).unwrap_err(); // not yet
    /// let r = h.join_timeout(Duration::from_secs(60)).unwrap();
    /// assert_eq!(r.unwrap(), 7);
    /// ```
    pub fn join_timeout(mut self, timeout: Duration) -> Result<thread::Result<T>, JoinHandle<T>> {
        let deadline = Instant::now().checked_add(timeout);
        if self.inner().wait(deadline) {
            Ok(self.take_inner().take())
        } else {
            Err(self)
        }
    }

    /// Whether the coroutine has ended (its result can be taken without waiting).
    pub fn is_finished(&self) -> bool {
        self.inner().is_finished()
    }

    /// The coroutine's id (what `current_id` returns inside it).
    pub fn id(&self) -> u64 {
        self.inner().id()
    }

    /// The coroutine's name, as given to [`Builder::name`] (None if it has none).
    ///
    /// ```
    /// let h = goro::Builder::new().name("parser").spawn(|| ()).unwrap();
    /// assert_eq!(h.name(), Some("parser"));
    /// assert_eq!(goro::spawn(|| ()).name(), None);
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.inner().name()
    }
}

/// Awaiting a handle waits for the coroutine without blocking the executor's thread:
/// `handle.await` gives what [`join`](JoinHandle::join) returns. Works on any executor
/// (tokio's, `futures`', [`block_on`](crate::block_on)): the coroutine's end wakes the
/// awaiting task through its waker.
///
/// ```
/// use std::time::Duration;
///
/// let h = goro::go!(|| {
///     goro::time::sleep(Duration::from_millis(5));
///     6 * 7
/// });
/// // From a plain thread here; a tokio task awaits it the same way.
/// assert_eq!(goro::block_on(async { h.await.unwrap() }), 42);
/// ```
impl<T> IntoFuture for JoinHandle<T> {
    type Output = thread::Result<T>;
    type IntoFuture = JoinFuture<T>;

    fn into_future(mut self) -> JoinFuture<T> {
        JoinFuture {
            inner: Some(self.take_inner()),
            registered: None,
        }
    }
}

/// The future of a [`JoinHandle`] being awaited (see its `IntoFuture`): ready with the
/// coroutine's result, `Err` with the panic payload if it panicked. Dropping it before
/// then detaches the coroutine, as dropping the handle does.
#[must_use = "futures do nothing unless polled"]
pub struct JoinFuture<T> {
    /// None once the result has been taken.
    inner: Option<JoinInner<T>>,
    /// The waker of the wait registered in the packet, if any.
    registered: Option<Waker>,
}

impl<T> Future for JoinFuture<T> {
    type Output = thread::Result<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<thread::Result<T>> {
        let this = &mut *self;
        let Some(inner) = &this.inner else {
            panic!("JoinFuture polled after it returned the coroutine's result");
        };
        if inner.poll_wait(&mut this.registered, cx).is_pending() {
            return Poll::Pending;
        }
        this.registered = None;
        match this.inner.take() {
            Some(inner) => Poll::Ready(inner.take()),
            None => unreachable!("checked above"),
        }
    }
}

impl<T> Drop for JoinFuture<T> {
    fn drop(&mut self) {
        if let Some(inner) = &self.inner {
            inner.cancel_wait(&mut self.registered);
            inner.detach();
        }
    }
}

impl<T> fmt::Debug for JoinFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("JoinFuture");
        if let Some(inner) = &self.inner {
            d.field("id", &inner.id())
                .field("finished", &inner.is_finished());
        }
        d.finish_non_exhaustive()
    }
}

impl<T> fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("finished", &self.is_finished())
            .finish()
    }
}

/// The stack of the coroutine `#[goro::main]` runs `main` on: the size of a Linux main
/// thread's usual stack (`ulimit -s`, 8 MiB), as virtual memory (only pages used cost).
const MAIN_STACK: usize = 8 << 20;

/// What `#[goro::main]` expands to: runs `body` as a coroutine named `"main"` and
/// returns its exit code (its result's [`Termination`](std::process::Termination)
/// report, made on the coroutine, so the result need not be `Send`); a panic in it is
/// resumed here, on the main thread, which then ends as a panicking `main` does.
#[doc(hidden)]
#[track_caller]
pub fn __main<R, F>(body: F) -> std::process::ExitCode
where
    R: std::process::Termination,
    F: FnOnce() -> R + Send + 'static,
{
    let h = Builder::new()
        .name("main")
        .stack_size(MAIN_STACK)
        .spawn(move || body().report())
        .unwrap_or_else(|e| panic!("#[goro::main]: cannot start the main coroutine: {e}"));
    match h.join() {
        Ok(code) => code,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
