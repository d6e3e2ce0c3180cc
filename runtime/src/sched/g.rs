//! G: a coroutine, its status and its wait reason.

use std::cell::{RefCell, UnsafeCell};
use std::panic::Location;
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use corosensei::{Coroutine, CoroutineResult, Yielder};

use super::scan::ScanWord;
use super::traceback::Capture;
use crate::local_table::LocalTable;
use crate::stack::overflow::GuardInfo;
use crate::stack::Stack;
use crate::wait::{WaitCell, WaitReason};

/// A shared reference to a G. Run queues, `runnext` and unparkers hold these.
pub(crate) type GRef = Arc<G>;

type GCoroutine = Coroutine<Resume, Request, (), Stack>;

/// What a G is resumed with: null to run on (the scheduler's resume), or a capture to
/// walk its own stack into before it suspends again with `Request::Inspected` (a
/// dump's resume: `traceback.rs`, under the scan handshake; the G goes on waiting or
/// queued as it was, and nothing else runs). A bare pointer, not an enum: the
/// scheduler's resume passes one register and the G tests it for null.
pub(crate) type Resume = *mut Capture;

/// What a G is doing (Go: the _G* statuses). Changed only through [`G::transition`],
/// by the G's owner:
///
/// ```text
/// Runnable --execute--> Running --yield, exit from a retaken call--> Runnable
///                       Running --park--> Waiting --ready--> Runnable
///                                         Waiting --woken before it slept--> Running
///                       Running --blocking--> Syscall --return--> Running
///                       Running --return--> Dead
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum GStatus {
    /// In a run queue or `runnext`, or about to be.
    Runnable = 0,
    /// Running on an M.
    Running = 1,
    /// Parked.
    Waiting = 2,
    /// In `goro::blocking`.
    Syscall = 3,
    /// Its coroutine has returned.
    Dead = 4,
}

impl GStatus {
    fn from_u8(v: u8) -> GStatus {
        match v {
            0 => GStatus::Runnable,
            1 => GStatus::Running,
            2 => GStatus::Waiting,
            3 => GStatus::Syscall,
            _ => GStatus::Dead,
        }
    }

    /// Whether the scheduler ever moves a G from `self` to `to` (the diagram above).
    fn may_become(self, to: GStatus) -> bool {
        use GStatus::*;
        matches!(
            (self, to),
            (Runnable, Running)
                | (Running, Runnable)
                | (Running, Waiting)
                | (Waiting, Runnable)
                | (Waiting, Running)
                | (Running, Syscall)
                | (Syscall, Running)
                | (Running, Dead)
        )
    }
}

/// What a G asks of its M when it suspends.
pub(crate) enum Request {
    /// `yield_now`: put me behind the global queue if anything waits there, else at
    /// the tail of the local run queue.
    Yield,
    /// sysmon ended my time slice (a preemption point saw the request): as `Yield`,
    /// and the P looks at the global queue first when it picks the next G.
    Preempt,
    /// `park_commit`: run this commit action (a closure on my stack, which stays valid
    /// while I am suspended), then park me unless I was woken already.
    Park(*mut (dyn FnMut() + 'static)),
    /// Back from a blocking call with no P to run on: queue me globally and park the M.
    ExitSyscall,
    /// My stack is walked (the answer to an inspecting resume); only a dump sees this.
    Inspected,
}

/// A coroutine.
///
/// # Ownership
///
/// `co`, `yielder` and `on_adopt` are touched only by the G's owner: the M that
/// runs it (and the G itself, on its own stack, while it runs). A G is owned by one
/// place at a time, and ownership moves through run queues and the park/ready
/// handshake, whose Release/Acquire pairs order one owner's accesses before the next.
///
/// # A parked G keeps itself alive
///
/// When a G parks, its M keeps the strong reference it ran the G with instead of
/// dropping it (`on_adopt`), and the next M to run the G drops it. So a G can
/// never be freed while its coroutine is suspended: a coroutine that nobody will ever
/// wake is leaked with its stack, as Go leaks a goroutine blocked forever, instead of
/// having its destructors run on whichever thread happened to drop the last waker (see
/// docs/decisions/0001-coroutines-migrate-between-threads.md).
pub(crate) struct G {
    pub(crate) id: u64,
    /// Stack bounds, id and name, for the overflow handler and the dump.
    pub(crate) guard: GuardInfo,
    /// The park/ready handshake.
    pub(crate) wait: WaitCell,
    /// A `WaitReason` as u8. Written by the G, read by the dump.
    wait_reason: AtomicU8,
    /// A `GStatus` as u8. Written by the G's owner; read by the dump and sysmon.
    status: AtomicU8,
    /// When the G last parked, on the runtime's coarse clock. Written by the G as it
    /// parks; read by the dump (Relaxed: a stale one only skews a printed duration).
    pub(crate) wait_since: AtomicI64,
    /// The G's index in its `AllGs` shard: written and read by `AllGs` only, under that
    /// shard's lock (hence Relaxed).
    pub(crate) reg_idx: AtomicU32,
    /// Where the G was spawned (the user's call, through `#[track_caller]`); None for a
    /// coroutine the runtime makes for itself. Immutable.
    pub(crate) spawned_at: Option<&'static Location<'static>>,
    /// The scan handshake with a dump (`scan.rs`).
    pub(crate) scan: ScanWord,
    co: UnsafeCell<Option<GCoroutine>>,
    yielder: UnsafeCell<*const Yielder<Resume, Request>>,
    /// What the next M to take the G from a run queue does first (`adopt`): drop the
    /// reference a parked G kept to itself (`ADOPT_SELF_REF`), or make the coroutine of
    /// a plain thread's spawn (`ADOPT_MAKE`). One byte for both, so that the common
    /// cases cost `adopt` what the flag alone did.
    on_adopt: UnsafeCell<u8>,
    /// How many thread locks the G holds (Go: lockedExt): 1 for a `Builder::pinned`
    /// coroutine from the start, plus one per [`lock_os_thread`](super::lockos) scope
    /// open on it. Non-zero: the G runs only on `locked_m`, and that M runs nothing
    /// else. Owner-only (the G itself while it runs, or its M).
    lock_depth: UnsafeCell<u32>,
    /// The M a locked G is bound to (owner-only): set when a lock is taken on a running
    /// G, or on a pinned G's first run; null again when the last scoped lock ends. That
    /// M does not leave the pool (and free itself) while the G is bound to it, so the
    /// pointer stays valid.
    locked_m: UnsafeCell<*const super::m::M>,
    /// The coroutine's `coroutine_local!` values (`local.rs`). Touched only by the G
    /// itself, on its own stack (also inside a `blocking` call), never across a switch;
    /// its values migrate with the G like the values on its stack.
    pub(crate) locals: RefCell<LocalTable>,
}

// SAFETY: the coroutine inside a G may be resumed on any M. That is the runtime's
// migration contract (docs/decisions/0001-coroutines-migrate-between-threads.md): the
// fields that are not thread-safe (the coroutine, its yielder, `locals` and the `Rc`s
// in it) are accessed only by the G's single owner, as the struct doc says, and
// ownership changes hands with Release/Acquire synchronisation.
unsafe impl Send for G {}
// SAFETY: as above; the shared fields (`id`, `guard`, `wait`, `wait_reason`) are
// immutable or atomic.
unsafe impl Sync for G {}

impl G {
    /// Makes a G that will run `main` on `stack`: in `shell`, a dead G of this P's
    /// (see [`GShells`]), if there is one, else in a new allocation.
    #[inline]
    pub(crate) fn new(
        shell: Option<GRef>,
        id: u64,
        name: Option<Arc<str>>,
        spawned_at: Option<&'static Location<'static>>,
        pinned: bool,
        stack: Stack,
        main: impl FnOnce() + Send + 'static,
    ) -> GRef {
        let guard = GuardInfo::of(&stack, id, name);
        let co = make_coroutine(stack, main);
        let g = G::fresh(guard, spawned_at, pinned, Some(co), std::ptr::null(), 0);
        Self::in_shell(shell, g)
    }

    /// As [`G::new`], for a plain thread's spawn: the coroutine is made by the M that
    /// first takes the G to run it (`adopt`), not here. Making it writes its first frame
    /// at the stack's top, the first touch of a fresh stack's top page: a page fault
    /// and a page zeroed, 2-3 µs here, that a spawning thread (`main`) would pay for
    /// every coroutine while the Ms wait for them (issue 38); the M pays it instead, with
    /// the page then hot in its own cache. A coroutine's spawn makes its coroutine at
    /// once: its M runs the new one itself, soon, and the box would cost the hot path.
    ///
    /// Until then `co` is None and the yielder slot (unused until the coroutine's entry
    /// writes it) holds the [`Unmade`] body, so that the G is no larger. (A G dropped
    /// before its first run would leak the body and its stack: none is, a queued G
    /// runs, or the process ends first.)
    pub(crate) fn new_unmade<F: FnOnce() + Send + 'static>(
        shell: Option<GRef>,
        id: u64,
        name: Option<Arc<str>>,
        spawned_at: Option<&'static Location<'static>>,
        pinned: bool,
        stack: Stack,
        main: F,
    ) -> GRef {
        let guard = GuardInfo::of(&stack, id, name);
        let body = Box::into_raw(Box::new(Unmade {
            make: Unmade::<F>::make,
            stack,
            main,
        }));
        let body = body.cast::<Yielder<Resume, Request>>().cast_const();
        let g = G::fresh(guard, spawned_at, pinned, None, body, ADOPT_MAKE);
        Self::in_shell(shell, g)
    }

    /// A G in its first state: `Runnable`, not waiting, registered nowhere.
    #[inline(always)]
    fn fresh(
        guard: GuardInfo,
        spawned_at: Option<&'static Location<'static>>,
        pinned: bool,
        co: Option<GCoroutine>,
        yielder: *const Yielder<Resume, Request>,
        on_adopt: u8,
    ) -> G {
        G {
            id: guard.id,
            guard,
            wait: WaitCell::new(),
            wait_reason: AtomicU8::new(WaitReason::None as u8),
            status: AtomicU8::new(GStatus::Runnable as u8),
            wait_since: AtomicI64::new(0),
            reg_idx: AtomicU32::new(u32::MAX),
            spawned_at,
            scan: ScanWord::new(),
            co: UnsafeCell::new(co),
            yielder: UnsafeCell::new(yielder),
            on_adopt: UnsafeCell::new(on_adopt),
            lock_depth: UnsafeCell::new(u32::from(pinned)),
            locked_m: UnsafeCell::new(std::ptr::null()),
            locals: RefCell::new(LocalTable::new()),
        }
    }

    /// `g` in `shell` (a dead G of this P's, see [`GShells`]), or in a new allocation.
    #[inline(always)]
    fn in_shell(shell: Option<GRef>, g: G) -> GRef {
        match shell {
            Some(mut shell) => {
                // A shell is a unique reference (`GShells::put` checked), so nothing
                // can see the old G being overwritten.
                match Arc::get_mut(&mut shell) {
                    Some(old) => *old = g,
                    None => super::fatal!("G::new: a G shell is shared"),
                }
                shell
            }
            None => Arc::new(g),
        }
    }

    /// Whether the G is locked to an M (pinned, or inside a `lock_os_thread` scope).
    ///
    /// # Safety
    /// The caller owns the G.
    #[inline]
    pub(crate) unsafe fn is_locked(&self) -> bool {
        // SAFETY: owner-only field (caller's contract).
        unsafe { *self.lock_depth.get() != 0 }
    }

    /// Adds `delta` (+1 or -1) to the G's lock depth; returns the new depth.
    ///
    /// # Safety
    /// The caller owns the G.
    pub(crate) unsafe fn add_lock_depth(&self, delta: i32) -> u32 {
        // SAFETY: owner-only field (caller's contract).
        unsafe {
            let d = &mut *self.lock_depth.get();
            *d = d.checked_add_signed(delta).unwrap_or_else(|| {
                super::fatal!(
                    "G::add_lock_depth: coroutine {} lock count out of range",
                    self.id
                )
            });
            *d
        }
    }

    /// The M this locked G is bound to, or null (not locked, or pinned and not yet run).
    ///
    /// # Safety
    /// The caller owns the G.
    pub(crate) unsafe fn locked_m(&self) -> *const super::m::M {
        // SAFETY: owner-only field (caller's contract).
        unsafe { *self.locked_m.get() }
    }

    /// Binds this pinned G to `m`.
    ///
    /// # Safety
    /// The caller owns the G.
    pub(crate) unsafe fn set_locked_m(&self, m: *const super::m::M) {
        // SAFETY: owner-only field (caller's contract).
        unsafe { *self.locked_m.get() = m };
    }

    pub(crate) fn set_wait_reason(&self, r: WaitReason) {
        // Relaxed: informational, read only by the dump.
        self.wait_reason.store(r as u8, Ordering::Relaxed);
    }

    pub(crate) fn wait_reason(&self) -> WaitReason {
        WaitReason::from_u8(self.wait_reason.load(Ordering::Relaxed))
    }

    /// Moves the G from `from` to `to` (Go: casgstatus). Only the G's owner calls it
    /// (its M, the G itself, or the readier that won its park/ready handshake); debug
    /// builds check that the G was `from` and that the diagram in `GStatus`'s doc has
    /// the transition, and abort naming both otherwise.
    #[inline]
    pub(crate) fn transition(&self, from: GStatus, to: GStatus) {
        if cfg!(debug_assertions) {
            let now = self.status();
            if now != from || !from.may_become(to) {
                super::fatal!(
                    "G::transition: coroutine {} is {now:?}, asked to go {from:?} -> {to:?}",
                    self.id
                );
            }
        }
        // Release: a move off `Running` is made by the M after the coroutine suspended
        // (`execute`, `commit_park`), and publishes its stack as it left it to a dump
        // that sees the new status (the scan handshake, `scan.rs`; the Acquire in
        // `status_off_cpu`). Ownership itself moves with other Release/Acquire pairs
        // (run queues, the park/ready handshake), and the other readers (sysmon's
        // deadlock check, which re-checks over time) take a hint. A plain store on x86.
        self.status.store(to as u8, Ordering::Release);
    }

    pub(crate) fn status(&self) -> GStatus {
        GStatus::from_u8(self.status.load(Ordering::Relaxed))
    }

    /// For a dump holding the G's scan claim, after the barrier: whether the G is off
    /// its CPU (parked or queued), so that its stack is the dump's until it lets go
    /// (the scan handshake).
    pub(crate) fn status_off_cpu(&self) -> bool {
        // Acquire: pairs with the Release in `transition` (see there).
        let s = GStatus::from_u8(self.status.load(Ordering::Acquire));
        matches!(s, GStatus::Waiting | GStatus::Runnable)
    }

    /// Runs the G until it suspends or ends.
    ///
    /// # Safety
    ///
    /// The caller must be the G's owner (see the struct doc), running on its M's own
    /// stack, with this G published as the M's current G.
    pub(crate) unsafe fn resume(&self) -> CoroutineResult<Request, ()> {
        // SAFETY: the owner has exclusive access to `co` (caller's contract).
        let co = unsafe { &mut *self.co.get() };
        match co {
            Some(co) => co.resume(std::ptr::null_mut()),
            None => super::fatal!("G::resume: coroutine {} has already finished", self.id),
        }
    }

    /// Walks the suspended G's stack into `cap` by resuming it in inspection mode
    /// (`traceback.rs`). Returns false, touching nothing, if its coroutine has not
    /// started or has finished.
    ///
    /// # Safety
    ///
    /// The caller holds the G's scan claim and saw it off its CPU (`status_off_cpu`),
    /// which makes it the coroutine's only user until it releases the claim.
    pub(crate) unsafe fn inspect(&self, cap: &mut Capture) -> bool {
        // SAFETY: the claim excludes the G's M from `co` (caller's contract).
        let co = unsafe { &mut *self.co.get() };
        let Some(co) = co.as_mut().filter(|c| c.started() && !c.done()) else {
            return false;
        };
        match co.resume(cap) {
            CoroutineResult::Yield(Request::Inspected) => true,
            _ => super::fatal!(
                "G::inspect: coroutine {} did not answer an inspection",
                self.id
            ),
        }
    }

    /// Takes back the stack of a G whose coroutine has returned.
    ///
    /// # Safety
    ///
    /// Owner only, after `resume` returned `CoroutineResult::Return`.
    #[inline]
    pub(crate) unsafe fn take_stack(&self) -> Option<Stack> {
        // SAFETY: owner-only access (caller's contract).
        let co = unsafe { (*self.co.get()).take() };
        co.filter(|c| c.done()).map(|c| c.into_stack())
    }

    /// Suspends the running G with `req`. Returns when an M resumes it.
    ///
    /// # Safety
    ///
    /// Must be called by the G itself, on its own stack.
    #[inline]
    pub(crate) unsafe fn suspend(&self, req: Request) {
        if cfg!(debug_assertions) {
            if let Some(m) = super::m::current_m() {
                m.check_unborrowed("G::suspend");
            }
        }
        // SAFETY: the yielder was recorded by the coroutine's entry and stays valid
        // for the coroutine's whole life; we are on that coroutine (caller's contract).
        let y = unsafe { &**self.yielder.get() };
        let mut resumed = y.suspend(req);
        if !resumed.is_null() {
            // A dump's resume. Whether the walk has room is decided here, in this
            // frame, before anything is pushed below it: a G parked with a few bytes
            // of stack left would fault on its guard in the walk's own frames, with the
            // G published as running (its overflow, and an abort).
            if super::traceback::room_to_walk(stack_pointer(), &self.guard) {
                self.answer_inspections(y, resumed);
            } else {
                while !resumed.is_null() {
                    // SAFETY: the dump passes a Capture that it does not touch until
                    // this G suspends again.
                    unsafe { super::traceback::refuse(resumed) };
                    resumed = y.suspend(Request::Inspected);
                }
            }
        }
    }

    /// A dump's resume: walk our stack for it, and suspend again as we were, until the
    /// scheduler resumes us.
    #[cold]
    #[inline(never)]
    fn answer_inspections(&self, y: &Yielder<Resume, Request>, mut resumed: Resume) {
        while !resumed.is_null() {
            super::traceback::capture(resumed, &self.guard);
            resumed = y.suspend(Request::Inspected);
        }
    }

    /// Records (owner only, before the park CAS) that the owner's reference now keeps
    /// the parked G alive.
    ///
    /// # Safety
    ///
    /// Owner only, on a G that has run (so `ADOPT_MAKE` is clear: a plain store).
    pub(crate) unsafe fn set_parked_self_ref(&self, v: bool) {
        // SAFETY: owner-only field (caller's contract).
        unsafe { *self.on_adopt.get() = if v { ADOPT_SELF_REF } else { 0 } };
    }

    /// Called by the G's new owner when it takes the G to run it: drops the reference
    /// the G kept to itself while parked, if any. Returns whether the G is a plain
    /// thread's spawn whose coroutine is still to be made: the caller makes it (`make`)
    /// once the G is `Running` and past the scan handshake, before it leaves goro for
    /// the coroutine, so that the page fault of its first frame is the scheduler's
    /// time, not time in which sysmon would see the coroutine stand still outside goro
    /// (and retake its P for it).
    ///
    /// # Safety
    ///
    /// Owner only, and `this` must be a strong reference of the caller's (so that the
    /// count cannot reach zero here).
    #[inline]
    pub(crate) unsafe fn adopt(this: &GRef) -> bool {
        // SAFETY: owner-only field (caller's contract).
        let work = std::mem::take(unsafe { &mut *this.on_adopt.get() });
        if work == ADOPT_SELF_REF {
            // SAFETY: the parked G's M forgot one strong reference (see the struct
            // doc); the caller holds another, so this does not free the G.
            unsafe { Arc::decrement_strong_count(Arc::as_ptr(this)) };
        }
        work == ADOPT_MAKE
    }

    /// Makes the coroutine of a G from `new_unmade`.
    ///
    /// # Safety
    ///
    /// Owner only, once, on a G from `new_unmade` (its yielder slot holds the body),
    /// `Running` and past `scan.begin_run` (no dump may inspect `co` meanwhile).
    #[cold]
    #[inline(never)]
    pub(crate) unsafe fn make(&self) {
        // SAFETY: owner-only fields (caller's contract); the slot holds the pointer
        // `new_unmade` made from a `Box<Unmade<F>>`, whose first field (`repr(C)`) is
        // the function that takes it back with the right `F`.
        unsafe {
            let slot = &mut *self.yielder.get();
            let body = std::mem::replace(slot, std::ptr::null())
                .cast_mut()
                .cast::<u8>();
            let make = *body.cast::<unsafe fn(*mut u8) -> GCoroutine>();
            *self.co.get() = Some(make(body));
        }
    }
}

/// `G::on_adopt`: the G holds a reference to itself, made when it parked.
const ADOPT_SELF_REF: u8 = 1;
/// `G::on_adopt`: the G's coroutine is to be made (`G::new_unmade`).
const ADOPT_MAKE: u8 = 2;

/// A plain thread's spawn until its coroutine is made (`G::new_unmade`): boxed, and
/// reached through one thin pointer (the G's yielder slot) whose first field says how
/// to take it back.
#[repr(C)]
struct Unmade<F> {
    /// `Unmade::<F>::make`, first: read through the erased pointer.
    make: unsafe fn(*mut u8) -> GCoroutine,
    stack: Stack,
    main: F,
}

impl<F: FnOnce() + Send + 'static> Unmade<F> {
    /// The coroutine that runs the body on its stack; the box is freed here (the body
    /// moved onto the stack), not kept for the coroutine's life.
    ///
    /// # Safety
    ///
    /// `body` is a pointer from `Box::<Unmade<F>>::into_raw`, used once.
    unsafe fn make(body: *mut u8) -> GCoroutine {
        // SAFETY: the caller's contract.
        let Unmade { stack, main, .. } = *unsafe { Box::from_raw(body.cast::<Unmade<F>>()) };
        make_coroutine(stack, main)
    }
}

/// The largest body a coroutine's first frame holds: corosensei moves the body onto
/// the new stack by value and refuses (panics) past 1 KiB. A larger one is boxed, and
/// moves onto the stack when it is called (a Go closure's captures live in the heap,
/// so `go f()` takes a body of any size).
const MAX_INLINE_BODY: usize = 1024;

/// The coroutine that runs `main` on `stack`.
#[inline(always)]
fn make_coroutine<F: FnOnce() + Send + 'static>(stack: Stack, main: F) -> GCoroutine {
    if std::mem::size_of::<F>() > MAX_INLINE_BODY {
        // Decided at compile time: one of the two branches is left.
        let main = Box::new(main);
        return start_coroutine(stack, main);
    }
    start_coroutine(stack, main)
}

/// The coroutine that runs `main` (at most [`MAX_INLINE_BODY`] bytes) on `stack`.
#[inline(always)]
fn start_coroutine(stack: Stack, main: impl FnOnce() + Send + 'static) -> GCoroutine {
    // The first resume is always the scheduler's (null): a dump walks only a coroutine
    // that has started (`inspect`).
    Coroutine::with_stack(stack, move |y: &Yielder<Resume, Request>, _: Resume| {
        // The M published this G as its current one before resuming it.
        let g = super::m::current_g_ptr();
        // SAFETY: `g` is the running G (alive: its M holds it); the yielder slot is
        // written only here, by the G itself, before anything can suspend it.
        unsafe { *(*g).yielder.get() = y as *const _ };
        main();
    })
}

/// The stack pointer, read without giving anything an address (which would make the
/// caller keep it in memory: `G::suspend` is inlined into every park and yield).
#[inline(always)]
fn stack_pointer() -> usize {
    let sp: usize;
    #[cfg(target_arch = "x86_64")]
    // SAFETY: reads a register into another; touches no memory.
    unsafe {
        std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above.
    unsafe {
        std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let here = 0u8;
        sp = std::hint::black_box(&here) as *const u8 as usize;
    }
    sp
}

/// Dead Gs kept by a P for its next spawns (Go: gfput/gfget, the P's free list of
/// dead Gs), so a spawn does not allocate its G and an exit does not free one. Only a
/// G that nothing else references is kept: an `Arc` that is unique cannot be reached
/// by a stale unparker, the dump or a queue, so overwriting it is invisible. (Stacks
/// are cached per P apart from the shells, by the stack pool.) Owner-only: it lives in
/// the P's local state.
///
/// A P that spawns and a P that runs what it spawned are often two (one steals the
/// other's work): the spawner's list empties and the runner's fills. As Go's lists do,
/// a full list moves half its shells to a global one ([`GFree`]) and an empty one
/// takes a batch from there, so the spawner builds in the Gs the runner freed instead
/// of allocating while the runner frees: a G allocated by one thread and freed by
/// another is a malloc arena lock both take (`compare`'s spawn_join at 2 Ps spent half
/// its futex calls there).
#[derive(Default)]
pub(crate) struct GShells {
    shells: std::cell::RefCell<Vec<GRef>>,
}

/// The most dead Gs a P keeps (Go keeps 64 per P before moving half to the global
/// list).
pub(crate) const G_SHELLS_MAX: usize = 64;
/// The most dead Gs the global list keeps; beyond it, a dead G is freed (Go keeps them
/// all: a burst of a million coroutines would pin a million G allocations here).
pub(crate) const G_FREE_MAX: usize = 8192;

/// The global list of dead Gs (Go: sched.gFree): what the Ps' lists overflow into and
/// refill from, a batch at a time under its lock.
pub(crate) struct GFree {
    shells: crate::lockrank::Mutex<Vec<GRef>>,
}

impl GFree {
    pub(crate) fn new() -> GFree {
        GFree {
            shells: crate::lockrank::Mutex::new(crate::lockrank::Rank::GFree, Vec::new()),
        }
    }

    /// One dead G, for a spawn from a thread without a P.
    pub(crate) fn take(&self) -> Option<GRef> {
        self.shells.lock().pop()
    }
}

impl GShells {
    /// A dead G to build the next one in, if this P or the global list has one.
    #[inline]
    pub(crate) fn get(&self, global: &GFree) -> Option<GRef> {
        let mut shells = self.shells.borrow_mut();
        if shells.is_empty() {
            Self::refill(&mut shells, global);
        }
        shells.pop()
    }

    /// Takes a batch from the global list into an empty one.
    #[cold]
    #[inline(never)]
    fn refill(shells: &mut Vec<GRef>, global: &GFree) {
        let mut g = global.shells.lock();
        let n = g.len().min(G_SHELLS_MAX / 2);
        let at = g.len() - n;
        shells.extend(g.drain(at..));
    }

    /// Keeps `g`, whose coroutine has returned and whose stack has been taken, if
    /// nothing else references it; else drops it. A full list moves half to `global`.
    #[inline]
    pub(crate) fn put(&self, mut g: GRef, global: &GFree) {
        if Arc::get_mut(&mut g).is_none() {
            return;
        }
        let mut shells = self.shells.borrow_mut();
        shells.push(g);
        if shells.len() > G_SHELLS_MAX {
            Self::spill(&mut shells, global);
        }
    }

    /// Moves half of a full list to the global one.
    #[cold]
    #[inline(never)]
    fn spill(shells: &mut Vec<GRef>, global: &GFree) {
        let at = shells.len() - G_SHELLS_MAX / 2;
        let mut half = shells.split_off(at);
        let mut spill = global.shells.lock();
        let room = G_FREE_MAX.saturating_sub(spill.len());
        // What does not fit is freed after the lock is released (its drop frees the
        // allocation).
        let extra = half.split_off(room.min(half.len()));
        spill.append(&mut half);
        drop(spill);
        drop(extra);
    }

    /// Moves every kept G to the global list (a P being retired).
    pub(crate) fn clear(&self, global: &GFree) {
        let mut all = std::mem::take(&mut *self.shells.borrow_mut());
        let mut g = global.shells.lock();
        let room = G_FREE_MAX.saturating_sub(g.len());
        // What does not fit is freed after the lock is released.
        let extra = all.split_off(room.min(all.len()));
        g.append(&mut all);
        drop(g);
        drop(extra);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stack::usable_size;

    fn dead_g(shell: Option<GRef>, id: u64) -> GRef {
        let stack = Stack::new(usable_size(64 * 1024).unwrap()).unwrap();
        let g = G::new(
            shell,
            id,
            Some(format!("g{id}").into()),
            None,
            false,
            stack,
            || {},
        );
        // Nobody resumes it; drop its coroutine as `take_stack` does for a dead one.
        // SAFETY: we are the only owner; the coroutine never started.
        unsafe { (*g.co.get()).take() };
        g
    }

    #[test]
    fn shells_are_reused_only_when_unique_and_up_to_the_cap() {
        let shells = GShells::default();
        let global = GFree::new();
        let g = dead_g(None, 1);
        let addr = Arc::as_ptr(&g);
        shells.put(g, &global);
        let reused = dead_g(shells.get(&global), 2);
        assert_eq!(Arc::as_ptr(&reused), addr, "a unique dead G is built over");
        assert_eq!((reused.id, reused.guard.name.as_deref()), (2, Some("g2")));
        assert_eq!(reused.status(), GStatus::Runnable);
        assert!(shells.get(&global).is_none());

        // A G someone still references (a stale unparker) is not kept.
        let stale = reused.clone();
        shells.put(reused, &global);
        assert!(shells.get(&global).is_none());
        drop(stale);

        // A full list moves half to the global one, which another P's empty list
        // refills from.
        for id in 0..(G_SHELLS_MAX as u64 + 1) {
            shells.put(dead_g(None, id), &global);
        }
        assert_eq!(shells.shells.borrow().len(), G_SHELLS_MAX / 2 + 1);
        assert_eq!(global.shells.lock().len(), G_SHELLS_MAX / 2);
        let other = GShells::default();
        assert!(other.get(&global).is_some());
        assert_eq!(other.shells.borrow().len(), G_SHELLS_MAX / 2 - 1);
        assert!(global.shells.lock().is_empty());

        // The global list keeps at most G_FREE_MAX; a retiring P's shells go there.
        shells.clear(&global);
        assert!(shells.shells.borrow().is_empty());
        assert_eq!(global.shells.lock().len(), G_SHELLS_MAX / 2 + 1);
        let g = dead_g(None, 7);
        let fill = G_FREE_MAX - global.shells.lock().len() - 1;
        global.shells.lock().extend(vec![g.clone(); fill]);
        for id in 0..3 {
            shells.put(dead_g(None, 100 + id), &global);
        }
        shells.clear(&global);
        assert_eq!(
            global.shells.lock().len(),
            G_FREE_MAX,
            "full: the rest is freed"
        );
        assert!(global.take().is_some());
        global.shells.lock().clear();
        assert!(global.take().is_none());
    }
}
