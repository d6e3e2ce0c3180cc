//! Coroutine stacks: allocation, guard pages, the pool, the overflow handler.
//!
//! A stack is part of an anonymous mapping, `MAP_NORESERVE | MAP_STACK`, so its pages
//! are committed only when touched (a parked coroutine costs the pages its frames use,
//! not its virtual size) and the kernel does not back it with huge pages: a stack of
//! the default size is part of a slab, carved from a region of 1 024 stacks
//! ([`arena`]); one of another size is a mapping of its own. The lowest
//! [`GUARD_PAGES`] pages are the guard:
//!
//! - on Linux 6.13+ they are installed with `madvise(MADV_GUARD_INSTALL)`, which marks
//!   page-table entries and leaves the mapping whole, so a region stays one VMA and a
//!   million guarded stacks fit in a process;
//! - elsewhere with `mprotect(PROT_NONE)`, which splits the mapping in two: every stack
//!   then costs two VMAs and `vm.max_map_count` (65530 by default) caps a process near
//!   32 000 live coroutines. Allocation failure there is a typed `io::Error` that names
//!   the limit, never a panic.
//!
//! Which one is used is decided once, at start-up, by trying a guard install on a
//! scratch mapping ([`guard_kind`]); `GORO_STACK_GUARD=mprotect` forces the fallback.
//! A slab's guard installs go to the kernel in one `process_madvise` where it takes
//! them ([`guard_batch`]); `GORO_STACK_GUARD=madvise` forces one `madvise` per stack,
//! which older kernels get.
//!
//! This module owns all raw stack memory; `pool` recycles stacks and `overflow` turns a
//! hit in a guard page into a message naming the coroutine.
//!
//! The calls are libc's, not `nix`'s (which the rest of the runtime uses where it
//! can): nix has no `MADV_GUARD_INSTALL`, `process_madvise` or `mincore`, and its
//! `mmap`, `mprotect` and `munmap` are `unsafe` as these are, so it would remove no
//! `unsafe` block here. The overflow handler's `sigaltstack` and `sigaction` stay raw
//! for the same reason (nix's are `unsafe` too, and its `sigaltstack` is missing).

pub(crate) mod overflow;
pub(crate) mod pool;
pub(crate) mod trap;

use std::io;
use std::ptr::NonNull;
use std::sync::OnceLock;

use corosensei::stack::StackPointer;

/// Pages of guard below every stack. One would do for Rust code, whose stack probes
/// touch every page of a large frame in order; four also catch C frames that skip
/// ahead. With guard installs they cost nothing but address space.
pub(crate) const GUARD_PAGES: usize = 4;

/// The smallest stack a user may ask for. Smaller stacks cannot hold a panic's
/// formatting and unwinding, so they would turn every panic into an overflow.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// The largest stack a user may ask for (virtual size; it costs only what is touched).
pub const MAX_STACK_SIZE: usize = 1 << 30;

/// `madvise` advice that installs guard markers (Linux 6.13+). Not in libc yet.
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Fresh default-size stacks are mapped this many at a time (see [`Stack::new_slab`]).
pub(crate) const SLAB_STACKS: usize = 64;

/// `process_madvise`'s name for the calling process (Linux 6.15+). Not in libc yet.
const PIDFD_SELF: libc::c_int = -10000;

/// How guard pages are made on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardKind {
    /// `madvise(MADV_GUARD_INSTALL)`: no extra mapping per stack.
    GuardInstall,
    /// `mprotect(PROT_NONE)`: two mappings per stack.
    Mprotect,
}

pub(crate) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v <= 0 {
            4096
        } else {
            v as usize
        }
    })
}

/// How the guard installs of a new slab reach the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardBatch {
    /// One `process_madvise(PIDFD_SELF, ...)` per slab (Linux 6.15+).
    PidfdSelf,
    /// One `process_madvise` per slab on a pidfd of this process, opened once
    /// (`pidfd_open`: kernels that take guard installs there but have no `PIDFD_SELF`).
    Pidfd,
    /// One `madvise` per stack: `GORO_STACK_GUARD=madvise`, or a kernel that refuses
    /// guard installs through `process_madvise`; also what the `mprotect` fallback does
    /// (one `mprotect` per stack).
    PerStack,
}

/// `GORO_STACK_GUARD`: `mprotect`, `madvise` (guard installs, one call per stack),
/// `pidfd` (batched through a pidfd opened once, not `PIDFD_SELF`), `auto` (checked
/// with the other variables at start: `config::READ_LATER`).
fn guard_setting() -> Option<String> {
    std::env::var("GORO_STACK_GUARD").ok()
}

/// The guard mechanism in use, detected on first call.
pub fn guard_kind() -> GuardKind {
    static KIND: OnceLock<GuardKind> = OnceLock::new();
    *KIND.get_or_init(|| {
        if guard_setting().as_deref() == Some("mprotect") {
            return GuardKind::Mprotect;
        }
        let ok = on_scratch_page(|p, page| {
            // SAFETY: `p` is the scratch page; the advice only changes page tables.
            unsafe { libc::madvise(p, page, MADV_GUARD_INSTALL) == 0 }
        });
        if ok {
            GuardKind::GuardInstall
        } else {
            GuardKind::Mprotect
        }
    })
}

/// Rounds a requested stack size up to whole pages and checks it.
pub(crate) fn usable_size(requested: usize) -> io::Result<usize> {
    if !(MIN_STACK_SIZE..=MAX_STACK_SIZE).contains(&requested) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "coroutine stack size must be between {} KiB and {} MiB, got {requested} bytes",
                MIN_STACK_SIZE / 1024,
                MAX_STACK_SIZE >> 20
            ),
        ));
    }
    let page = page_size();
    Ok(requested.div_ceil(page) * page)
}

/// One coroutine stack: `[guard | usable]`, growing down from the top of the mapping.
pub(crate) struct Stack {
    /// Start of the mapping (the bottom of the guard).
    map: NonNull<u8>,
    /// Length of the whole mapping, guard included.
    len: usize,
    /// Length of the guard at the bottom.
    guard: usize,
}

// SAFETY: a Stack is the sole owner of its mapping; moving that ownership to another
// thread is like moving a Box.
unsafe impl Send for Stack {}

impl Stack {
    /// Maps a new stack with `usable` bytes (a multiple of the page size) above its guard.
    pub(crate) fn new(usable: usize) -> io::Result<Stack> {
        Ok(Stack::new_slab(usable, 1)?
            .pop()
            .expect("a slab of one holds one stack"))
    }

    /// Maps `n` stacks of `usable` bytes each (a multiple of the page size) in one
    /// range, `[guard | usable][guard | usable]...` (a slab: carved from the [`arena`]'s
    /// region when `n > 1`, a mapping of its own for one), and installs their guards: with
    /// guard installs, all `n` in one `process_madvise` where the kernel takes it for
    /// the calling process (else one `madvise` each); with the `mprotect` fallback, one
    /// `mprotect` each. Each stack owns its part of the mapping and unmaps only that.
    ///
    /// One `mmap` per stack and one `madvise` cost a fresh spawn ~1.1 µs and ~0.9 µs
    /// here; per stack of a slab of 64 they are a few ns and ~0.4 µs. (The first touch
    /// of a stack's top page stays: it is the page's zeroing, which a batched
    /// `MADV_POPULATE_WRITE` does no faster.)
    ///
    /// Behind every stack stands the memory reserve (see [`reserve`]): no stack is
    /// mapped while the reserve cannot be, and a mapping that fails for want of memory
    /// gives the reserve up, so that the program that gets the `Err` has room to
    /// recover.
    pub(crate) fn new_slab(usable: usize, n: usize) -> io::Result<Vec<Stack>> {
        let guard = GUARD_PAGES * page_size();
        let one = usable + guard;
        let len = one.checked_mul(n).ok_or_else(|| {
            alloc_error(
                usable,
                usize::MAX,
                io::Error::from_raw_os_error(libc::ENOMEM),
            )
        })?;
        if !reserve::hold() {
            let err = io::Error::from_raw_os_error(libc::ENOMEM);
            return Err(alloc_error(usable, len.saturating_add(reserve::BYTES), err));
        }
        // A slab is carved from the arena's region; a single stack is a mapping of its
        // own, placed by the kernel.
        let mapped = if n > 1 {
            arena::carve(len)
        } else {
            map_stacks(0, len)
        };
        let base = match mapped {
            Ok(base) => base,
            Err(err) => return Err(reserve::give_up(alloc_error(usable, len, err))),
        };
        if let Err(err) = install_guards(base, one, guard, n) {
            // SAFETY: unmapping the part we own and have not handed out.
            unsafe { libc::munmap(base as *mut libc::c_void, len) };
            return Err(reserve::give_up(alloc_error(usable, len, err)));
        }
        Ok((0..n)
            .map(|k| Stack {
                // SAFETY: mmap succeeded, so the mapping (and every part of it) is not
                // at null.
                map: unsafe { NonNull::new_unchecked((base + k * one) as *mut u8) },
                len: one,
                guard,
            })
            .collect())
    }

    /// Usable bytes above the guard.
    pub(crate) fn usable(&self) -> usize {
        self.len - self.guard
    }

    /// The guard's address range `[lo, hi)`.
    pub(crate) fn guard_range(&self) -> (usize, usize) {
        let lo = self.map.as_ptr() as usize;
        (lo, lo + self.guard)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // SAFETY: the mapping is ours and no coroutine runs on it any more (a coroutine
        // owns its stack until it completes and hands it back with into_stack).
        unsafe { libc::munmap(self.map.as_ptr().cast(), self.len) };
    }
}

/// Unmaps `stacks`, each run of neighbours (the stacks of a slab, the slabs of a
/// region) in one `munmap`: the scavenger's batch of up to 4 096 stacks is then tens
/// of calls, not thousands. Every `munmap` write-locks the address space and sends the
/// other CPUs running the process a TLB flush; one per stack made the scavenger,
/// running beside the exits of a million coroutines, take 0.2 s of CPU in 0.6 s of
/// their wake-up (docs/benchmarks.md).
pub(crate) fn unmap_all(mut stacks: Vec<Stack>) {
    stacks.sort_unstable_by_key(|s| s.map.as_ptr() as usize);
    let mut run: Option<(usize, usize)> = None;
    let unmap = |(lo, len): (usize, usize)| {
        // SAFETY: `[lo, lo + len)` is the union of whole stacks' mappings, each owned by
        // a `Stack` of `stacks`, which no coroutine runs on any more and which are
        // forgotten below instead of dropped (so nothing unmaps them twice).
        unsafe { libc::munmap(lo as *mut libc::c_void, len) };
    };
    for s in &stacks {
        let lo = s.map.as_ptr() as usize;
        run = match run {
            Some((start, len)) if start + len == lo => Some((start, len + s.len)),
            Some(done) => {
                unmap(done);
                Some((lo, s.len))
            }
            None => Some((lo, s.len)),
        };
    }
    if let Some(done) = run {
        unmap(done);
    }
    for s in stacks {
        std::mem::forget(s);
    }
}

// SAFETY: [limit, base) is mapped read-write and at least MIN_STACK_SIZE long (checked
// by usable_size), with guard pages directly below `limit`, as corosensei requires.
unsafe impl corosensei::stack::Stack for Stack {
    fn base(&self) -> StackPointer {
        let top = self.map.as_ptr() as usize + self.len;
        StackPointer::new(top).expect("stack top is not null")
    }

    fn limit(&self) -> StackPointer {
        StackPointer::new(self.map.as_ptr() as usize + self.guard).expect("stack limit is not null")
    }
}

/// Maps `len` bytes of fresh stack memory (read-write, committed page by page as
/// touched, never huge pages) at `hint` if that range is free, else where the kernel
/// puts it (`hint` 0: the kernel's choice). Its address, or the error.
fn map_stacks(hint: usize, len: usize) -> io::Result<usize> {
    // SAFETY: a fresh private anonymous mapping; without MAP_FIXED the hint is only a
    // hint, and the kernel never places it over an existing mapping.
    let p = unsafe {
        libc::mmap(
            hint as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(io::Error::last_os_error())
    } else {
        Ok(p as usize)
    }
}

/// The address space default-size slabs are carved from: a region of
/// [`REGION_SLABS`](arena::REGION_SLABS) slabs, mapped at once, placed a page apart
/// from the region before it.
///
/// Why not one mapping per slab: the kernel merges a new anonymous mapping with an
/// adjacent one of the same kind, and the top-down allocator puts each new slab right
/// below the last. Growing a mapping write-locks it, which waits for the page faults
/// in flight there and sends the ones that follow to the address-space lock: the
/// slab a plain thread maps while the Ms fault the top pages of the slabs before it
/// stalled both sides (a spawn from `main` at 2 Ps took 3.6-4.5 µs, 1.4x the floor of
/// a fresh stack; with regions, 1.9-2.2 µs, below it; docs/benchmarks.md). Carving
/// touches no mapping: a slab's guards go in with `process_madvise`, which, as a page
/// fault, only reads the mapping.
///
/// Why regions and not a hole after every slab: every hole costs a mapping, and
/// `vm.max_map_count` (65 530 by default) would then cap a process near four million
/// coroutines; a region of sixteen slabs is one mapping for 1 024 stacks. A region's
/// unused part is address space only (no page tables until a slab's guards go in).
/// Where the region cannot be mapped (`RLIMIT_AS`), the slab is mapped alone, as
/// before; where the kernel never overcommits, a region is one slab. With `mprotect`
/// guards (old kernels) each stack's guard splits the region anyway, under the
/// address-space lock, as it split a slab before.
mod arena {
    use std::io;
    use std::sync::OnceLock;

    use crate::lockrank::{Mutex, Rank};

    /// Slabs a region holds.
    pub(crate) const REGION_SLABS: usize = 16;

    /// Slabs a region holds on this machine: [`REGION_SLABS`], or one where the kernel
    /// never overcommits (`vm.overcommit_memory=2` counts `MAP_NORESERVE` mappings
    /// whole: a region would charge fifteen slabs nobody uses yet).
    pub(crate) fn region_slabs() -> usize {
        static SLABS: OnceLock<usize> = OnceLock::new();
        *SLABS.get_or_init(
            || match std::fs::read_to_string("/proc/sys/vm/overcommit_memory") {
                Ok(v) if v.trim() == "2" => 1,
                _ => REGION_SLABS,
            },
        )
    }

    /// The current region: `[next, end)` is not carved yet; `low` is the region's base,
    /// below which the next region goes.
    struct Region {
        next: usize,
        end: usize,
        low: usize,
    }

    impl Region {
        /// The base of `len` bytes carved from the region, if it has them.
        fn take(&mut self, len: usize) -> Option<usize> {
            if self.end - self.next < len {
                return None;
            }
            let base = self.next;
            self.next += len;
            Some(base)
        }
    }

    /// Regions and the one slabs are carved from now.
    pub(crate) struct Arena(Mutex<Region>);

    static ARENA: Arena = Arena::new();

    /// The base of `len` fresh bytes of stack memory (a slab), from the runtime's arena.
    pub(crate) fn carve(len: usize) -> io::Result<usize> {
        ARENA.carve(len)
    }

    impl Arena {
        pub(crate) const fn new() -> Arena {
            Arena(Mutex::new(
                Rank::StackArena,
                Region {
                    next: 0,
                    end: 0,
                    low: 0,
                },
            ))
        }

        /// The base of `len` fresh bytes, carved from the current region, or from a new
        /// one mapped a page below the last.
        pub(crate) fn carve(&self, len: usize) -> io::Result<usize> {
            let low = {
                let mut r = self.0.lock();
                if let Some(base) = r.take(len) {
                    return Ok(base);
                }
                r.low
            };
            // Mapped without the lock held: a `fork` waits for the address-space lock
            // that the `mmap` takes, and a child forked then would inherit the lock
            // held for good.
            let page = super::page_size();
            let size = len.checked_mul(region_slabs()).unwrap_or(len);
            // One page below the last region, so the kernel cannot merge the two.
            let hint = low.saturating_sub(size.saturating_add(page));
            let base = match super::map_stacks(hint, size) {
                Ok(base) => base,
                // No room for a region: this slab alone.
                Err(_) if size > len => return super::map_stacks(0, len),
                Err(err) => return Err(err),
            };
            let mut r = self.0.lock();
            if let Some(theirs) = r.take(len) {
                // Another caller put a region in meanwhile: carve from it, and give
                // ours back.
                drop(r);
                // SAFETY: the mapping just made, which nothing else knows of.
                unsafe { libc::munmap(base as *mut libc::c_void, size) };
                return Ok(theirs);
            }
            *r = Region {
                next: base + len,
                end: base + size,
                low: base,
            };
            Ok(base)
        }
    }
}

/// Installs the guard (the lowest `guard` bytes) of each of the `n` stacks of `one`
/// bytes from `base` (see [`Stack::new_slab`]).
fn install_guards(base: usize, one: usize, guard: usize, n: usize) -> io::Result<()> {
    let each = |k: usize| {
        let at = (base + k * one) as *mut libc::c_void;
        let rc = match guard_kind() {
            // SAFETY: the guard range is the bottom of stack `k`, inside the mapping
            // the caller just made; the advice only changes page tables.
            GuardKind::GuardInstall => unsafe { libc::madvise(at, guard, MADV_GUARD_INSTALL) },
            // SAFETY: as above.
            GuardKind::Mprotect => unsafe { libc::mprotect(at, guard, libc::PROT_NONE) },
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    };
    let mut done = 0;
    if guard_kind() == GuardKind::GuardInstall && n > 1 {
        if let Some(pidfd) = batch_pidfd() {
            // process_madvise takes at most IOV_MAX (1024) ranges and returns the bytes
            // it advised, in order: what it did not reach gets one madvise each below.
            let iov: Vec<libc::iovec> = (0..n.min(1024))
                .map(|k| libc::iovec {
                    iov_base: (base + k * one) as *mut libc::c_void,
                    iov_len: guard,
                })
                .collect();
            let r = process_madvise_guards(pidfd, &iov);
            if r > 0 {
                done = r as usize / guard;
            }
        }
    }
    (done..n).try_for_each(each)
}

/// `process_madvise(pidfd, iov, MADV_GUARD_INSTALL)`: the bytes advised, or -1.
fn process_madvise_guards(pidfd: libc::c_int, iov: &[libc::iovec]) -> libc::c_long {
    // SAFETY: the ranges are guards of stacks in a fresh mapping of the caller's (or
    // the probe's scratch page); the advice only changes page tables, and `pidfd`
    // names this process.
    unsafe {
        libc::syscall(
            libc::SYS_process_madvise,
            pidfd,
            iov.as_ptr(),
            iov.len(),
            MADV_GUARD_INSTALL,
            0,
        )
    }
}

/// How a slab's guards are installed here, decided once: `PIDFD_SELF`, else a pidfd
/// of this process opened once, each tried on a scratch mapping; else one call per
/// stack (see [`GuardBatch`]).
pub fn guard_batch() -> GuardBatch {
    batch().0
}

/// The decision and, for [`GuardBatch::Pidfd`], the descriptor and the pid it names.
fn batch() -> &'static (GuardBatch, Option<(std::os::fd::OwnedFd, libc::pid_t)>) {
    static BATCH: OnceLock<(GuardBatch, Option<(std::os::fd::OwnedFd, libc::pid_t)>)> =
        OnceLock::new();
    BATCH.get_or_init(|| {
        if guard_kind() != GuardKind::GuardInstall || guard_setting().as_deref() == Some("madvise")
        {
            return (GuardBatch::PerStack, None);
        }
        // `pidfd` skips PIDFD_SELF, for testing the path that kernels before 6.15 take.
        if guard_setting().as_deref() != Some("pidfd") && probe_batch(PIDFD_SELF) {
            return (GuardBatch::PidfdSelf, None);
        }
        // SAFETY: pidfd_open of our own pid, no flags: a new descriptor (close-on-exec,
        // as pidfd_open always makes it) or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) } as libc::c_int;
        if fd < 0 {
            return (GuardBatch::PerStack, None);
        }
        // SAFETY: the descriptor pidfd_open just returned, ours alone.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        if probe_batch(std::os::fd::AsRawFd::as_raw_fd(&fd)) {
            // SAFETY: getpid has no preconditions.
            (GuardBatch::Pidfd, Some((fd, unsafe { libc::getpid() })))
        } else {
            (GuardBatch::PerStack, None)
        }
    })
}

/// The pidfd to batch a slab's guard installs with, if any. A pidfd opened before a
/// `fork` names the parent: in the child it is not used (one call per stack there).
fn batch_pidfd() -> Option<libc::c_int> {
    match batch() {
        (GuardBatch::PidfdSelf, _) => Some(PIDFD_SELF),
        // SAFETY: getpid has no preconditions.
        (GuardBatch::Pidfd, Some((fd, pid))) if *pid == unsafe { libc::getpid() } => {
            Some(std::os::fd::AsRawFd::as_raw_fd(fd))
        }
        _ => None,
    }
}

/// Whether `process_madvise(pidfd, .., MADV_GUARD_INSTALL)` installs a guard here,
/// tried once on a scratch mapping.
fn probe_batch(pidfd: libc::c_int) -> bool {
    on_scratch_page(|p, page| {
        let iov = [libc::iovec {
            iov_base: p,
            iov_len: page,
        }];
        process_madvise_guards(pidfd, &iov) == page as libc::c_long
    })
}

/// Runs `try_it` on a fresh scratch page (its address and the page size) and unmaps
/// it after: how the guard probes find what this kernel takes. False if no page could
/// be mapped.
fn on_scratch_page(try_it: impl FnOnce(*mut libc::c_void, usize) -> bool) -> bool {
    let page = page_size();
    // SAFETY: a fresh anonymous mapping of one page; no memory is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            page,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    let ok = try_it(p, page);
    // SAFETY: unmapping the scratch page we own.
    unsafe { libc::munmap(p, page) };
    ok
}

/// The memory reserve: address space (and one mapping) held back from the stacks so
/// that a program whose spawn failed for want of memory can still release what it
/// holds and go on. Without it, the stacks take the last headroom (the pool falls back
/// from slabs to single stacks), and the next allocation of any kind aborts, often
/// inside goro (readying the coroutines of a closed channel, starting an M) or in a
/// panic's backtrace. Go keeps no such reserve, but its stacks come from its own heap,
/// whose growth fails in one place.
///
/// A `PROT_NONE`, `MAP_NORESERVE` mapping of [`BYTES`](reserve::BYTES): it costs no
/// memory, only address space (which `RLIMIT_AS` counts) and one mapping (which
/// `vm.max_map_count` counts). Mapped with the first stack; unmapped when a stack's
/// mapping fails with ENOMEM (the caller computes the error's cause first); mapped
/// again before the next stack, whose spawn fails while it cannot be.
pub(crate) mod reserve {
    use std::io;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The reserve's size: room for a few MiB of recovery (a channel's waiter list of
    /// a million coroutines is 16 MiB; a backtrace, a thread's stack guard, a run
    /// queue's growth are far less).
    pub(crate) const BYTES: usize = 16 << 20;

    /// The reserve's address, 0 while it is not held. A CAS decides who maps or
    /// unmaps it (AcqRel: the mapping is the only thing published, and the kernel
    /// orders it).
    static AT: AtomicUsize = AtomicUsize::new(0);

    /// Maps the reserve if it is not held; whether it is held now.
    pub(crate) fn hold() -> bool {
        if AT.load(Ordering::Acquire) != 0 {
            return true;
        }
        // SAFETY: a fresh private anonymous mapping, inaccessible, that nothing uses.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BYTES,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return false;
        }
        if AT
            .compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // Another caller mapped it first.
            // SAFETY: our own mapping, never published.
            unsafe { libc::munmap(p, BYTES) };
        }
        true
    }

    /// A stack's mapping failed with `err`: if for want of memory, give the reserve
    /// up. Returns `err`.
    pub(crate) fn give_up(err: io::Error) -> io::Error {
        if err.raw_os_error() == Some(libc::ENOMEM) {
            let p = AT.swap(0, Ordering::AcqRel);
            if p != 0 {
                // SAFETY: the reserve's mapping, which only this swap's winner owns.
                unsafe { libc::munmap(p as *mut libc::c_void, BYTES) };
            }
        }
        err
    }
}

/// The error for a failed stack allocation (a mapping of `len` bytes), naming the
/// limit the process hit when the cause is ENOMEM (see [`enomem_cause`]).
fn alloc_error(usable: usize, len: usize, err: io::Error) -> io::Error {
    let mut msg = format!(
        "cannot allocate a {} KiB coroutine stack: {err}",
        usable / 1024
    );
    if err.raw_os_error() == Some(libc::ENOMEM) {
        msg.push_str("; ");
        msg.push_str(&enomem_cause(len));
    }
    io::Error::new(err.kind(), msg)
}

/// Which limit a mapping of `len` bytes that failed with ENOMEM ran into: the
/// address-space limit (`RLIMIT_AS`, `ulimit -v`, the usual container limit) if the
/// process's mappings plus `len` pass it; else the mapping count
/// (`vm.max_map_count`) if the process is at it; else the system's memory (or its
/// overcommit policy). Read from `/proc` and `getrlimit` at the failure only.
pub(crate) fn enomem_cause(len: usize) -> String {
    let mib = |b: u64| b / (1024 * 1024);
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid out-pointer.
    let as_limit = (unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY)
        .then_some(lim.rlim_cur);
    if let Some(limit) = as_limit {
        // statm's first field: the process's mapped size, in pages.
        let mapped = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map(|pages| pages * page_size() as u64);
        if let Some(mapped) = mapped {
            if mapped.saturating_add(len as u64) > limit {
                return format!(
                    "the process reached its address-space limit (RLIMIT_AS, `ulimit -v`: \
                     {} MiB, {} MiB mapped): raise it, or use smaller stacks \
                     (GORO_STACK_SIZE) or fewer coroutines",
                    mib(limit),
                    mib(mapped)
                );
            }
        }
    }
    let max_maps = std::fs::read_to_string("/proc/sys/vm/max_map_count")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    if let (Some(max), Some(maps)) = (max_maps, map_count()) {
        // A margin: the runtime and libc map a few more between our count and the call.
        if maps + 8 >= max {
            return format!(
                "the process reached vm.max_map_count ({max} mappings, {maps} in use){}",
                if guard_kind() == GuardKind::Mprotect {
                    ": each coroutine stack with an mprotect guard costs two"
                } else {
                    ""
                }
            );
        }
    }
    "the system is out of memory, or its overcommit policy (vm.overcommit_memory) \
     refused the mapping"
        .into()
}

/// The process's mappings: the lines of `/proc/self/maps`, counted through a small
/// buffer (the process may be short of memory).
fn map_count() -> Option<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open("/proc/self/maps").ok()?;
    let mut buf = [0u8; 4096];
    let mut lines = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Some(lines),
            Ok(n) => lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_checked_and_rounded() {
        assert!(usable_size(0).is_err());
        assert!(usable_size(MIN_STACK_SIZE - 1).is_err());
        assert!(usable_size(MAX_STACK_SIZE + 1).is_err());
        let s = usable_size(MIN_STACK_SIZE + 1).unwrap();
        assert_eq!(s % page_size(), 0);
        assert!(s > MIN_STACK_SIZE);
    }

    #[test]
    fn a_slab_of_stacks_is_guarded_under_every_stack() {
        let usable = usable_size(64 * 1024).unwrap();
        let slab = Stack::new_slab(usable, SLAB_STACKS).unwrap();
        assert_eq!(slab.len(), SLAB_STACKS);
        for s in &slab {
            use corosensei::stack::Stack as _;
            let (lo, hi) = s.guard_range();
            assert_eq!(hi - lo, GUARD_PAGES * page_size());
            assert_eq!(s.limit().get(), hi);
            assert_eq!(s.base().get() - hi, usable);
            // SAFETY: the first and last usable bytes of this stack.
            unsafe {
                *(hi as *mut u8) = 1;
                *((s.base().get() - 1) as *mut u8) = 2;
            }
            // The guard is not resident (and must never become so).
            let mut vec = vec![0u8; GUARD_PAGES];
            // SAFETY: the range is inside our mapping; vec has one byte per page.
            let rc = unsafe { libc::mincore(lo as *mut _, hi - lo, vec.as_mut_ptr()) };
            assert_eq!(rc, 0);
            assert!(vec.iter().all(|b| b & 1 == 0));
        }
        // Stacks of one slab go their own ways: dropping some leaves the others whole.
        let mut slab = slab;
        let kept = slab.split_off(SLAB_STACKS / 2);
        drop(slab);
        for s in &kept {
            use corosensei::stack::Stack as _;
            // SAFETY: as above.
            unsafe { *((s.base().get() - 1) as *mut u8) = 3 };
        }
    }

    /// Whether the page at `at` is mapped (`mincore` fails with ENOMEM where not).
    fn mapped(at: usize) -> bool {
        let page = page_size();
        let mut v = [0u8; 1];
        // SAFETY: mincore only reads the page tables; `v` has room for one page.
        unsafe { libc::mincore((at & !(page - 1)) as *mut _, page, v.as_mut_ptr()) == 0 }
    }

    #[test]
    fn unmap_all_unmaps_exactly_the_stacks_given_in_any_order() {
        use corosensei::stack::Stack as _;
        let usable = usable_size(16 * 1024).unwrap();
        let mut slab = Stack::new_slab(usable, SLAB_STACKS).unwrap();
        // Every third stack stays; the others go, in a scrambled order: runs of two
        // neighbours, each run between two kept stacks.
        let mut kept = Vec::new();
        let mut gone = Vec::new();
        for (k, s) in slab.drain(..).enumerate() {
            if k % 3 == 0 {
                kept.push(s);
            } else {
                gone.push(s);
            }
        }
        gone.reverse();
        gone.swap(0, 7);
        let gone_at: Vec<(usize, usize)> = gone
            .iter()
            .map(|s| (s.guard_range().0, s.base().get()))
            .collect();
        unmap_all(gone);
        // Another test's mapping may land in a hole just made (each hole is two
        // stacks between kept ones): all but a few must read as unmapped.
        let still = gone_at
            .iter()
            .filter(|&&(lo, top)| mapped(lo) || mapped(top - 1))
            .count();
        assert!(
            still <= 3,
            "{still} of {} stacks still mapped",
            gone_at.len()
        );
        for s in &kept {
            assert!(mapped(s.guard_range().0) && mapped(s.base().get() - 1));
            // SAFETY: the top byte of a stack that is still ours.
            unsafe { *((s.base().get() - 1) as *mut u8) = 1 };
        }
    }

    /// The mapping (`/proc/self/maps` line) that holds `at`: its range.
    fn mapping_of(at: usize) -> Option<(usize, usize)> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines().find_map(|l| {
            let (a, b) = l.split_whitespace().next()?.split_once('-')?;
            let (a, b) = (
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            );
            (a <= at && at < b).then_some((a, b))
        })
    }

    #[test]
    fn slabs_are_carved_from_regions_kept_apart() {
        // A private arena: the runtime's own is shared with the other tests.
        let arena = arena::Arena::new();
        let len = 16 * page_size();
        let per = arena::region_slabs();
        let bases: Vec<usize> = (0..=per).map(|_| arena.carve(len).unwrap()).collect();
        // A region's slabs follow one another, in one mapping.
        for w in bases[..per].windows(2) {
            assert_eq!(w[1], w[0] + len);
        }
        let (lo, hi) = mapping_of(bases[0]).unwrap();
        assert!(lo <= bases[0] && bases[per - 1] + len <= hi);
        // The next region is a mapping of its own, not merged with this one.
        let next = bases[per];
        assert!(next + len <= bases[0] || next >= bases[per - 1] + len);
        let (nlo, nhi) = mapping_of(next).unwrap();
        assert!(
            nhi <= bases[0] || nlo >= bases[per - 1] + len,
            "regions merged"
        );
        // SAFETY: the two regions this arena mapped, which nothing else uses.
        unsafe {
            libc::munmap(bases[0] as *mut libc::c_void, len * per);
            libc::munmap(next as *mut libc::c_void, len * per);
        }
    }

    #[test]
    fn stack_is_writable_and_guarded_below() {
        let s = Stack::new(usable_size(64 * 1024).unwrap()).unwrap();
        let (lo, hi) = s.guard_range();
        assert_eq!(hi - lo, GUARD_PAGES * page_size());
        use corosensei::stack::Stack as _;
        let limit = s.limit().get();
        let base = s.base().get();
        assert_eq!(limit, hi);
        assert_eq!(base - limit, s.usable());
        // Touch the first and last usable bytes.
        // SAFETY: both addresses are inside the read-write part of the mapping.
        unsafe {
            *(limit as *mut u8) = 1;
            *((base - 1) as *mut u8) = 2;
        }
        // mincore says the guard pages are not resident (and must never become so).
        let mut vec = vec![0u8; GUARD_PAGES];
        // SAFETY: the range is inside our mapping; vec has one byte per page.
        let rc = unsafe { libc::mincore(lo as *mut _, hi - lo, vec.as_mut_ptr()) };
        assert_eq!(rc, 0);
        assert!(vec.iter().all(|b| b & 1 == 0));
    }
}
