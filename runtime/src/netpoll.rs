//! The netpoller: one epoll instance per runtime (`epoll.rs`), where the last M to go
//! idle sleeps until the earliest timer of any P or an event on a registered fd.
//!
//! It sits below the scheduler: it knows fds, keys and deadlines, and hands each event
//! to the [`PollTarget`] registered for its fd (the socket layer's poll descriptor,
//! `net/poll.rs`), which wakes its waiters and returns the coroutines among them. The
//! poll returns that list to its caller, who queues it (Go: `netpoll` returns a gList,
//! `injectglist` queues it): the blocking M globally, then it takes a P and runs the
//! first; a quick poll from `find_runnable` into its own P's queue.
//!
//! Registrations live in a table whose keys carry a generation (so an event for a
//! closed descriptor whose slot was reused is dropped).
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

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::epoll::{Epoll, Events, RawEvent, TIMER_KEY, WAKE_KEY};
use crate::lockrank::{Mutex, Rank};
use crate::loom;
use crate::timers::{nanotime, until};
use goro_timers::MAX_WHEN;

/// The poller of a runtime whose wake-ups are `W`s (the runtime's: `GRef`, the
/// coroutines to queue): generic so that this layer, below the scheduler, names none of
/// its types.
pub(crate) struct Netpoll<W> {
    poller: Epoll,
    /// Whether an M is (about to be) blocked in the poller. Taken with a swap and given
    /// back by that M (`block`); read as a hint by quick polls, `find_runnable`, sysmon.
    busy: AtomicBool,
    /// The blocking M's deadline and the count of fd waiters (the two Dekker pairs).
    watch: Watch,
    events: Mutex<Events>,
    /// Moving average of how late the kernel woke the poller after a timeout, in ns.
    /// Written only by the M in the poller (turns ordered by `busy`); read by anyone.
    late_avg: AtomicI64,
    /// Registered descriptors, by key.
    table: Mutex<Table<W>>,
    /// Registered descriptors. Changed by `register` / `deregister`; read by the
    /// deadlock check (Relaxed: a count, and the check re-checks over time).
    registered: AtomicUsize,
    /// When an M last polled (blocking or not): sysmon's backstop polls after 10 ms.
    /// Written by whichever M polls; read by sysmon (Relaxed: a heuristic's timestamp).
    last_poll: AtomicI64,
}

/// What an event for a registered fd goes to (the socket layer's poll descriptor).
pub(crate) trait PollTarget<W>: Send + Sync {
    /// An event with epoll's `bits` arrived: wake whoever it wakes, and push the
    /// coroutines among them on `woken` for the caller of the poll to queue.
    fn event(&self, bits: u32, woken: &mut Vec<W>);
}

/// A registration's target, as the table holds it.
type Target<W> = Arc<dyn PollTarget<W>>;

/// The descriptor table: a slab whose keys carry a generation.
struct Table<W> {
    slots: Vec<(u32, Option<Target<W>>)>,
    free: Vec<u32>,
}

/// The most events one poll takes (Go: 128).
const EVENTS_CAP: usize = 128;

/// Bounds of the early-wake margin.
pub(crate) const MIN_EARLY_NS: i64 = 20_000;
pub(crate) const MAX_EARLY_NS: i64 = 250_000;

impl<W> Netpoll<W> {
    pub(crate) fn new() -> std::io::Result<Netpoll<W>> {
        Ok(Netpoll {
            poller: Epoll::new()?,
            busy: AtomicBool::new(false),
            watch: Watch::new(),
            events: Mutex::new(Rank::PollEvents, Events::with_capacity(EVENTS_CAP)),
            late_avg: AtomicI64::new(MIN_EARLY_NS),
            table: Mutex::new(
                Rank::PollTable,
                Table {
                    slots: Vec::new(),
                    free: Vec::new(),
                },
            ),
            registered: AtomicUsize::new(0),
            last_poll: AtomicI64::new(0),
        })
    }

    /// Whether any caller waits on a socket (Relaxed: a hint for whether to poll).
    pub(crate) fn has_waiters(&self) -> bool {
        self.watch.has_waiters()
    }

    /// How many callers wait on an fd (for `debug::stats`).
    pub(crate) fn waiters(&self) -> usize {
        self.watch.waiters()
    }

    /// Registered sockets now.
    pub(crate) fn registered(&self) -> usize {
        // Relaxed: see the field.
        self.registered.load(Ordering::Relaxed)
    }

    /// Registers `fd` (a non-blocking socket) with the target `make(key)` builds, and
    /// returns the target. The caller must call [`Netpoll::deregister`] with the key
    /// before closing `fd`.
    pub(crate) fn register<T: PollTarget<W> + 'static>(
        &self,
        fd: RawFd,
        make: impl FnOnce(usize) -> T,
    ) -> io::Result<Arc<T>> {
        let (key, pd) = {
            let mut t = self.table.lock();
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
            let pd = Arc::new(make(key));
            slot.1 = Some(pd.clone() as Target<W>);
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

    /// Removes `fd`, registered under `key`, from the poller (before it is closed):
    /// no event reaches its target from now on.
    pub(crate) fn deregister(&self, key: usize, fd: RawFd) {
        // The fd is still open (the caller closes it after this call).
        let _ = self.poller.delete(fd);
        self.forget(key);
        // Relaxed: as in `register`.
        self.registered.fetch_sub(1, Ordering::Relaxed);
    }

    fn forget(&self, key: usize) {
        let mut t = self.table.lock();
        let idx = key & 0xffff_ffff;
        if let Some(slot) = t.slots.get_mut(idx) {
            if (slot.0 as usize) == key >> 32 {
                slot.1 = None;
                t.free.push(idx as u32);
            }
        }
    }

    fn lookup(&self, key: usize) -> Option<Target<W>> {
        let t = self.table.lock();
        let (gen, pd) = t.slots.get(key & 0xffff_ffff)?;
        (*gen as usize == key >> 32).then(|| pd.clone()).flatten()
    }

    /// Hands `events` to their targets; the coroutines they wake go on `woken`.
    /// `quick`: they come from a non-blocking poll, not from the M that blocks in the
    /// poller.
    fn dispatch(&self, events: &[RawEvent], quick: bool, woken: &mut Vec<W>) {
        for ev in events {
            // `as`: the bits of the kernel's u32, which nix keeps as a c_int.
            let (bits, key) = (ev.events().bits() as u32, ev.data());
            if key == WAKE_KEY {
                self.poller.ack_wake();
                // A quick poll that ran just before an M blocked can take the
                // notification meant for that M (sent once the M published `until`).
                // Pass it on, or the M would sleep past the timer that sent it.
                if quick && self.watch.until() != 0 {
                    self.poller.notify();
                }
                continue;
            }
            if key == TIMER_KEY {
                continue;
            }
            if let Some(target) = self.lookup(key as usize) {
                target.event(bits, woken);
            }
        }
    }

    /// Polls without blocking; the coroutines the events wake go on `woken`, for the
    /// caller to queue. Does nothing if an M is in the poller or another poll is under
    /// way.
    ///
    /// It does not take `busy`: `busy` means "an M sleeps here", and an idle M that
    /// found it taken by a quick poll would stop instead of sleeping in the poller,
    /// leaving nobody to watch the sockets and timers once the poll ended (a lost
    /// wake-up seen as a hung socket read). The quick poll only takes the event buffer's
    /// lock, which the blocking M holds while it waits, so the two never overlap.
    pub(crate) fn poll_now(&self, woken: &mut Vec<W>) {
        // Relaxed: a shortcut only; the event buffer's lock is what keeps this poll
        // from running beside the blocking M.
        if self.busy.load(Ordering::Relaxed) {
            return;
        }
        let Some(mut events) = self.events.try_lock() else {
            return;
        };
        if self.poller.wait(&mut events, Some(Duration::ZERO)).is_ok() {
            self.dispatch(events.as_slice(), true, woken);
        }
        // Relaxed: a timestamp for sysmon's backstop heuristic; a stale one costs at most
        // one extra non-blocking poll.
        self.last_poll.store(nanotime(), Ordering::Relaxed);
    }

    /// When an M last polled (runtime clock, ns).
    pub(crate) fn last_poll(&self) -> i64 {
        // Relaxed: see the field.
        self.last_poll.load(Ordering::Relaxed)
    }

    /// Whether an M is in the poller now.
    pub(crate) fn busy(&self) -> bool {
        // Relaxed: a hint for whether to poll; nothing is read on the strength of it.
        self.busy.load(Ordering::Relaxed)
    }

    /// How long before a timer's deadline the poller wakes (see "waking early").
    pub(crate) fn early_margin(&self) -> i64 {
        // Relaxed: a tuning hint (see the field).
        (2 * self.late_avg.load(Ordering::Relaxed)).clamp(MIN_EARLY_NS, MAX_EARLY_NS)
    }

    /// Blocks the calling M (which holds no P) until `earliest()` — the earliest timer
    /// of any P, 0 for none — or a notification; the coroutines the events woke go on
    /// `woken`, for the caller to queue (Go: netpoll returns a gList). Returns false at
    /// once, without blocking, if another M is already in the poller or there is
    /// nothing to wait for.
    pub(crate) fn block(&self, earliest: impl Fn() -> i64, woken: &mut Vec<W>) -> bool {
        // Acquire: pairs with the Release that ends the previous M's turn (below), so
        // one turn in the poller happens before the next: the load and store of
        // `late_avg`, not an RMW, rely on it.
        if self.busy.swap(true, Ordering::Acquire) {
            return false;
        }
        let Some(mut deadline) = self.watch.commit(earliest()) else {
            // Release: ends our turn (pairs with the swap's Acquire above).
            self.busy.store(false, Ordering::Release);
            return false;
        };
        // The poller half of the timers' Dekker pair: re-read them after publishing.
        let again = earliest();
        if again != 0 && again < deadline {
            deadline = again;
            self.watch.shorten(deadline);
        }
        let wake_at = if deadline == MAX_WHEN {
            MAX_WHEN
        } else {
            deadline.saturating_sub(self.early_margin()).max(1)
        };
        let timeout = (wake_at != MAX_WHEN).then(|| until(nanotime(), wake_at));
        let woke_by_event = {
            let mut events = self.events.lock();
            // An error here only means we wake early; the caller re-checks.
            let _ = self.poller.wait(&mut events, timeout);
            self.dispatch(events.as_slice(), false, woken);
            events.as_slice().iter().any(|ev| ev.data() < TIMER_KEY)
        };
        let now = nanotime();
        // Relaxed: see the field.
        self.last_poll.store(now, Ordering::Relaxed);
        if !woke_by_event && wake_at != MAX_WHEN && now >= wake_at {
            // A timeout: learn how late the kernel was (Relaxed: a tuning hint).
            let avg = self.late_avg.load(Ordering::Relaxed);
            let sample = (now - wake_at).min(10 * MAX_EARLY_NS);
            self.late_avg
                .store(avg + (sample - avg) / 8, Ordering::Relaxed);
        }
        self.watch.release();
        // Release: ends our turn, as above.
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
        let until = self.watch.until();
        if until == 0 {
            return false;
        }
        if when < until {
            self.notify();
        }
        true
    }

    /// A caller is about to park on a registered fd: see [`Watch::waiter_arrived`].
    pub(crate) fn waiter_arrived(&self) -> bool {
        self.watch.waiter_arrived()
    }

    /// A caller counted by `waiter_arrived` is awake again.
    pub(crate) fn waiter_left(&self) {
        self.watch.waiter_left();
    }

    /// Breaks the poller's wait (or makes the next one return at once).
    pub(crate) fn notify(&self) {
        self.poller.notify();
    }
}

/// The two words the poller's protocols turn on: the deadline the M in the poller
/// sleeps until, and the number of callers parked on registered fds ("someone watches
/// the sockets", and the timers' Dekker pair, in the module doc). A type of its own so
/// that `tests/loom_netpoll.rs` can check the very code.
pub struct Watch {
    /// The deadline the blocked M sleeps until (`MAX_WHEN`: no timeout), or 0 when no
    /// M is committed to the poller. Written by that M (`commit`, `shorten`,
    /// `release`); read by fd waiters, timer adders and quick polls.
    until: loom::AtomicI64,
    /// Callers parked on a descriptor slot: while there are any, an idle M blocks in the
    /// poller even with no timer pending, and `find_runnable` polls. Written by the
    /// waiters; read by the M deciding whether to block, and as a hint by anyone.
    waiters: loom::AtomicUsize,
}

impl Watch {
    /// No M in the poller, nobody waiting.
    pub fn new() -> Watch {
        Watch {
            until: loom::AtomicI64::new(0),
            waiters: loom::AtomicUsize::new(0),
        }
    }

    /// How many callers wait on an fd (Relaxed: a count for `debug::stats`).
    pub fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Relaxed)
    }

    /// Whether any caller waits on an fd (Relaxed: a hint for whether to poll).
    pub fn has_waiters(&self) -> bool {
        self.waiters.load(Ordering::Relaxed) != 0
    }

    /// The deadline of the M committed to the poller, 0 if none.
    pub fn until(&self) -> i64 {
        // SeqCst: the reader half of the timers' pair (after the adder's fence) and of
        // the waiters' pair.
        self.until.load(Ordering::SeqCst)
    }

    /// The M that took `busy` decides whether to block, given `earliest`, the earliest
    /// timer (0: none). Returns the deadline it committed to (`MAX_WHEN`: only fds to
    /// watch), or None if there is nothing to wait for. A commit ends with a SeqCst
    /// fence, after which the caller re-reads the timers (`shorten` if one is earlier).
    pub fn commit(&self, earliest: i64) -> Option<i64> {
        let deadline = if earliest != 0 {
            earliest
        } else {
            // SeqCst: if we miss a waiter here, we never store `until`, so that waiter
            // reads 0 and wakes an M itself (`waiter_arrived`). And with `release`'s
            // store before it, a Dekker pair: a waiter that read the deadline of an M
            // leaving the poller is seen by that M's next decision.
            loom::seqcst_pair_fence();
            if self.waiters.load(Ordering::SeqCst) == 0 {
                return None;
            }
            MAX_WHEN // sockets to watch, no timer: no timeout
        };
        // SeqCst: the M's store in the timers' Dekker pair. (The fence below would
        // order a weaker store as well; a waiter that reads this deadline needs none.)
        self.until.store(deadline, Ordering::SeqCst);
        // SeqCst fence: the poller half of the timers' pair; the caller re-reads the
        // timers after it.
        loom::fence(Ordering::SeqCst);
        Some(deadline)
    }

    /// The committed M found an earlier timer on its re-read.
    pub fn shorten(&self, deadline: i64) {
        // SeqCst: as the commit's store.
        self.until.store(deadline, Ordering::SeqCst);
    }

    /// The committed M is awake again and leaves the poller.
    pub fn release(&self) {
        // SeqCst: waiters and adders that read 0 from now on wake an M themselves.
        self.until.store(0, Ordering::SeqCst);
    }

    /// A caller is about to park on a registered fd: counts it, and returns whether
    /// the caller must wake an M (`wakep`) because none is committed to the poller.
    ///
    /// The waiter's half: count ourselves, then look for a committed M (`until` set).
    /// An M that read the count before our increment saw no waiter and never stores
    /// `until`, so we read 0 and wake one (an idle M with nothing else to do blocks in
    /// the poller). `busy` would not do: an M that took it and then saw no waiter
    /// drops it again without blocking. A `true` ends with a SeqCst fence, as `wakep`
    /// requires of what it follows.
    pub fn waiter_arrived(&self) -> bool {
        let first = self.waiters.fetch_add(1, Ordering::SeqCst) == 0;
        loom::seqcst_pair_fence();
        if first && self.until() == 0 {
            loom::fence(Ordering::SeqCst);
            return true;
        }
        false
    }

    /// A caller counted by `waiter_arrived` is awake again.
    pub fn waiter_left(&self) {
        // SeqCst: the count is read by `commit` (above).
        self.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Default for Watch {
    fn default() -> Self {
        Self::new()
    }
}
