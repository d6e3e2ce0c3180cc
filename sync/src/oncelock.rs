//! [`OnceLock`] and [`LazyLock`]: std's cells that are written once, whose second
//! caller waits by parking.
//!
//! std's versions block the OS thread of a caller that finds the cell being
//! initialised. On a coroutine that is the M, and with it the P: at one P, an
//! initialiser that itself parks (a channel receive, a sleep, a socket read) can then
//! never be resumed, and the program hangs. Here a caller that finds the cell being
//! initialised waits on goro's mutex, which parks a coroutine and blocks a thread.
//!
//! The API is std's. As in std, an initialiser that panics leaves the cell empty and
//! the next caller initialises it (a [`LazyLock`] whose initialiser panicked is
//! poisoned: its function is gone, and every later use panics); an initialiser that
//! uses its own cell deadlocks.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::Deref;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::sync::atomic::AtomicBool;

use crate::loom::Ordering;
use crate::mutex::RawMutex;
use crate::once::Gate;

/// A cell written at most once (std's `OnceLock`), for coroutines and threads alike.
///
/// ```
/// use goro::sync::OnceLock;
///
/// static CONFIG: OnceLock<String> = OnceLock::new();
///
/// let h = goro::go!(|| {
///     // The first caller runs the initialiser; one that comes meanwhile parks.
///     CONFIG.get_or_init(|| {
///         goro::time::sleep(std::time::Duration::from_millis(1)); // it may park
///         "from a coroutine".to_string()
///     })
///     .len()
/// });
/// assert_eq!(h.join().unwrap(), 16);
/// assert_eq!(CONFIG.get().map(String::as_str), Some("from a coroutine"));
/// assert_eq!(CONFIG.set("again".into()), Err("again".to_string()));
/// ```
pub struct OnceLock<T> {
    /// Whether `value` holds a value. Written (Release) once, under `m`, after the
    /// value; read (Acquire) by every `get`, which then reads the value.
    set: AtomicBool,
    /// Taken by the one initialising, and by those waiting for it.
    m: RawMutex,
    /// Opened when `set` is, for `wait`.
    gate: Gate,
    /// Some once `set`. An `Option` rather than a `MaybeUninit` with a `Drop` of our
    /// own: with no `Drop` impl, the drop check is std's, which lets a cell hold a
    /// reference that dies with the cell (std's `OnceLock` gets there with the unstable
    /// `#[may_dangle]`).
    value: UnsafeCell<Option<T>>,
}

// SAFETY: a shared `OnceLock` hands out `&T` to any thread (so T: Sync) and moves a T
// in from whichever thread initialises it (so T: Send), as std's does. The value is
// written once, under `m`, before `set` is published with Release; readers read it
// only after an Acquire load of `set` saw true.
unsafe impl<T: Sync + Send> Sync for OnceLock<T> {}
// SAFETY: owning the cell owns the T.
unsafe impl<T: Send> Send for OnceLock<T> {}
impl<T: RefUnwindSafe + UnwindSafe> RefUnwindSafe for OnceLock<T> {}
impl<T: UnwindSafe> UnwindSafe for OnceLock<T> {}

impl<T> OnceLock<T> {
    /// An empty cell.
    pub const fn new() -> OnceLock<T> {
        OnceLock {
            set: AtomicBool::new(false),
            m: RawMutex::new(),
            gate: Gate::new(),
            value: UnsafeCell::new(None),
        }
    }

    /// The value, if the cell has one. Never waits.
    pub fn get(&self) -> Option<&T> {
        // Acquire: pairs with the Release in `init`, so the value is visible.
        if self.set.load(Ordering::Acquire) {
            // SAFETY: set, so the value is written and never written again while
            // `&self` lives.
            unsafe { (*self.value.get()).as_ref() }
        } else {
            None
        }
    }

    /// The value, mutably, if the cell has one.
    pub fn get_mut(&mut self) -> Option<&mut T> {
        // `&mut self`: nobody else reads or writes the value.
        self.value.get_mut().as_mut()
    }

    /// Puts `value` in the cell if it is empty; else gives it back. Waits if another
    /// caller is initialising the cell.
    pub fn set(&self, value: T) -> Result<(), T> {
        let mut value = Some(value);
        self.get_or_init(|| value.take().expect("taken once"));
        match value {
            None => Ok(()),
            Some(v) => Err(v),
        }
    }

    /// The value, running `f` to make it if the cell is empty. Waits (parks a
    /// coroutine, blocks a thread) while another caller's `f` runs; if that one
    /// panics, the next waiter runs its own.
    pub fn get_or_init(&self, f: impl FnOnce() -> T) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        self.init(f)
    }

    #[cold]
    fn init(&self, f: impl FnOnce() -> T) -> &T {
        struct Unlock<'a>(&'a RawMutex);
        impl Drop for Unlock<'_> {
            fn drop(&mut self) {
                self.0.unlock(); // on unwind too: the next waiter tries again
            }
        }
        self.m.lock();
        let _unlock = Unlock(&self.m);
        // Relaxed: `set` is written only under `m`, which we hold.
        if !self.set.load(Ordering::Relaxed) {
            let v = f();
            // SAFETY: under `m`, and not set: nobody reads or writes the value.
            unsafe { *self.value.get() = Some(v) };
            // Release: publishes the value to the lock-free readers of `get`.
            self.set.store(true, Ordering::Release);
            self.gate.open();
        }
        // SAFETY: set (by us or before us), and never written again.
        unsafe { (*self.value.get()).as_ref() }.expect("OnceLock: set without a value")
    }

    /// Waits until the cell has a value, without initialising it: a coroutine parks,
    /// a thread blocks, until a `set` or `get_or_init` elsewhere succeeds (std's
    /// `OnceLock::wait`).
    ///
    /// ```
    /// use goro::sync::OnceLock;
    /// use std::sync::Arc;
    ///
    /// let cell = Arc::new(OnceLock::new());
    /// let c = cell.clone();
    /// let waiter = goro::go!(move || *c.wait());
    /// cell.set(7).unwrap();
    /// assert_eq!(waiter.join().unwrap(), 7);
    /// ```
    pub fn wait(&self) -> &T {
        if let Some(v) = self.get() {
            return v;
        }
        self.gate.wait();
        self.get()
            .expect("OnceLock::wait: the gate opened with no value")
    }

    /// The value, if any, out of the cell.
    pub fn into_inner(mut self) -> Option<T> {
        self.take()
    }

    /// Takes the value out, leaving the cell empty.
    pub fn take(&mut self) -> Option<T> {
        *self.set.get_mut() = false;
        self.gate.reset();
        self.value.get_mut().take()
    }
}

impl<T> Default for OnceLock<T> {
    fn default() -> Self {
        OnceLock::new()
    }
}

impl<T> From<T> for OnceLock<T> {
    fn from(v: T) -> Self {
        let cell = OnceLock::new();
        let _ = cell.set(v);
        cell
    }
}

impl<T: Clone> Clone for OnceLock<T> {
    fn clone(&self) -> Self {
        match self.get() {
            Some(v) => OnceLock::from(v.clone()),
            None => OnceLock::new(),
        }
    }
}

impl<T: PartialEq> PartialEq for OnceLock<T> {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl<T: Eq> Eq for OnceLock<T> {}

impl<T: fmt::Debug> fmt::Debug for OnceLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.get() {
            Some(v) => f.debug_tuple("OnceLock").field(v).finish(),
            None => f.write_str("OnceLock(<uninit>)"),
        }
    }
}

/// A value made on first use (std's `LazyLock`), for coroutines and threads alike: a
/// caller that comes while another runs the initialiser parks.
///
/// ```
/// use goro::sync::LazyLock;
/// use std::collections::HashMap;
///
/// static PRIMES: LazyLock<HashMap<u32, bool>> =
///     LazyLock::new(|| (2..20).map(|n| (n, (2..n).all(|d| n % d != 0))).collect());
///
/// let hs: Vec<_> = (0..4).map(|_| goro::go!(|| PRIMES[&17])).collect();
/// assert!(hs.into_iter().all(|h| h.join().unwrap()));
/// assert!(!PRIMES[&15]);
/// ```
pub struct LazyLock<T, F = fn() -> T> {
    cell: OnceLock<T>,
    /// The initialiser, taken (under the cell's mutex) by the call that runs it.
    init: UnsafeCell<Option<F>>,
}

// SAFETY: `init` is taken only inside the cell's initialisation, under its mutex, by
// one caller; after that only the cell's value is shared (as `OnceLock`'s). The
// function moves to whichever thread runs it, hence F: Send.
unsafe impl<T: Sync + Send, F: Send> Sync for LazyLock<T, F> {}
impl<T: RefUnwindSafe + UnwindSafe, F: UnwindSafe> RefUnwindSafe for LazyLock<T, F> {}

impl<T, F: FnOnce() -> T> LazyLock<T, F> {
    /// A value that `f` makes on first use.
    pub const fn new(f: F) -> LazyLock<T, F> {
        LazyLock {
            cell: OnceLock::new(),
            init: UnsafeCell::new(Some(f)),
        }
    }

    /// The value, made now if this is the first use.
    ///
    /// # Panics
    ///
    /// If the initialiser panicked in an earlier use (the value can never be made).
    pub fn force(this: &LazyLock<T, F>) -> &T {
        this.cell.get_or_init(|| {
            // SAFETY: we are inside the cell's initialisation, under its mutex: the
            // only place that touches `init`.
            let f = unsafe { (*this.init.get()).take() };
            match f {
                Some(f) => f(),
                // std's message for a LazyLock whose initialiser panicked.
                None => panic!("LazyLock instance has previously been poisoned"),
            }
        })
    }

    /// The value, if it has been made. Never waits.
    pub fn get(this: &LazyLock<T, F>) -> Option<&T> {
        this.cell.get()
    }

    /// The value, or the initialiser if it has not run (`Err(f)`).
    ///
    /// # Panics
    ///
    /// If the initialiser panicked in an earlier use.
    pub fn into_inner(this: LazyLock<T, F>) -> Result<T, F> {
        let LazyLock { cell, init } = this;
        match cell.into_inner() {
            Some(v) => Ok(v),
            None => Err(init
                .into_inner()
                .expect("LazyLock instance has previously been poisoned")),
        }
    }
}

impl<T, F: FnOnce() -> T> Deref for LazyLock<T, F> {
    type Target = T;
    fn deref(&self) -> &T {
        LazyLock::force(self)
    }
}

impl<T: Default> Default for LazyLock<T> {
    fn default() -> Self {
        LazyLock::new(T::default)
    }
}

impl<T: fmt::Debug, F> fmt::Debug for LazyLock<T, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cell.get() {
            Some(v) => f.debug_tuple("LazyLock").field(v).finish(),
            None => f.write_str("LazyLock(<uninit>)"),
        }
    }
}
