//! `ArcSlot`: the fd table's pointer to a descriptor's poll registration, which the
//! hooks read on every blocking call and `close` takes away, without a lock.
//!
//! A reader announces itself (`users += 1`), loads the pointer, takes a strong
//! reference, and leaves (`users -= 1`). A taker swaps the pointer out, then waits
//! until no reader is between its announcement and its leaving: a reader that loaded
//! the old pointer holds its own reference by then, and one that announced later loads
//! null. Both sides are a store (an RMW) followed by a load of the other side's word,
//! a Dekker pair, so all four accesses are SeqCst (see `loom::seqcst_pair_fence`).
//!
//! Filling an empty slot goes through `BUSY`: the filler CASes null to `BUSY`, builds
//! the value (registering the fd with the poller), and CASes `BUSY` to the pointer. A
//! take that finds `BUSY` clears it, and the filler's second CAS then fails: it
//! disposes of its value itself and reports the descriptor closed.
//!
//! Only a `close` racing a call on the same descriptor in another thread makes a
//! taker wait, a bug in the caller (Rust's I/O safety rules it out for owned fds); the
//! protocol keeps even that memory-safe. `tests/loom_arc_slot.rs` models it.
//!
//! Built with the `hooks` feature (the fd table is its user) and for the loom models,
//! where its `Arc` is loom's, whose counts the model sees.

use crate::loom::{seqcst_pair_fence, Arc, AtomicPtr, AtomicU32, Ordering};

/// A slot holding an `Arc<T>` or nothing (see the module doc).
pub struct ArcSlot<T> {
    ptr: AtomicPtr<T>,
    users: AtomicU32,
}

/// What [`ArcSlot::get_or_fill`] found.
pub enum Got<T> {
    /// The value, or the one this caller just filled in.
    Value(Arc<T>),
    /// `fill` failed with this error.
    Failed(std::io::Error),
    /// A take cleared the slot while this caller filled it: the caller's value was
    /// handed to `dispose`.
    Taken,
}

impl<T> Default for ArcSlot<T> {
    fn default() -> Self {
        ArcSlot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            users: AtomicU32::new(0),
        }
    }
}

/// The filling marker: never a pointer an `Arc` hands out (an `Arc`'s allocation
/// holds two counters before the value, so its value is never at address 1).
fn busy<T>() -> *mut T {
    1 as *mut T
}

impl<T> ArcSlot<T> {
    /// The value, if the slot holds one.
    pub fn get(&self) -> Option<Arc<T>> {
        // SeqCst, and the load below: the reader's half of the Dekker pair with `take`.
        self.users.fetch_add(1, Ordering::SeqCst);
        seqcst_pair_fence();
        let p = self.ptr.load(Ordering::SeqCst);
        let got = if p.is_null() || p == busy() {
            None
        } else {
            // Under loom, a second look at the slot: a point where the model may run a
            // `take` between our load and our increment (loom's DPOR sees no conflict
            // in that window otherwise, and would not try a take there).
            #[cfg(loom)]
            let _ = self.ptr.load(Ordering::Relaxed);
            // SAFETY: `p` came from `Arc::into_raw` in `get_or_fill`, and its reference
            // is still held by the slot: a `take` that swapped it out waits for
            // `users` to fall to 0 before it lets its reference go, and we are counted.
            unsafe {
                Arc::increment_strong_count(p);
                Some(Arc::from_raw(p))
            }
        };
        // Release: our reference is taken before a waiting `take` sees us leave.
        self.users.fetch_sub(1, Ordering::Release);
        got
    }

    /// The value; an empty slot is filled with `fill()` first. A caller that finds
    /// another filling calls `wait` and tries again. `dispose` gets the value of a fill
    /// that lost to a `take` (see the module doc).
    pub fn get_or_fill(
        &self,
        fill: impl FnOnce() -> std::io::Result<Arc<T>>,
        dispose: impl FnOnce(Arc<T>),
        mut wait: impl FnMut(),
    ) -> Got<T> {
        let mut fill = Some(fill);
        loop {
            if let Some(v) = self.get() {
                return Got::Value(v);
            }
            // SeqCst: part of the slot's single order (see `take`); a failure only
            // means someone else fills or filled it.
            if self
                .ptr
                .compare_exchange(
                    std::ptr::null_mut(),
                    busy(),
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_err()
            {
                wait();
                continue;
            }
            let f = fill.take().expect("filled twice");
            let v = match f() {
                Ok(v) => v,
                Err(e) => {
                    // SeqCst: as above; if a take cleared BUSY meanwhile, nothing to undo.
                    let _ = self.ptr.compare_exchange(
                        busy(),
                        std::ptr::null_mut(),
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    );
                    return Got::Failed(e);
                }
            };
            let raw = Arc::into_raw(v.clone()) as *mut T;
            // SeqCst: as above. Failing means a take cleared BUSY: the fd is closing.
            return match self
                .ptr
                .compare_exchange(busy(), raw, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => Got::Value(v),
                Err(_) => {
                    // SAFETY: `raw` is the reference `into_raw` just made, never published.
                    drop(unsafe { Arc::from_raw(raw) });
                    dispose(v);
                    Got::Taken
                }
            };
        }
    }

    /// Empties the slot and returns its value, once no reader can still be taking a
    /// reference to it.
    pub fn take(&self) -> Option<Arc<T>> {
        // SeqCst: the taker's half of the Dekker pair with `get` (see the module doc).
        let p = self.ptr.swap(std::ptr::null_mut(), Ordering::SeqCst);
        seqcst_pair_fence();
        if p.is_null() || p == busy() {
            return None;
        }
        // SeqCst: the pair's load. A reader counted here may hold `p`; wait until it
        // has its own reference (it never waits for anything, so this ends).
        while self.users.load(Ordering::SeqCst) != 0 {
            crate::loom::spin_loop();
        }
        // SAFETY: `p` came from `Arc::into_raw` and the slot's reference is ours now:
        // no reader can load `p` any more (it is swapped out) and none that did is
        // still between its load and its own increment.
        Some(unsafe { Arc::from_raw(p) })
    }
}

impl<T> Drop for ArcSlot<T> {
    fn drop(&mut self) {
        drop(self.take());
    }
}
