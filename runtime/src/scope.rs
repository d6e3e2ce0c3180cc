//! Scoped coroutines: [`scope`], [`Scope`], [`ScopedJoinHandle`] (`std::thread::scope`
//! for coroutines).
//!
//! # Why borrowing is sound
//!
//! A scoped coroutine's function may borrow from the caller, because [`scope`] neither
//! returns nor unwinds until every coroutine spawned in it has *ended*: its function
//! has returned or unwound, its coroutine-locals are dropped, its result is in its
//! packet, and its reference to the packet is gone (which drops the result, if the
//! handle was dropped unjoined) — the last things it does that can touch borrowed data.
//!
//! The scope counts its running coroutines (`ScopeState::running`). The count goes up
//! before a coroutine is spawned and down as the coroutine's own last step, not when a
//! handle is dropped, so a handle that is leaked (`mem::forget`) can make the scope
//! neither return early nor wait for ever. The count, the panics nobody joined and the
//! scope's waiter live under one short lock (`ScopeData::state`, rank `Scope`): a leaf,
//! under which nothing parks, runs user code or takes another lock; the wake-up goes
//! through the park/ready handshake once the lock is released, so no lost wake-up
//! needs a protocol of its own.

use std::fmt;
use std::io;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::thread;

use crate::lockrank::{Mutex, Rank};
use crate::park::{self, Unparker, WaitReason};
use crate::spawn::{run, Builder, JoinInner, Packet};

/// What a scope's coroutines count down (see the module doc).
struct ScopeState {
    /// Coroutines spawned in the scope that have not ended.
    running: usize,
    /// Coroutines that panicked and whose result no `join` took (yet).
    unjoined_panics: usize,
    /// The scope's caller, parked until `running` is 0.
    waiter: Option<Unparker>,
}

struct ScopeData {
    state: Mutex<ScopeState>,
}

impl ScopeData {
    /// A scoped coroutine has ended: counts it down, waking the scope at zero.
    fn coroutine_ended(&self) {
        let waiter = {
            let mut s = self.state.lock();
            s.running -= 1;
            if s.running == 0 {
                s.waiter.take()
            } else {
                None
            }
        };
        if let Some(u) = waiter {
            u.unpark();
        }
    }

    /// Parks (or blocks) until every coroutine of the scope has ended.
    fn wait_all(&self) {
        loop {
            {
                let mut s = self.state.lock();
                if s.running == 0 {
                    return;
                }
                // Published under the lock that `coroutine_ended` takes: the last
                // coroutine to end finds it (an unpark before the park below makes
                // the park return at once).
                s.waiter = Some(park::prepare());
            }
            park::park(WaitReason::Join);
        }
    }
}

/// A scope to spawn coroutines in, given by [`scope`]. See there.
pub struct Scope<'scope, 'env: 'scope> {
    data: Arc<ScopeData>,
    /// Invariance over 'scope, so that a scope cannot be shortened to outlive its
    /// handles (std's `Scope` does the same).
    scope: PhantomData<&'scope mut &'scope ()>,
    env: PhantomData<&'env mut &'env ()>,
}

/// Creates a scope for spawning coroutines that may borrow from the caller, as
/// `std::thread::scope` does for threads.
///
/// `f` gets the [`Scope`]; every coroutine spawned with [`Scope::spawn`] (or
/// [`Builder::spawn_scoped`]) has ended before `scope` returns, whether it was joined
/// or not, and also when `f` panics. Waiting parks the calling coroutine, or blocks the
/// calling thread.
///
/// # Panics
///
/// If `f` panicked, that panic is resumed once every coroutine has ended. Otherwise, if
/// a coroutine of the scope panicked and nobody took its result with
/// [`ScopedJoinHandle::join`], `scope` panics with std's message, "a scoped thread
/// panicked" (kept as std has it, for code that ports from threads).
///
/// ```
/// let mut v = vec![1, 2, 3, 4];
/// let total = 10;
/// goro::scope(|s| {
///     let (left, right) = v.split_at_mut(2);
///     s.spawn(|| left.iter_mut().for_each(|x| *x += total));
///     let h = s.spawn(|| right.iter().sum::<i32>());
///     assert_eq!(h.join().unwrap(), 7);
/// });
/// assert_eq!(v, [11, 12, 3, 4]);
/// ```
#[track_caller]
pub fn scope<'env, F, T>(f: F) -> T
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> T,
{
    let scope = Scope {
        data: Arc::new(ScopeData {
            state: Mutex::new(
                Rank::Scope,
                ScopeState {
                    running: 0,
                    unjoined_panics: 0,
                    waiter: None,
                },
            ),
        }),
        scope: PhantomData,
        env: PhantomData,
    };
    let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    scope.data.wait_all();
    let unjoined_panics = scope.data.state.lock().unjoined_panics;
    match r {
        Err(payload) => resume_unwind(payload),
        Ok(_) if unjoined_panics > 0 => panic!("a scoped thread panicked"),
        Ok(v) => v,
    }
}

impl<'scope, 'env> Scope<'scope, 'env> {
    /// Spawns a coroutine in the scope. Unlike [`spawn`](crate::spawn), `f` may borrow
    /// anything that outlives the scope: the scope waits for the coroutine.
    ///
    /// # Panics
    ///
    /// If no stack can be allocated; use [`Builder::spawn_scoped`] to get the error
    /// instead.
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        Builder::new()
            .spawn_scoped(self, f)
            .unwrap_or_else(|e| panic!("failed to spawn coroutine: {e}"))
    }
}

impl fmt::Debug for Scope<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.data.state.lock();
        f.debug_struct("Scope")
            .field("running", &s.running)
            .field("unjoined_panics", &s.unjoined_panics)
            .finish()
    }
}

impl Builder {
    /// Spawns a coroutine in `scope` with this configuration (see [`Scope::spawn`]).
    /// Fails as [`Builder::spawn`] does, without running anything.
    ///
    /// ```
    /// let data = [1, 2, 3];
    /// goro::scope(|s| {
    ///     let h = goro::Builder::new()
    ///         .name("summer")
    ///         .spawn_scoped(s, || data.iter().sum::<i32>())
    ///         .unwrap();
    ///     assert_eq!(h.name(), Some("summer"));
    ///     assert_eq!(h.join().unwrap(), 6);
    /// });
    /// ```
    #[track_caller]
    pub fn spawn_scoped<'scope, 'env, F, T>(
        self,
        scope: &'scope Scope<'scope, 'env>,
        f: F,
    ) -> io::Result<ScopedJoinHandle<'scope, T>>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        // Counted before it exists, so the scope cannot finish waiting while it runs.
        scope.data.state.lock().running += 1;
        let packet = Arc::new(Packet::new());
        let theirs = packet.clone();
        let data = scope.data.clone();
        let main = move || {
            let r = run(f);
            if r.is_err() {
                data.state.lock().unjoined_panics += 1;
            }
            theirs.complete(r);
            // Drops the result if the handle is gone: still inside the scope. (A
            // result whose drop panics is a fatal error there, naming the coroutine.)
            drop(theirs);
            // The last touch of anything borrowed is behind us (the module doc).
            data.coroutine_ended();
        };
        let main: Box<dyn FnOnce() + Send + 'scope> = Box::new(main);
        // SAFETY: only the lifetime changes (same type, same layout). `main` may
        // borrow for 'scope, and `scope` does not return or unwind before `main` has
        // called `coroutine_ended`, after dropping everything it owned of lifetime
        // 'scope (`f` is consumed by `run`, the packet reference dropped above); what
        // it touches after that is its `Arc<ScopeData>`, which is 'static. If the
        // spawn fails, `main` is dropped before `spawn_main` returns, within 'scope.
        let main: Box<dyn FnOnce() + Send + 'static> = unsafe { std::mem::transmute(main) };
        match self.spawn_main(main) {
            Ok((id, name)) => Ok(ScopedJoinHandle {
                inner: {
                    packet.set_id(id);
                    JoinInner::new(id, name, packet)
                },
                data: &scope.data,
            }),
            Err(e) => {
                scope.data.coroutine_ended();
                Err(e)
            }
        }
    }
}

/// An owned permission to join a scoped coroutine. Dropping it (or leaking it) does
/// not detach the coroutine from its scope: the scope waits for it anyway.
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinInner<T>,
    data: &'scope ScopeData,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Waits for the coroutine to end (parks the calling coroutine, or blocks the
    /// calling thread) and returns its result, or `Err` with its panic payload. A
    /// panic taken here no longer makes [`scope`] panic.
    pub fn join(self) -> thread::Result<T> {
        self.inner.wait(None);
        let r = self.inner.take();
        if r.is_err() {
            self.data.state.lock().unjoined_panics -= 1;
        }
        r
    }

    /// Whether the coroutine has ended (its result can be taken without waiting).
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }

    /// The coroutine's id (what `current_id` returns inside it).
    pub fn id(&self) -> u64 {
        self.inner.id()
    }

    /// The coroutine's name, as given to [`Builder::name`] (None if it has none).
    pub fn name(&self) -> Option<&str> {
        self.inner.name()
    }
}

impl<T> fmt::Debug for ScopedJoinHandle<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScopedJoinHandle")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("finished", &self.is_finished())
            .finish()
    }
}
