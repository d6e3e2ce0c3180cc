//! A 4-ary min-heap of timers ordered by deadline, with slab storage.
//!
//! The heap array holds `(when, slot)` pairs so that sifting compares
//! deadlines without touching the slab; each slab slot holds the timer's
//! period, its data and its current position in the heap array, so a timer
//! known by its [`TimerKey`] is found in O(1) and can be modified or deleted
//! in O(log n).

use crate::rules::{check_period, check_when, next_periodic_when, MAX_WHEN};

/// Handle to a timer in a [`TimerHeap`].
///
/// A key is a slab slot index plus the generation of that slot. When a timer
/// is deleted, or a one-shot timer fires, its slot's generation is bumped,
/// so the old key no longer addresses anything, even after the slot is
/// reused by a newer timer. A slot whose generation counter is exhausted is
/// retired instead of reused, so a stale key can never alias a live timer.
///
/// Keys are only meaningful for the heap that issued them. The ordering
/// (`Ord`) is arbitrary but total; it exists so that keys can be used in
/// ordered collections.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TimerKey {
    slot: u32,
    generation: u32,
}

/// A timer returned by [`TimerHeap::pop_due`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Fired<T> {
    /// The key of the timer that fired. For a one-shot timer it is already
    /// stale; for a periodic timer it is still live.
    pub key: TimerKey,
    /// The deadline this firing is for (not the clock reading at which it
    /// was popped, and not the periodic timer's next deadline).
    pub when: i64,
    /// The timer's data: moved out for a one-shot timer, cloned for a
    /// periodic one (which keeps its own copy in the heap).
    pub data: T,
    /// Whether the timer is periodic and therefore still in the heap.
    pub periodic: bool,
}

/// One element of the heap array.
#[derive(Clone, Copy, Debug)]
struct Node {
    when: i64,
    slot: u32,
}

/// A live timer's slab record.
#[derive(Debug)]
struct Entry<T> {
    period: i64,
    /// Index of this timer's node in `TimerHeap::heap`.
    pos: usize,
    data: T,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    entry: Option<Entry<T>>,
}

/// Number of children of each heap node.
const ARITY: usize = 4;

/// A min-heap of timers on their deadline (`when`), following Go's runtime
/// timer rules.
///
/// * Deadlines must be positive and periods non-negative; [`add`] and
///   [`modify`] panic otherwise (see [`check_when`], [`check_period`]).
///   A period of zero means a one-shot timer.
/// * [`pop_due`] returns the earliest timer whose deadline is `<= now`, one
///   at a time. A one-shot timer leaves the heap; a periodic one is
///   rescheduled to [`next_periodic_when`] (strictly after `now`, pinned at
///   [`MAX_WHEN`] on overflow) and stays.
/// * A timer at [`MAX_WHEN`] never fires.
///
/// Timers with equal deadlines come out in an unspecified order (not
/// necessarily the order they were added or modified in).
///
/// The structure is a 4-ary heap: the children of position `i` are
/// `4i+1 ..= 4i+4` and its parent is `(i-1)/4`.
///
/// [`add`]: TimerHeap::add
/// [`modify`]: TimerHeap::modify
/// [`pop_due`]: TimerHeap::pop_due
#[derive(Debug)]
pub struct TimerHeap<T> {
    heap: Vec<Node>,
    slots: Vec<Slot<T>>,
    /// Vacant, reusable slots.
    free: Vec<u32>,
}

impl<T> Default for TimerHeap<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> TimerHeap<T> {
    /// An empty heap. Does not allocate.
    pub const fn new() -> Self {
        TimerHeap {
            heap: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The number of timers in the heap.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether the heap holds no timer.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Adds a timer with deadline `when` and `period` (0 for a one-shot
    /// timer) and returns its key.
    ///
    /// # Panics
    ///
    /// With `"timer when must be positive"` if `when <= 0`, and with
    /// `"timer period must be non-negative"` if `period < 0`. Also if the
    /// heap would need more than `u32::MAX` slots.
    #[track_caller]
    pub fn add(&mut self, when: i64, period: i64, data: T) -> TimerKey {
        check_when(when);
        check_period(period);
        let pos = self.heap.len();
        let entry = Entry { period, pos, data };
        let key = match self.free.pop() {
            Some(slot) => {
                let s = &mut self.slots[slot as usize];
                debug_assert!(s.entry.is_none(), "free slot {slot} is occupied");
                s.entry = Some(entry);
                TimerKey {
                    slot,
                    generation: s.generation,
                }
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("too many timers");
                self.slots.push(Slot {
                    generation: 0,
                    entry: Some(entry),
                });
                TimerKey {
                    slot,
                    generation: 0,
                }
            }
        };
        self.heap.push(Node {
            when,
            slot: key.slot,
        });
        self.sift_up(pos);
        key
    }

    /// Changes the deadline and period of the live timer `key`, keeping its
    /// data, and returns true; returns false, changing nothing, if `key` is
    /// not live (deleted, or a one-shot timer that fired).
    ///
    /// # Panics
    ///
    /// Like [`add`](TimerHeap::add) on a bad `when` or `period`. The checks
    /// come first, so bad input panics even when `key` is stale.
    #[track_caller]
    pub fn modify(&mut self, key: TimerKey, when: i64, period: i64) -> bool {
        check_when(when);
        check_period(period);
        let Some(entry) = self.entry_mut(key) else {
            return false;
        };
        entry.period = period;
        let pos = entry.pos;
        self.heap[pos].when = when;
        self.fix(pos);
        true
    }

    /// Removes the live timer `key` and returns its data, or returns `None`
    /// if `key` is not live.
    pub fn delete(&mut self, key: TimerKey) -> Option<T> {
        let pos = self.entry(key)?.pos;
        self.remove_at(pos);
        Some(self.release(key.slot).data)
    }

    /// Whether `key` addresses a timer in this heap.
    pub fn contains(&self, key: TimerKey) -> bool {
        self.entry(key).is_some()
    }

    /// The deadline, period and data of the live timer `key`.
    pub fn get(&self, key: TimerKey) -> Option<(i64, i64, &T)> {
        let entry = self.entry(key)?;
        Some((self.heap[entry.pos].when, entry.period, &entry.data))
    }

    /// Mutable access to the data of the live timer `key`. (Deadline and
    /// period change only through [`modify`](TimerHeap::modify).)
    pub fn get_mut(&mut self, key: TimerKey) -> Option<&mut T> {
        self.entry_mut(key).map(|entry| &mut entry.data)
    }

    /// The key and deadline of the earliest timer (any one of them if
    /// several share the earliest deadline).
    pub fn peek(&self) -> Option<(TimerKey, i64)> {
        let node = self.heap.first()?;
        Some((self.key_of(node.slot), node.when))
    }

    /// The earliest deadline in the heap.
    pub fn peek_when(&self) -> Option<i64> {
        self.heap.first().map(|node| node.when)
    }

    /// Fires the earliest timer if it is due, that is if its deadline is
    /// `<= now` (and is not [`MAX_WHEN`], which never fires).
    ///
    /// A one-shot timer is removed and its data moved into the result. A
    /// periodic timer stays in the heap, rescheduled to
    /// [`next_periodic_when`]`(when, period, now)`, and a clone of its data
    /// is returned. In both cases [`Fired::when`] is the deadline that was
    /// reached.
    ///
    /// Returns `None` if no timer is due. Callers loop until then, running
    /// each fired timer's function in between; each periodic timer fires at
    /// most once for a given `now`, since its new deadline is after `now`.
    pub fn pop_due(&mut self, now: i64) -> Option<Fired<T>>
    where
        T: Clone,
    {
        let root = *self.heap.first()?;
        if root.when > now || root.when == MAX_WHEN {
            return None;
        }
        let key = self.key_of(root.slot);
        let entry = self.slots[root.slot as usize]
            .entry
            .as_ref()
            .expect("heap node points at a vacant slot");
        if entry.period > 0 {
            let data = entry.data.clone();
            self.heap[0].when = next_periodic_when(root.when, entry.period, now);
            self.sift_down(0);
            Some(Fired {
                key,
                when: root.when,
                data,
                periodic: true,
            })
        } else {
            self.remove_at(0);
            let entry = self.release(root.slot);
            Some(Fired {
                key,
                when: root.when,
                data: entry.data,
                periodic: false,
            })
        }
    }

    /// Pops every timer due at `now`, in deadline order (see
    /// [`pop_due`](TimerHeap::pop_due)).
    ///
    /// This is a convenience for tests and single-threaded users: a runtime
    /// that must run timer functions without holding the heap's lock calls
    /// `pop_due` once per timer instead.
    pub fn drain_due(&mut self, now: i64) -> Vec<Fired<T>>
    where
        T: Clone,
    {
        let mut fired = Vec::new();
        while let Some(f) = self.pop_due(now) {
            fired.push(f);
        }
        fired
    }

    /// Checks every internal invariant and panics if one is broken: the
    /// heap order, positive deadlines, non-negative periods, slab back
    /// indices in both directions, and the free list. Takes O(n); meant for
    /// tests and debugging.
    pub fn check_invariants(&self) {
        let n = self.heap.len();
        for (i, node) in self.heap.iter().enumerate() {
            assert!(
                node.when > 0,
                "heap[{i}] has non-positive when {}",
                node.when
            );
            if i > 0 {
                let parent = (i - 1) / ARITY;
                assert!(
                    self.heap[parent].when <= node.when,
                    "heap order broken: heap[{parent}].when = {} > heap[{i}].when = {}",
                    self.heap[parent].when,
                    node.when
                );
            }
            let slot = self
                .slots
                .get(node.slot as usize)
                .unwrap_or_else(|| panic!("heap[{i}] points at slot {} out of range", node.slot));
            let entry = slot
                .entry
                .as_ref()
                .unwrap_or_else(|| panic!("heap[{i}] points at vacant slot {}", node.slot));
            assert_eq!(
                entry.pos, i,
                "slot {} has back index {} but sits at heap[{i}]",
                node.slot, entry.pos
            );
            assert!(entry.period >= 0, "slot {} has negative period", node.slot);
        }
        let mut occupied = 0;
        for (s, slot) in self.slots.iter().enumerate() {
            if let Some(entry) = &slot.entry {
                occupied += 1;
                assert!(
                    entry.pos < n,
                    "slot {s} has back index {} past the heap end {n}",
                    entry.pos
                );
                assert_eq!(
                    self.heap[entry.pos].slot as usize, s,
                    "slot {s} back index {} points at another slot",
                    entry.pos
                );
            }
        }
        assert_eq!(occupied, n, "{occupied} occupied slots but {n} heap nodes");
        let mut on_free_list = vec![false; self.slots.len()];
        for &f in &self.free {
            let slot = self
                .slots
                .get(f as usize)
                .unwrap_or_else(|| panic!("free slot {f} out of range"));
            assert!(slot.entry.is_none(), "free slot {f} is occupied");
            assert!(
                !on_free_list[f as usize],
                "slot {f} is twice on the free list"
            );
            assert!(
                slot.generation != u32::MAX,
                "retired slot {f} is on the free list"
            );
            on_free_list[f as usize] = true;
        }
        for (s, slot) in self.slots.iter().enumerate() {
            if slot.entry.is_none() && !on_free_list[s] {
                assert_eq!(
                    slot.generation,
                    u32::MAX,
                    "vacant slot {s} is neither free nor retired"
                );
            }
        }
    }

    // ---- internals ----

    fn key_of(&self, slot: u32) -> TimerKey {
        TimerKey {
            slot,
            generation: self.slots[slot as usize].generation,
        }
    }

    fn entry(&self, key: TimerKey) -> Option<&Entry<T>> {
        let slot = self.slots.get(key.slot as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.entry.as_ref()
    }

    fn entry_mut(&mut self, key: TimerKey) -> Option<&mut Entry<T>> {
        let slot = self.slots.get_mut(key.slot as usize)?;
        if slot.generation != key.generation {
            return None;
        }
        slot.entry.as_mut()
    }

    /// Empties `slot` (whose node must already be out of the heap), bumps
    /// its generation so old keys go stale, and recycles or retires it.
    fn release(&mut self, slot: u32) -> Entry<T> {
        let s = &mut self.slots[slot as usize];
        let entry = s.entry.take().expect("releasing a vacant slot");
        if s.generation == u32::MAX {
            // Reusing the slot would have to wrap the generation and could
            // make a very old key valid again: retire the slot for good.
        } else {
            s.generation += 1;
            self.free.push(slot);
        }
        entry
    }

    /// Points the slab record of the node at `pos` back at `pos`.
    fn set_pos(&mut self, pos: usize) {
        let slot = self.heap[pos].slot as usize;
        match &mut self.slots[slot].entry {
            Some(entry) => entry.pos = pos,
            None => unreachable!("heap node {pos} points at vacant slot {slot}"),
        }
    }

    /// Removes the node at `pos` from the heap array (the slab slot is left
    /// to the caller).
    fn remove_at(&mut self, pos: usize) {
        let last = self.heap.pop().expect("remove_at on an empty heap");
        if pos < self.heap.len() {
            self.heap[pos] = last;
            self.set_pos(pos);
            self.fix(pos);
        }
    }

    /// Restores the heap order after the deadline at `pos` changed.
    fn fix(&mut self, pos: usize) {
        if pos > 0 && self.heap[pos].when < self.heap[(pos - 1) / ARITY].when {
            self.sift_up(pos);
        } else {
            self.sift_down(pos);
        }
    }

    fn sift_up(&mut self, mut pos: usize) {
        let moved = self.heap[pos];
        debug_assert!(
            moved.when > 0,
            "bad timer: sifting up a non-positive when {}",
            moved.when
        );
        while pos > 0 {
            let parent = (pos - 1) / ARITY;
            if self.heap[parent].when <= moved.when {
                break;
            }
            self.heap[pos] = self.heap[parent];
            self.set_pos(pos);
            pos = parent;
        }
        self.heap[pos] = moved;
        self.set_pos(pos);
        self.debug_check_local(pos);
    }

    fn sift_down(&mut self, mut pos: usize) {
        let n = self.heap.len();
        let moved = self.heap[pos];
        debug_assert!(
            moved.when > 0,
            "bad timer: sifting down a non-positive when {}",
            moved.when
        );
        loop {
            let first = pos.saturating_mul(ARITY).saturating_add(1);
            if first >= n {
                break;
            }
            let end = first.saturating_add(ARITY).min(n);
            let mut least = first;
            for child in first + 1..end {
                if self.heap[child].when < self.heap[least].when {
                    least = child;
                }
            }
            if moved.when <= self.heap[least].when {
                break;
            }
            self.heap[pos] = self.heap[least];
            self.set_pos(pos);
            pos = least;
        }
        self.heap[pos] = moved;
        self.set_pos(pos);
        self.debug_check_local(pos);
    }

    /// In debug builds, checks the node that a sift just placed at `pos`
    /// against its parent and children.
    fn debug_check_local(&self, pos: usize) {
        if cfg!(debug_assertions) {
            let when = self.heap[pos].when;
            if pos > 0 {
                let parent = (pos - 1) / ARITY;
                assert!(
                    self.heap[parent].when <= when,
                    "bad timer heap: heap[{parent}].when = {} > heap[{pos}].when = {when}",
                    self.heap[parent].when
                );
            }
            let first = pos.saturating_mul(ARITY).saturating_add(1);
            let end = first.saturating_add(ARITY).min(self.heap.len());
            for child in first..end {
                assert!(
                    when <= self.heap[child].when,
                    "bad timer heap: heap[{pos}].when = {when} > heap[{child}].when = {}",
                    self.heap[child].when
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::when_after;
    use std::time::Duration;

    fn whens<T: Clone>(fired: &[Fired<T>]) -> Vec<i64> {
        fired.iter().map(|f| f.when).collect()
    }

    #[test]
    fn empty() {
        let mut h: TimerHeap<u8> = TimerHeap::default();
        assert!(h.is_empty());
        assert_eq!(h.len(), 0);
        assert_eq!(h.peek(), None);
        assert_eq!(h.peek_when(), None);
        assert_eq!(h.pop_due(i64::MAX), None);
        h.check_invariants();
    }

    #[test]
    fn pops_in_deadline_order() {
        let mut h = TimerHeap::new();
        let order = [50, 10, 40, 30, 20, 70, 60, 5, 90, 80, 15, 25];
        for (i, &w) in order.iter().enumerate() {
            h.add(w, 0, i);
            h.check_invariants();
        }
        assert_eq!(h.len(), order.len());
        assert_eq!(h.peek_when(), Some(5));
        assert_eq!(h.pop_due(4), None);
        let mut fired = h.drain_due(45);
        h.check_invariants();
        assert_eq!(whens(&fired), vec![5, 10, 15, 20, 25, 30, 40]);
        fired.extend(h.drain_due(1000));
        let mut sorted = order.to_vec();
        sorted.sort();
        assert_eq!(whens(&fired), sorted);
        for f in &fired {
            assert_eq!(order[f.data], f.when);
            assert!(!f.periodic);
            assert!(!h.contains(f.key));
        }
        assert!(h.is_empty());
        h.check_invariants();
    }

    #[test]
    fn pop_due_fires_exactly_at_when() {
        let mut h = TimerHeap::new();
        let k = h.add(10, 0, "a");
        assert_eq!(h.pop_due(9), None);
        let f = h.pop_due(10).unwrap();
        assert_eq!(
            f,
            Fired {
                key: k,
                when: 10,
                data: "a",
                periodic: false
            }
        );
    }

    #[test]
    fn periodic_stays_and_skips_missed_periods() {
        let mut h = TimerHeap::new();
        let k = h.add(10, 5, 'p');
        let f = h.pop_due(10).unwrap();
        assert_eq!((f.key, f.when, f.data, f.periodic), (k, 10, 'p', true));
        assert_eq!(h.get(k), Some((15, 5, &'p')));
        assert_eq!(h.pop_due(14), None);
        // Fell far behind: fires once for deadline 15, next is 45 (> 43).
        let fired = h.drain_due(43);
        assert_eq!(whens(&fired), vec![15]);
        assert_eq!(h.get(k), Some((45, 5, &'p')));
        h.check_invariants();
    }

    #[test]
    fn periodic_with_max_period_pins_and_never_fires_again() {
        let mut h = TimerHeap::new();
        let k = h.add(1, i64::MAX, ());
        assert!(h.pop_due(1).unwrap().periodic);
        assert_eq!(h.get(k), Some((MAX_WHEN, i64::MAX, &())));
        assert_eq!(h.pop_due(MAX_WHEN - 1), None);
        // MAX_WHEN means never, even at now == MAX_WHEN (no endless loop).
        assert!(h.pop_due(MAX_WHEN).is_none());
        assert!(h.contains(k));
    }

    #[test]
    fn duration_max_timer_never_fires() {
        let mut h = TimerHeap::new();
        let never = h.add(when_after(100, Duration::MAX), 0, 0);
        let soon = h.add(when_after(100, Duration::from_nanos(5)), 0, 1);
        assert_eq!(h.peek(), Some((soon, 105)));
        let fired = h.drain_due(MAX_WHEN - 1);
        assert_eq!(fired.len(), 1);
        assert_eq!(fired[0].key, soon);
        assert_eq!(h.peek(), Some((never, MAX_WHEN)));
        assert!(h.pop_due(MAX_WHEN).is_none());
    }

    #[test]
    fn modify_moves_timer_both_ways() {
        let mut h = TimerHeap::new();
        let keys: Vec<_> = (1..=30).map(|w| h.add(w * 10, 0, w)).collect();
        assert!(h.modify(keys[29], 1, 0));
        h.check_invariants();
        assert_eq!(h.peek(), Some((keys[29], 1)));
        assert!(h.modify(keys[29], 1000, 7));
        h.check_invariants();
        assert_eq!(h.peek(), Some((keys[0], 10)));
        assert_eq!(h.get(keys[29]), Some((1000, 7, &30)));
        // Same deadline: still fine.
        assert!(h.modify(keys[5], 60, 0));
        h.check_invariants();
    }

    #[test]
    fn modify_turns_periodic_into_one_shot() {
        let mut h = TimerHeap::new();
        let k = h.add(5, 3, ());
        assert!(h.pop_due(5).unwrap().periodic);
        assert!(h.modify(k, 9, 0));
        let f = h.pop_due(9).unwrap();
        assert!(!f.periodic);
        assert!(!h.contains(k));
        assert!(!h.modify(k, 9, 0));
    }

    #[test]
    fn delete_from_the_middle() {
        let mut h = TimerHeap::new();
        let keys: Vec<_> = (0..40).map(|i| h.add(1 + (i * 7919) % 101, 0, i)).collect();
        for (n, &k) in keys.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
            assert_eq!(h.delete(k), Some(n as i64));
            h.check_invariants();
            assert_eq!(h.delete(k), None);
            assert!(!h.contains(k));
        }
        let fired = h.drain_due(1000);
        let w = whens(&fired);
        assert!(w.windows(2).all(|p| p[0] <= p[1]));
        assert_eq!(fired.len(), 40 - 14);
    }

    #[test]
    fn stale_keys_do_not_address_reused_slots() {
        let mut h = TimerHeap::new();
        let a = h.add(10, 0, "a");
        assert_eq!(h.delete(a), Some("a"));
        let b = h.add(20, 0, "b");
        assert_eq!(a.slot, b.slot, "slot is reused");
        assert_ne!(a, b);
        assert!(!h.contains(a));
        assert_eq!(h.get(a), None);
        assert_eq!(h.get_mut(a), None);
        assert!(!h.modify(a, 5, 0));
        assert_eq!(h.delete(a), None);
        assert_eq!(h.get(b), Some((20, 0, &"b")));
        // A fired one-shot goes stale the same way.
        let f = h.pop_due(20).unwrap();
        assert_eq!(f.key, b);
        let c = h.add(30, 0, "c");
        assert_eq!(c.slot, b.slot);
        assert!(!h.contains(b));
        assert!(h.contains(c));
    }

    #[test]
    fn exhausted_slot_is_retired_not_reused() {
        let mut h = TimerHeap::new();
        let a = h.add(10, 0, 1);
        h.slots[a.slot as usize].generation = u32::MAX;
        let a = h.key_of(a.slot);
        assert_eq!(h.delete(a), Some(1));
        h.check_invariants();
        let b = h.add(10, 0, 2);
        assert_ne!(a.slot, b.slot);
        assert!(!h.contains(a));
        assert!(h.contains(b));
        h.check_invariants();
    }

    #[test]
    fn keys_from_another_heap_are_not_live() {
        let mut big = TimerHeap::new();
        for i in 0..10 {
            big.add(1 + i, 0, ());
        }
        let foreign = big.add(100, 0, ());
        let small: TimerHeap<()> = TimerHeap::new();
        assert!(!small.contains(foreign));
        assert_eq!(small.get(foreign), None);
    }

    #[test]
    fn get_mut_changes_data() {
        let mut h = TimerHeap::new();
        let k = h.add(3, 2, vec![1]);
        h.get_mut(k).unwrap().push(2);
        let f = h.pop_due(3).unwrap();
        assert_eq!(f.data, vec![1, 2]);
        h.get_mut(k).unwrap().push(3);
        assert_eq!(h.get(k), Some((5, 2, &vec![1, 2, 3])));
    }

    #[test]
    fn four_ary_layout() {
        // Increasing deadlines leave the array in insertion order; check the
        // parent/child arithmetic against it.
        let mut h = TimerHeap::new();
        for w in 2..=22 {
            h.add(w, 0, ());
        }
        let w: Vec<i64> = h.heap.iter().map(|n| n.when).collect();
        assert_eq!(w, (2..=22).collect::<Vec<_>>());
        // Lowering the last node (position 20, parent 4, grandparent 0)
        // below everything moves it to the root in two steps, each
        // displaced node moving down one level.
        let last = h.key_of(h.heap[20].slot);
        assert!(h.modify(last, 1, 0));
        h.check_invariants();
        assert_eq!(h.heap[0].slot, last.slot);
        assert_eq!(h.heap[4].when, 2);
        assert_eq!(h.heap[20].when, 6);
        // Raising the root above everything sends it down along the least
        // child each time: position 0 -> 4 (children 1..=4 hold 3, 4, 5, 2)
        // -> 20 (children 17..=20 hold 19, 20, 21, 6).
        assert!(h.modify(last, 100, 0));
        h.check_invariants();
        assert_eq!(h.heap[20].slot, last.slot);
        assert_eq!(h.heap[0].when, 2);
        assert_eq!(h.heap[4].when, 6);
    }

    #[test]
    fn ties_all_fire() {
        let mut h = TimerHeap::new();
        let keys: Vec<_> = (0..17).map(|i| h.add(7, 0, i)).collect();
        let fired = h.drain_due(7);
        assert_eq!(fired.len(), 17);
        let mut got: Vec<_> = fired.iter().map(|f| f.key).collect();
        got.sort();
        let mut want = keys.clone();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    #[should_panic(expected = "timer when must be positive")]
    fn add_rejects_zero_when() {
        TimerHeap::new().add(0, 0, ());
    }

    #[test]
    #[should_panic(expected = "timer period must be non-negative")]
    fn add_rejects_negative_period() {
        TimerHeap::new().add(1, -5, ());
    }

    #[test]
    #[should_panic(expected = "timer when must be positive")]
    fn modify_rejects_bad_when_even_for_stale_key() {
        let mut h = TimerHeap::new();
        let k = h.add(1, 0, ());
        h.delete(k);
        h.modify(k, -1, 0);
    }

    #[test]
    #[should_panic(expected = "timer period must be non-negative")]
    fn modify_rejects_bad_period_even_for_stale_key() {
        let mut h = TimerHeap::new();
        let k = h.add(1, 0, ());
        h.delete(k);
        h.modify(k, 1, i64::MIN);
    }

    #[test]
    fn failed_add_changes_nothing() {
        let mut h = TimerHeap::new();
        h.add(4, 0, 1);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.add(-4, 0, 2);
        }));
        assert!(r.is_err());
        assert_eq!(h.len(), 1);
        h.check_invariants();
    }

    #[test]
    #[should_panic(expected = "heap order broken")]
    fn check_invariants_catches_bad_order() {
        let mut h = TimerHeap::new();
        h.add(1, 0, ());
        h.add(2, 0, ());
        h.heap[0].when = 3;
        h.check_invariants();
    }

    #[test]
    #[should_panic(expected = "back index")]
    fn check_invariants_catches_bad_back_index() {
        let mut h = TimerHeap::new();
        let k = h.add(1, 0, ());
        h.add(2, 0, ());
        h.slots[k.slot as usize].entry.as_mut().unwrap().pos = 1;
        h.check_invariants();
    }
}
