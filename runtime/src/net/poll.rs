//! Poll descriptors: a registered socket's readiness, and the callers waiting on it.
//!
//! The poller (`netpoll.rs`, below the scheduler) hands each event for a registered fd
//! to its [`PollDesc`] ([`PollTarget::event`]), which wakes the waiters it concerns and
//! returns the coroutines among them to the poll's caller.
//!
//! # Slot states
//!
//! Every socket is registered once, edge-triggered, for reading, writing and the
//! peer's shutdown (`EPOLLRDHUP`).
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
//! one after the other. There is one turn at a time (`SlotState::holder`): an edge
//! that arrives while the holder is between calls wakes nobody else, since the holder
//! will see its count and retry; otherwise a waiter woken by a pass, whose call then
//! found the socket empty, could lose the next datagram to the waiter behind it. A
//! holder always ends its turn: it passes it (`pass`), ends it (`end_turn`, which
//! still passes if an edge came since its call), or gives it back to the queue by
//! waiting again; `Registered::io`'s guard ends it on an unwind.
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
//! stay for good, never cleared by a short call's hint: a hang-up or error; the peer's FIN
//! (`EPOLLRDHUP`), because data and a FIN that arrive before a read raise one edge
//! between them, and after the short read that takes the data no edge would come for
//! the EOF; and urgent data (`EPOLLPRI`), because a read stops short at the urgent
//! mark with the rest of the data queued behind it. A call that fails with
//! `WouldBlock` clears even those (`PollDesc::clear_empty`): the kernel has just said
//! the socket is empty, which happens after an error edge a datagram socket's call
//! took (an ICMP error reported once).
//!
//! Only one M blocks in the poller at a time (`busy`), and a quick poll never runs
//! beside it (it needs the event buffer's lock, which the blocking M holds). The
//! blocking M publishes the deadline it sleeps until in `until`; whoever adds a timer
//! earlier than that breaks the wait with `Netpoll::notify` (Go: netpollBreak).
//!

use std::collections::VecDeque;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::epoll;
use crate::lockrank::{Mutex, MutexGuard, Rank};
use crate::netpoll::PollTarget;
use crate::park::{self, Unparker};
use crate::sched::{g::GRef, rt};
use crate::wait::WaitReason;

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
    /// without a lock by every operation before its call (Relaxed: see `is_closed`).
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
    /// `ready` is not cleared again, unless a call finds the socket empty
    /// (`PollDesc::clear_empty`).
    for_good: bool,
    /// A caller holds the turn (see "many waiters"): it was woken from the queue or
    /// consumed `ready`, and will retry its call. While it does, an edge wakes nobody
    /// else (the holder sees the edge count change); the holder passes the turn on or
    /// ends it (`PollDesc::pass`, `PollDesc::end_turn`).
    holder: bool,
}

/// The waiters an edge, a pass or a close wakes (see `SlotState::take_woken`).
type Woken = std::iter::Chain<
    std::option::IntoIter<(u64, Unparker)>,
    std::collections::vec_deque::IntoIter<(u64, Unparker)>,
>;

impl SlotState {
    /// Unlinks and returns the waiters an edge or a pass wakes: the head (no
    /// allocation: an edge per request is the common case), or all of them once the
    /// slot is ready for good or closed.
    fn take_woken(&mut self, queued: &AtomicU32) -> Woken {
        let (head, rest) = if self.for_good || self.closed {
            self.holder = false;
            (None, std::mem::take(&mut self.waiters))
        } else {
            let head = self.waiters.pop_front();
            self.holder = head.is_some();
            (head, VecDeque::new())
        };
        // Relaxed: see `Slot::queued`.
        queued.store(self.waiters.len() as u32, Ordering::Relaxed);
        head.into_iter().chain(rest)
    }
}

/// The error of an operation on a closed socket.
pub(crate) fn closed_error() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "use of a closed socket")
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: Mutex::new(Rank::PollSlot, SlotState::default()),
            seq: AtomicU32::new(0),
            drained: AtomicU64::new(0),
            queued: AtomicU32::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock()
    }

    /// An edge: wake the head waiter, or mark the slot ready if nobody waits.
    /// `for_good`: the socket stays ready in this direction (an error, a hang-up, the
    /// peer's FIN): mark it ready and wake everyone. Coroutines to ready go on `batch`
    /// (the poller's caller queues them).
    fn ready(&self, for_good: bool, batch: &mut Vec<GRef>) {
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
            if st.holder && !st.for_good {
                // The turn holder will retry and see this edge's count: it, not the
                // next waiter, takes what the edge announced (arrival order).
                None.into_iter().chain(VecDeque::new())
            } else {
                if st.waiters.is_empty() || st.for_good {
                    st.ready = true;
                }
                st.take_woken(&self.queued)
            }
        };
        for (_, u) in woken {
            u.unpark_into(batch);
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
    /// Registers `fd` (a non-blocking socket) with the runtime's poller and returns its
    /// descriptor. [`PollDesc::deregister`] must be called before `fd` is closed.
    pub(crate) fn register(fd: RawFd) -> io::Result<Arc<PollDesc>> {
        rt().netpoll.register(fd, |key| PollDesc::new(fd, key))
    }

    /// Closes the descriptor (waking its waiters with `closed_error`) and removes its
    /// fd from the poller; the caller closes the fd afterwards.
    pub(crate) fn deregister(&self) {
        self.close();
        rt().netpoll.deregister(self.key, self.fd);
    }

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
        // Relaxed, both: under the lock that every edge takes to change them; the
        // lock-free reader of `drained` takes it as a hint (see `drained`).
        if slot.seq.load(Ordering::Relaxed) == seq && !st.closed && !st.for_good {
            st.ready = false;
            slot.drained.store(DRAINED | seq as u64, Ordering::Relaxed);
        }
    }

    /// An operation that started when the edge count was `seq` failed with
    /// `WouldBlock`: the kernel says the socket is not ready in `dir` now. As
    /// [`PollDesc::clear`], and more: readiness that was for good is forgotten too.
    /// "For good" is right for a hang-up or the peer's FIN, after which no call finds
    /// the socket empty; but an error edge (`EPOLLERR`) on a datagram socket, an ICMP
    /// error, is taken by the call that reports it (`SO_ERROR` is cleared), and a call
    /// after it can find the socket empty. Keeping that slot ready would make every
    /// later wait return at once, a busy loop that ignores its deadline.
    pub(crate) fn clear_empty(&self, dir: Dir, seq: u32) {
        let slot = self.slot(dir);
        let mut st = slot.lock();
        // Relaxed, both: as in `clear`.
        if slot.seq.load(Ordering::Relaxed) == seq && !st.closed {
            st.ready = false;
            st.for_good = false;
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
        // Relaxed: the fast refusal of `is_closed`; waiters learn of the close under
        // the slots' locks, below.
        self.closed.store(true, Ordering::Relaxed);
        self.read.close();
        self.write.close();
    }

    /// Waits for a turn in `dir` (see "many waiters"): returns `Ok` when the caller
    /// should retry its I/O, `TimedOut` at `deadline`, `closed_error` once the
    /// descriptor is closed. `seq` is the edge count the caller read before the call
    /// that failed with `WouldBlock` (or that it skipped as `drained`): an edge since
    /// then is a retry at once. `front`: the caller holds the turn and its call found
    /// the socket empty, so it gives the turn back and waits again at the head of the
    /// queue, where it was. `Ok(true)`: the caller holds the turn now, and must end it
    /// with [`PollDesc::pass`] or [`PollDesc::end_turn`]. Parks a coroutine, blocks a
    /// thread.
    pub(crate) fn wait(
        &self,
        dir: Dir,
        seq: u32,
        deadline: Option<Instant>,
        front: bool,
    ) -> io::Result<bool> {
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
        if st.ready && !st.for_good {
            // Consuming the readiness no waiter was woken for is a turn.
            st.ready = false;
            st.holder = true;
            return Ok(true);
        }
        // Relaxed: under the lock that every edge takes to change it.
        if st.ready || slot.seq.load(Ordering::Relaxed) != seq {
            // An edge since the caller's call: retry. A holder keeps its turn; anyone
            // else contends beside the waiter that edge woke.
            return Ok(front && !st.for_good);
        }
        if front {
            // The holder found the socket empty: the turn goes back to the queue, and
            // the holder with it (below), at its head.
            st.holder = false;
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
        // Some M must watch the poller while we sleep ("someone watches the sockets"
        // in netpoll.rs).
        if rt.netpoll.waiter_arrived() {
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
        rt.netpoll.waiter_left();
        let mut st = slot.lock();
        if let Some(i) = st.waiters.iter().position(|(t, _)| *t == ticket) {
            // Still queued, so not woken by an edge, a pass or a close: the deadline
            // woke us. (Unlinked, we hold a turn even if the deadline fired too.)
            st.waiters.remove(i);
            // Relaxed: see `Slot::queued`.
            slot.queued
                .store(st.waiters.len() as u32, Ordering::Relaxed);
            return Err(timed_out());
        }
        if st.closed {
            return Err(closed_error());
        }
        // Dequeued by an edge or a pass: the turn is ours (`take_woken` set `holder`).
        Ok(true)
    }

    /// Ends the caller's turn without passing it (its call drained the socket, or it
    /// gives up), unless an edge came since `seq`, the count it read before that call:
    /// then the turn goes to the next waiter, or, with none, the edge's readiness
    /// stays for the next caller (see "many waiters").
    pub(crate) fn end_turn(&self, dir: Dir, seq: u32) {
        let slot = self.slot(dir);
        let woken = {
            let mut st = slot.lock();
            // Relaxed: under the lock that every edge takes to change it.
            if slot.seq.load(Ordering::Relaxed) == seq {
                st.holder = false;
                None
            } else {
                if st.waiters.is_empty() {
                    st.ready = true;
                }
                Some(st.take_woken(&slot.queued))
            }
        };
        for (_, u) in woken.into_iter().flatten() {
            u.unpark();
        }
    }

    /// Ends a turn (see "many waiters"): the caller's retried call did not fail with
    /// `WouldBlock` and may have left the socket ready in `dir`, so the next waiter
    /// gets a turn.
    pub(crate) fn pass(&self, dir: Dir) {
        let slot = self.slot(dir);
        // Under the lock even with nobody queued: the turn must end (`holder`), or the
        // next edge would wake nobody.
        let woken = slot.lock().take_woken(&slot.queued);
        for (_, u) in woken {
            u.unpark();
        }
    }
}

impl PollTarget<GRef> for PollDesc {
    fn event(&self, bits: u32, batch: &mut Vec<GRef>) {
        // An error or a hang-up readies both slots for good. The peer's shutdown
        // (RDHUP) readies the reader's for good: a read returns 0 from now on. So does
        // urgent data (PRI): a read stops short at its mark with data queued behind
        // it, so a short read no longer means the socket is empty.
        let err = bits & (epoll::ERR | epoll::HUP) != 0;
        if bits & (epoll::IN | epoll::PRI | epoll::RDHUP) != 0 || err {
            self.read
                .ready(err || bits & (epoll::RDHUP | epoll::PRI) != 0, batch);
        }
        if bits & epoll::OUT != 0 || err {
            self.write.ready(err, batch);
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
        pd.read.ready(false, &mut Vec::new());
        let seq = pd.seq(d);
        pd.clear(d, seq);
        assert!(drained(&pd, d));
        assert!(!pd.read.lock().ready);
        // A new edge undoes it, and the hint never names a later edge count.
        pd.read.ready(false, &mut Vec::new());
        assert!(!drained(&pd, d));
        assert!(!pd.drained(d, seq.wrapping_add(1)));
        assert!(pd.read.lock().ready);
        // An edge during the operation (after its `seq`): not cleared.
        let seq = pd.seq(d);
        pd.read.ready(false, &mut Vec::new());
        pd.clear(d, seq);
        assert!(!drained(&pd, d));
        assert!(pd.read.lock().ready);
        // The other direction is untouched throughout.
        assert!(!drained(&pd, Dir::Write));
        // A hang-up or the peer's FIN stays: never cleared.
        pd.read.ready(true, &mut Vec::new());
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

    /// A call that found the socket empty forgets even readiness that was for good
    /// (an error edge a datagram socket's call has taken), unless an edge came since.
    #[test]
    fn would_block_forgets_an_error_edge() {
        let pd = PollDesc::new(-1, 0);
        let d = Dir::Read;
        pd.read.ready(true, &mut Vec::new());
        let seq = pd.seq(d);
        pd.read.ready(true, &mut Vec::new());
        pd.clear_empty(d, seq);
        assert!(pd.read.lock().for_good, "cleared despite a later edge");
        let seq = pd.seq(d);
        pd.clear_empty(d, seq);
        let st = pd.read.lock();
        assert!(!st.ready && !st.for_good);
        drop(st);
        assert!(pd.drained(d, seq));
    }

    /// The count wraps instead of overflowing (a long-lived socket sees 2^32 edges).
    #[test]
    fn seq_wraps() {
        let pd = PollDesc::new(-1, 0);
        pd.write.seq.store(u32::MAX, Ordering::Relaxed);
        pd.write.ready(false, &mut Vec::new());
        assert_eq!(pd.seq(Dir::Write), 0);
    }
}
