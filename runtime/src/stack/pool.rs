//! Stack recycling: a small cache per P, one global pool, and a watermark above which
//! stacks go back to the OS, slowly.
//!
//! Only stacks of the runtime's default size are recycled; a coroutine spawned with
//! its own `stack_size` gets a fresh mapping and unmaps it when it ends. When there is
//! no default-size stack to reuse, a slab of [`SLAB_STACKS`] is mapped at once
//! (`Stack::new_slab`: one `mmap`, and the guards in one call where the kernel allows);
//! the caller takes one and the others go to its P's cache and the global pool. A P takes from
//! and returns to its own cache without any lock; when the cache overflows, half of it
//! moves to the global pool, and when it is empty it refills half from there.
//!
//! The global pool takes every stack it is given. Above [`GLOBAL_POOL_MAX`] stacks,
//! sysmon's scavenger (`scavenge`, every [`SCAVENGE_PERIOD_NS`]) unmaps half of the
//! excess per round, at most [`SCAVENGE_BATCH`] stacks, so a burst of a million
//! coroutines does not pin a million stacks for long after it ends. Unmapping on the
//! spot instead cost a burst of 100 000 spawn+join 40% of its time in `munmap` (and
//! the next burst the `mmap`s and first-touch page faults again); Go, too, returns
//! freed stacks to the OS in the background.

use crate::lockrank::{Mutex, Rank};
use std::cell::RefCell;
use std::io;

use super::{Stack, SLAB_STACKS};

/// Stacks a P keeps for itself.
pub(crate) const P_CACHE_MAX: usize = 32;
/// Stacks the global pool keeps for good; the scavenger unmaps the rest (the
/// watermark).
pub(crate) const GLOBAL_POOL_MAX: usize = 512;
/// How often sysmon runs the scavenger while the pool is above its watermark.
pub(crate) const SCAVENGE_PERIOD_NS: i64 = 250_000_000;
/// The most stacks one scavenger round unmaps (~10 ms of `munmap`).
pub(crate) const SCAVENGE_BATCH: usize = 4096;

/// A P's own stack cache. Owner-only: it lives in the P's local state, which only the
/// M holding the P touches.
#[derive(Default)]
pub(crate) struct StackCache {
    stacks: RefCell<Vec<Stack>>,
}

/// The runtime's stack source.
pub(crate) struct StackPool {
    /// Usable size of the default stack, in bytes.
    default_usable: usize,
    global: Mutex<Vec<Stack>>,
}

impl StackPool {
    pub(crate) fn new(default_usable: usize) -> StackPool {
        StackPool {
            default_usable,
            global: Mutex::new(Rank::StackPool, Vec::new()),
        }
    }

    pub(crate) fn default_usable(&self) -> usize {
        self.default_usable
    }

    /// A stack with `usable` bytes: recycled when it is the default size and one is
    /// cached, freshly mapped otherwise.
    pub(crate) fn get(&self, cache: Option<&StackCache>, usable: usize) -> io::Result<Stack> {
        if usable == self.default_usable {
            if let Some(cache) = cache {
                let mut stacks = cache.stacks.borrow_mut();
                if stacks.is_empty() {
                    let mut global = self.global.lock();
                    let take = global.len().min(P_CACHE_MAX / 2);
                    let at = global.len() - take;
                    stacks.extend(global.drain(at..));
                }
                if let Some(s) = stacks.pop() {
                    return Ok(s);
                }
            } else if let Some(s) = self.global.lock().pop() {
                return Ok(s);
            }
            // None to reuse: map a slab of them. This caller takes one; the rest go to
            // its P's cache, up to half of it, and to the global pool. A slab that
            // cannot be had (near `vm.max_map_count` with mprotect guards, where a slab
            // needs two mappings per stack) falls back to one stack.
            let Ok(mut slab) = Stack::new_slab(usable, SLAB_STACKS) else {
                return Stack::new(usable);
            };
            let mine = slab.pop().expect("a slab is not empty");
            if let Some(cache) = cache {
                let keep = slab.len().min(P_CACHE_MAX / 2);
                let rest = slab.split_off(keep);
                cache.stacks.borrow_mut().append(&mut slab);
                slab = rest;
            }
            if !slab.is_empty() {
                self.release(slab);
            }
            return Ok(mine);
        }
        Stack::new(usable)
    }

    /// Gives back the stack of a finished coroutine.
    pub(crate) fn put(&self, cache: Option<&StackCache>, stack: Stack) {
        if stack.usable() != self.default_usable {
            return; // dropped: unmapped
        }
        match cache {
            Some(cache) => {
                let spill = {
                    let mut stacks = cache.stacks.borrow_mut();
                    stacks.push(stack);
                    if stacks.len() > P_CACHE_MAX {
                        let at = stacks.len() - P_CACHE_MAX / 2;
                        stacks.split_off(at)
                    } else {
                        Vec::new()
                    }
                };
                if !spill.is_empty() {
                    self.release(spill);
                }
            }
            None => self.release(vec![stack]),
        }
    }

    /// Moves a whole cache to the global pool (a P being retired).
    pub(crate) fn flush(&self, cache: &StackCache) {
        let all = std::mem::take(&mut *cache.stacks.borrow_mut());
        self.release(all);
    }

    /// Adds stacks to the global pool (the scavenger trims it).
    fn release(&self, mut stacks: Vec<Stack>) {
        let mut global = self.global.lock();
        global.append(&mut stacks);
    }

    /// How many stacks the global pool holds above its watermark (a racy snapshot).
    pub(crate) fn excess(&self) -> usize {
        let global = self.global.lock();
        global.len().saturating_sub(GLOBAL_POOL_MAX)
    }

    /// One scavenger round: unmaps half of the excess above the watermark (all of it
    /// when small), at most `SCAVENGE_BATCH` stacks, outside the lock. Returns the
    /// excess left.
    pub(crate) fn scavenge(&self) -> usize {
        let (victims, left) = {
            let mut global = self.global.lock();
            let excess = global.len().saturating_sub(GLOBAL_POOL_MAX);
            let n = if excess <= 64 { excess } else { excess / 2 };
            let n = n.min(SCAVENGE_BATCH);
            // The oldest stacks (bottom of the LIFO) go: the top ones are warmest.
            let victims: Vec<Stack> = global.drain(..n).collect();
            (victims, excess - n)
        };
        super::unmap_all(victims);
        left
    }

    #[cfg(test)]
    fn global_len(&self) -> usize {
        self.global.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::usable_size;

    #[test]
    fn recycles_default_size_and_respects_watermark() {
        let size = usable_size(32 * 1024).unwrap();
        let pool = StackPool::new(size);
        let cache = StackCache::default();
        let mut live: Vec<Stack> = (0..GLOBAL_POOL_MAX + 2 * P_CACHE_MAX)
            .map(|_| pool.get(Some(&cache), size).unwrap())
            .collect();
        for s in live.drain(..) {
            pool.put(Some(&cache), s);
        }
        assert!(cache.stacks.borrow().len() <= P_CACHE_MAX);
        // Everything given back is kept until the scavenger trims it to the watermark.
        let total = GLOBAL_POOL_MAX + 2 * P_CACHE_MAX;
        assert_eq!(pool.global_len() + cache.stacks.borrow().len(), total);
        assert_eq!(pool.excess(), pool.global_len() - GLOBAL_POOL_MAX);
        let mut rounds = 0;
        while pool.scavenge() > 0 {
            rounds += 1;
            assert!(rounds < 100, "the scavenger does not converge");
        }
        assert_eq!(pool.global_len(), GLOBAL_POOL_MAX);
        // A cached stack comes back: same address.
        let top = {
            use corosensei::stack::Stack as _;
            let s = pool.get(Some(&cache), size).unwrap();
            let t = s.base().get();
            pool.put(Some(&cache), s);
            t
        };
        use corosensei::stack::Stack as _;
        assert_eq!(pool.get(Some(&cache), size).unwrap().base().get(), top);
        // Other sizes are never pooled.
        let other = pool.get(Some(&cache), size * 2).unwrap();
        let before = cache.stacks.borrow().len();
        pool.put(Some(&cache), other);
        assert_eq!(cache.stacks.borrow().len(), before);
        pool.flush(&cache);
        assert!(cache.stacks.borrow().is_empty());
        while pool.scavenge() > 0 {}
        assert_eq!(pool.global_len(), GLOBAL_POOL_MAX);
    }
}
