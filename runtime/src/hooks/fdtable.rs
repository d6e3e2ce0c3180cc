//! The hooks' descriptor table: what the hooks know about each fd.
//!
//! One [`Entry`] per descriptor number, in an array mapped once, on a coroutine's
//! first hooked call (`mmap`, `MAP_NORESERVE`: untouched pages cost nothing), as long as the
//! process's hard `RLIMIT_NOFILE` (at most 2^20 entries). A zeroed entry means
//! "unknown", so the map needs no initialisation, and no hook ever allocates for the
//! table or takes a lock to read it. Descriptors beyond the table are left alone
//! (real calls; retake covers them).
//!
//! An entry is filled when the hooks see the descriptor born (`socket`, `socketpair`,
//! `accept`, `dup*`), or lazily on a coroutine's first blocking call on it: one
//! `getsockopt(SO_TYPE)` tells a socket (then `F_GETFL` and the two timeouts are read
//! from the kernel) from everything else. `close` and `dup2`/`dup3` onto it empty it.
//!
//! A socket's mode and timeouts are not the descriptor's but the open socket's, shared
//! by its duplicates (`try_clone`): they live in a [`Desc`] that every entry of the
//! socket names, in a second array beside the entries (see `Desc`).
//!
//! The fields are independent settings, each read and written on its own. An entry's
//! `desc` index is published with Release and read with Acquire, so a hook that finds
//! it sees the desc's fields as they were filled; a desc's flags are set with Release
//! after the kernel state they name (the `O_NONBLOCK` set underneath).

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::Arc;
use std::time::Duration;

use libc::c_int;

use crate::arc_slot::{ArcSlot, Got};
use crate::net::poll::PollDesc;
use crate::sys;

/// `Entry::kind` kinds (the low two bits).
const KIND: u32 = 3;
const UNKNOWN: u32 = 0;
const OTHER: u32 = 1;
const SOCKET: u32 = 2;
/// A `SOCK_STREAM` socket: a blocking send queues everything, and a short read or
/// write drains it.
pub(crate) const STREAM: u32 = 4;
/// `Desc::flags`: the user asked for non-blocking mode (`O_NONBLOCK`, `FIONBIO`,
/// `SOCK_NONBLOCK`): every call on it is the real call.
pub(crate) const USER_NB: u32 = 8;
/// `Desc::flags`: the hooks set `O_NONBLOCK` underneath a socket the user sees as
/// blocking.
pub(crate) const OUR_NB: u32 = 16;

/// What the hooks know about one descriptor (see the module doc).
pub(crate) struct Entry {
    /// UNKNOWN, OTHER, or SOCKET with STREAM.
    kind: AtomicU32,
    /// The open socket's [`Desc`], as its index + 1 (0: none).
    desc: AtomicU32,
    /// The descriptor's registration with the poller, made on its first wait.
    pd: ArcSlot<PollDesc>,
}

/// What the hooks know about one open socket, shared by all its descriptors (`dup`,
/// `try_clone`): `O_NONBLOCK` belongs to the open file, and the socket options to the
/// socket, so a change through one descriptor holds for all.
///
/// Descs live in a second array of the table's length, so there is always one free
/// for each open descriptor. A new socket claims one with a CAS of `refs` from 0 to
/// 1, trying the slot of its own fd number first, then the next ones (the slot of its
/// number is free unless duplicates of an earlier socket with that number outlive
/// it); each descriptor that shares it holds a reference, and the last `forget`
/// frees it. No allocation, no lock.
struct Desc {
    refs: AtomicU32,
    /// USER_NB, OUR_NB.
    flags: AtomicU32,
    /// `SO_RCVTIMEO` / `SO_SNDTIMEO` in ns (0: none).
    rcv_ns: AtomicU64,
    snd_ns: AtomicU64,
}

/// A snapshot of a descriptor's kind and its socket's flags.
#[derive(Clone, Copy)]
pub(crate) struct State(u32);

impl State {
    pub(crate) fn is_socket(self) -> bool {
        self.0 & KIND == SOCKET
    }
    pub(crate) fn has(self, flag: u32) -> bool {
        self.0 & flag != 0
    }
    /// A socket whose blocking calls the hooks emulate: the user sees it as blocking.
    pub(crate) fn managed(self) -> bool {
        self.is_socket() && !self.has(USER_NB)
    }
    /// A socket made non-blocking underneath: a plain thread's call that finds it
    /// empty waits with `poll` rather than seeing `EAGAIN`.
    pub(crate) fn emulated(self) -> bool {
        self.managed() && self.has(OUR_NB)
    }
}

/// The entries, then as many descs (one mapping).
static TABLE: AtomicPtr<Entry> = AtomicPtr::new(std::ptr::null_mut());
static DESCS: AtomicPtr<Desc> = AtomicPtr::new(std::ptr::null_mut());
static LEN: AtomicUsize = AtomicUsize::new(0);

/// The most entries the table maps.
const MAX_ENTRIES: usize = 1 << 20;

/// Whether coroutines' calls park: unknown until a coroutine first makes one, then
/// on or off for good (`GORO_HOOKS`, and whether the table could be mapped); off in a
/// forked child, whose runtime threads did not survive the fork.
static ENABLED: AtomicU8 = AtomicU8::new(UNSET);
const UNSET: u8 = 0;
const STARTING: u8 = 1;
const ON: u8 = 2;
const OFF: u8 = 3;

/// Set in a forked child: the poller (an epoll instance the child shares with its
/// parent) and its table belong to the parent, so `forget` leaves them alone.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether the caller is a coroutine whose blocking calls park.
#[inline(always)]
pub(crate) fn parking() -> bool {
    if !crate::sched::m::on_coroutine_here() {
        return false;
    }
    // Relaxed: a switch set once (and in a fork child, by its only thread); `start`
    // publishes the table on its own.
    match ENABLED.load(Ordering::Relaxed) {
        ON => true,
        UNSET => start(),
        _ => false,
    }
}

/// A coroutine's first hooked call: the runtime runs, so its configuration is known.
/// Maps the table and turns parking off in children of `fork`. A call that races the
/// start makes the real call.
#[cold]
fn start() -> bool {
    // Relaxed: only who starts is decided here; the outcome is stored below.
    if ENABLED
        .compare_exchange(UNSET, STARTING, Ordering::Relaxed, Ordering::Relaxed)
        .is_err()
    {
        return ENABLED.load(Ordering::Relaxed) == ON;
    }
    let on =
        crate::sched::rt().hooks && (!TABLE.load(Ordering::Acquire).is_null() || init().is_ok());
    if on {
        extern "C" fn in_child() {
            // Relaxed: the child has one thread.
            ENABLED.store(OFF, Ordering::Relaxed);
            FORKED.store(true, Ordering::Relaxed);
        }
        // SAFETY: registers a handler that only stores to an atomic.
        unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
    }
    // Relaxed: as in `parking`.
    ENABLED.store(if on { ON } else { OFF }, Ordering::Relaxed);
    on
}

/// Maps the table (once: the first hook that records a descriptor, or the first
/// coroutine that parks). Async-signal-safe (an `mmap`); a racing second mapping is
/// unmapped again. On failure the hooks stay real calls.
#[cold]
fn init() -> io::Result<()> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct we pass.
    let n = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0 {
        (lim.rlim_max.max(lim.rlim_cur) as usize).clamp(1024, MAX_ENTRIES)
    } else {
        65536
    };
    let entries = n * std::mem::size_of::<Entry>();
    let bytes = entries + n * std::mem::size_of::<Desc>();
    // SAFETY: a fresh anonymous mapping; nothing else refers to it.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    // Only one mapping wins; LEN and DESCS are set by the winner before it publishes
    // TABLE, so they are never seen half-made. The lock is a CAS of a flag, never
    // waited on: a loser unmaps its own mapping and the table is simply not there
    // yet for its caller.
    static MAPPING: AtomicBool = AtomicBool::new(false);
    // Acquire/Release: the winner's stores below happen after its CAS.
    if MAPPING
        .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        // SAFETY: our own mapping, never published.
        unsafe { libc::munmap(p, bytes) };
        return Err(io::Error::from_raw_os_error(libc::EAGAIN));
    }
    // Relaxed: published by the Release store of TABLE below.
    LEN.store(n, Ordering::Relaxed);
    // SAFETY: the descs follow the entries inside the mapping (both 8-aligned).
    DESCS.store(
        unsafe { p.cast::<u8>().add(entries) }.cast(),
        Ordering::Relaxed,
    );
    // Release: a hook that loads the pointer (Acquire) sees LEN, DESCS and the zeroed
    // pages.
    TABLE.store(p.cast(), Ordering::Release);
    Ok(())
}

/// The entry of `fd`, if the table exists and covers it.
#[inline]
pub(crate) fn entry(fd: RawFd) -> Option<&'static Entry> {
    // Acquire: pairs with `init`'s Release store.
    let t = TABLE.load(Ordering::Acquire);
    // Relaxed: ordered by the Acquire load above.
    if t.is_null() || fd < 0 || fd as usize >= LEN.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: `t` maps LEN zero-initialised entries for the life of the process, and
    // an all-zero `Entry` is a valid one (atomics and null pointers); `fd < LEN`.
    Some(unsafe { &*t.add(fd as usize) })
}

/// The entry of `fd`, mapping the table first if need be (for a hook that records a
/// descriptor just born).
pub(crate) fn entry_or_init(fd: RawFd) -> Option<&'static Entry> {
    if TABLE.load(Ordering::Acquire).is_null() {
        let _ = init();
    }
    entry(fd)
}

/// Desc `i` (an index below LEN, from an entry).
fn desc(i: u32) -> &'static Desc {
    // Relaxed: DESCS is published with TABLE (Release), which our caller loaded
    // (Acquire) to reach the entry that named `i`.
    let d = DESCS.load(Ordering::Relaxed);
    // SAFETY: DESCS maps LEN zero-initialised descs for the life of the process (all
    // zero is a valid Desc), and entries only name indices below LEN.
    unsafe { &*d.add(i as usize) }
}

/// Claims a free desc, starting at the slot of `fd`, and sets its flags and timeouts.
/// None if every one is taken (cannot happen while each holds an open descriptor).
fn claim_desc(fd: RawFd, flags: u32, rcv_ns: u64, snd_ns: u64) -> Option<u32> {
    // Relaxed: as in `desc`.
    let len = LEN.load(Ordering::Relaxed);
    for k in 0..len {
        let i = ((fd as usize + k) % len) as u32;
        let d = desc(i);
        // Acquire: the last `release` of this desc (its Release) is before our reuse.
        // Relaxed on failure: the slot is taken, try the next.
        if d.refs
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // Relaxed: published by the Release store of the entry's `desc`.
            d.flags.store(flags, Ordering::Relaxed);
            d.rcv_ns.store(rcv_ns, Ordering::Relaxed);
            d.snd_ns.store(snd_ns, Ordering::Relaxed);
            return Some(i);
        }
    }
    None
}

impl Entry {
    /// The descriptor's kind and its socket's flags (Acquire: see the module doc).
    #[inline]
    pub(crate) fn state(&self) -> State {
        let kind = self.kind.load(Ordering::Acquire);
        match self.desc() {
            // Acquire: pairs with `set`'s Release, so a hook that sees OUR_NB also sees
            // the O_NONBLOCK set underneath before it.
            Some(d) => State(kind | d.flags.load(Ordering::Acquire)),
            None => State(kind),
        }
    }

    fn desc(&self) -> Option<&'static Desc> {
        // Acquire: pairs with the Release store in `fill`, so the desc's fields are seen.
        match self.desc.load(Ordering::Acquire) {
            0 => None,
            i => Some(desc(i - 1)),
        }
    }

    /// The state, filled in from the kernel first if unknown. Returns an unknown state
    /// (neither socket nor other) if the descriptor is not open.
    ///
    /// Descriptors 0, 1 and 2 that the process did not open itself (a socket it made
    /// and that landed there is `born_socket`'s) are left alone: standard streams are
    /// shared with the parent and its other children, and `O_NONBLOCK` belongs to the
    /// open file, so setting it underneath would make their reads fail with `EAGAIN`
    /// in the other processes (Go leaves them alone too, since golang/go#24164).
    pub(crate) fn known(&self, fd: RawFd) -> State {
        let st = self.state();
        if st.0 & KIND != UNKNOWN {
            return st;
        }
        if (0..=2).contains(&fd) {
            // Release: as in `fill`.
            self.kind.store(OTHER, Ordering::Release);
            return self.state();
        }
        let ty = match sys::getsockopt::<c_int>(fd, libc::SOL_SOCKET, libc::SO_TYPE) {
            Ok(ty) => ty,
            Err(libc::ENOTSOCK) => {
                // Release: as in `fill`.
                self.kind.store(OTHER, Ordering::Release);
                return self.state();
            }
            Err(_) => return st,
        };
        let Ok(fl) = sys::fcntl(fd, libc::F_GETFL, 0) else {
            return st;
        };
        let kind = if ty == libc::SOCK_STREAM {
            SOCKET | STREAM
        } else {
            SOCKET
        };
        let flags = if fl as c_int & libc::O_NONBLOCK != 0 {
            USER_NB
        } else {
            0
        };
        let rcv = kernel_timeout(fd, libc::SO_RCVTIMEO);
        let snd = kernel_timeout(fd, libc::SO_SNDTIMEO);
        self.fill(fd, kind, flags, rcv, snd);
        self.state()
    }

    /// Records a socket: its kind, and a new desc with `flags` and timeouts.
    fn fill(&self, fd: RawFd, kind: u32, flags: u32, rcv_ns: u64, snd_ns: u64) {
        let Some(i) = claim_desc(fd, flags, rcv_ns, snd_ns) else {
            return; // left unknown: real calls
        };
        // Release: publishes the desc's fields (see `desc`), then the kind. Relaxed on
        // failure: another caller filled the entry first (two lazy fills racing); ours
        // goes back.
        if self
            .desc
            .compare_exchange(0, i + 1, Ordering::Release, Ordering::Relaxed)
            .is_err()
        {
            // Release: as in `forget`.
            desc(i).refs.fetch_sub(1, Ordering::Release);
            return;
        }
        self.kind.store(kind, Ordering::Release);
    }

    /// A new socket `fd` from `socket`, `socketpair` or `accept`.
    pub(crate) fn born_socket(&self, fd: RawFd, ty: c_int, rcv_ns: u64, snd_ns: u64) {
        self.forget();
        let kind = if ty & 0xf == libc::SOCK_STREAM {
            SOCKET | STREAM
        } else {
            SOCKET
        };
        let flags = if ty & libc::SOCK_NONBLOCK != 0 {
            USER_NB
        } else {
            0
        };
        self.fill(fd, kind, flags, rcv_ns, snd_ns);
    }

    /// `dst` is a duplicate of this descriptor: the same open socket (its desc, with
    /// one more reference), and a registration of its own to come.
    pub(crate) fn copy_to(&self, dst: &Entry) {
        dst.forget();
        let kind = self.kind.load(Ordering::Acquire);
        // Acquire: as in `desc`.
        let i = self.desc.load(Ordering::Acquire);
        if i != 0 {
            // Relaxed: our own reference keeps the count above 0 (a concurrent close of
            // the source is a caller's bug, see `ArcSlot`).
            desc(i - 1).refs.fetch_add(1, Ordering::Relaxed);
            // Release: as in `fill`.
            dst.desc.store(i, Ordering::Release);
        }
        if kind & KIND != SOCKET || i != 0 {
            dst.kind.store(kind, Ordering::Release);
        }
    }

    /// Sets or clears `flag` (USER_NB, OUR_NB) for the socket, in every descriptor.
    pub(crate) fn set(&self, flag: u32, on: bool) {
        let Some(d) = self.desc() else { return };
        // Release: the kernel state the flag names is set before (see `state`).
        if on {
            d.flags.fetch_or(flag, Ordering::Release);
        } else {
            d.flags.fetch_and(!flag, Ordering::Release);
        }
    }

    /// The timeout of `SO_RCVTIMEO` (`read`) or `SO_SNDTIMEO`.
    pub(crate) fn timeout(&self, read: bool) -> Option<Duration> {
        let d = self.desc()?;
        // Relaxed: a plain setting (as std's own socket timeouts, the kernel's).
        let ns = if read { &d.rcv_ns } else { &d.snd_ns }.load(Ordering::Relaxed);
        (ns != 0).then(|| Duration::from_nanos(ns))
    }

    /// `setsockopt` set a timeout.
    pub(crate) fn set_timeout(&self, read: bool, ns: u64) {
        let Some(d) = self.desc() else { return };
        // Relaxed: as in `timeout`.
        if read { &d.rcv_ns } else { &d.snd_ns }.store(ns, Ordering::Relaxed);
    }

    /// The descriptor's poll registration, made on first use (the socket must be
    /// non-blocking underneath by then). `EBADF` if `close` raced it.
    pub(crate) fn pd(&self, fd: RawFd) -> Result<Arc<PollDesc>, c_int> {
        match self.pd.get_or_fill(
            || PollDesc::register(fd),
            |pd| pd.deregister(),
            crate::yield_now,
        ) {
            Got::Value(pd) => Ok(pd),
            Got::Failed(e) => Err(e.raw_os_error().unwrap_or(libc::ENOMEM)),
            Got::Taken => Err(libc::EBADF),
        }
    }

    /// The registration if there is one already.
    pub(crate) fn pd_if_any(&self) -> Option<Arc<PollDesc>> {
        self.pd.get()
    }

    /// The descriptor is going away (`close`, or `dup2` onto it): empty the entry, let
    /// go of its socket's desc, and remove its registration from the poller while the
    /// fd is still open. A call still waiting on it (a `close` racing it, a caller's
    /// bug) fails with `EBADF`.
    pub(crate) fn forget(&self) {
        // Relaxed: the cheap common case of a descriptor the hooks never knew; a
        // registration is always made after the kind was filled.
        if self.kind.load(Ordering::Relaxed) == UNKNOWN {
            return;
        }
        // Release: as in `fill`.
        self.kind.store(UNKNOWN, Ordering::Release);
        // Acquire: as in `desc`.
        let i = self.desc.swap(0, Ordering::AcqRel);
        if i != 0 {
            // Release: our uses of the desc come before a new claimer's (Acquire) reuse.
            desc(i - 1).refs.fetch_sub(1, Ordering::Release);
        }
        // Relaxed: set by a forked child's only thread, before anything else it runs.
        // There the registration is left alone: a delete would remove the parent's
        // registration from the epoll instance they share, the poller's lock may have
        // been held by a parent thread that is not here, and so may a reader's count
        // in the slot (the child never parks, so it never uses the registration).
        if FORKED.load(Ordering::Relaxed) {
            return;
        }
        if let Some(pd) = self.pd.take() {
            pd.deregister();
        }
    }
}

/// A socket timeout as the kernel holds it, in ns (0: none).
fn kernel_timeout(fd: RawFd, name: c_int) -> u64 {
    match sys::getsockopt::<libc::timeval>(fd, libc::SOL_SOCKET, name) {
        Ok(tv) => timeval_ns(&tv),
        Err(_) => 0,
    }
}

/// A `timeval` in ns, saturating; negative fields count as 0.
pub(crate) fn timeval_ns(tv: &libc::timeval) -> u64 {
    let s = u64::try_from(tv.tv_sec).unwrap_or(0);
    let us = u64::try_from(tv.tv_usec).unwrap_or(0);
    s.saturating_mul(1_000_000_000)
        .saturating_add(us.saturating_mul(1000))
}
