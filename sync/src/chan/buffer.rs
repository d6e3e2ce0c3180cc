//! A channel's buffer: a FIFO of at most `cap` values whose memory follows what it
//! holds, not what it could hold.
//!
//! - **Allocated as it fills.** Nothing is reserved up front, so `channel(1 << 40)`
//!   and the unbounded channel ([`UNBOUNDED`] slots) cost nothing until values arrive
//!   (before issue 18, `channel(cap)` reserved `cap` slots, and `channel(usize::MAX)`
//!   panicked).
//! - **Grows by doubling, clamped to `cap`.** A full buffer of a bounded channel holds
//!   exactly `cap` slots, never the next power of two; growth stays amortised O(1) per
//!   value. It happens under the channel's lock, as every buffer change does: a
//!   doubling of a large buffer makes that one send slower (large reallocations are
//!   page remaps, not copies, with the system allocator).
//! - **Shrinks when drained.** A receive that empties a buffer whose allocation is
//!   over [`SHRINK_ABOVE_BYTES`] frees it: an unbounded channel that once held a
//!   million values does not keep their memory forever. Small buffers keep theirs, so
//!   a channel that goes between empty and a few values does not reallocate each time;
//!   a large one that fills and drains repeatedly regrows in O(log n) steps per burst,
//!   which the burst's n values pay for.

use std::collections::VecDeque;

/// The capacity of the unbounded channel: a send always finds room.
pub(crate) const UNBOUNDED: usize = usize::MAX;

/// An empty buffer whose allocation is larger than this many bytes is freed.
pub(crate) const SHRINK_ABOVE_BYTES: usize = 64 * 1024;

/// The fewest slots a growing buffer adds (as `VecDeque`'s own minimum), unless `cap`
/// is smaller.
const MIN_GROW_SLOTS: usize = 4;

/// The values a channel holds, at most `cap` of them ([`UNBOUNDED`]: no limit).
pub(crate) struct Buffer<T> {
    items: VecDeque<T>,
    cap: usize,
}

impl<T> Buffer<T> {
    /// An empty buffer for at most `cap` values; allocates nothing.
    pub(crate) fn new(cap: usize) -> Buffer<T> {
        Buffer {
            items: VecDeque::new(),
            cap,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether one more value fits (always, for the unbounded channel).
    pub(crate) fn has_room(&self) -> bool {
        self.cap == UNBOUNDED || self.items.len() < self.cap
    }

    /// Appends `v`, growing the allocation by doubling but never past `cap` slots.
    ///
    /// # Panics
    ///
    /// If the buffer is full ("channel buffer: push past capacity"): callers check
    /// [`has_room`](Buffer::has_room) first.
    pub(crate) fn push_back(&mut self, v: T) {
        assert!(self.has_room(), "channel buffer: push past capacity");
        let len = self.items.len();
        if len == self.items.capacity() {
            // `cap - len >= 1` as there is room; for UNBOUNDED it is huge and the
            // doubling decides.
            let extra = len.max(MIN_GROW_SLOTS).min(self.cap - len);
            self.items.reserve_exact(extra);
        }
        self.items.push_back(v);
    }

    /// Puts `v` back at the head, even past `cap` (a value handed to an async receive
    /// that was called off: `future.rs`); it is the next one taken.
    pub(crate) fn push_front(&mut self, v: T) {
        self.items.push_front(v);
    }

    /// Takes the oldest value; frees the allocation if that emptied a large buffer
    /// (see the module doc).
    pub(crate) fn pop_front(&mut self) -> Option<T> {
        let v = self.items.pop_front()?;
        if self.items.is_empty() && self.allocated_bytes() > SHRINK_ABOVE_BYTES {
            self.items = VecDeque::new();
        }
        Some(v)
    }

    /// Queues `v` and takes the oldest value, in one step that neither grows nor
    /// shrinks the allocation: `v` itself if the buffer is empty (a receive that meets
    /// a waiting sender).
    pub(crate) fn cycle(&mut self, v: T) -> T {
        match self.items.pop_front() {
            None => v,
            Some(head) => {
                // Room: one value just left.
                self.items.push_back(v);
                head
            }
        }
    }

    /// Takes every value, leaving the buffer empty and unallocated.
    pub(crate) fn take_all(&mut self) -> VecDeque<T> {
        std::mem::take(&mut self.items)
    }

    /// The bytes the allocation holds (0 for zero-sized values, which allocate none).
    fn allocated_bytes(&self) -> usize {
        self.items
            .capacity()
            .saturating_mul(std::mem::size_of::<T>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_nothing_up_front() {
        let b = Buffer::<u64>::new(1 << 40);
        assert_eq!(b.items.capacity(), 0);
        let b = Buffer::<u64>::new(UNBOUNDED);
        assert_eq!(b.items.capacity(), 0);
    }

    #[test]
    fn grows_to_exactly_cap() {
        for cap in [1, 3, 600, 1000] {
            let mut b = Buffer::<u64>::new(cap);
            for i in 0..cap {
                assert!(b.has_room());
                b.push_back(i as u64);
            }
            assert!(!b.has_room());
            assert_eq!(b.items.capacity(), cap, "cap {cap}");
        }
    }

    #[test]
    #[should_panic(expected = "push past capacity")]
    fn push_past_capacity_panics() {
        let mut b = Buffer::<u8>::new(1);
        b.push_back(1);
        b.push_back(2);
    }

    #[test]
    fn shrinks_when_a_large_buffer_drains() {
        let mut b = Buffer::<u64>::new(UNBOUNDED);
        for i in 0..100_000 {
            b.push_back(i);
        }
        assert!(b.allocated_bytes() >= 800_000);
        for i in 0..100_000 {
            assert_eq!(b.pop_front(), Some(i));
            // Not before it is empty.
            if i < 99_999 {
                assert!(b.allocated_bytes() >= 800_000);
            }
        }
        assert_eq!(b.items.capacity(), 0);
        assert_eq!(b.pop_front(), None);
    }

    #[test]
    fn small_buffers_keep_their_allocation() {
        let mut b = Buffer::<u64>::new(UNBOUNDED);
        for _ in 0..100 {
            for i in 0..10 {
                b.push_back(i);
            }
            while b.pop_front().is_some() {}
        }
        assert!(b.items.capacity() >= 10);
    }

    #[test]
    fn cycle_keeps_fifo_order_and_the_allocation() {
        let mut b = Buffer::<u64>::new(2);
        assert_eq!(b.cycle(7), 7, "empty: the value passes straight through");
        b.push_back(1);
        b.push_back(2);
        let before = b.items.capacity();
        assert_eq!(b.cycle(3), 1);
        assert_eq!(b.cycle(4), 2);
        assert_eq!(b.items.capacity(), before);
        assert_eq!((b.pop_front(), b.pop_front()), (Some(3), Some(4)));
    }

    #[test]
    fn zero_sized_values_never_allocate_or_shrink() {
        let mut b = Buffer::<()>::new(UNBOUNDED);
        for _ in 0..1000 {
            b.push_back(());
        }
        assert_eq!(b.allocated_bytes(), 0);
        while b.pop_front().is_some() {}
        assert_eq!(b.len(), 0);
    }
}
