//! [`Semaphore`]: a counting semaphore on the sema table, and its RAII
//! [`SemaphorePermit`].
//!
//! # Multi-permit acquires: the gate
//!
//! A single permit is taken in one step, so single-permit acquirers can never hold
//! part of what they need. A request for `n` permits that are not all free at once
//! has to collect them, and two collectors that each hold part of what they need can
//! deadlock (4 permits, two callers wanting 3, each holding 2). So collectors take
//! turns: a request that cannot take its `n` permits in one CAS first waits for the
//! *gate* (a second sema count of 1, FIFO), then collects its permits as they come,
//! queueing for each one in the semaphore's own FIFO queue beside the single-permit
//! acquirers, and passes the gate on when it has all `n`. At most one caller ever
//! holds part of a request, so partial holdings cannot wait on each other.
//!
//! Fairness: a big request does not hold back later small ones. It collects one permit
//! per turn in the semaphore's FIFO queue, as a single-permit waiter would, and queues
//! again at the tail for the next, so a small request that arrived after it gets a
//! permit between two of its turns. It is served (every release moves it up the queue,
//! as it does everyone), but slowly when the queue is long, and the permits it has
//! collected are out of use until it has all `n`. A request that finds all its permits
//! free takes them at once without the gate, even while another collects; like
//! `acquire`'s fast path, that can overtake queued waiters. golang.org/x/sync's and
//! tokio's semaphores are strictly FIFO by weight instead: a big request at the head of
//! the queue stops every later one until it is served. Both take a lock on every
//! release to weigh the head of the queue; goro's release takes none when nobody
//! waits (the sema table's fast path).

use std::fmt;
use std::mem;
use std::sync::Arc;
use std::time::{Duration, Instant};

use goro_runtime::park::WaitReason;

use crate::loom::{AtomicU32, Ordering};
use crate::sema;

/// A counting semaphore: `acquire` takes a permit, waiting (parking a coroutine,
/// blocking a thread) until one is available; `release` gives permits back.
///
/// ```
/// use std::sync::Arc;
/// use goro::sync::Semaphore;
///
/// let slots = Arc::new(Semaphore::new(2));
/// let workers: Vec<_> = (0..8)
///     .map(|i| {
///         let slots = slots.clone();
///         goro::spawn(move || {
///             let _permit = slots.acquire_permit(); // at most two at a time
///             i * 2
///         })
///     })
///     .collect();
/// let sum: i32 = workers.into_iter().map(|h| h.join().unwrap()).sum();
/// assert_eq!(sum, 56);
/// assert_eq!(slots.available_permits(), 2);
/// ```
pub struct Semaphore {
    /// The sema count: taken by the acquires (the sema table's Acquire CASes), given
    /// back by `release` (its SeqCst CAS); read as a snapshot by `available_permits`.
    permits: AtomicU32,
    /// The multi-permit collectors' gate (see "the gate"): a sema count of 1 when no
    /// collector is in, taken and given back only by `acquire_many`.
    gate: AtomicU32,
}

/// Converts a permit count argument, or panics naming the method and the limit.
fn permit_count(method: &str, n: usize) -> u32 {
    u32::try_from(n).unwrap_or_else(|_| {
        panic!(
            "Semaphore::{method}: {n} permits is more than the {} a semaphore can count",
            u32::MAX
        )
    })
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    ///
    /// # Panics
    ///
    /// If `permits` does not fit in 32 bits.
    pub fn new(permits: usize) -> Semaphore {
        Semaphore {
            permits: AtomicU32::new(permit_count("new", permits)),
            gate: AtomicU32::new(1),
        }
    }

    /// Takes a permit, waiting until one is available. Waiters are served FIFO.
    pub fn acquire(&self) {
        goro_runtime::preempt_point();
        sema::acquire(&self.permits, false, WaitReason::Sema);
    }

    /// Takes `n` permits, waiting until it has them all. `acquire_many(0)` returns at
    /// once; `acquire_many(1)` is `acquire`.
    ///
    /// Permits that are not all free at once are collected one at a time, by one
    /// caller at a time, so that concurrent `acquire_many` callers cannot deadlock by
    /// each holding part of what they need; a big request does not hold back later
    /// small ones, which go on being served in between (see the module doc for the
    /// fairness). It waits forever if `n` permits never become free together.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Arc::new(Semaphore::new(1));
    /// let sem2 = sem.clone();
    /// let h = goro::spawn(move || {
    ///     sem2.acquire_many(3);
    ///     "got 3"
    /// });
    /// sem.release(2);
    /// assert_eq!(h.join().unwrap(), "got 3");
    /// assert_eq!(sem.available_permits(), 0);
    /// ```
    ///
    /// # Panics
    ///
    /// If `n` does not fit in 32 bits (no semaphore can ever have that many).
    pub fn acquire_many(&self, n: usize) {
        let n = permit_count("acquire_many", n);
        goro_runtime::preempt_point();
        if n == 1 {
            sema::acquire(&self.permits, false, WaitReason::Sema);
            return;
        }
        if sema::can_acquire_many(&self.permits, n) {
            return;
        }
        sema::acquire(&self.gate, false, WaitReason::Sema);
        let mut got = sema::acquire_up_to(&self.permits, n);
        while got < n {
            sema::acquire(&self.permits, false, WaitReason::Sema);
            got += 1;
            got += sema::acquire_up_to(&self.permits, n - got);
        }
        sema::release(&self.gate, false);
    }

    /// Takes a permit if one is available now.
    pub fn try_acquire(&self) -> bool {
        sema::can_acquire(&self.permits)
    }

    /// Takes `n` permits if `n` are available now, or none: never waits, never holds
    /// part of them. `try_acquire_many(0)` is true. A request for more permits than
    /// fit in 32 bits is false (no semaphore can have that many).
    ///
    /// ```
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Semaphore::new(3);
    /// assert!(!sem.try_acquire_many(4));
    /// assert_eq!(sem.available_permits(), 3); // all or nothing
    /// assert!(sem.try_acquire_many(3));
    /// assert_eq!(sem.available_permits(), 0);
    /// ```
    pub fn try_acquire_many(&self, n: usize) -> bool {
        match u32::try_from(n) {
            Ok(n) => sema::can_acquire_many(&self.permits, n),
            Err(_) => false,
        }
    }

    /// Takes a permit, waiting at most `timeout`. Returns whether it took one.
    ///
    /// Waiting, it is served FIFO with the `acquire` callers. If a release chooses it
    /// just as its time runs out, it takes that permit and returns true, so no permit
    /// is lost to a waiter that left. A timeout too large to add to the current time
    /// waits without a deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Semaphore::new(0);
    /// assert!(!sem.acquire_timeout(Duration::from_millis(10)));
    /// sem.release(1);
    /// assert!(sem.acquire_timeout(Duration::from_millis(10)));
    /// ```
    pub fn acquire_timeout(&self, timeout: Duration) -> bool {
        goro_runtime::preempt_point();
        if sema::can_acquire(&self.permits) {
            return true;
        }
        match Instant::now().checked_add(timeout) {
            Some(deadline) => {
                sema::acquire_timeout(&self.permits, false, WaitReason::Sema, deadline)
            }
            None => {
                sema::acquire(&self.permits, false, WaitReason::Sema);
                true
            }
        }
    }

    /// Takes a permit like [`acquire`](Self::acquire), and returns it as a guard that
    /// releases it when dropped.
    ///
    /// ```
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Semaphore::new(1);
    /// {
    ///     let _permit = sem.acquire_permit();
    ///     assert_eq!(sem.available_permits(), 0);
    /// }
    /// assert_eq!(sem.available_permits(), 1); // released on drop
    /// sem.acquire_permit().forget();
    /// assert_eq!(sem.available_permits(), 0); // kept taken
    /// ```
    pub fn acquire_permit(&self) -> SemaphorePermit<'_> {
        self.acquire();
        SemaphorePermit {
            sem: self,
            permits: 1,
        }
    }

    /// Takes a permit like [`acquire`](Self::acquire), as a guard that owns a handle to
    /// the semaphore: `Send + 'static`, so it can move into a coroutine (or a struct)
    /// that outlives the caller, and releases the permit when dropped (tokio's
    /// `acquire_owned`).
    ///
    /// ```
    /// use goro::sync::Semaphore;
    /// use std::sync::Arc;
    ///
    /// let slots = Arc::new(Semaphore::new(2));
    /// let mut workers = Vec::new();
    /// for i in 0..6 {
    ///     let permit = slots.clone().acquire_owned(); // waits while two are out
    ///     workers.push(goro::go!(move || {
    ///         let _permit = permit; // released when this coroutine ends
    ///         i * i
    ///     }));
    /// }
    /// let sum: i32 = workers.into_iter().map(|w| w.join().unwrap()).sum();
    /// assert_eq!(sum, 55);
    /// assert_eq!(slots.available_permits(), 2);
    /// ```
    pub fn acquire_owned(self: Arc<Self>) -> OwnedSemaphorePermit {
        self.acquire();
        OwnedSemaphorePermit::new(self)
    }

    /// Takes a permit if one is available now, as an [`OwnedSemaphorePermit`]; `None`
    /// (and the handle dropped) if none is.
    ///
    /// ```
    /// use goro::sync::Semaphore;
    /// use std::sync::Arc;
    ///
    /// let sem = Arc::new(Semaphore::new(1));
    /// let permit = sem.clone().try_acquire_owned().expect("one is free");
    /// assert!(sem.clone().try_acquire_owned().is_none());
    /// drop(permit);
    /// assert!(sem.try_acquire_owned().is_some());
    /// ```
    pub fn try_acquire_owned(self: Arc<Self>) -> Option<OwnedSemaphorePermit> {
        if self.try_acquire() {
            Some(OwnedSemaphorePermit::new(self))
        } else {
            None
        }
    }

    /// Gives back `n` permits, waking up to `n` waiters.
    ///
    /// ```should_panic
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Semaphore::new(1);
    /// sem.release(u32::MAX as usize); // panics: the count would overflow
    /// ```
    ///
    /// # Panics
    ///
    /// If the count would overflow 32 bits (more permits released than can be
    /// counted). The check and the update are one atomic step, so concurrent releases
    /// cannot overflow it together; a release that panics changes nothing.
    pub fn release(&self, n: usize) {
        let now = match u32::try_from(n) {
            Ok(k) => match sema::release_many(&self.permits, k) {
                Ok(()) => return,
                Err(now) => now,
            },
            // Relaxed: the number for the message only.
            Err(_) => self.permits.load(Ordering::Relaxed),
        };
        panic!(
            "Semaphore::release: {n} more permits would overflow the count \
             ({now} available, at most {} can be counted)",
            u32::MAX
        );
    }

    /// Permits available now.
    pub fn available_permits(&self) -> usize {
        // Relaxed: a snapshot that publishes and takes nothing.
        self.permits.load(Ordering::Relaxed) as usize
    }
}

impl fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Semaphore")
            .field("available", &self.available_permits())
            .finish()
    }
}

/// A permit taken by [`Semaphore::acquire_permit`]: released when dropped, unless
/// [`forget`](Self::forget) keeps it taken.
#[must_use = "a permit is released as soon as it is dropped"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
    permits: u32,
}

impl SemaphorePermit<'_> {
    /// Keeps the permit taken: it is not released, now or later (give it back with
    /// [`Semaphore::release`]).
    ///
    /// ```
    /// use goro::sync::Semaphore;
    ///
    /// let sem = Semaphore::new(2);
    /// sem.acquire_permit().forget();
    /// assert_eq!(sem.available_permits(), 1);
    /// sem.release(1);
    /// assert_eq!(sem.available_permits(), 2);
    /// ```
    pub fn forget(self) {
        mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release(self.permits as usize);
    }
}

impl fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SemaphorePermit")
            .field("permits", &self.permits)
            .finish()
    }
}

/// A permit taken by [`Semaphore::acquire_owned`] or
/// [`try_acquire_owned`](Semaphore::try_acquire_owned): it holds an `Arc` of its
/// semaphore, so it is `Send + 'static`, and releases the permit when dropped unless
/// [`forget`](Self::forget) keeps it taken.
#[must_use = "a permit is released as soon as it is dropped"]
pub struct OwnedSemaphorePermit {
    sem: Arc<Semaphore>,
    /// False once [`forget`](Self::forget) kept the permit taken.
    release: bool,
}

impl OwnedSemaphorePermit {
    fn new(sem: Arc<Semaphore>) -> OwnedSemaphorePermit {
        OwnedSemaphorePermit { sem, release: true }
    }

    /// The semaphore the permit belongs to.
    pub fn semaphore(&self) -> &Arc<Semaphore> {
        &self.sem
    }

    /// Keeps the permit taken: it is not released, now or later (give it back with
    /// [`Semaphore::release`]). The handle to the semaphore is dropped.
    ///
    /// ```
    /// use goro::sync::Semaphore;
    /// use std::sync::Arc;
    ///
    /// let sem = Arc::new(Semaphore::new(1));
    /// sem.clone().acquire_owned().forget();
    /// assert_eq!(sem.available_permits(), 0);
    /// ```
    pub fn forget(mut self) {
        self.release = false;
    }
}

impl Drop for OwnedSemaphorePermit {
    fn drop(&mut self) {
        if self.release {
            self.sem.release(1);
        }
    }
}

impl fmt::Debug for OwnedSemaphorePermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedSemaphorePermit")
            .field("semaphore", &self.sem)
            .finish()
    }
}
