//! The registry of live coroutines (Go: allgs), for the coroutine dump and deadlock
//! detection.
//!
//! Sharded by coroutine id so that spawning and exiting on different Ps rarely meet on
//! one lock. A G is registered before it is first queued and removed when its
//! coroutine has returned, so a registered pointer always points at a live G (a parked
//! G keeps itself alive, see `g.rs`); readers hold the shard's lock while they look.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

use crossbeam_utils::CachePadded;

use super::g::G;

const SHARDS: usize = 16;

/// A raw pointer that may be sent between threads; see the module doc for why it is
/// valid while in the registry.
struct GPtr(*const G);

impl GPtr {
    /// A strong reference to the G. Only under its shard's lock.
    fn strong(&self) -> super::g::GRef {
        // SAFETY: a registered G is alive, so its `Arc` (every G is made in one:
        // `G::new`) has a strong reference that cannot go while the caller holds the
        // shard's lock (a G leaves the registry before its last reference does); we add
        // one of our own and own it.
        unsafe {
            std::sync::Arc::increment_strong_count(self.0);
            std::sync::Arc::from_raw(self.0)
        }
    }
}

// SAFETY: registered Gs are alive while registered and are only read (their shared,
// thread-safe fields) under the shard lock.
unsafe impl Send for GPtr {}

/// A shard: a spin lock around its Gs. Not `std::sync::Mutex`: its unlock is a
/// locked `xchg` (it must learn whether to wake a sleeper), and a spawn+join takes a
/// shard's lock twice, so a plain store to unlock saves two locked instructions per
/// coroutine. Critical sections are a push or a swap-remove (and the dump's walk).
struct Shard {
    /// The lock word: taken (Acquire CAS) and released (Release store) by `add`,
    /// `remove` and `for_each`.
    locked: AtomicBool,
    gs: UnsafeCell<Vec<GPtr>>,
}

// SAFETY: `gs` is only reached through a `ShardGuard`, i.e. under `locked`.
unsafe impl Sync for Shard {}

impl Shard {
    #[inline]
    fn lock(&self) -> ShardGuard<'_> {
        crate::lockrank::acquire(crate::lockrank::Rank::AllGs);
        let mut spins = 0u32;
        // Acquire: pairs with the Release of the previous holder's unlock, so we see
        // its writes to `gs`.
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                // A long holder (the dump walking a big shard): let it run.
                std::thread::yield_now();
            }
        }
        ShardGuard { shard: self }
    }
}

struct ShardGuard<'a> {
    shard: &'a Shard,
}

impl Deref for ShardGuard<'_> {
    type Target = Vec<GPtr>;
    fn deref(&self) -> &Vec<GPtr> {
        // SAFETY: we hold the shard's lock.
        unsafe { &*self.shard.gs.get() }
    }
}

impl DerefMut for ShardGuard<'_> {
    fn deref_mut(&mut self) -> &mut Vec<GPtr> {
        // SAFETY: we hold the shard's lock, and `&mut self` makes this borrow unique.
        unsafe { &mut *self.shard.gs.get() }
    }
}

impl Drop for ShardGuard<'_> {
    fn drop(&mut self) {
        // Release: publishes our writes to `gs` to the next holder.
        self.shard.locked.store(false, Ordering::Release);
        crate::lockrank::release(crate::lockrank::Rank::AllGs);
    }
}

pub(crate) struct AllGs {
    /// Each shard on its own cache lines (two on x86_64, where the adjacent-line
    /// prefetcher pairs lines up), so spawns on different shards do not share one.
    shards: Vec<CachePadded<Shard>>,
}

impl AllGs {
    pub(crate) fn new() -> AllGs {
        AllGs {
            shards: (0..SHARDS)
                .map(|_| {
                    CachePadded::new(Shard {
                        locked: AtomicBool::new(false),
                        gs: UnsafeCell::new(Vec::new()),
                    })
                })
                .collect(),
        }
    }

    fn shard(&self, id: u64) -> &Shard {
        &self.shards[id as usize % SHARDS]
    }

    #[inline]
    pub(crate) fn add(&self, g: &G) {
        let mut v = self.shard(g.id).lock();
        // Relaxed: the index is only read and written under this shard's lock.
        g.reg_idx.store(v.len() as u32, Ordering::Relaxed);
        v.push(GPtr(g));
    }

    #[inline]
    pub(crate) fn remove(&self, g: &G) {
        let mut v = self.shard(g.id).lock();
        // Relaxed: under the shard's lock, as in `add`.
        let i = g.reg_idx.load(Ordering::Relaxed) as usize;
        if i >= v.len() || !std::ptr::eq(v[i].0, g) {
            super::fatal!("AllGs::remove: coroutine {} is not registered", g.id);
        }
        v.swap_remove(i);
        if let Some(moved) = v.get(i) {
            // SAFETY: registered, hence alive; we hold the shard lock.
            // Relaxed: under the shard's lock.
            unsafe { (*moved.0).reg_idx.store(i as u32, Ordering::Relaxed) };
        }
    }

    /// Every live G, as strong references taken under each shard's lock (for the dump,
    /// which walks them without holding the locks).
    pub(crate) fn collect(&self) -> Vec<super::g::GRef> {
        // Sized from a first count (a few spawns between the two passes may still grow
        // it once): grown shard by shard, the Vec could hold twice the coroutines.
        let about: usize = self.shards.iter().map(|s| s.lock().len()).sum();
        let mut out = Vec::with_capacity(about + about / 64 + 16);
        for s in &self.shards {
            let v = s.lock();
            out.extend(v.iter().map(|g| g.strong()));
        }
        out
    }

    /// The live G with id `id`, if any, as a strong reference.
    pub(crate) fn get(&self, id: u64) -> Option<super::g::GRef> {
        let v = self.shard(id).lock();
        // SAFETY: registered, hence alive; we hold the shard lock.
        let found = v.iter().find(|g| unsafe { (*g.0).id } == id);
        found.map(|g| g.strong())
    }

    /// Calls `f` on every live G, shard by shard, under the shard's lock. `f` must not
    /// spawn, park or end coroutines.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&G)) {
        for s in &self.shards {
            let v = s.lock();
            for g in v.iter() {
                // SAFETY: registered, hence alive; we hold the shard lock.
                f(unsafe { &*g.0 });
            }
        }
    }
}
