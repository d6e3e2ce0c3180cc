//! The netpoller: one epoll instance per runtime (`epoll.rs`), where the last M to go
//! idle sleeps until the earliest timer of any P or a socket event, and the poll
//! descriptors of the sockets registered with it.
//!
//! # Poll descriptors and their slot states
//!
//! Every socket is registered once, edge-triggered, for reading, writing and the
//! peer's shutdown (`EPOLLRDHUP`), under a key that indexes the descriptor table with
//! a generation (so an event for a closed descriptor whose slot was reused is dropped).
//! A [`PollDesc`] has a reader slot and a writer slot, each, under its small lock,
//! `ready` (an edge arrived that nobody was woken for) and a FIFO queue of waiters.
//! I/O is tried first; on `WouldBlock` the caller waits on the slot
//! (`PollDesc::wait`): a `ready` slot is consumed at once, else the caller queues and
//! parks, releasing the slot's lock after its switch. `close` marks both slots closed
//! and wakes every waiter with an error.
//!
//! # Many waiters, one turn at a time
//!
//! std lets any number of threads wait on one socket through `&self` (two acceptors
//! on one listener, two readers of a stream, two `recv_from` on a UDP socket); Go
//! serialises each direction with its fdMutex. goro queues them, and an edge wakes only
//! the queue's head (no thundering herd). Being woken from the queue, or consuming
//! `ready`, gives the caller a **turn**: it retries its call, and when that call did not
//! fail with `WouldBlock` and may have left the socket ready (an accept, a datagram, a
//! full read), it passes the turn to the next waiter (`PollDesc::pass`), which
//! retries in its turn. A call that finds the socket empty just waits again, at the
//! front of the queue. So one edge for two queued connections serves both acceptors,
//! one after the other.
//!
//! No waiter sleeps on a ready socket: a caller parks only if no edge came since it
//! read the slot's edge count before its failed call (`wait` takes that count), so any
//! data that arrived after the call has an edge still to come, which wakes the head or
//! sets `ready`; and the turn holder passes to every waiter that was queued before the
//! edge that gave it its turn. An edge that makes the slot ready for good (a hang-up,
//! an error, the peer's FIN) wakes every waiter, since each of them will get the same
//! answer at once.
//!
//! # Skipping the failing call
//!
//! A stream read that returns less than it asked for has emptied the socket, and a
//! short write has filled it: the next call in that direction would fail with
//! `WouldBlock`. So after one, the slot's readiness is cleared (`PollDesc::clear`) and
//! the next operation waits for an edge before making its call (tokio does the same;
//! Go makes the failing call); the hint names the edge count it was taken at, so an
//! operation that reads a later count makes its call. An echo server's reads went
//! from 1.45 system calls per request to 1. Clearing is safe only if no edge that came after the operation
//! started is forgotten: every edge bumps the slot's count, the operation reads the
//! count before its call, and `clear` does nothing if the count moved. Three edges
//! stay for good and are never cleared: a hang-up or error; the peer's FIN
//! (`EPOLLRDHUP`), because data and a FIN that arrive before a read raise one edge
//! between them, and after the short read that takes the data no edge would come for
//! the EOF; and urgent data (`EPOLLPRI`), because a read stops short at the urgent
//! mark with the rest of the data queued behind it.
//!
//! Only one M blocks in the poller at a time (`busy`), and a quick poll never runs
//! beside it (it needs the event buffer's lock, which the blocking M holds). The
//! blocking M publishes the deadline it sleeps until in `until`; whoever adds a timer
//! earlier than that breaks the wait with `Netpoll::notify` (Go: netpollBreak).
//!
//! # The poller's Dekker pair
//!
//! The blocking M stores `until`, then (after a SeqCst fence) reads every P's earliest
//! timer once more and shortens its deadline if one is earlier. A timer adder stores its
//! P's earliest `when`, then (after a SeqCst fence) reads `until`. Either the M sees the
//! new timer, or the adder sees the M's deadline and notifies it; a notification sent
//! before the wait makes the wait return at once. The wait's timeout is a timerfd, so it
//! has nanosecond resolution and no timer slack.
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

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{
    fence, AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::epoll::{self, Epoll, RawEvent, TIMER_KEY, WAKE_KEY};

use crate::park::{self, Unparker, WaitReason};
use crate::timers::{nanotime, until};
use goro_timers::MAX_WHEN;

pub(crate) struct Netpoll {
    poller: Epoll,
    /// Whether an M is (about to be) blocked in the poller. Taken with a swap.
    busy: AtomicBool,
    /// The deadline the blocked M sleeps until (`MAX_WHEN`: no timeout), or 0 when no
    /// M is blocked. Written by the blocking M; read by timer adders.
    until: AtomicI64,
    events: Mutex<Vec<RawEvent>>,
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

/// The most events one poll takes (Go: 128).
const EVENTS_CAP: usize = 128;

/// Bounds of the early-wake margin.
pub(crate) const MIN_EARLY_NS: i64 = 20_000;
pub(crate) const MAX_EARLY_NS: i64 = 250_000;

impl Netpoll {
    pub(crate) fn new() -> std::io::Result<Netpoll> {
        Ok(Netpoll {
            poller: Epoll::new()?,
            busy: AtomicBool::new(false),
            until: AtomicI64::new(0),
            events: Mutex::new(Vec::with_capacity(EVENTS_CAP)),
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
        if let Err(e) = self.poller.add(fd, key as u64) {
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
        // The fd is still open (the caller closes it after this call).
        let _ = self.poller.delete(pd.fd);
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

    /// Readies the waiters of the descriptors in `events`. `quick`: they come from a
    /// non-blocking poll, not from the M that blocks in the poller.
    fn dispatch(&self, events: &[RawEvent], quick: bool) {
        for ev in events {
            let (bits, key) = (ev.events, ev.u64);
            if key == WAKE_KEY {
                self.poller.ack_wake();
                // A quick poll that ran just before an M blocked can take the
                // notification meant for that M (sent once the M published `until`).
                // Pass it on, or the M would sleep past the timer that sent it.
                if quick && self.until.load(Ordering::SeqCst) != 0 {
                    self.poller.notify();
                }
                continue;
            }
            if key == TIMER_KEY {
                continue;
            }
            let Some(pd) = self.lookup(key as usize) else {
                continue;
            };
            // An error or a hang-up readies both slots for good. The peer's shutdown
            // (RDHUP) readies the reader's for good: a read returns 0 from now on. So
            // does urgent data (PRI): a read stops short at its mark with data queued
            // behind it, so a short read no longer means the socket is empty.
            let err = bits & (epoll::ERR | epoll::HUP) != 0;
            if bits & (epoll::IN | epoll::PRI | epoll::RDHUP) != 0 || err {
                pd.read
                    .ready(err || bits & (epoll::RDHUP | epoll::PRI) != 0);
            }
            if bits & epoll::OUT != 0 || err {
                pd.write.ready(err);
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
        if self.poller.wait(&mut events, Some(Duration::ZERO)).is_ok() {
            self.dispatch(&events, true);
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
            // An error here only means we wake early; the caller re-checks.
            let _ = self.poller.wait(&mut events, timeout);
            self.dispatch(&events, false);
            events.iter().any(|ev| ev.u64 < TIMER_KEY)
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
        self.poller.notify();
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
    /// Set once by `close` (before the slots learn it under their locks); read
    /// without a lock by every operation before its call.
    closed: AtomicBool,
}

struct Slot {
    state: Mutex<SlotState>,
    /// Edges seen so far. Written only under `state`'s lock; read without it by
    /// operations before their call (see `PollDesc::seq`).
    seq: AtomicU32,
    /// A hint: `DRAINED | seq` when an operation that started at edge count `seq`
    /// drained the socket in this direction (then `ready` is false too), 0 when an
    /// edge came since. Written only under `state`'s lock.
    drained: AtomicU64,
    /// How many callers are queued: written under `state`'s lock, read without it by
    /// `PollDesc::pass` to skip the lock when nobody waits (see its comment).
    queued: AtomicU32,
}

/// The flag of `Slot::drained`.
const DRAINED: u64 = 1 << 32;

#[derive(Default)]
struct SlotState {
    /// An edge arrived that no waiter was woken for and none has consumed.
    ready: bool,
    /// Parked callers in arrival order, by ticket (see "many waiters").
    waiters: VecDeque<(u64, Unparker)>,
    next_ticket: u64,
    closed: bool,
    /// An edge said the socket stays ready in this direction (see `Slot::ready`):
    /// `ready` is never cleared again.
    for_good: bool,
}

impl SlotState {
    /// Unlinks and returns the waiters an edge or a pass wakes: the head, or all of
    /// them once the slot is ready for good or closed.
    fn take_woken(&mut self, queued: &AtomicU32) -> VecDeque<(u64, Unparker)> {
        let woken = if self.for_good || self.closed {
            std::mem::take(&mut self.waiters)
        } else {
            self.waiters.pop_front().into_iter().collect()
        };
        // Relaxed: see `Slot::queued`.
        queued.store(self.waiters.len() as u32, Ordering::Relaxed);
        woken
    }
}

/// The error of an operation on a closed socket.
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "use of a closed socket")
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new(SlotState::default()),
            seq: AtomicU32::new(0),
            drained: AtomicU64::new(0),
            queued: AtomicU32::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An edge: wake the head waiter, or mark the slot ready if nobody waits.
    /// `for_good`: the socket stays ready in this direction (an error, a hang-up, the
    /// peer's FIN): mark it ready and wake everyone.
    fn ready(&self, for_good: bool) {
        let woken = {
            let mut st = self.lock();
            st.for_good |= for_good;
            // Relaxed: both change only under the lock, whose release publishes them to
            // `clear` and `wait` (under the same lock); lock-free readers take them as
            // hints, or re-check under the lock.
            self.seq.store(
                self.seq.load(Ordering::Relaxed).wrapping_add(1),
                Ordering::Relaxed,
            );
            self.drained.store(0, Ordering::Relaxed);
            let woken = st.take_woken(&self.queued);
            if woken.is_empty() || st.for_good {
                st.ready = true;
            }
            woken
        };
        for (_, u) in woken {
            u.unpark();
        }
    }

    fn close(&self) {
        let woken = {
            let mut st = self.lock();
            st.closed = true;
            st.take_woken(&self.queued)
        };
        for (_, u) in woken {
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
            closed: AtomicBool::new(false),
        }
    }

    fn slot(&self, dir: Dir) -> &Slot {
        match dir {
            Dir::Read => &self.read,
            Dir::Write => &self.write,
        }
    }

    /// The count of edges seen in `dir`, to pass to [`PollDesc::clear`] after an
    /// operation that may have drained the socket. Read before the operation starts.
    pub(crate) fn seq(&self, dir: Dir) -> u32 {
        // Acquire: the system call that follows must not be ordered before this load.
        // A stale (older) count only makes `clear` decline.
        self.slot(dir).seq.load(Ordering::Acquire)
    }

    /// Whether an operation that started at edge count `seq` (this operation's, from
    /// [`PollDesc::seq`]) drained the socket in `dir`: this one may skip its system
    /// call and wait for an edge first (see `clear`).
    pub(crate) fn drained(&self, dir: Dir, seq: u32) -> bool {
        // Relaxed: a hint. A stale 0 costs one system call that fails with
        // `WouldBlock`. A stale `DRAINED | seq` cannot name a later edge count than
        // the caller read, so it never makes a caller skip a call after an edge it has
        // seen; `wait` re-checks the count under the lock.
        self.slot(dir).drained.load(Ordering::Relaxed) == DRAINED | seq as u64
    }

    /// An operation that started when the edge count was `seq` found the socket empty
    /// (`WouldBlock`) or drained it (a short read or write): forget the readiness the
    /// edges so far announced, unless an edge came since `seq`. Every edge after the
    /// operation started raises the count, so a readiness it announced is never lost
    /// (tokio's `clear_readiness` with its tick works the same way).
    pub(crate) fn clear(&self, dir: Dir, seq: u32) {
        let slot = self.slot(dir);
        let mut st = slot.lock();
        if slot.seq.load(Ordering::Relaxed) == seq && !st.closed && !st.for_good {
            st.ready = false;
            slot.drained.store(DRAINED | seq as u64, Ordering::Relaxed);
        }
    }

    /// Whether `close` was called.
    pub(crate) fn is_closed(&self) -> bool {
        // Relaxed: a fast refusal only. An operation that misses a concurrent close
        // makes its call as it would have had it started a moment earlier, and if it
        // then waits it finds the close under the slot's lock.
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes both slots and wakes their waiters, which get `closed_error`.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.read.close();
        self.write.close();
    }

    /// Waits for a turn in `dir` (see "many waiters"): returns `Ok` when the caller
    /// should retry its I/O, `TimedOut` at `deadline`, `closed_error` once the
    /// descriptor is closed. `seq` is the edge count the caller read before the call
    /// that failed with `WouldBlock` (or that it skipped as `drained`): an edge since
    /// then is a turn at once. `front`: the caller's last turn found the socket empty,
    /// so it waits again at the head of the queue, where it was. Parks a coroutine,
    /// blocks a thread.
    pub(crate) fn wait(
        &self,
        dir: Dir,
        seq: u32,
        deadline: Option<Instant>,
        front: bool,
    ) -> io::Result<()> {
        let rt = crate::sched::rt();
        let slot = self.slot(dir);
        let reason = match dir {
            Dir::Read => WaitReason::IoRead,
            Dir::Write => WaitReason::IoWrite,
        };
        let mut st = slot.lock();
        if st.closed {
            return Err(closed_error());
        }
        // Relaxed: under the lock that every edge takes to change it.
        if st.ready || slot.seq.load(Ordering::Relaxed) != seq {
            if !st.for_good {
                st.ready = false;
            }
            return Ok(());
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(timed_out());
        }
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        let me = (ticket, park::prepare());
        if front {
            st.waiters.push_front(me);
        } else {
            st.waiters.push_back(me);
        }
        // Relaxed: see `Slot::queued`.
        slot.queued
            .store(st.waiters.len() as u32, Ordering::Relaxed);
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
        if let Some(i) = st.waiters.iter().position(|(t, _)| *t == ticket) {
            // Still queued, so not woken by an edge, a pass or a close: the deadline
            // woke us. (Unlinked, we hold a turn even if the deadline fired too.)
            st.waiters.remove(i);
            slot.queued
                .store(st.waiters.len() as u32, Ordering::Relaxed);
            return Err(timed_out());
        }
        if st.closed {
            return Err(closed_error());
        }
        Ok(())
    }

    /// Ends a turn (see "many waiters"): the caller's retried call did not fail with
    /// `WouldBlock` and may have left the socket ready in `dir`, so the next waiter
    /// gets a turn.
    pub(crate) fn pass(&self, dir: Dir) {
        let slot = self.slot(dir);
        // Relaxed, and no lock when it reads 0: the waiters a turn must pass to are
        // those queued before the edge (or the readiness) that gave the turn, and each
        // of those increments happened before that edge took the slot's lock, which
        // happened before this caller was woken (the park/ready handshake orders the
        // rest). A waiter queued after that edge saw its count change, or made its
        // call after it, so it needs no pass.
        if slot.queued.load(Ordering::Relaxed) == 0 {
            return;
        }
        let woken = slot.lock().take_woken(&slot.queued);
        for (_, u) in woken {
            u.unpark();
        }
    }
}

/// The error of an operation whose deadline passed.
pub(crate) fn timed_out() -> io::Error {
    io::Error::new(io::ErrorKind::TimedOut, "i/o timeout")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The readiness-clearing rules of `PollDesc::clear` against a model of one slot.
    #[test]
    fn clear_forgets_only_what_came_before_the_operation() {
        let pd = PollDesc::new(-1, 0);
        let d = Dir::Read;
        let drained = |pd: &PollDesc, d| pd.drained(d, pd.seq(d));
        assert!(!drained(&pd, d));
        // An edge, then an operation that drains the socket: cleared.
        pd.read.ready(false);
        let seq = pd.seq(d);
        pd.clear(d, seq);
        assert!(drained(&pd, d));
        assert!(!pd.read.lock().ready);
        // A new edge undoes it, and the hint never names a later edge count.
        pd.read.ready(false);
        assert!(!drained(&pd, d));
        assert!(!pd.drained(d, seq.wrapping_add(1)));
        assert!(pd.read.lock().ready);
        // An edge during the operation (after its `seq`): not cleared.
        let seq = pd.seq(d);
        pd.read.ready(false);
        pd.clear(d, seq);
        assert!(!drained(&pd, d));
        assert!(pd.read.lock().ready);
        // The other direction is untouched throughout.
        assert!(!drained(&pd, Dir::Write));
        // A hang-up or the peer's FIN stays: never cleared.
        pd.read.ready(true);
        let seq = pd.seq(d);
        pd.clear(d, seq);
        assert!(!drained(&pd, d));
        assert!(pd.read.lock().ready);
        // A closed slot is not cleared either (its waiters get the close error).
        let pd = PollDesc::new(-1, 0);
        pd.close();
        pd.clear(Dir::Write, pd.seq(Dir::Write));
        assert!(!drained(&pd, Dir::Write));
    }

    /// The count wraps instead of overflowing (a long-lived socket sees 2^32 edges).
    #[test]
    fn seq_wraps() {
        let pd = PollDesc::new(-1, 0);
        pd.write.seq.store(u32::MAX, Ordering::Relaxed);
        pd.write.ready(false);
        assert_eq!(pd.seq(Dir::Write), 0);
    }
}
