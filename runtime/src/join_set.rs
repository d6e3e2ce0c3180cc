//! [`JoinSet`]: a set of coroutines whose results are taken in the order they finish.
//!
//! Each coroutine of a set ends by pushing its id and result on the set's completion
//! queue (step 3 of "how a coroutine ends", `spawn.rs`), and wakes the set's waiter if
//! one is parked. The queue and the waiter live under one short lock
//! (`SetShared::state`, rank `JoinSet`): a leaf, under which nothing parks, runs user
//! code or takes another lock. The waiter publishes its unparker under the lock before
//! it parks, and the coroutine takes it under the lock and unparks it after releasing
//! it, so the park/ready handshake rules out a lost wake-up with no protocol of its
//! own. Results nobody will take (the set was dropped or detached) are dropped outside
//! the lock, by whoever finds them: their destructors are user code.

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::mem;
use std::sync::Arc;
use std::thread;

use crate::lockrank::{Mutex, Rank};
use crate::park::{self, Unparker, WaitReason};
use crate::sched;
use crate::spawn::{run, Builder};

struct SetState<T> {
    /// Finished coroutines' ids and results, in the order they finished.
    done: VecDeque<(u64, thread::Result<T>)>,
    /// The set's owner, parked in `join_next` until `done` is not empty.
    waiter: Option<Unparker>,
    /// The set was dropped or detached: results are dropped as they come.
    detached: bool,
}

struct SetShared<T> {
    state: Mutex<SetState<T>>,
}

impl<T> SetShared<T> {
    fn new() -> Arc<SetShared<T>> {
        Arc::new(SetShared {
            state: Mutex::new(
                Rank::JoinSet,
                SetState {
                    done: VecDeque::new(),
                    waiter: None,
                    detached: false,
                },
            ),
        })
    }

    /// Coroutine side: a coroutine of the set has finished.
    fn finished(&self, id: u64, r: thread::Result<T>) {
        let (unwanted, waiter) = {
            let mut s = self.state.lock();
            if s.detached {
                (Some(r), None)
            } else {
                s.done.push_back((id, r));
                (None, s.waiter.take())
            }
        };
        if let Some(u) = waiter {
            u.unpark();
        }
        drop(unwanted);
    }

    /// Owner side: nobody will take results from here on.
    fn detach(&self) {
        let unwanted = {
            let mut s = self.state.lock();
            s.detached = true;
            s.waiter = None;
            mem::take(&mut s.done)
        };
        drop(unwanted);
    }
}

/// A set of coroutines, joined in the order they finish (tokio's `JoinSet`, for
/// coroutines).
///
/// [`spawn`](JoinSet::spawn) adds a coroutine; [`join_next`](JoinSet::join_next)
/// waits for the next one to finish (parks the calling coroutine, or blocks the calling
/// thread) and returns its result, or `Err` with its panic payload, or None once every
/// coroutine of the set has been joined.
///
/// There is no cancellation in goro, so a set cannot abort its coroutines: dropping the
/// set, or [`detach_all`](JoinSet::detach_all), detaches them. They run on to their
/// end, and their results are dropped as they finish (on the coroutine that
/// finishes), like a dropped [`JoinHandle`](crate::JoinHandle)'s.
///
/// ```
/// use std::time::Duration;
///
/// let mut set = goro::JoinSet::new();
/// for ms in [60u64, 0, 30] {
///     set.spawn(move || {
///         goro::time::sleep(Duration::from_millis(ms));
///         ms
///     });
/// }
/// assert_eq!(set.len(), 3);
/// let mut order = Vec::new();
/// while let Some(r) = set.join_next() {
///     order.push(r.unwrap());
/// }
/// assert_eq!(order, [0, 30, 60]); // as they finished
/// assert!(set.is_empty());
/// ```
pub struct JoinSet<T> {
    shared: Arc<SetShared<T>>,
    /// Coroutines spawned into `shared` whose results have not been taken.
    len: usize,
}

impl<T> JoinSet<T> {
    /// An empty set.
    pub fn new() -> JoinSet<T> {
        JoinSet {
            shared: SetShared::new(),
            len: 0,
        }
    }

    /// The coroutines in the set: spawned and not yet returned by `join_next`,
    /// finished or not.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the set has no coroutines.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Waits for the next coroutine of the set to finish and returns its result, or
    /// `Err` with its panic payload; None if the set is empty.
    pub fn join_next(&mut self) -> Option<thread::Result<T>> {
        self.join_next_with_id().map(|(_, r)| r)
    }

    /// Like [`join_next`](JoinSet::join_next), with the finished coroutine's id (the
    /// one `spawn` returned).
    pub fn join_next_with_id(&mut self) -> Option<(u64, thread::Result<T>)> {
        if self.len == 0 {
            return None;
        }
        loop {
            {
                let mut s = self.shared.state.lock();
                if let Some(done) = s.done.pop_front() {
                    self.len -= 1;
                    return Some(done);
                }
                // Published under the lock the finishing coroutine takes (see the
                // module doc).
                s.waiter = Some(park::prepare());
            }
            park::park(WaitReason::Join);
        }
    }

    /// The result of a coroutine of the set that has finished, without waiting; None
    /// if none has (or the set is empty).
    pub fn try_join_next(&mut self) -> Option<thread::Result<T>> {
        let done = self.shared.state.lock().done.pop_front()?;
        self.len -= 1;
        Some(done.1)
    }

    /// Detaches every coroutine of the set, leaving it empty (and ready for new
    /// spawns): they run on, and their results are dropped as they finish. Results
    /// already waiting are dropped now.
    pub fn detach_all(&mut self) {
        let old = mem::replace(&mut self.shared, SetShared::new());
        self.len = 0;
        old.detach();
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawns a coroutine running `f` into the set and returns its id.
    ///
    /// # Panics
    ///
    /// If no stack can be allocated; use [`spawn_with`](JoinSet::spawn_with) to get the
    /// error instead.
    #[track_caller]
    pub fn spawn<F>(&mut self, f: F) -> u64
    where
        F: FnOnce() -> T + Send + 'static,
    {
        self.spawn_with(Builder::new(), f)
            .unwrap_or_else(|e| panic!("failed to spawn coroutine: {e}"))
    }

    /// Spawns a coroutine configured by `builder` (its name, stack size, pinning) into
    /// the set and returns its id. Fails as [`Builder::spawn`] does, without running
    /// anything.
    #[track_caller]
    pub fn spawn_with<F>(&mut self, builder: Builder, f: F) -> io::Result<u64>
    where
        F: FnOnce() -> T + Send + 'static,
    {
        let shared = self.shared.clone();
        let (id, _) = builder.spawn_main(move || {
            let r = run(f);
            let id = sched::current_id().unwrap_or(0);
            shared.finished(id, r);
        })?;
        self.len += 1;
        Ok(id)
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

impl<T> Drop for JoinSet<T> {
    fn drop(&mut self) {
        self.shared.detach();
    }
}

impl<T> fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len).finish()
    }
}
