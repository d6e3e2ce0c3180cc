//! Coroutine-local storage: [`LocalKey`] and the
//! [`coroutine_local!`](crate::coroutine_local) macro, what `thread_local!` cannot be
//! on a coroutine that moves between threads (docs/caveats.md, rule 1).
//!
//! Each coroutine has its own table of values (`local_table.rs`, inside its G), and so
//! does each plain thread that uses a key. [`LocalKey::with`] finds the running
//! coroutine's table (also inside a [`blocking`](crate::blocking) call, where the
//! coroutine runs as a plain thread but is still itself), else the thread's, and makes
//! the value with the key's initialiser the first time. A table is borrowed only for
//! a lookup or a store, never while user code runs, so initialisers, destructors and
//! the closures given to `with` may use other keys, and may park.
//!
//! A coroutine's values are dropped as it ends, on the coroutine: see
//! [`drop_coroutine_locals`] and "how a coroutine ends" in `spawn.rs`.

use std::any::Any;
use std::cell::RefCell;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::local_table::{LocalTable, LocalValue, Lookup};
use crate::sched;

/// Declares coroutine-local statics: one value per coroutine (per thread, on plain
/// threads), made by its initialiser on the first [`with`](crate::LocalKey::with) and
/// dropped when the coroutine ends. The syntax is `thread_local!`'s, without the
/// `const { ... }` form.
///
/// ```
/// use std::cell::RefCell;
///
/// goro::coroutine_local! {
///     static COUNT: RefCell<u32> = RefCell::new(0);
///     pub static NAME: String = String::from("unnamed");
/// }
///
/// let hs: Vec<_> = (1..=3u32)
///     .map(|n| {
///         goro::spawn(move || {
///             for _ in 0..n {
///                 COUNT.with(|c| *c.borrow_mut() += 1);
///                 goro::yield_now(); // may resume on another thread
///             }
///             COUNT.with(|c| *c.borrow())
///         })
///     })
///     .collect();
/// let counts: Vec<u32> = hs.into_iter().map(|h| h.join().unwrap()).collect();
/// assert_eq!(counts, [1, 2, 3]); // each coroutine counted its own
/// assert_eq!(COUNT.with(|c| *c.borrow()), 0); // and this thread has its own too
/// assert_eq!(NAME.with(|n| n.len()), 7);
/// ```
#[macro_export]
macro_rules! coroutine_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr; $($rest:tt)*) => {
        $crate::coroutine_local!($(#[$attr])* $vis static $name: $t = $init);
        $crate::coroutine_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr) => {
        $(#[$attr])*
        $vis static $name: $crate::LocalKey<$t> =
            $crate::LocalKey::__new(::core::stringify!($name), || -> $t { $init });
    };
}

/// A coroutine-local static, declared with
/// [`coroutine_local!`](crate::coroutine_local): one value of `T` per coroutine (or
/// per plain thread).
///
/// # Lifetime of a value
///
/// - **Made** by the key's initialiser on the first [`with`](LocalKey::with) in a
///   coroutine (or thread). If the initialiser panics, nothing is stored and the next
///   `with` tries again; an initialiser that uses its own key panics.
/// - **Dropped**, for a coroutine, when the coroutine's function has returned or
///   unwound (the values it captured are already dropped), on the coroutine itself
///   (its stack, whichever thread it is on by then), all of its values last-made
///   first, and before the coroutine counts as finished: before `join` returns, before
///   `is_finished` is true, before `JoinSet::join_next` hands out its result, before a
///   `scope` returns. A destructor may use goro (park, lock, send); one that panics
///   makes the coroutine's result that panic, if the function itself returned. A
///   destructor may use another key (a key not used before is made, and dropped in
///   turn), but not one whose value was already dropped: that `with` panics. A coroutine
///   that never ends (parked for ever, rule 5 of docs/caveats.md) keeps its values.
/// - On a **plain thread**, the values are dropped like `thread_local!`'s, when the
///   thread exits (std does not run them for the main thread).
///
/// # Why `T` need not be `Send`
///
/// A value is reachable only from its own coroutine, as if it were a local variable
/// at the bottom of that coroutine's stack, and it is made, used and dropped by that
/// coroutine only. When the coroutine moves to another thread, its values move with
/// it, exactly as the values on its stack do, under the same contract
/// (docs/decisions/0001-coroutines-migrate-between-threads.md): an `Rc` or `RefCell`
/// that only this coroutine can reach may move with it. What the contract forbids on
/// the stack it forbids here too (docs/caveats.md, rule 1): a value tied to the thread
/// it was made on (a `std::sync::MutexGuard`, an `Rc` shared with a `thread_local!`, a
/// thread-bound FFI handle) must not be kept in a coroutine-local across a blocking
/// call. And unlike a `thread_local!`, a reference given to a `with` closure may be held
/// across one: the closure may park, and it finds its value on whichever thread it
/// resumes on.
pub struct LocalKey<T: 'static> {
    name: &'static str,
    init: fn() -> T,
    /// This key's slot in every table, allocated on first use.
    key: OnceLock<usize>,
}

/// The next key number to hand out (`LocalKey::index`). Relaxed: only uniqueness
/// matters, and the `OnceLock` that stores a key's number publishes it.
static NEXT_KEY: AtomicUsize = AtomicUsize::new(0);

impl<T: 'static> LocalKey<T> {
    /// Used by [`coroutine_local!`](crate::coroutine_local); not an API.
    #[doc(hidden)]
    pub const fn __new(name: &'static str, init: fn() -> T) -> LocalKey<T> {
        LocalKey {
            name,
            init,
            key: OnceLock::new(),
        }
    }

    /// Calls `f` with this coroutine's value (this thread's, on a plain thread), making
    /// it first if this is the key's first use here.
    ///
    /// `f` may block, park and resume on another thread: the value belongs to the
    /// coroutine, not to the thread.
    ///
    /// # Panics
    ///
    /// If called from the key's own initialiser; from the destructor of a value of this
    /// coroutine after this key's value was dropped; or on a plain thread whose
    /// coroutine-locals have been destroyed (from another thread-local's destructor).
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        let value = self.value();
        match value.downcast_ref::<T>() {
            Some(v) => f(v),
            None => panic!(
                "coroutine_local: {} holds a value of another type",
                self.name
            ),
        }
    }

    fn index(&self) -> usize {
        // Relaxed: the RMW alone makes each key's index unique; nothing is published
        // with it (the OnceLock publishes the index itself).
        *self
            .key
            .get_or_init(|| NEXT_KEY.fetch_add(1, Ordering::Relaxed))
    }

    /// This coroutine's (or thread's) value, made if need be.
    fn value(&'static self) -> LocalValue {
        let key = self.index();
        match with_table(self.name, |t| t.lookup(key)) {
            Lookup::Alive(v) => v,
            Lookup::MustInit => {
                // Puts the slot back to empty if the initialiser unwinds.
                struct Unfill<'a> {
                    name: &'a str,
                    key: usize,
                }
                impl Drop for Unfill<'_> {
                    fn drop(&mut self) {
                        with_table(self.name, |t| t.unfill(self.key));
                    }
                }
                let guard = Unfill {
                    name: self.name,
                    key,
                };
                // The initialiser runs with no table borrowed: it may use other keys,
                // and park (the table is looked up afresh below).
                let v: LocalValue = Rc::new((self.init)());
                std::mem::forget(guard);
                with_table(self.name, |t| t.fill(key, v.clone()));
                v
            }
            Lookup::Initialising => panic!(
                "coroutine_local: {} was used by its own initialiser (recursive initialisation)",
                self.name
            ),
            Lookup::Dropped => panic!(
                "coroutine_local: {} was used after its value was dropped (by another \
                 coroutine-local's destructor, as the coroutine ended)",
                self.name
            ),
            Lookup::Closed => panic!(
                "coroutine_local: {} was used after the coroutine's coroutine-locals were \
                 dropped (as it ended)",
                self.name
            ),
        }
    }
}

impl<T: 'static> fmt::Debug for LocalKey<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalKey")
            .field("name", &self.name)
            .finish()
    }
}

/// A plain thread's table; drops its values, last made first, as the thread exits.
struct ThreadTable(RefCell<LocalTable>);

impl Drop for ThreadTable {
    fn drop(&mut self) {
        let table = self.0.get_mut();
        while let Some(v) = table.take_last() {
            drop(v);
        }
    }
}

thread_local! {
    static THREAD_TABLE: ThreadTable = const { ThreadTable(RefCell::new(LocalTable::new())) };
}

/// Runs `f` on the running coroutine's table, else on this thread's. `f` is runtime
/// code that neither switches nor runs user code.
fn with_table<R>(name: &str, f: impl FnOnce(&mut LocalTable) -> R) -> R {
    let g = sched::current_locals();
    if !g.is_null() {
        // SAFETY: `current_locals` gave the running coroutine's table, valid until it
        // switches; `f` does not switch, and only this coroutine touches its table.
        let table = unsafe { &*g };
        return f(&mut table.borrow_mut());
    }
    THREAD_TABLE
        .try_with(|t| f(&mut t.0.borrow_mut()))
        .unwrap_or_else(|_| {
            panic!(
                "coroutine_local: {name} was used on a thread whose coroutine-locals were \
                 already destroyed (from a thread-local's destructor as the thread exits)"
            )
        })
}

/// Drops the running coroutine's coroutine-local values, last made first, and closes
/// its table (step 2 of "how a coroutine ends", `spawn.rs`). Returns the payload of the
/// first destructor that panicked; the others still run. Called by `spawn::run`, on
/// the coroutine, once its function has returned or unwound.
pub(crate) fn drop_coroutine_locals() -> Option<Box<dyn Any + Send>> {
    let mut first_panic = None;
    loop {
        let table = sched::current_locals();
        if table.is_null() {
            sched::fatal!("drop_coroutine_locals: not on a coroutine");
        }
        // SAFETY: as in `with_table`; the borrow ends before the value is dropped, and
        // the table is looked up afresh after each drop (a destructor may switch).
        let last = unsafe { &*table }.borrow_mut().take_last();
        let Some(v) = last else {
            return first_panic;
        };
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(v))) {
            first_panic.get_or_insert(p);
        }
    }
}
