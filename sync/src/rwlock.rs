//! [`RwLock`]: Go's `sync.RWMutex`, writer-preferring: once a writer waits, new readers
//! wait behind it, so a stream of readers cannot starve writers.
//!
//! `reader_count` counts readers; a writer subtracts [`MAX_READERS`] from it, which
//! both announces the pending writer (new readers see a negative count and sleep on
//! `reader_sem`) and lets it learn how many readers are still inside; it waits on
//! `writer_sem` until the last of those (`reader_wait`) leaves. Writers exclude each
//! other with a goro mutex.

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::ptr::NonNull;
use std::sync::atomic::AtomicI32;

use goro_runtime::park::WaitReason;

use crate::loom::{AtomicU32, Ordering};
use crate::mutex::RawMutex;
use crate::sema;

/// The most readers an `RwLock` can hold at once (Go: rwmutexMaxReaders).
pub const MAX_READERS: i32 = 1 << 30;

/// A reader-writer lock for coroutines and threads (see the module doc).
pub struct RwLock<T: ?Sized> {
    raw: RawRwLock,
    data: UnsafeCell<T>,
}

/// The lock without its value: what a read guard holds, so that the guard is covariant
/// in `T` (std's is) instead of invariant through `UnsafeCell<T>`.
struct RawRwLock {
    w: RawMutex,
    /// The sema the pending writer sleeps on; released by the last reader out.
    writer_sem: AtomicU32,
    /// The sema readers behind a writer sleep on; released by `write_unlock`.
    reader_sem: AtomicU32,
    /// Readers inside or waiting, minus MAX_READERS while a writer is pending. Changed
    /// (RMWs only) by readers coming and going and by the writer; read by both.
    reader_count: AtomicI32,
    /// Readers the pending writer still waits for: added to by the writer, counted
    /// down by the readers it waits for (RMWs only).
    reader_wait: AtomicI32,
}

// SAFETY: as std's RwLock: readers share &T (T: Sync), a writer has &mut T (T: Send).
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}
// As std's RwLock, whatever T. goro's lock is not poisoned by a panic (Go's rule): a
// value a panicking writer left half-updated is what the next holder sees, as with
// `AssertUnwindSafe` around std's `into_inner` of a poisoned lock.
impl<T: ?Sized> UnwindSafe for RwLock<T> {}
impl<T: ?Sized> RefUnwindSafe for RwLock<T> {}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            raw: RawRwLock {
                w: RawMutex::new(),
                writer_sem: AtomicU32::new(0),
                reader_sem: AtomicU32::new(0),
                reader_count: AtomicI32::new(0),
                reader_wait: AtomicI32::new(0),
            },
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock and returns its value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl RawRwLock {
    fn read(&self) {
        goro_runtime::preempt_point();
        // Acquire: pairs with the writer's Release in write_unlock.
        if self.reader_count.fetch_add(1, Ordering::Acquire) + 1 < 0 {
            // A writer is pending: wait for it.
            sema::acquire(&self.reader_sem, false, WaitReason::RwLock);
        }
    }

    fn try_read(&self) -> bool {
        // Relaxed: only the CAS's expected value; the successful CAS is the Acquire
        // that pairs with the writer unlock's Release.
        let mut c = self.reader_count.load(Ordering::Relaxed);
        loop {
            if c < 0 {
                return false;
            }
            // Acquire on success, as above.
            match self.reader_count.compare_exchange_weak(
                c,
                c + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => c = now,
            }
        }
    }

    fn read_unlock(&self) {
        // Release: publishes the reader's reads-before to the writer.
        let r = self.reader_count.fetch_sub(1, Ordering::Release) - 1;
        if r < 0 {
            if r + 1 == 0 || r + 1 == -MAX_READERS {
                panic!("goro RwLock: read unlock of an unlocked lock");
            }
            // A writer is pending: the last reader out wakes it. AcqRel: Release hands
            // our reads to the writer; Acquire gathers the earlier leavers' Releases,
            // which the last one passes on to the writer through the sema.
            if self.reader_wait.fetch_sub(1, Ordering::AcqRel) - 1 == 0 {
                sema::release(&self.writer_sem, false);
            }
        }
    }

    fn write(&self) {
        self.w.lock();
        // Announce the writer; learn how many readers are inside. AcqRel: Acquire pairs
        // with the read_unlock Release of readers already gone (Release is more than
        // needed: readers that come later are let in through `write_unlock`).
        let r = self.reader_count.fetch_sub(MAX_READERS, Ordering::AcqRel);
        // AcqRel: Acquire pairs with the readers' fetch_sub when they all left before
        // this add (then we do not sleep); Release is more than needed. Free on x86.
        if r != 0 && self.reader_wait.fetch_add(r, Ordering::AcqRel) + r != 0 {
            sema::acquire(&self.writer_sem, false, WaitReason::RwLock);
        }
    }

    fn try_write(&self) -> bool {
        if !self.w.try_lock() {
            return false;
        }
        // AcqRel on success: Acquire pairs with the read_unlock Release of the readers
        // that were here (Release is more than needed, as in `write`); a failure only
        // gives up.
        if self
            .reader_count
            .compare_exchange(0, -MAX_READERS, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            self.w.unlock();
            return false;
        }
        true
    }

    fn write_unlock(&self) {
        // Let readers in again; wake the ones that queued behind us. Release: publishes
        // our writes to readers whose Acquire fetch_add comes after it (those that
        // queued are ordered through the sema).
        let r = self.reader_count.fetch_add(MAX_READERS, Ordering::Release) + MAX_READERS;
        if r >= MAX_READERS {
            panic!("goro RwLock: write unlock of an unlocked lock");
        }
        for _ in 0..r {
            sema::release(&self.reader_sem, false);
        }
        self.w.unlock();
    }

    /// Turns the writer's hold into a reader's, letting no writer in between: the
    /// reader is counted before readers are let in again, and the writer mutex is
    /// released last (Go has no downgrade; std's `RwLockWriteGuard::downgrade`).
    fn downgrade(&self) {
        // Release: publishes our writes to readers whose Acquire fetch_add comes after
        // it, as in write_unlock. The +1 is our own read hold.
        let r = self
            .reader_count
            .fetch_add(MAX_READERS + 1, Ordering::Release)
            + MAX_READERS;
        for _ in 0..r {
            sema::release(&self.reader_sem, false);
        }
        self.w.unlock();
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting while a writer holds or waits for the lock.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.raw.read();
        RwLockReadGuard::new(self)
    }

    /// Locks for reading if no writer holds or waits for the lock.
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        self.raw.try_read().then(|| RwLockReadGuard::new(self))
    }

    /// Locks for writing, waiting until no reader or writer holds it.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.raw.write();
        RwLockWriteGuard { lock: self }
    }

    /// Locks for writing if the lock is free now.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        self.raw
            .try_write()
            .then(|| RwLockWriteGuard { lock: self })
    }

    /// The value, through a unique borrow (no locking needed).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.try_read() {
            Some(g) => f.debug_struct("RwLock").field("data", &&*g).finish(),
            None => f.debug_struct("RwLock").field("data", &"<locked>").finish(),
        }
    }
}

/// Shared access to a read-locked [`RwLock`]'s value.
///
/// Covariant in `T`, as std's guard: it holds a pointer to the value and the lock
/// without its value, not `&RwLock<T>` (whose `UnsafeCell<T>` is invariant).
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    data: NonNull<T>,
    raw: &'a RawRwLock,
    /// The guard is a shared borrow of the value for `'a`.
    _value: PhantomData<&'a T>,
}

// SAFETY: a read guard is a shared borrow of T (`&T` is Sync when T is).
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as `&T`, which is Send when T is Sync; goro's lock does not care which
// thread unlocks it, so the guard may move with a coroutine between Ms.
unsafe impl<T: ?Sized + Sync> Send for RwLockReadGuard<'_, T> {}

impl<'a, T: ?Sized> RwLockReadGuard<'a, T> {
    /// The guard of a read hold the caller has just taken on `lock`.
    fn new(lock: &'a RwLock<T>) -> RwLockReadGuard<'a, T> {
        RwLockReadGuard {
            // SAFETY: `UnsafeCell::get` never returns null.
            data: unsafe { NonNull::new_unchecked(lock.data.get()) },
            raw: &lock.raw,
            _value: PhantomData,
        }
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: readers hold the lock shared; no writer can be inside, and the value
        // lives for 'a.
        unsafe { self.data.as_ref() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.raw.read_unlock();
    }
}

/// Unique access to a write-locked [`RwLock`]'s value.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

// SAFETY: as MutexGuard.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

impl<'a, T: ?Sized> RwLockWriteGuard<'a, T> {
    /// Turns this write hold into a read hold without unlocking: no writer gets in
    /// between, and readers waiting behind this writer are let in (std's
    /// `RwLockWriteGuard::downgrade`).
    ///
    /// ```
    /// use goro::sync::{RwLock, RwLockWriteGuard};
    ///
    /// let lock = RwLock::new(1);
    /// let mut w = lock.write();
    /// *w += 1;
    /// let r = RwLockWriteGuard::downgrade(w);
    /// assert_eq!(*r, 2);
    /// assert!(lock.try_read().is_some()); // other readers may come in now
    /// assert!(lock.try_write().is_none()); // writers may not
    /// ```
    pub fn downgrade(this: RwLockWriteGuard<'a, T>) -> RwLockReadGuard<'a, T> {
        let lock = this.lock;
        std::mem::forget(this);
        lock.raw.downgrade();
        RwLockReadGuard::new(lock)
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the writer holds the lock exclusively.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as above, and the guard is borrowed uniquely.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.raw.write_unlock();
    }
}
