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
//! place; the releaser that dequeues it takes its unparker and writes its `ticket`
//! before unparking it, and never touches it afterwards. Nodes are only ever reached
//! through raw pointers while linked, and only under the root lock or by the one
//! releaser that dequeued them.
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
    fn unpark(u: Self::Unparker) {
        u.unpark();
    }

    #[inline]
    fn yield_now() {
        goro_runtime::yield_now();
    }
}

/// A waiter's queue node, on the waiter's stack (see "waiters are intrusive").
struct Waiter<P: ParkApi> {
    addr: usize,
    next: *mut Waiter<P>,
    unparker: Option<P::Unparker>,
    /// Set to 1 by a hand-off release: the count was handed to this waiter.
    ticket: u32,
}

/// The waiters of one address on a root.
struct AddrQueue<P: ParkApi> {
    addr: usize,
    head: *mut Waiter<P>,
    tail: *mut Waiter<P>,
}

#[repr(align(128))] // two cache lines: adjacent-line prefetch must not pair roots up
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
    /// `lock` held; `w` valid and unlinked, and it stays in place until dequeued.
    unsafe fn enqueue(&self, w: *mut Waiter<P>, lifo: bool) {
        // SAFETY: `queues` is guarded by `lock`, which the caller holds; `w` and the
        // nodes already linked are valid (caller's contract, and every linked node's
        // waiter is parked until dequeued).
        unsafe {
            let queues = &mut *self.queues.get();
            let addr = (*w).addr;
            (*w).next = ptr::null_mut();
            match queues.iter_mut().find(|q| q.addr == addr) {
                Some(q) if lifo => {
                    (*w).next = q.head;
                    q.head = w;
                }
                Some(q) => {
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
            let queues = &mut *self.queues.get();
            let Some(i) = queues.iter().position(|q| q.addr == addr) else {
                return ptr::null_mut();
            };
            let q = &mut queues[i];
            let w = q.head;
            q.head = (*w).next;
            if q.head.is_null() {
                queues.swap_remove(i);
            }
            (*w).next = ptr::null_mut();
            w
        }
    }
}

/// The table of roots.
pub struct SemaTable<P: ParkApi = GoroPark> {
    roots: Box<[Root<P>]>,
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
            roots: (0..SEMTAB_SIZE).map(|_| Root::new()).collect(),
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
        if can_acquire(count) {
            return;
        }
        let root = self.root(count);
        let mut node = Waiter::<P> {
            addr: count as *const AtomicU32 as usize,
            next: ptr::null_mut(),
            unparker: None,
            ticket: 0,
        };
        let w: *mut Waiter<P> = &mut node;
        loop {
            root.lock.lock();
            // The sema missed-wakeup rule: count ourselves, then re-check. SeqCst bump
            // and SeqCst fence: the acquirer's half of the pair (see the module doc).
            root.nwait.fetch_add(1, Ordering::SeqCst);
            fence(Ordering::SeqCst);
            if can_acquire(count) {
                // Relaxed: under the root lock (see the module doc).
                root.nwait.fetch_sub(1, Ordering::Relaxed);
                root.lock.unlock();
                return;
            }
            // SAFETY: `w` points at `node`, on this stack frame, which outlives the
            // time it is linked (we do not return until a release dequeued it, and
            // only that release can wake us). The root lock is held.
            unsafe {
                (*w).unparker = Some(P::prepare());
                (*w).ticket = 0;
                root.enqueue(w, lifo);
            }
            P::park_commit(reason, || root.lock.unlock());
            // SAFETY: the releaser that dequeued us wrote the ticket before unparking
            // us, and the park handshake ordered that write before our wake-up.
            if unsafe { (*w).ticket } != 0 || can_acquire(count) {
                return;
            }
        }
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

    /// `release`'s slow path: somebody waits on the count's root, maybe on `count`.
    #[inline(never)]
    fn wake_one(&self, count: &AtomicU32, handoff: bool) {
        let root = self.root(count);
        root.lock.lock();
        // Relaxed: every change of `nwait` is made under the root lock, which we hold.
        if root.nwait.load(Ordering::Relaxed) == 0 {
            // Another release took our waiter.
            root.lock.unlock();
            return;
        }
        // SAFETY: the root lock is held.
        let w = unsafe { root.dequeue(count as *const AtomicU32 as usize) };
        if !w.is_null() {
            // Relaxed: under the root lock (see the module doc).
            root.nwait.fetch_sub(1, Ordering::Relaxed);
        }
        root.lock.unlock();
        if w.is_null() {
            return; // the waiters on this root wait for other addresses
        }
        // SAFETY: we dequeued `w`: its waiter stays parked, and its node in place,
        // until we unpark it below; nobody else can reach the node any more.
        let (u, handed) = unsafe {
            let handed = handoff && can_acquire(count);
            if handed {
                (*w).ticket = 1;
            }
            ((*w).unparker.take(), handed)
        };
        if let Some(u) = u {
            P::unpark(u);
        }
        if handed {
            P::yield_now();
        }
    }
}

/// Takes one unit of `count` if there is one (Go: cansemacquire).
#[inline]
pub fn can_acquire(count: &AtomicU32) -> bool {
    // Relaxed: the CAS is the Acquire; as the acquirer's re-check, this load is ordered
    // by the SeqCst fence before it (see the module doc).
    let mut v = count.load(Ordering::Relaxed);
    let mut backoff = Backoff::new();
    loop {
        if v == 0 {
            return false;
        }
        // Acquire: taking a unit orders what its releaser wrote before us.
        match count.compare_exchange_weak(v, v - 1, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => {
                v = now;
                backoff.spin();
            }
        }
    }
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
    }

    fn op() -> impl Strategy<Value = Op> {
        // Addresses 8 apart hash to neighbouring roots; 8 * 251 apart to the same one.
        let addr = prop::sample::select(vec![0x1000, 0x1008, 0x1000 + 8 * 251, 0x1000 + 16 * 251]);
        prop_oneof![
            (addr.clone(), any::<bool>()).prop_map(|(addr, lifo)| Op::Enqueue { addr, lifo }),
            addr.prop_map(|addr| Op::Dequeue { addr }),
        ]
    }

    proptest! {
        /// The per-address queues of the roots behave like one VecDeque per address
        /// (FIFO, LIFO at the front), whatever the collisions on a root.
        #[test]
        fn root_queues_match_a_model(ops in prop::collection::vec(op(), 1..300)) {
            let table = SemaTable::<GoroPark>::new();
            let mut model: HashMap<usize, VecDeque<usize>> = HashMap::new();
            let mut nodes: Vec<Box<Waiter<GoroPark>>> = Vec::new();
            for op in ops {
                match op {
                    Op::Enqueue { addr, lifo } => {
                        let id = nodes.len();
                        nodes.push(Box::new(Waiter { addr, next: ptr::null_mut(), unparker: None, ticket: id as u32 }));
                        let w: *mut Waiter<GoroPark> = &mut *nodes[id];
                        let root = &table.roots[(addr >> 3) % SEMTAB_SIZE];
                        // SAFETY: single-threaded test standing in for the lock; the
                        // boxed nodes outlive the table's use of them.
                        unsafe { root.enqueue(w, lifo) };
                        let q = model.entry(addr).or_default();
                        if lifo { q.push_front(id) } else { q.push_back(id) }
                    }
                    Op::Dequeue { addr } => {
                        let root = &table.roots[(addr >> 3) % SEMTAB_SIZE];
                        // SAFETY: as above.
                        let w = unsafe { root.dequeue(addr) };
                        let want = model.get_mut(&addr).and_then(|q| q.pop_front());
                        // SAFETY: a dequeued pointer is one of our boxed nodes.
                        let got = (!w.is_null()).then(|| unsafe { (*w).ticket as usize });
                        prop_assert_eq!(got, want);
                    }
                }
            }
            // Drain everything that is left, in order.
            for (addr, q) in model {
                let root = &table.roots[(addr >> 3) % SEMTAB_SIZE];
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
        }
    }
}
