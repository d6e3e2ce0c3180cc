//! The table of one coroutine's coroutine-local values (or one plain thread's): a slot
//! per `coroutine_local!` key, indexed by the key's number, and the order the values
//! were made in, so that they are dropped last-made first. `local.rs` (layer 3) builds
//! the public `LocalKey` on it; a G embeds one table (`sched/g.rs`), and so does every
//! plain thread that uses a key.
//!
//! # Slot states
//!
//! ```text
//! Empty --first access--> Initialising --init returned--> Alive --teardown--> Dropped
//!                         Initialising --init panicked--> Empty
//! ```
//!
//! Once teardown has taken every value, the table is closed: any lookup says so.
//!
//! A table is used by one coroutine (or thread) only, and never across a switch: each
//! access borrows it for a few instructions and lets go before any user code runs
//! (an initialiser, a destructor, the closure given to `with`), so that user code can
//! use other keys, or park, meanwhile.

use std::any::Any;
use std::rc::Rc;

/// A made value, shared with the `with` calls running on it (they clone the `Rc`, so
/// the table can be borrowed again, and grown, while they run).
pub(crate) type LocalValue = Rc<dyn Any>;

enum Slot {
    Empty,
    Initialising,
    Alive(LocalValue),
    Dropped,
}

/// The values of one coroutine or thread. Empty (one null pointer, no allocation) until
/// a key is used.
#[derive(Default)]
pub(crate) struct LocalTable {
    inner: Option<Box<Inner>>,
    /// Set once teardown has dropped everything: no key may be used any more.
    closed: bool,
}

#[derive(Default)]
struct Inner {
    slots: Vec<Slot>,
    /// Keys whose slot is `Alive`, in the order their values were made.
    made: Vec<usize>,
}

/// What a lookup found (see [`LocalTable::lookup`]).
pub(crate) enum Lookup {
    /// The value: use it.
    Alive(LocalValue),
    /// No value yet; the slot is now `Initialising` and the caller must make one and
    /// [`LocalTable::fill`] it, or [`LocalTable::unfill`] if making it failed.
    MustInit,
    /// The key's initialiser is running and used the key itself.
    Initialising,
    /// The value was dropped as the coroutine ended.
    Dropped,
    /// The table was torn down: its owner has ended.
    Closed,
}

impl LocalTable {
    /// An empty table (const, for a thread-local).
    pub(crate) const fn new() -> LocalTable {
        LocalTable {
            inner: None,
            closed: false,
        }
    }

    /// The value of key `key`, or what to do about it.
    pub(crate) fn lookup(&mut self, key: usize) -> Lookup {
        if self.closed {
            return Lookup::Closed;
        }
        let inner = self.inner.get_or_insert_with(Box::default);
        if inner.slots.len() <= key {
            inner.slots.resize_with(key + 1, || Slot::Empty);
        }
        let slot = &mut inner.slots[key];
        match slot {
            Slot::Alive(v) => Lookup::Alive(v.clone()),
            Slot::Empty => {
                *slot = Slot::Initialising;
                Lookup::MustInit
            }
            Slot::Initialising => Lookup::Initialising,
            Slot::Dropped => Lookup::Dropped,
        }
    }

    /// Stores the value made after `lookup` said `MustInit`.
    pub(crate) fn fill(&mut self, key: usize, value: LocalValue) {
        let inner = self.slot_owner("fill", key);
        inner.slots[key] = Slot::Alive(value);
        inner.made.push(key);
    }

    /// Undoes a `MustInit` whose initialiser panicked: the next access tries again.
    pub(crate) fn unfill(&mut self, key: usize) {
        let inner = self.slot_owner("unfill", key);
        inner.slots[key] = Slot::Empty;
    }

    fn slot_owner(&mut self, who: &str, key: usize) -> &mut Inner {
        match self.inner.as_deref_mut() {
            Some(inner) if matches!(inner.slots.get(key), Some(Slot::Initialising)) => inner,
            _ => panic!("LocalTable::{who}: key {key} is not being initialised"),
        }
    }

    /// Teardown, one step: takes the most recently made value out (its slot becomes
    /// `Dropped`) for the caller to drop, with the table no longer borrowed. None once
    /// nothing is left; the table is then closed and its memory freed. A value made
    /// during teardown (by another value's destructor) is taken by a later step, so
    /// this ends: each key is made at most once per table.
    pub(crate) fn take_last(&mut self) -> Option<LocalValue> {
        if let Some(inner) = self.inner.as_deref_mut() {
            if let Some(key) = inner.made.pop() {
                return match std::mem::replace(&mut inner.slots[key], Slot::Dropped) {
                    Slot::Alive(v) => Some(v),
                    _ => panic!("LocalTable::take_last: key {key} was listed but not alive"),
                };
            }
        }
        self.inner = None;
        self.closed = true;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookup_fill_and_teardown_last_made_first() {
        let mut t = LocalTable::new();
        assert!(matches!(t.lookup(3), Lookup::MustInit));
        assert!(matches!(t.lookup(3), Lookup::Initialising));
        t.fill(3, Rc::new(30u32));
        assert!(matches!(t.lookup(0), Lookup::MustInit));
        t.unfill(0);
        assert!(matches!(t.lookup(0), Lookup::MustInit));
        t.fill(0, Rc::new(0u32));
        match t.lookup(3) {
            Lookup::Alive(v) => assert_eq!(v.downcast_ref::<u32>(), Some(&30)),
            _ => panic!("key 3 not alive"),
        }
        let first = t.take_last().unwrap();
        assert_eq!(first.downcast_ref::<u32>(), Some(&0));
        assert!(matches!(t.lookup(0), Lookup::Dropped));
        // A key first used during teardown is made, then dropped in turn.
        assert!(matches!(t.lookup(1), Lookup::MustInit));
        t.fill(1, Rc::new(10u32));
        assert_eq!(t.take_last().unwrap().downcast_ref::<u32>(), Some(&10));
        assert_eq!(t.take_last().unwrap().downcast_ref::<u32>(), Some(&30));
        assert!(t.take_last().is_none());
        assert!(matches!(t.lookup(2), Lookup::Closed));
        // A table never used closes without allocating.
        let mut unused = LocalTable::new();
        assert!(unused.take_last().is_none());
        assert!(unused.inner.is_none() && matches!(unused.lookup(0), Lookup::Closed));
    }
}
