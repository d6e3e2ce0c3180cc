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
use std::ops::{Deref, DerefMut};
use std::sync::atomic::AtomicI32;

use goro_runtime::park::WaitReason;

use crate::loom::{AtomicU32, Ordering};
use crate::mutex::RawMutex;
use crate::sema;

/// The most readers an `RwLock` can hold at once (Go: rwmutexMaxReaders).
pub const MAX_READERS: i32 = 1 << 30;

/// A reader-writer lock for coroutines and threads (see the module doc).
pub struct RwLock<T: ?Sized> {
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
    data: UnsafeCell<T>,
}

// SAFETY: as std's RwLock: readers share &T (T: Sync), a writer has &mut T (T: Send).
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

impl<T> RwLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> RwLock<T> {
        RwLock {
            w: RawMutex::new(),
            writer_sem: AtomicU32::new(0),
            reader_sem: AtomicU32::new(0),
            reader_count: AtomicI32::new(0),
            reader_wait: AtomicI32::new(0),
            data: UnsafeCell::new(value),
        }
    }

    /// Consumes the lock and returns its value.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Locks for reading, waiting while a writer holds or waits for the lock.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        goro_runtime::preempt_point();
        // Acquire: pairs with the writer's Release in write_unlock.
        if self.reader_count.fetch_add(1, Ordering::Acquire) + 1 < 0 {
            // A writer is pending: wait for it.
            sema::acquire(&self.reader_sem, false, WaitReason::RwLock);
        }
        RwLockReadGuard { lock: self }
    }

    /// Locks for reading if no writer holds or waits for the lock.
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        // Relaxed: only the CAS's expected value; the successful CAS is the Acquire
        // that pairs with the writer unlock's Release.
        let mut c = self.reader_count.load(Ordering::Relaxed);
        loop {
            if c < 0 {
                return None;
            }
            // Acquire on success, as above.
            match self.reader_count.compare_exchange_weak(
                c,
                c + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(RwLockReadGuard { lock: self }),
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

    /// Locks for writing, waiting until no reader or writer holds it.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
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
        RwLockWriteGuard { lock: self }
    }

    /// Locks for writing if the lock is free now.
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        if !self.w.try_lock() {
            return None;
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
            return None;
        }
        Some(RwLockWriteGuard { lock: self })
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
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

// SAFETY: a read guard is a shared borrow of T.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: readers hold the lock shared; no writer can be inside.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.read_unlock();
    }
}

/// Unique access to a write-locked [`RwLock`]'s value.
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

// SAFETY: as MutexGuard.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

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
        self.lock.write_unlock();
    }
}
