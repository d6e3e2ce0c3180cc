//! The semaphore table (Go: runtime/sema.go): where every goro lock waits.
//!
//! A semaphore is any `AtomicU32` count. Waiting on it is the job of one table of
//! [`SEMTAB_SIZE`] (251) roots, each on its own cache lines, chosen by hashing the
//! count's address. A root has a lock, the queues of waiters of every address that
//! hashes to it (one FIFO queue per address, with a LIFO option), and `nwait`, the
//! number of waiters on the root.
//!
//! # The sema missed-wakeup rule
//!
//! `release` adds 1 to the count, then reads `nwait`: if it is zero there is nobody to
//! wake and it returns — a count bump and one load, no lock (wait-free). `acquire`,
//! when it finds the count zero, locks the root, adds 1 to `nwait`, and only *then*
//! looks at the count once more before it queues itself. This is a Dekker pair:
//! either the releaser sees the waiter in `nwait` and takes the lock to wake it, or the
//! acquirer's re-check sees the releaser's count and takes it. `tests/loom_sema.rs`
//! checks it.
//!
//! The orderings: the releaser's count bump and `nwait` load are both SeqCst, so they
//! stay in that order in the single total order S of SeqCst operations; the acquirer's
//! `nwait` bump is SeqCst and is followed by a SeqCst fence before it re-reads the
//! count (a relaxed load and an acquire CAS). If both sides missed each other, the
//! releaser's load would precede the acquirer's bump in S (it did not read it), and the
//! fence would precede the releaser's bump (C++20 [atomics.order]/4: a fence before a
//! read that misses a SeqCst write precedes that write): bump(count) < load(nwait) <
//! bump(nwait) < fence < bump(count), a cycle. So the releaser needs no fence of its
//! own, as Go's semrelease has none (on x86 its `lock xadd` is a full barrier anyway):
//! the fence cost the wait-free path a second locked instruction. Under loom it is
//! kept, because loom treats SeqCst accesses as AcqRel and would report a lost wake-up
//! that the C++ model rules out.
//!
//! Only the increments of `nwait` take part: the decrements (a waiter that took a unit
//! on its re-check, a release that dequeued one) and `wake_one`'s load are made under
//! the root lock, which orders them for everyone else who holds it, and they can be
//! Relaxed. A fast-path load that reads a decrement's value is still
//! coherence-ordered before every increment it does not include, so the argument
//! above holds; one that misses a decrement only takes the lock for nothing.
//!
//! # Waiters are intrusive
//!
//! A waiter's queue node lives on its own stack (the coroutine's, or the thread's): it
//! is linked into its root while the waiter is parked, which keeps it alive and in
//! place. The releaser that dequeues it takes its unparker and writes its `ticket`
//! *under the root lock*, and never touches it after unlocking: a timed waiter may
//! leave as soon as it holds the lock and finds itself dequeued (see "the sema timeout
//! rule"). Nodes are only ever reached through raw pointers while linked, and only under
//! the root lock.
//!
//! # Timed waits: the sema timeout rule
//!
//! [`SemaTable::acquire_timeout`] parks with a deadline. When the deadline wakes it,
//! the waiter locks its root again and looks at its node:
//!
//! - Still queued: no release chose it. It unlinks itself (`Root::remove`), takes
//!   itself out of `nwait`, and gives up. Every release so far woke somebody else.
//! - Dequeued: a release chose it between the deadline and the re-lock, and counted on
//!   waking it; that release's unpark lost the wait cell to the deadline and did
//!   nothing. So the wake-up is the timed-out waiter's to use: it takes the handed unit
//!   (a ticket) or a unit from the count, and reports success (the release came
//!   first). If a newcomer took the count's unit in between, that unit was used and no
//!   wake-up is owed.
//!
//! Without the second case the release's unit would sit in the count while the waiters
//! behind the timed-out one stay parked: a lost wake-up. Taking the unit is the same as
//! the alternative, passing the wake-up on to the next waiter (golang.org/x/sync's
//! semaphore gives the tokens back and notifies the next), without a second trip
//! through the lock; a caller that did not want the unit any more can release it.
//! `tests/loom_sema.rs` has a timed waiter race a release with a plain waiter behind it,
//! and fails without this step.
//!
//! # Releasing many units
//!
//! [`SemaTable::release_many`] adds its units with one CAS, which fails, changing
//! nothing, if the count would pass `u32::MAX`: a check and an update in one step, so
//! concurrent releases cannot overflow it together. The CAS is the count bump of the
//! missed-wakeup rule (SeqCst), and each wake after it starts with the `nwait` load:
//! the first load that finds nobody, or a root with no waiter for this count, ends the
//! wakes, since every later waiter re-checks the count and finds the units there.
//!
//! # Hand-off
//!
//! A `handoff` release (a starving mutex) takes the count it just added back at once
//! and gives it to the woken waiter through its ticket, so that no newcomer can grab
//! it in between; the releaser then yields so that the waiter, now in its `runnext`,
//! runs right away.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ptr;
#[cfg(not(loom))]
use std::sync::OnceLock;
use std::time::Instant;

use crossbeam_utils::CachePadded;
use goro_runtime::park::WaitReason;

use crate::backoff::Backoff;
use crate::lock::SpinLock;
use crate::loom::{fence, AtomicU32, Ordering};

/// Roots in the table (Go's semTabSize).
pub const SEMTAB_SIZE: usize = 251;

/// How a waiter sleeps and is woken. goro's park API in the runtime; loom's thread park
/// in the model.
pub trait ParkApi {
    /// Wakes one prepared wait.
    type Unparker: Send;
    /// Starts a wait of the caller.
    fn prepare() -> Self::Unparker;
    /// Sleeps until the prepared wait is woken, running `commit` once the caller is
    /// off its stack (a coroutine) or right away (a thread).
    fn park_commit<F: FnOnce()>(reason: WaitReason, commit: F);
    /// Like `park_commit`, but wakes by itself no later than `deadline`. Returns true if
    /// the deadline woke the wait (an unparker of it then does nothing), false if an
    /// unparker did.
    fn park_commit_timeout<F: FnOnce()>(reason: WaitReason, deadline: Instant, commit: F) -> bool;
    /// Wakes a prepared wait.
    fn unpark(u: Self::Unparker);
    /// Lets the woken waiter run (after a hand-off).
    fn yield_now();
}

/// goro's park API: works for coroutines and plain threads.
pub struct GoroPark;

impl ParkApi for GoroPark {
    type Unparker = goro_runtime::park::Unparker;

    #[inline]
    fn prepare() -> Self::Unparker {
        goro_runtime::park::prepare()
    }

    #[inline]
    fn park_commit<F: FnOnce()>(reason: WaitReason, commit: F) {
        goro_runtime::park::park_commit(reason, commit);
    }

    #[inline]
    fn park_commit_timeout<F: FnOnce()>(reason: WaitReason, deadline: Instant, commit: F) -> bool {
        goro_runtime::park::park_commit_timeout(reason, deadline, commit)
    }

    #[inline]
    fn unpark(u: Self::Unparker) {
        u.unpark();
    }

    #[inline]
    fn yield_now() {
        goro_runtime::yield_now();
    }
}

/// A waiter's queue node, on the waiter's stack (see "waiters are intrusive"). Every
/// field but `addr` is guarded by the root lock while the node is queued.
struct Waiter<P: ParkApi> {
    addr: usize,
    next: *mut Waiter<P>,
    prev: *mut Waiter<P>,
    /// Whether the node is linked in its root: set by `enqueue`, cleared by `dequeue`
    /// and `remove`. How a timed-out waiter learns that a release chose it.
    queued: bool,
    unparker: Option<P::Unparker>,
    /// Set to 1 by a hand-off release: the count was handed to this waiter.
    ticket: u32,
}

impl<P: ParkApi> Waiter<P> {
    fn new(addr: usize) -> Self {
        Waiter {
            addr,
            next: ptr::null_mut(),
            prev: ptr::null_mut(),
            queued: false,
            unparker: None,
            ticket: 0,
        }
    }
}

/// The waiters of one address on a root.
struct AddrQueue<P: ParkApi> {
    addr: usize,
    head: *mut Waiter<P>,
    tail: *mut Waiter<P>,
}

struct Root<P: ParkApi> {
    lock: SpinLock,
    /// Waiters on this root, all addresses. Changed under `lock`; read without it by
    /// `release`'s fast path (see "the sema missed-wakeup rule").
    nwait: AtomicU32,
    /// Guarded by `lock`. Usually empty or one address; an address's entry is removed
    /// when its last waiter leaves (the vector keeps its capacity).
    queues: UnsafeCell<Vec<AddrQueue<P>>>,
}

impl<P: ParkApi> Root<P> {
    fn new() -> Self {
        Root {
            lock: SpinLock::new(),
            nwait: AtomicU32::new(0),
            queues: UnsafeCell::new(Vec::new()),
        }
    }

    /// Links `w` at the tail (or head, with `lifo`) of its address's queue.
    ///
    /// # Safety
    ///
    /// `lock` held; `w` valid and unlinked, and it stays in place until dequeued or
    /// removed.
    unsafe fn enqueue(&self, w: *mut Waiter<P>, lifo: bool) {
        // SAFETY: `queues` is guarded by `lock`, which the caller holds; `w` and the
        // nodes already linked are valid (caller's contract, and every linked node's
        // waiter is parked, or waits for this lock, until its node is unlinked).
        unsafe {
            let queues = &mut *self.queues.get();
            let addr = (*w).addr;
            (*w).next = ptr::null_mut();
            (*w).prev = ptr::null_mut();
            (*w).queued = true;
            match queues.iter_mut().find(|q| q.addr == addr) {
                Some(q) if lifo => {
                    (*w).next = q.head;
                    (*q.head).prev = w;
                    q.head = w;
                }
                Some(q) => {
                    (*w).prev = q.tail;
                    (*q.tail).next = w;
                    q.tail = w;
                }
                None => queues.push(AddrQueue {
                    addr,
                    head: w,
                    tail: w,
                }),
            }
        }
    }

    /// Unlinks the first waiter on `addr`, or returns null.
    ///
    /// # Safety
    ///
    /// `lock` held.
    unsafe fn dequeue(&self, addr: usize) -> *mut Waiter<P> {
        // SAFETY: as in enqueue.
        unsafe {
            let head = (*self.queues.get())
                .iter()
                .find(|q| q.addr == addr)
                .map_or(ptr::null_mut(), |q| q.head);
            if !head.is_null() {
                self.remove(head);
            }
            head
        }
    }

    /// Unlinks `w` from its address's queue if it is still linked, and returns whether
    /// it was (false: a release dequeued it first). Go's sema.go has no such step: its
    /// waits cannot time out.
    ///
    /// # Safety
    ///
    /// `lock` held; `w` valid (linked, or unlinked and not going to be linked by anyone
    /// but the caller).
    unsafe fn remove(&self, w: *mut Waiter<P>) -> bool {
        // SAFETY: as in enqueue; a linked node's neighbours are linked nodes.
        unsafe {
            if !(*w).queued {
                return false;
            }
            let (prev, next) = ((*w).prev, (*w).next);
            if !prev.is_null() {
                (*prev).next = next;
            }
            if !next.is_null() {
                (*next).prev = prev;
            }
            if prev.is_null() || next.is_null() {
                // The head or the tail: the address's queue entry changes.
                let queues = &mut *self.queues.get();
                let Some(i) = queues.iter().position(|q| q.addr == (*w).addr) else {
                    unreachable!("sema Root::remove: a queued waiter without its queue");
                };
                let q = &mut queues[i];
                if prev.is_null() {
                    q.head = next;
                }
                if next.is_null() {
                    q.tail = prev;
                }
                if q.head.is_null() {
                    queues.swap_remove(i);
                }
            }
            (*w).next = ptr::null_mut();
            (*w).prev = ptr::null_mut();
            (*w).queued = false;
            true
        }
    }
}

/// The table of roots.
pub struct SemaTable<P: ParkApi = GoroPark> {
    /// Each root on its own cache lines (two on x86_64: adjacent-line prefetch must
    /// not pair roots up).
    roots: Box<[CachePadded<Root<P>>]>,
    _park: PhantomData<P>,
}

// SAFETY: each root's queues are only touched under its lock; the waiter nodes they
// point at belong to parked waiters, and their unparkers are Send.
unsafe impl<P: ParkApi> Sync for SemaTable<P> {}
// SAFETY: as above.
unsafe impl<P: ParkApi> Send for SemaTable<P> {}

impl<P: ParkApi> Default for SemaTable<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: ParkApi> SemaTable<P> {
    /// An empty table.
    pub fn new() -> Self {
        SemaTable {
            roots: (0..SEMTAB_SIZE)
                .map(|_| CachePadded::new(Root::new()))
                .collect(),
            _park: PhantomData,
        }
    }

    #[inline]
    fn root(&self, addr: &AtomicU32) -> &Root<P> {
        // Go's hash: the address without its alignment bits, modulo the table size.
        &self.roots[(addr as *const AtomicU32 as usize >> 3) % SEMTAB_SIZE]
    }

    /// Takes one unit of `count`, waiting until there is one (Go: semacquire1).
    /// `lifo` queues the caller at the head of its address's queue (a waiter that
    /// already waited once, in a mutex).
    pub fn acquire(&self, count: &AtomicU32, lifo: bool, reason: WaitReason) {
        let took = self.acquire_until(count, lifo, reason, None);
        debug_assert!(took, "an acquire without a deadline returns with a unit");
    }

    /// Like [`acquire`](Self::acquire), but gives up at `deadline`. Returns whether it
    /// took a unit. A deadline that has passed still queues the caller once (and the
    /// park returns at once): use [`can_acquire`] for a try without a wait.
    ///
    /// A wait whose deadline fires just after a release chose it takes that release's
    /// unit, and returns true (see "the sema timeout rule").
    ///
    /// ```
    /// use std::sync::atomic::AtomicU32;
    /// use std::time::{Duration, Instant};
    /// use goro_runtime::park::WaitReason;
    /// use goro_sync::sema;
    ///
    /// let count = AtomicU32::new(0);
    /// let soon = Instant::now() + Duration::from_millis(10);
    /// assert!(!sema::table().acquire_timeout(&count, false, WaitReason::Sema, soon));
    /// sema::release(&count, false);
    /// assert!(sema::table().acquire_timeout(&count, false, WaitReason::Sema, soon));
    /// ```
    pub fn acquire_timeout(
        &self,
        count: &AtomicU32,
        lifo: bool,
        reason: WaitReason,
        deadline: Instant,
    ) -> bool {
        self.acquire_until(count, lifo, reason, Some(deadline))
    }

    /// [`acquire`](Self::acquire) (`deadline` None, always true) and
    /// [`acquire_timeout`](Self::acquire_timeout) (whether it took a unit by then).
    fn acquire_until(
        &self,
        count: &AtomicU32,
        lifo: bool,
        reason: WaitReason,
        deadline: Option<Instant>,
    ) -> bool {
        if can_acquire(count) {
            return true;
        }
        let root = self.root(count);
        let mut node = Waiter::<P>::new(count as *const AtomicU32 as usize);
        let w: *mut Waiter<P> = &mut node;
        loop {
            root.lock.lock();
            // SAFETY: the root lock is held; `w` points at `node`, on this stack frame,
            // which outlives the time it is linked: we return only after a release
            // dequeued it (only that release can wake an untimed wait), or after we
            // unlinked it ourselves under the lock (`timed_out`).
            if unsafe { self.take_or_queue_locked(root, count, w, lifo) } {
                root.lock.unlock();
                return true;
            }
            match deadline {
                None => P::park_commit(reason, || root.lock.unlock()),
                Some(d) => {
                    if P::park_commit_timeout(reason, d, || root.lock.unlock()) {
                        // SAFETY: `w` is our node, linked or dequeued by a release
                        // (which is done with it once it unlocks the root).
                        return unsafe { self.timed_out(root, count, w) };
                    }
                }
            }
            // Woken by the release that dequeued us.
            // SAFETY: the releaser that dequeued us wrote the ticket under the root
            // lock before unparking us, and the park handshake ordered that write
            // before our wake-up.
            if unsafe { (*w).ticket } != 0 || can_acquire(count) {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                // A newcomer took the unit we were woken for: it was used, nothing is
                // owed (as in the sema timeout rule's second case).
                return false;
            }
        }
    }

    /// The acquirer's half of the sema missed-wakeup rule: counts the caller in `nwait`,
    /// re-checks the count, and queues `w` if that finds nothing. Returns true if the
    /// re-check took a unit (`nwait` is back as it was, `w` unlinked), false if `w` is
    /// queued for the caller to park. The root lock stays held either way.
    ///
    /// # Safety
    ///
    /// `root` is `count`'s root and its lock is held; `w` is valid and unlinked, and
    /// stays in place until it is unlinked.
    #[inline]
    unsafe fn take_or_queue_locked(
        &self,
        root: &Root<P>,
        count: &AtomicU32,
        w: *mut Waiter<P>,
        lifo: bool,
    ) -> bool {
        // SeqCst bump and SeqCst fence: the acquirer's half of the pair (see the
        // module doc).
        root.nwait.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        if can_acquire(count) {
            // Relaxed: under the root lock (see the module doc).
            root.nwait.fetch_sub(1, Ordering::Relaxed);
            return true;
        }
        // SAFETY: the caller's contract.
        unsafe {
            (*w).unparker = Some(P::prepare());
            (*w).ticket = 0;
            root.enqueue(w, lifo);
        }
        false
    }

    /// After a timed wait's deadline woke it: the sema timeout rule (module doc).
    /// Returns whether the caller took a unit.
    ///
    /// # Safety
    ///
    /// `w` is the caller's node on `count`'s root `root`, queued by
    /// `take_or_queue_locked` and not unlinked by the caller since.
    #[cold]
    unsafe fn timed_out(&self, root: &Root<P>, count: &AtomicU32, w: *mut Waiter<P>) -> bool {
        root.lock.lock();
        // SAFETY: the root lock is held, which is what guards a queued node; a release
        // that dequeued `w` wrote its ticket under that lock too.
        let (removed, ticket) = unsafe { (root.remove(w), (*w).ticket) };
        if removed {
            // Relaxed: under the root lock (see the module doc).
            root.nwait.fetch_sub(1, Ordering::Relaxed);
        }
        root.lock.unlock();
        if removed {
            return false; // no release chose us
        }
        // A release dequeued us and its unpark lost to the deadline: its wake-up is
        // ours. Take the unit it handed us or added to the count (the step the loom
        // model `timed_acquire_takes_over_the_wakeup` fails without).
        ticket != 0 || can_acquire(count)
    }

    /// Adds one unit to `count` and wakes one waiter if there is any (Go:
    /// semrelease1). Wait-free when nobody waits on the count's root. With `handoff`,
    /// the unit goes straight to the woken waiter and the caller yields to it.
    #[inline]
    pub fn release(&self, count: &AtomicU32, handoff: bool) {
        // The sema missed-wakeup rule, the releaser's half: see the module doc for
        // why two SeqCst accesses need no fence between them (loom needs one).
        count.fetch_add(1, Ordering::SeqCst);
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        if self.root(count).nwait.load(Ordering::SeqCst) != 0 {
            self.wake_one(count, handoff);
        }
    }

    /// Adds `n` units to `count` in one step and wakes up to `n` of its waiters (see
    /// "releasing many units"). Fails without changing anything if the count would
    /// pass `u32::MAX`, returning the count it found then. Wait-free when nobody waits
    /// on the count's root, but for CAS retries against concurrent changes.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use goro_sync::sema;
    ///
    /// let count = AtomicU32::new(1);
    /// assert_eq!(sema::table().release_many(&count, 2), Ok(()));
    /// assert_eq!(sema::table().release_many(&count, u32::MAX), Err(3));
    /// assert_eq!(count.load(Ordering::Relaxed), 3);
    /// ```
    #[inline]
    pub fn release_many(&self, count: &AtomicU32, n: u32) -> Result<(), u32> {
        // Relaxed: only the CAS's first expected value; the CAS is the bump.
        let mut v = count.load(Ordering::Relaxed);
        let mut backoff = Backoff::new();
        loop {
            let Some(new) = v.checked_add(n) else {
                return Err(v);
            };
            // SeqCst on success: the count bump of the sema missed-wakeup rule, as in
            // `release` (no fence needed before the loads below, but under loom).
            // Relaxed on failure: only the next expected value.
            match count.compare_exchange_weak(v, new, Ordering::SeqCst, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => {
                    v = now;
                    backoff.spin();
                }
            }
        }
        // The missed-wakeup rule's fence, under loom only, as in `release`.
        #[cfg(loom)]
        fence(Ordering::SeqCst);
        let root = self.root(count);
        for _ in 0..n {
            // SeqCst: the releaser's load of the missed-wakeup rule, as in `release`.
            if root.nwait.load(Ordering::SeqCst) == 0 || !self.wake_one(count, false) {
                break;
            }
        }
        Ok(())
    }

    /// `release`'s slow path: somebody waits on the count's root, maybe on `count`.
    /// Returns whether it dequeued (and woke) a waiter of `count`.
    #[inline(never)]
    fn wake_one(&self, count: &AtomicU32, handoff: bool) -> bool {
        let root = self.root(count);
        root.lock.lock();
        // Relaxed: every change of `nwait` is made under the root lock, which we hold.
        if root.nwait.load(Ordering::Relaxed) == 0 {
            // Another release took our waiter.
            root.lock.unlock();
            return false;
        }
        // SAFETY: the root lock is held.
        let w = unsafe { root.dequeue(count as *const AtomicU32 as usize) };
        if w.is_null() {
            root.lock.unlock();
            return false; // the waiters on this root wait for other addresses
        }
        // Relaxed: under the root lock (see the module doc).
        root.nwait.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: we dequeued `w` and hold the root lock: its waiter is parked, or (a
        // timed one) waits for this lock before it looks at its node, so the node is
        // in place until we unlock. After that we touch only the unparker we took.
        let (u, handed) = unsafe {
            let handed = handoff && can_acquire(count);
            if handed {
                (*w).ticket = 1;
            }
            ((*w).unparker.take(), handed)
        };
        root.lock.unlock();
        if let Some(u) = u {
            P::unpark(u);
        }
        if handed {
            P::yield_now();
        }
        true
    }
}

/// Takes `units(v)` units of `count`, where `v` is the count at the time of the
/// CAS that takes them (0: take none, and stop). Returns how many it took. The one
/// CAS loop behind every non-waiting take below.
#[inline(always)]
fn take_units(count: &AtomicU32, units: impl Fn(u32) -> u32) -> u32 {
    // Relaxed: the CAS is the Acquire.
    let mut v = count.load(Ordering::Relaxed);
    let mut backoff = Backoff::new();
    loop {
        let take = units(v);
        if take == 0 {
            return 0;
        }
        // Acquire: taking units orders what their releasers wrote before us.
        match count.compare_exchange_weak(v, v - take, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return take,
            Err(now) => {
                v = now;
                backoff.spin();
            }
        }
    }
}

/// Takes one unit of `count` if there is one (Go: cansemacquire).
#[inline]
pub fn can_acquire(count: &AtomicU32) -> bool {
    take_units(count, |v| v.min(1)) == 1
}

/// Takes `n` units of `count` if there are that many, or none (the all-or-nothing
/// try of a counting semaphore; Go's sema.go has none).
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use goro_sync::sema;
///
/// let count = AtomicU32::new(3);
/// assert!(!sema::can_acquire_many(&count, 4));
/// assert!(sema::can_acquire_many(&count, 3));
/// assert!(sema::can_acquire_many(&count, 0));
/// ```
#[inline]
pub fn can_acquire_many(count: &AtomicU32, n: u32) -> bool {
    n == 0 || take_units(count, |v| if v >= n { n } else { 0 }) == n
}

/// Takes as many units of `count` as there are, up to `n`, and returns how many it
/// took (a multi-unit acquirer's collecting step).
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// use goro_sync::sema;
///
/// let count = AtomicU32::new(3);
/// assert_eq!(sema::acquire_up_to(&count, 2), 2);
/// assert_eq!(sema::acquire_up_to(&count, 2), 1);
/// assert_eq!(sema::acquire_up_to(&count, 2), 0);
/// ```
#[inline]
pub fn acquire_up_to(count: &AtomicU32, n: u32) -> u32 {
    take_units(count, |v| v.min(n))
}

/// The process-wide table.
#[cfg(not(loom))]
pub fn table() -> &'static SemaTable {
    static TABLE: OnceLock<SemaTable> = OnceLock::new();
    TABLE.get_or_init(SemaTable::new)
}

/// Takes one unit of `count`, waiting if there is none.
#[cfg(not(loom))]
#[inline]
pub fn acquire(count: &AtomicU32, lifo: bool, reason: WaitReason) {
    if !can_acquire(count) {
        table().acquire(count, lifo, reason);
    }
}

/// Adds one unit to `count`, waking a waiter if any.
#[cfg(not(loom))]
#[inline]
pub fn release(count: &AtomicU32, handoff: bool) {
    table().release(count, handoff);
}

/// Takes one unit of `count`, waiting no later than `deadline`; returns whether it took
/// one (see [`SemaTable::acquire_timeout`]).
#[cfg(not(loom))]
#[inline]
pub fn acquire_timeout(
    count: &AtomicU32,
    lifo: bool,
    reason: WaitReason,
    deadline: Instant,
) -> bool {
    can_acquire(count) || table().acquire_timeout(count, lifo, reason, deadline)
}

/// Adds `n` units to `count` in one step, waking up to `n` waiters; fails, changing
/// nothing, if the count would pass `u32::MAX` (see [`SemaTable::release_many`]).
#[cfg(not(loom))]
#[inline]
pub fn release_many(count: &AtomicU32, n: u32) -> Result<(), u32> {
    table().release_many(count, n)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, VecDeque};

    #[derive(Debug, Clone)]
    enum Op {
        /// Queue a new waiter on one of a few addresses (some colliding on one root).
        Enqueue { addr: usize, lifo: bool },
        /// Dequeue the first waiter of an address.
        Dequeue { addr: usize },
        /// Remove one waiter made so far (queued or not), as a timed-out waiter does.
        Remove { which: prop::sample::Index },
    }

    fn op() -> impl Strategy<Value = Op> {
        // Addresses 8 apart hash to neighbouring roots; 8 * 251 apart to the same one.
        let addr = prop::sample::select(vec![0x1000, 0x1008, 0x1000 + 8 * 251, 0x1000 + 16 * 251]);
        prop_oneof![
            (addr.clone(), any::<bool>()).prop_map(|(addr, lifo)| Op::Enqueue { addr, lifo }),
            addr.prop_map(|addr| Op::Dequeue { addr }),
            any::<prop::sample::Index>().prop_map(|which| Op::Remove { which }),
        ]
    }

    fn root_of(table: &SemaTable<GoroPark>, addr: usize) -> &Root<GoroPark> {
        &table.roots[(addr >> 3) % SEMTAB_SIZE] // through CachePadded's Deref
    }

    /// The ids (tickets) queued on `addr`, walked from the head by `next` and checked
    /// against the walk from the tail by `prev`.
    fn queued_ids(root: &Root<GoroPark>, addr: usize) -> Vec<usize> {
        // SAFETY: single-threaded test standing in for the lock; the linked nodes are
        // boxed by the test and outlive the walk.
        unsafe {
            let Some(q) = (*root.queues.get()).iter().find(|q| q.addr == addr) else {
                return Vec::new();
            };
            let (mut fwd, mut back) = (Vec::new(), Vec::new());
            let mut w = q.head;
            while !w.is_null() {
                assert!((*w).queued, "an unqueued node linked");
                fwd.push((*w).ticket as usize);
                w = (*w).next;
            }
            let mut w = q.tail;
            while !w.is_null() {
                back.push((*w).ticket as usize);
                w = (*w).prev;
            }
            back.reverse();
            assert_eq!(fwd, back, "next and prev links disagree");
            assert!(!fwd.is_empty(), "an empty queue entry left behind");
            fwd
        }
    }

    proptest! {
        /// The per-address queues of the roots behave like one VecDeque per address
        /// (FIFO, LIFO at the front, removal from anywhere), whatever the collisions
        /// on a root.
        #[test]
        fn root_queues_match_a_model(ops in prop::collection::vec(op(), 1..300)) {
            let table = SemaTable::<GoroPark>::new();
            let mut model: HashMap<usize, VecDeque<usize>> = HashMap::new();
            let mut nodes: Vec<Box<Waiter<GoroPark>>> = Vec::new();
            for op in ops {
                match op {
                    Op::Enqueue { addr, lifo } => {
                        let id = nodes.len();
                        let mut node = Box::new(Waiter::new(addr));
                        node.ticket = id as u32;
                        nodes.push(node);
                        let w: *mut Waiter<GoroPark> = &mut *nodes[id];
                        // SAFETY: single-threaded test standing in for the lock; the
                        // boxed nodes outlive the table's use of them.
                        unsafe { root_of(&table, addr).enqueue(w, lifo) };
                        let q = model.entry(addr).or_default();
                        if lifo { q.push_front(id) } else { q.push_back(id) }
                    }
                    Op::Dequeue { addr } => {
                        // SAFETY: as above.
                        let w = unsafe { root_of(&table, addr).dequeue(addr) };
                        let want = model.get_mut(&addr).and_then(|q| q.pop_front());
                        // SAFETY: a dequeued pointer is one of our boxed nodes.
                        let got = (!w.is_null()).then(|| unsafe { (*w).ticket as usize });
                        prop_assert_eq!(got, want);
                        // SAFETY: as above.
                        let unlinked = w.is_null() || unsafe { !(*w).queued };
                        prop_assert!(unlinked, "a dequeued node still marked queued");
                    }
                    Op::Remove { which } => {
                        if nodes.is_empty() {
                            continue;
                        }
                        let id = which.index(nodes.len());
                        let addr = nodes[id].addr;
                        let w: *mut Waiter<GoroPark> = &mut *nodes[id];
                        // SAFETY: as above; `w` is linked or was unlinked by the table.
                        let got = unsafe { root_of(&table, addr).remove(w) };
                        let q = model.entry(addr).or_default();
                        let want = match q.iter().position(|&i| i == id) {
                            Some(at) => q.remove(at).is_some(),
                            None => false,
                        };
                        prop_assert_eq!(got, want);
                    }
                }
                for (&addr, q) in &model {
                    let want: Vec<usize> = q.iter().copied().collect();
                    prop_assert_eq!(queued_ids(root_of(&table, addr), addr), want);
                }
            }
            // Drain everything that is left, in order.
            for (addr, q) in model {
                let root = root_of(&table, addr);
                for want in q {
                    // SAFETY: as above.
                    let w = unsafe { root.dequeue(addr) };
                    prop_assert!(!w.is_null());
                    // SAFETY: a dequeued pointer is one of our boxed nodes.
                    let got = unsafe { (*w).ticket as usize };
                    prop_assert_eq!(got, want);
                }
                // SAFETY: as above.
                let rest = unsafe { root.dequeue(addr) };
                prop_assert!(rest.is_null());
            }
            for root in table.roots.iter() {
                // SAFETY: as above.
                let empty = unsafe { (*root.queues.get()).is_empty() };
                prop_assert!(empty, "a queue entry left behind");
            }
        }
    }
}
