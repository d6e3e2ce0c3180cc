//! The registry of live coroutines (Go: allgs), for the coroutine dump and deadlock
//! detection.
//!
//! Sharded by coroutine id so that spawning and exiting on different Ps rarely meet on
//! one lock. A G is registered before it is first queued and removed when its
//! coroutine has returned, so a registered pointer always points at a live G (a parked
//! G keeps itself alive, see `g.rs`); readers hold the shard's lock while they look.

use std::sync::atomic::Ordering;
use std::sync::Mutex;

use super::g::G;

const SHARDS: usize = 16;

/// A raw pointer that may be sent between threads; see the module doc for why it is
/// valid while in the registry.
struct GPtr(*const G);

// SAFETY: registered Gs are alive while registered and are only read (their shared,
// thread-safe fields) under the shard lock.
unsafe impl Send for GPtr {}

#[repr(align(64))]
struct Shard {
    gs: Mutex<Vec<GPtr>>,
}

pub(crate) struct AllGs {
    shards: Vec<Shard>,
}

impl AllGs {
    pub(crate) fn new() -> AllGs {
        AllGs {
            shards: (0..SHARDS)
                .map(|_| Shard {
                    gs: Mutex::new(Vec::new()),
                })
                .collect(),
        }
    }

    fn shard(&self, id: u64) -> &Mutex<Vec<GPtr>> {
        &self.shards[id as usize % SHARDS].gs
    }

    pub(crate) fn add(&self, g: &G) {
        let mut v = self.shard(g.id).lock().unwrap_or_else(|e| e.into_inner());
        // Relaxed: the index is only read and written under this shard's lock.
        g.reg_idx.store(v.len() as u32, Ordering::Relaxed);
        v.push(GPtr(g));
    }

    pub(crate) fn remove(&self, g: &G) {
        let mut v = self.shard(g.id).lock().unwrap_or_else(|e| e.into_inner());
        let i = g.reg_idx.load(Ordering::Relaxed) as usize;
        if i >= v.len() || !std::ptr::eq(v[i].0, g) {
            super::fatal!("AllGs::remove: coroutine {} is not registered", g.id);
        }
        v.swap_remove(i);
        if let Some(moved) = v.get(i) {
            // SAFETY: registered, hence alive; we hold the shard lock.
            unsafe { (*moved.0).reg_idx.store(i as u32, Ordering::Relaxed) };
        }
    }

    /// Calls `f` on every live G, shard by shard, under the shard's lock. `f` must not
    /// spawn, park or end coroutines.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&G)) {
        for s in &self.shards {
            let v = s.gs.lock().unwrap_or_else(|e| e.into_inner());
            for g in v.iter() {
                // SAFETY: registered, hence alive; we hold the shard lock.
                f(unsafe { &*g.0 });
            }
        }
    }
}
