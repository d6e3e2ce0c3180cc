//! The netpoller: one `polling::Poller` per runtime, where the last M to go idle sleeps
//! until the earliest timer of any P or a socket event, and the poll descriptors of the
//! sockets registered with it.
//!
//! # Poll descriptors and their slot states
//!
//! Every socket is registered once, edge-triggered, for reading and writing, under a
//! key that indexes the descriptor table with a generation (so an event for a closed
//! descriptor whose slot was reused is dropped). A [`PollDesc`] has a reader slot and a
//! writer slot, each, under its small lock, `ready` (an edge arrived nobody consumed),
//! `empty`, or holding the unparker of the one waiter. I/O is always tried first; on
//! `WouldBlock` the caller waits on the slot (`PollDesc::wait`): a `ready` slot is
//! consumed at once, else the caller parks, releasing the slot's lock after its switch.
//! An event makes the slot ready and wakes its waiter. `close` marks both slots closed
//! and wakes both waiters with an error.
//!
//! Only one M blocks in the poller at a time (`polling` makes a second `wait` return at
//! once anyway). It publishes the deadline it sleeps until in `until`; whoever adds a
//! timer earlier than that breaks the wait with `Poller::notify` (Go: netpollBreak).
//!
//! # The poller's Dekker pair
//!
//! The blocking M stores `until`, then (after a SeqCst fence) reads every P's earliest
//! timer once more and shortens its deadline if one is earlier. A timer adder stores its
//! P's earliest `when`, then (after a SeqCst fence) reads `until`. Either the M sees the
//! new timer, or the adder sees the M's deadline and notifies it; a notification sent
//! before the wait makes the wait return at once. `polling`'s epoll backend arms a
//! timerfd for the timeout, so the wait has nanosecond resolution and no timer slack.
//!
//! # Someone watches the sockets
//!
//! While any caller waits on a socket, some M must end up in the poller: the last M to
//! go idle blocks there even with no timer pending. The first waiter (the count going
//! 0 -> 1) and an M deciding whether to block form a second Dekker pair: the waiter
//! increments `waiters`, then reads `until`; the M takes `busy`, then reads `waiters`
//! and, if it will block, stores `until`. If the M saw no waiter it never stored
//! `until`, so the waiter sees 0 and wakes an M itself. A quick non-blocking poll
//! (`poll_now`) never takes `busy`, so it cannot turn an idle M away from the poller.
//! sysmon backs all this up when every P is idle (`sysmon::idle_backstop`).
//!
//! # Waking early
//!
//! Resolution is not latency: on this project's VM a timerfd wait of 100 µs returns
//! ~40 µs late and one of 1 ms ~90 µs late at the median (the time for the host to run
//! a halted vCPU again), whatever the wait primitive. So the poller asks the kernel to
//! wake it [`Netpoll::early_margin`] before the deadline, and the scheduler spins the
//! rest of the way with a P in hand (`find_runnable`: a timer due within the margin
//! keeps a spinning M spinning). The margin is twice the lateness the poller has
//! observed (an exponential moving average), within [`MIN_EARLY_NS`, `MAX_EARLY_NS`]:
//! on a machine that wakes promptly it costs ~20 µs of CPU per timer expiry, here
//! ~200 µs.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use polling::{Event, Events, PollMode, Poller};

use crate::park::{self, Unparker, WaitReason};
use crate::timers::{nanotime, until};
use goro_timers::MAX_WHEN;

pub(crate) struct Netpoll {
    poller: Poller,
    /// Whether an M is (about to be) blocked in the poller. Taken with a swap.
    busy: AtomicBool,
    /// The deadline the blocked M sleeps until (`MAX_WHEN`: no timeout), or 0 when no
    /// M is blocked. Written by the blocking M; read by timer adders.
    until: AtomicI64,
    events: Mutex<Events>,
    /// Moving average of how late the kernel woke the poller after a timeout, in ns.
    /// Written only by the M in the poller; read by anyone.
    late_avg: AtomicI64,
    /// Registered descriptors, by key.
    table: Mutex<Table>,
    /// Callers parked on a descriptor slot: while there are any, an idle M blocks in
    /// the poller even with no timer pending, and `find_runnable` polls.
    waiters: AtomicUsize,
    /// Registered descriptors.
    registered: AtomicUsize,
    /// When an M last polled (blocking or not): sysmon's backstop polls after 10 ms.
    last_poll: AtomicI64,
}

/// The descriptor table: a slab whose keys carry a generation.
#[derive(Default)]
struct Table {
    slots: Vec<(u32, Option<Arc<PollDesc>>)>,
    free: Vec<u32>,
}

/// Bounds of the early-wake margin.
pub(crate) const MIN_EARLY_NS: i64 = 20_000;
pub(crate) const MAX_EARLY_NS: i64 = 250_000;

impl Netpoll {
    pub(crate) fn new() -> std::io::Result<Netpoll> {
        Ok(Netpoll {
            poller: Poller::new()?,
            busy: AtomicBool::new(false),
            until: AtomicI64::new(0),
            events: Mutex::new(Events::new()),
            late_avg: AtomicI64::new(MIN_EARLY_NS),
            table: Mutex::new(Table::default()),
            waiters: AtomicUsize::new(0),
            registered: AtomicUsize::new(0),
            last_poll: AtomicI64::new(0),
        })
    }

    /// Whether any caller waits on a socket (Relaxed: a hint for whether to poll).
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) != 0
    }

    /// Registered sockets now.
    pub(crate) fn registered(&self) -> usize {
        self.registered.load(Ordering::Relaxed)
    }

    /// Registers `fd` (a non-blocking socket) and returns its descriptor. The caller
    /// must call [`Netpoll::deregister`] before closing `fd`.
    pub(crate) fn register(&self, fd: RawFd) -> io::Result<Arc<PollDesc>> {
        let (key, pd) = {
            let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
            let idx = match t.free.pop() {
                Some(i) => i,
                None => {
                    t.slots.push((0, None));
                    (t.slots.len() - 1) as u32
                }
            };
            let slot = &mut t.slots[idx as usize];
            slot.0 = slot.0.wrapping_add(1);
            let key = ((slot.0 as usize) << 32) | idx as usize;
            let pd = Arc::new(PollDesc::new(fd, key));
            slot.1 = Some(pd.clone());
            (key, pd)
        };
        // SAFETY: `fd` is an open socket owned by the caller, which deregisters it
        // before closing it (the contract above).
        let added = unsafe {
            self.poller
                .add_with_mode(fd, Event::all(key), PollMode::Edge)
        };
        if let Err(e) = added {
            self.forget(key);
            return Err(e);
        }
        // Relaxed: a count read by the deadlock check, which re-checks over time.
        self.registered.fetch_add(1, Ordering::Relaxed);
        Ok(pd)
    }

    /// Removes a descriptor from the poller (before its fd is closed) and closes it.
    pub(crate) fn deregister(&self, pd: &PollDesc) {
        pd.close();
        // SAFETY: the fd is still open (the caller closes it after this call).
        let fd = unsafe { BorrowedFd::borrow_raw(pd.fd) };
        let _ = self.poller.delete(fd);
        self.forget(pd.key);
        self.registered.fetch_sub(1, Ordering::Relaxed);
    }

    fn forget(&self, key: usize) {
        let mut t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let idx = key & 0xffff_ffff;
        if let Some(slot) = t.slots.get_mut(idx) {
            if (slot.0 as usize) == key >> 32 {
                slot.1 = None;
                t.free.push(idx as u32);
            }
        }
    }

    fn lookup(&self, key: usize) -> Option<Arc<PollDesc>> {
        let t = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let (gen, pd) = t.slots.get(key & 0xffff_ffff)?;
        (*gen as usize == key >> 32).then(|| pd.clone()).flatten()
    }

    /// Readies the waiters of the descriptors in `events`.
    fn dispatch(&self, events: &Events) {
        for ev in events.iter() {
            if ev.key == usize::MAX {
                continue; // polling's own notifier
            }
            let Some(pd) = self.lookup(ev.key) else {
                continue;
            };
            let err = ev.is_err().unwrap_or(false) || ev.is_interrupt();
            if ev.readable || err {
                pd.read.ready();
            }
            if ev.writable || err {
                pd.write.ready();
            }
        }
    }

    /// Polls without blocking and readies whoever the events wake (from an M with a
    /// P: into its run queue). Does nothing if an M is in the poller or another poll is
    /// under way.
    ///
    /// It does not take `busy`: `busy` means "an M sleeps here", and an idle M that
    /// found it taken by a quick poll would stop instead of sleeping in the poller,
    /// leaving nobody to watch the sockets and timers once the poll ended (a lost
    /// wake-up seen as a hung socket read). The quick poll only takes the event buffer's
    /// lock, which the blocking M holds while it waits, so the two never overlap.
    pub(crate) fn poll_now(&self) {
        if self.busy.load(Ordering::Relaxed) {
            return;
        }
        let Ok(mut events) = self.events.try_lock() else {
            return;
        };
        events.clear();
        if self.poller.wait(&mut events, Some(Duration::ZERO)).is_ok() {
            self.dispatch(&events);
        }
        // Relaxed: a timestamp for sysmon's backstop heuristic; a stale one costs at most
        // one extra non-blocking poll.
        self.last_poll.store(nanotime(), Ordering::Relaxed);
    }

    /// When an M last polled (runtime clock, ns).
    pub(crate) fn last_poll(&self) -> i64 {
        self.last_poll.load(Ordering::Relaxed)
    }

    /// Whether an M is in the poller now.
    pub(crate) fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    /// How long before a timer's deadline the poller wakes (see "waking early").
    pub(crate) fn early_margin(&self) -> i64 {
        (2 * self.late_avg.load(Ordering::Relaxed)).clamp(MIN_EARLY_NS, MAX_EARLY_NS)
    }

    /// Blocks the calling M (which holds no P) until `earliest()` — the earliest timer
    /// of any P, 0 for none — or a notification. Returns false at once, without
    /// blocking, if another M is already in the poller or there is nothing to wait for.
    pub(crate) fn block(&self, earliest: impl Fn() -> i64) -> bool {
        if self.busy.swap(true, Ordering::Acquire) {
            return false;
        }
        let mut deadline = earliest();
        if deadline == 0 {
            // SeqCst: the blocker half of the Dekker pair with `PollDesc::wait`. If we
            // miss a waiter here, it sees `until` still 0 and wakes an M.
            if self.waiters.load(Ordering::SeqCst) == 0 {
                self.busy.store(false, Ordering::Release);
                return false;
            }
            deadline = MAX_WHEN; // sockets to watch, no timer: no timeout
        }
        self.until.store(deadline, Ordering::SeqCst);
        // The poller half of the Dekker pair: re-read the timers after publishing.
        fence(Ordering::SeqCst);
        let again = earliest();
        if again != 0 && again < deadline {
            deadline = again;
            self.until.store(deadline, Ordering::SeqCst);
        }
        let wake_at = if deadline == MAX_WHEN {
            MAX_WHEN
        } else {
            deadline.saturating_sub(self.early_margin()).max(1)
        };
        let timeout = (wake_at != MAX_WHEN).then(|| until(nanotime(), wake_at));
        let woke_by_event = {
            let mut events = self.events.lock().unwrap_or_else(|e| e.into_inner());
            events.clear();
            // An error here (EINTR) only means we wake early; the caller re-checks.
            let _ = self.poller.wait(&mut events, timeout);
            self.dispatch(&events);
            !events.is_empty()
        };
        let now = nanotime();
        self.last_poll.store(now, Ordering::Relaxed);
        if !woke_by_event && wake_at != MAX_WHEN && now >= wake_at {
            // A timeout: learn how late the kernel was (Relaxed: a tuning hint).
            let avg = self.late_avg.load(Ordering::Relaxed);
            let sample = (now - wake_at).min(10 * MAX_EARLY_NS);
            self.late_avg
                .store(avg + (sample - avg) / 8, Ordering::Relaxed);
        }
        self.until.store(0, Ordering::SeqCst);
        self.busy.store(false, Ordering::Release);
        true
    }

    /// A timer at `when` was just published (its P's earliest `when` stored). Returns
    /// true if an M is blocked in the poller (after breaking its wait if it sleeps past
    /// `when`), false if none is, in which case the caller should `wakep` so that some
    /// M comes to sleep here with the new deadline (Go: wakeNetPoller).
    pub(crate) fn timer_added(&self, when: i64) -> bool {
        // The adder half of the Dekker pair.
        fence(Ordering::SeqCst);
        let until = self.until.load(Ordering::SeqCst);
        if until == 0 {
            return false;
        }
        if when < until {
            self.notify();
        }
        true
    }

    /// Breaks the poller's wait (or makes the next one return at once).
    pub(crate) fn notify(&self) {
        let _ = self.poller.notify();
    }
}

/// Which slot of a descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// A registered socket's readiness (see "poll descriptors and their slot states").
pub(crate) struct PollDesc {
    fd: RawFd,
    key: usize,
    read: Slot,
    write: Slot,
}

struct Slot {
    state: Mutex<SlotState>,
}

#[derive(Default)]
struct SlotState {
    /// An edge arrived that no waiter has consumed.
    ready: bool,
    /// The one waiter's unparker.
    waiter: Option<Unparker>,
    closed: bool,
}

/// The error of an operation on a closed socket.
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "use of a closed socket")
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new(SlotState::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An edge: mark ready, wake the waiter if there is one.
    fn ready(&self) {
        let w = {
            let mut st = self.lock();
            st.ready = true;
            st.waiter.take()
        };
        if let Some(u) = w {
            u.unpark();
        }
    }

    fn close(&self) {
        let w = {
            let mut st = self.lock();
            st.closed = true;
            st.waiter.take()
        };
        if let Some(u) = w {
            u.unpark();
        }
    }
}

impl PollDesc {
    fn new(fd: RawFd, key: usize) -> PollDesc {
        PollDesc {
            fd,
            key,
            read: Slot::new(),
            write: Slot::new(),
        }
    }

    fn slot(&self, dir: Dir) -> &Slot {
        match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
        }
    }

    /// Whether `close` was called.
    pub(crate) fn is_closed(&self) -> bool {
        self.read.lock().closed
    }

    /// Closes both slots and wakes their waiters, which get `closed_error`.
    pub(crate) fn close(&self) {
        self.read.close();
        self.write.close();
    }

    /// Waits until the socket may be ready in `dir` (the caller then retries its I/O),
    /// until `deadline` (`TimedOut`), or until the descriptor is closed
    /// (`closed_error`). Parks a coroutine, blocks a thread.
    pub(crate) fn wait(&self, dir: Dir, deadline: Option<Instant>) -> io::Result<()> {
        let rt = crate::sched::rt();
        let slot = self.slot(dir);
        let reason = match dir {
            Dir::Read => WaitReason::IoRead,
            Dir::Write => WaitReason::IoWrite,
        };
        loop {
            let mut st = slot.lock();
            if st.closed {
                return Err(closed_error());
            }
            if st.ready {
                st.ready = false;
                return Ok(());
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(timed_out());
            }
            st.waiter = Some(park::prepare());
            // The waiter half of a Dekker pair with `block`: count ourselves, then look
            // for an M committed to the poller (`until` set). If there is none, wake
            // one (an idle M that finds nothing else to do blocks in the poller now).
            // `busy` would not do: an M that took it and then saw no waiter (before our
            // increment) drops it again without blocking.
            if rt.netpoll.waiters.fetch_add(1, Ordering::SeqCst) == 0
                && rt.netpoll.until.load(Ordering::SeqCst) == 0
            {
                fence(Ordering::SeqCst);
                crate::sched::wakep();
            }
            // The slot's lock is released after the switch (the park's commit), so an
            // event cannot slip between our check and our sleep.
            match deadline {
                Some(d) => {
                    park::park_commit_timeout(reason, d, move || drop(st));
                }
                None => park::park_commit(reason, move || drop(st)),
            }
            rt.netpoll.waiters.fetch_sub(1, Ordering::SeqCst);
            let mut st = slot.lock();
            if st.waiter.take().is_some() {
                // Not taken by an event or close: the deadline woke us.
                return Err(timed_out());
            }
        }
    }
}

/// The error of an operation whose deadline passed.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "i/o timeout")
}
