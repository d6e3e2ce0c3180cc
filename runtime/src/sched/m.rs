//! M: an OS thread that runs coroutines while it holds a P.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, Thread};

use super::g::G;
use super::p::{HeldP, P};
use super::{fatal, rt};

/// An M's own state. Lives as long as its thread (Ms never exit), on that thread only.
pub(crate) struct M {
    pub(crate) id: usize,
    /// What other threads use to hand this M a P and wake it.
    pub(crate) shared: Arc<MShared>,
    /// The P this M holds.
    p: Cell<Option<HeldP>>,
    /// The G this M is running (set around each resume), or null.
    curg: Cell<*const G>,
    /// Whether this M is counted in `nmspinning`.
    pub(crate) spinning: Cell<bool>,
}

/// The part of an M that other threads touch: its wake-up hand-off.
pub(crate) struct MShared {
    /// The P (and spinning flag) handed over by `startm`.
    next: Mutex<Option<(&'static P, bool)>>,
    /// Set (Release) after `next` is filled; cleared by the M when it wakes.
    woken: AtomicBool,
    thread: Thread,
}

impl MShared {
    /// Hands `p` to this parked M and wakes it (Go: notewakeup(&mp.park)).
    pub(crate) fn hand(&self, p: &'static P, spinning: bool) {
        *self.next.lock().unwrap_or_else(|e| e.into_inner()) = Some((p, spinning));
        // Release: pairs with the Acquire swap in `wait_for_p`.
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }

    /// Parks the calling M until `hand` gives it a P (Go: notesleep).
    fn wait_for_p(&self) -> (&'static P, bool) {
        loop {
            // Acquire: pairs with the Release store in `hand`.
            if self.woken.swap(false, Ordering::Acquire) {
                if let Some(next) = self.next.lock().unwrap_or_else(|e| e.into_inner()).take() {
                    return next;
                }
            }
            thread::park();
        }
    }
}

thread_local! {
    /// The M of this thread, or null on a thread that is not an M. Const-initialised
    /// and without destructor: a plain TLS load.
    static CURRENT_M: Cell<*const M> = const { Cell::new(std::ptr::null()) };
}

/// The current thread's M, if it is one.
///
/// `#[inline(never)]` on purpose: a G that suspends may resume on another thread, and
/// the compiler may keep a thread-local's address in a register across a call it
/// believes returns on the same thread. Every read of per-M state after a switch goes
/// through a fresh call to this function.
#[inline(never)]
pub(crate) fn current_m() -> Option<&'static M> {
    let m = CURRENT_M.with(|c| c.get());
    // SAFETY: a non-null CURRENT_M points at the leaked M of this thread.
    (!m.is_null()).then(|| unsafe { &*m })
}

/// The G running on this thread, or null. `#[inline(never)]` for the same reason as
/// [`current_m`].
#[inline(never)]
pub(crate) fn current_g_ptr() -> *const G {
    match current_m() {
        Some(m) => m.curg.get(),
        None => std::ptr::null(),
    }
}

impl M {
    /// The P this M holds.
    #[inline]
    pub(crate) fn p(&self) -> Option<HeldP> {
        self.p.get()
    }

    /// The P this M must hold here.
    pub(crate) fn held_p(&self, who: &str) -> HeldP {
        match self.p.get() {
            Some(p) => p,
            None => fatal!("{who}: M {} holds no P", self.id),
        }
    }

    /// Takes `p` as this M's P (Go: acquirep). `p` must have come off the idle list,
    /// been handed over by `startm`, or be newly created.
    pub(crate) fn acquirep(&self, p: &'static P) {
        if self.p.get().is_some() {
            fatal!("acquirep: M {} already holds a P", self.id);
        }
        p.set_status(super::p::PStatus::Running);
        // SAFETY: the caller took `p` from the idle list or a hand-off, so this M is
        // now its only holder.
        self.p.set(Some(unsafe { HeldP::new(p) }));
    }

    /// Gives up this M's P (Go: releasep); the caller puts it on the idle list or
    /// retires it.
    pub(crate) fn releasep(&self) -> &'static P {
        match self.p.take() {
            Some(p) => p.p(),
            None => fatal!("releasep: M {} holds no P", self.id),
        }
    }

    pub(crate) fn set_curg(&self, g: *const G) {
        self.curg.set(g);
    }

    /// Parks this M until it is handed a P (Go: stopm). Must hold no P.
    pub(crate) fn stopm(&self) {
        if self.p.get().is_some() {
            fatal!("stopm: M {} still holds a P", self.id);
        }
        rt().sched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .idle_ms
            .push(self.shared.clone());
        let (p, spinning) = self.shared.wait_for_p();
        self.acquirep(p);
        self.spinning.set(spinning);
    }
}

/// Starts a new M holding `p` (Go: newm). Aborts if the OS refuses a thread: the
/// runtime cannot keep its promise to run queued coroutines without one.
pub(crate) fn newm(p: &'static P, spinning: bool) {
    let id = rt().nm.fetch_add(1, Ordering::Relaxed);
    let spawned = thread::Builder::new()
        .name(format!("goro-m{id}"))
        .spawn(move || {
            crate::stack::overflow::ensure_altstack();
            let shared = Arc::new(MShared {
                next: Mutex::new(None),
                woken: AtomicBool::new(false),
                thread: thread::current(),
            });
            let m: &'static M = Box::leak(Box::new(M {
                id,
                shared,
                p: Cell::new(None),
                curg: Cell::new(std::ptr::null()),
                spinning: Cell::new(spinning),
            }));
            CURRENT_M.with(|c| c.set(m));
            m.acquirep(p);
            super::schedule::m_loop(m)
        });
    if let Err(e) = spawned {
        fatal!("newm: cannot start an OS thread for M {id}: {e}");
    }
}
