//! sysmon: a thread without a P that watches the scheduler (Go: proc.go sysmon).
//!
//! Each round it
//!
//! 1. retakes Ps whose M has been in a blocking call for more than
//!    [`RETAKE_AFTER_NS`] and hands them to another M (see "the syscall hand-off" in
//!    `syscall.rs`);
//! 2. flags a P whose coroutine has run for more than [`PREEMPT_AFTER_NS`] without
//!    a scheduling point: that coroutine yields at its next preemption point
//!    ([`preempt_point`]: channel operations, locks, sleeps, socket I/O);
//! 3. polls the network if sockets have waiters and nobody has polled for
//!    [`NETPOLL_BACKSTOP_NS`];
//! 4. prints the scheduler's state every `GORO_SCHEDTRACE` ms, if set;
//! 5. when every P is idle, checks for a deadlock (see [`deadlock`](self#deadlock)),
//!    and makes sure an M watches the pending timers and sockets (`idle_backstop`);
//! 6. every [`SCAVENGE_PERIOD_NS`], unmaps part of the pooled stacks above the
//!    pool's watermark (`stack::pool`).
//!
//! It sleeps [`SLEEP_MIN_NS`] between rounds, doubling up to [`SLEEP_MAX_NS`] while
//! nothing happens, and not at all while every P is idle: then it waits on its wake
//! pipe until a P starts running again (`wake_if_asleep`), so an idle runtime costs no
//! CPU. The pipe also carries SIGQUIT: the handler writes a byte (async-signal-safe) and
//! sysmon prints the coroutine dump and exits, as Go does; not while `goro::signal`
//! has a SIGQUIT subscriber (`set_sigquit_dump`).
//!
//! # Deadlock
//!
//! When every P is idle, nothing is queued, no coroutine is in a blocking call, no
//! timer is pending, no socket is registered, and every plain thread the runtime knows
//! (one that has waited on it) is waiting on it with no deadline, nothing can ever
//! wake anything (a coroutine's deadline is a pending timer; a thread's is a thread
//! that will wake up, so a thread in a timed wait never counts as waiting):
//! `fatal error: all coroutines are asleep - deadlock!`, the dump, exit status 2. The
//! condition must hold twice, [`DEADLOCK_GRACE_NS`] apart, with no scheduling in
//! between, and then every thread of the process that is not goro's must be asleep for
//! good (in an untimed futex wait: `census.rs`), since a thread the runtime has never
//! seen may still wake a coroutine. The check runs from the first goro call that
//! starts sysmon: a coroutine's spawn, or a plain thread's first untimed wait on the
//! runtime (`park.rs`), so a `main` that blocks on a channel with no coroutine at all
//! is reported too, as Go reports it. `GORO_DEADLOCK=ignore` turns it off (see
//! docs/caveats.md).

use std::io::Write;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd, RawFd};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::g::GStatus;
use super::p::PStatus;
use super::procfs::InKernel;
use super::runq::runq_empty;
use super::{census, rt, timers, Runtime};
use crate::stack::pool::SCAVENGE_PERIOD_NS;
use crate::timers::nanotime;

/// A blocking call this long loses its P.
pub(crate) const RETAKE_AFTER_NS: i64 = 20_000;
/// A coroutine running this long without a scheduling point is asked to yield.
pub(crate) const PREEMPT_AFTER_NS: i64 = 10_000_000;
/// A coroutine outside goro that has not honoured the preempt request of
/// `PREEMPT_AFTER_NS` this long after it was made loses its P anyway (so ~12 ms into
/// its slice): its thread keeps running it, and the P runs the others. Measured from
/// the request by the wall clock and by the thread's CPU clock both, so a thread that
/// only waited for a CPU (or a sysmon that looked late) does not count as ignoring it.
/// The grace (two sysmon rounds while it computes) lets a coroutine that makes a goro
/// call every millisecond or so yield cooperatively, which costs no thread; it is short
/// enough that a ticker beside a CPU loop is about as late as Go's beside a loop Go
/// preempts with a signal (docs/benchmark-journal.md, "Blocking code without
/// wrappers").
pub(crate) const PREEMPT_GRACE_NS: i64 = 2_000_000;
/// While any coroutine runs, sysmon looks at least this often: a thread that blocks in
/// the kernel without telling goro loses its P within about this long (plus a second
/// sample of its CPU clock, `RETAKE_AFTER_NS` later), or sooner if a timer falls due
/// behind it (`note_stuck_timer`). The price is this many sysmon rounds per second on a
/// busy program, ~1.3% of a core here (Go's sysmon backs off to 10 ms there, and relies
/// on every system call passing through `entersyscall`).
const RETAKE_WATCH_NS: i64 = 1_000_000;
/// How long sysmon keeps watching (rounds at most `RETAKE_WATCH_NS` apart) after the
/// last round that saw a P running.
const WATCH_LINGER_NS: i64 = 10_000_000;
/// sysmon polls the network if nobody has for this long.
pub(crate) const NETPOLL_BACKSTOP_NS: i64 = 10_000_000;
/// Shortest and longest sleep between rounds.
pub(crate) const SLEEP_MIN_NS: i64 = 20_000;
pub(crate) const SLEEP_MAX_NS: i64 = 10_000_000;
/// Quiet rounds before the sleep starts doubling (Go: 50).
const QUIET_ROUNDS: u32 = 50;
/// sysmon's longest sleep while a coroutine has been asked to yield.
const PREEMPT_POLL_NS: i64 = 1_000_000;
/// How overdue a timer may be, on an all-idle runtime, before sysmon steps in (see
/// `idle_backstop`).
const IDLE_BACKSTOP_NS: i64 = 1_000_000;
/// How long a deadlock must persist before it is reported.
pub(crate) const DEADLOCK_GRACE_NS: i64 = 100_000_000;

/// Set when any P has its preempt flag set: the one load on preemption points' fast
/// path. Written by sysmon (each round, from the Ps' flags) and by a preemption point
/// that took its P's request (from the other Ps' flags); read by every preemption
/// point. Relaxed: a stale value costs one check of the P's own flag, or delays a
/// yield by one sysmon round.
pub(crate) static PREEMPT_ANY: AtomicBool = AtomicBool::new(false);

/// The wake pipe's write end, -1 before sysmon starts (a raw fd in an atomic, so the
/// SIGQUIT handler can read it). Written once by `start`; read by `poke` (any M, the
/// SIGQUIT handler). Never closed.
static PIPE_W: AtomicI32 = AtomicI32::new(-1);
/// The wake pipe's read end: sysmon's `sleep` waits on it. Set once by `start`.
static PIPE_R: OnceLock<OwnedFd> = OnceLock::new();
/// Plain threads known to the runtime (they have waited on it), and those waiting now.
/// Changed by those threads (`park.rs`: Release RMWs); read by `nothing_pending` (Acquire),
/// so a check that counts a thread as waiting sees what it did before (the coroutines
/// it readied, the work it queued). No snapshot of the two is possible either way:
/// the check's second sighting, [`DEADLOCK_GRACE_NS`] later, is what rules out a race.
pub(crate) static KNOWN_THREADS: AtomicUsize = AtomicUsize::new(0);
pub(crate) static WAITING_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Starts sysmon, once (from the first M's start, when the runtime is initialised).
pub(crate) fn start() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let (r, w) = match nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK) {
            Ok(fds) => fds,
            // A runtime without sysmon has no retake, no preemption, no deadlock
            // report and no SIGQUIT dump: it does not start, as without a netpoller.
            Err(e) => {
                let e = std::io::Error::from(e);
                super::fatal!(
                    "sysmon: cannot create its wake pipe: {e}{}",
                    super::scarcity(&e)
                )
            }
        };
        if let Err(e) = super::procfs::init() {
            super::fatal!(
                "sysmon: cannot open /proc/self/task: {e}{}",
                super::scarcity(&e)
            );
        }
        let _ = PIPE_R.set(r);
        // Release, paired with `poke`'s Acquire: a poker that sees the fd sees it open.
        PIPE_W.store(w.into_raw_fd(), Ordering::Release);
        install_sigquit();
        let spawned = std::thread::Builder::new()
            .name("goro-sysmon".into())
            .stack_size(256 * 1024)
            .spawn(run);
        if let Err(e) = spawned {
            super::fatal!("sysmon: cannot start its thread: {e}");
        }
    });
}

/// How sysmon sleeps now, for the callers that may want it sooner: `AWAKE` (a short
/// sleep, or none), `LONG` (at least [`LONG_SLEEP_NS`], though it watches a running P:
/// it looks again within [`RETAKE_WATCH_NS`]), `UNWATCHED` (long, and no P was running
/// when it went to sleep). A blocking call that starts during a long sleep pokes sysmon
/// (`note_blocking`), so that its P is retaken within ~20 µs rather than at the end of
/// the sleep; a P that starts running during an unwatched one pokes it too
/// (`note_running`: its coroutine may block in the kernel without telling goro). One
/// poke per sleep, not per call. Set and cleared by sysmon around the sleep; swapped
/// back to `AWAKE` by the one caller that pokes.
static SLEEP_KIND: AtomicU8 = AtomicU8::new(AWAKE);
const AWAKE: u8 = 0;
const LONG: u8 = 1;
const UNWATCHED: u8 = 2;
/// See [`SLEEP_KIND`].
const LONG_SLEEP_NS: i64 = 1_000_000;

/// A blocking call began: shortens sysmon's sleep if it is a long one.
#[inline]
pub(crate) fn note_blocking() {
    poke_if_asleep(LONG);
}

/// A P started running: shortens sysmon's sleep if it watches no P.
#[inline]
pub(crate) fn note_running() {
    poke_if_asleep(UNWATCHED);
}

/// An M woke for a due timer and found every P held: pokes sysmon, which then watches
/// closely (a timer stuck behind a P whose holder sits in the kernel is what its next
/// round would find only later). Rare: only the M in the poller gets here, once per
/// wait there.
pub(crate) fn note_stuck_timer() {
    poke(b'B');
}

#[inline]
fn poke_if_asleep(at_least: u8) {
    // Relaxed load, AcqRel swap: only one caller pokes per sleep; the poke's write(2)
    // and read(2) order everything else.
    if SLEEP_KIND.load(Ordering::Relaxed) >= at_least
        && SLEEP_KIND.swap(AWAKE, Ordering::AcqRel) >= at_least
    {
        poke(if at_least == UNWATCHED { b'R' } else { b'B' });
    }
}

/// Wakes sysmon from its deep sleep (a P was just taken off the idle list; see "the
/// deep-sleep Dekker pair" in `idle.rs`).
#[inline]
pub(crate) fn wake_if_asleep() {
    if rt().deep_sleep.should_poke() {
        poke(b'W');
    }
}

fn poke(byte: u8) {
    // Acquire: pairs with the Release stores in `start`.
    let fd = PIPE_W.load(Ordering::Acquire);
    if fd >= 0 {
        // write(2) through `syscall`: async-signal-safe, and never a hook. A full
        // pipe (EAGAIN) already wakes sysmon.
        let _ = crate::sys::write(fd, &[byte]);
    }
}

/// Yields if sysmon asked the current P to (Go: the preemption check at function
/// entry, here at goro's own calls). Cheap when nothing was asked: one load.
#[inline]
pub fn preempt_point() {
    // Relaxed: a hint (see `PREEMPT_ANY`).
    if PREEMPT_ANY.load(Ordering::Relaxed) {
        preempt_slow();
    }
}

#[cold]
fn preempt_slow() {
    if super::m::current_g_ptr().is_null() {
        return; // on the scheduler's stack
    }
    // Relaxed: the flag is a hint and publishes nothing (see `P::preempt`).
    let asked = match super::m::current_m().and_then(|m| m.p()) {
        Some(p) => p.preempt.swap(false, Ordering::Relaxed),
        None => return,
    };
    // Our request is taken (or was, by an earlier point): the hint stays up only for
    // another P's. Left up until sysmon's next round, it would send every preemption
    // point of a busy program here for up to a round (a round is up to a millisecond,
    // and a slice that sysmon ends now ends every 10 ms). A request sysmon makes for
    // another P while we look may be hidden until its next round, as any stale hint.
    let rt = super::rt_started();
    let others = (0..rt.procs()).any(|id| rt.p(id).preempt.load(Ordering::Relaxed));
    PREEMPT_ANY.store(others, Ordering::Relaxed); // Relaxed: a hint
    if asked {
        super::schedule::preempt_yield();
    }
}

/// Per-P observations between rounds.
#[derive(Clone, Copy, Default)]
struct Seen {
    syscall_tick: u32,
    syscall_when: i64,
    sched_tick: u32,
    sched_when: i64,
    /// The P's retake epoch (its holder) when the slice below began.
    epoch: u64,
    /// When the P's tick last moved or it changed hands (the running coroutine's slice
    /// began).
    slice_since: i64,
    /// The holder's CPU time at the last sample, and when it was taken.
    cpu: Option<(i64, i64)>,
    /// When sysmon first asked this slice's holder to yield, and the holder's CPU time
    /// at the first sample after that (None: not asked, not sampled, or unknown).
    asked_at: Option<i64>,
    asked_cpu: Option<i64>,
    /// A second look wanted soon (the holder's thread did not use the CPU all the time
    /// since the last sample: it may be blocked), else at the next round.
    resample_at: Option<i64>,
    /// The futex word the holder waits on, where sysmon left it the P because waiters
    /// on that word get through (`convoy`); its next move counts as one more.
    deferred: Option<usize>,
}

/// sysmon's thread id, for the census (written once by sysmon, read by sysmon).
static SYSMON_TID: AtomicI32 = AtomicI32::new(0);

fn run() {
    // Relaxed: only sysmon reads it.
    SYSMON_TID.store(nix::unistd::gettid().as_raw(), Ordering::Relaxed);
    // Sleeps of tens of microseconds want no timer slack (50 µs by default). It cannot
    // fail for a value of 1 ns; were it to, sysmon would only sleep a little longer.
    let _ = nix::sys::prctl::set_timerslack(1);
    let rt = rt();
    let trace_ms = rt.schedtrace_ms;
    let deadlock_check = rt.deadlock_check;
    let start = nanotime();
    let mut next_trace = trace_ms.map(|ms| start + ms as i64 * 1_000_000);
    let mut seen = vec![Seen::default(); super::MAX_PROCS];
    let mut last_watched = i64::MIN / 2;
    let mut delay = SLEEP_MIN_NS;
    let mut quiet = 0u32;
    let mut deadlock_since: Option<(i64, u64)> = None;
    let mut next_scavenge = start;
    let mut was_idle = false;
    loop {
        let now = nanotime();
        // Relaxed: a coarse clock for durations shown in the dump; nothing hangs on it.
        rt.coarse_now.store(now, Ordering::Relaxed);
        // Stacks above the pool's watermark go back to the OS, a batch per period.
        let mut stack_excess = 0;
        if now >= next_scavenge {
            next_scavenge = now + SCAVENGE_PERIOD_NS;
            stack_excess = rt.stacks.scavenge();
        }
        if let Some(t) = next_trace {
            if now >= t {
                schedtrace(rt, now - start);
                next_trace = Some(t + trace_ms.unwrap_or(1) as i64 * 1_000_000);
            }
        }
        let procs = rt.procs();
        let all_idle = rt.spinning.npidle() >= procs;
        // The deep sleep needs two sightings of an all-idle runtime, a round apart: a
        // server whose Ps go idle between bursts thousands of times a second would
        // otherwise have each burst's first acquirep poke sysmon awake (a write(2)
        // on that M's path and a sysmon wake-up each; measured at 19% of an echo
        // server's CPU).
        let deep = all_idle && was_idle;
        was_idle = all_idle;
        if deep {
            // Deadlock check, then sleep until a P runs (or the grace period ends).
            let mut timeout = None;
            let pending_seen = deadlock_check && nothing_pending(rt);
            if pending_seen {
                // The scan of every coroutine (`no_g_runs`) only at a second sighting
                // with no progress in between: a G that runs on an M without a P (a
                // retaken computation) keeps the Ps idle and makes progress, and a
                // scan per round of a million Gs would hold their registry's locks
                // against its spawns.
                let progress = progress_mark(rt, procs);
                match deadlock_since {
                    Some((since, mark)) if mark == progress && no_g_runs(rt) => {
                        if now - since < DEADLOCK_GRACE_NS {
                            timeout = Some(DEADLOCK_GRACE_NS - (now - since));
                        } else if census::others_asleep_for_good(|tid| goro_thread(rt, tid)) {
                            report_deadlock();
                        } else {
                            // A thread goro does not know may still wake someone: look
                            // again, from a first sighting, a grace period later.
                            deadlock_since = None;
                            timeout = Some(DEADLOCK_GRACE_NS);
                        }
                    }
                    Some((_, mark)) if mark == progress => deadlock_since = None,
                    _ => {
                        deadlock_since = Some((now, progress));
                        timeout = Some(DEADLOCK_GRACE_NS);
                    }
                }
            } else {
                deadlock_since = None;
            }
            if let Some(t) = next_trace {
                let until = (t - nanotime()).max(0);
                timeout = Some(timeout.map_or(until, |d| d.min(until)));
            }
            if let Some(d) = idle_backstop(rt, now) {
                timeout = Some(timeout.map_or(d, |t| t.min(d)));
            }
            if stack_excess > 0 || rt.stacks.excess() > 0 {
                let d = (next_scavenge - now).max(0);
                timeout = Some(timeout.map_or(d, |t| t.min(d)));
            }
            // Announce the deep sleep, then re-check: a P that starts running after
            // the announcement pokes the pipe; one that started before is seen here.
            let still_idle = rt.deep_sleep.announce(&rt.spinning, rt.procs());
            // The same for a plain thread that began to wait (`park.rs` `Waiting::new`,
            // which pokes a sleep it sees announced): one that did between the check
            // above and the announcement is seen here, and the check runs again.
            let newly_waiting = deadlock_check && !pending_seen && nothing_pending(rt);
            let poked = sleep(if still_idle && !newly_waiting {
                timeout
            } else {
                Some(0)
            });
            rt.deep_sleep.end();
            if poked {
                // A P runs again. Back to rounds, but not 20 µs ones: nothing is known
                // to need them (a blocking call pokes sysmon out of a sleep this long;
                // see SLEEP_KIND).
                was_idle = false;
                delay = LONG_SLEEP_NS;
                quiet = QUIET_ROUNDS;
            }
            continue;
        }
        if !all_idle {
            deadlock_since = None;
        }
        let (retook, preempting, mut watch) = retake(rt, now, procs, &mut seen);
        if watch.is_some() {
            last_watched = now;
        } else if now - last_watched < WATCH_LINGER_NS {
            // No P runs at this instant, but one did lately: keep watching rather than
            // have the next acquirep poke us (a ping-pong would, at every round).
            watch = Some(RETAKE_WATCH_NS);
        }
        if rt.netpoll.has_waiters()
            && !rt.netpoll.busy()
            && now - rt.netpoll.last_poll() > NETPOLL_BACKSTOP_NS
            && poll_into_global(rt) > 0
        {
            super::wakep();
        }
        if retook {
            quiet = 0;
            delay = SLEEP_MIN_NS;
        } else {
            quiet += 1;
            if quiet > QUIET_ROUNDS {
                delay = (delay * 2).min(SLEEP_MAX_NS);
            }
        }
        let mut d = delay;
        if preempting {
            // A coroutine is running long: look again within PREEMPT_POLL_NS so that a
            // preemption point it reaches takes effect soon. Not a reset to 20 µs
            // rounds (Go does not count preemption as activity either): a CPU-bound
            // program would otherwise wake sysmon thousands of times a second.
            d = d.min(PREEMPT_POLL_NS);
        }
        if let Some(w) = watch {
            // A coroutine runs user code on some P: look at it again in time to notice
            // a thread blocked in the kernel within a couple of milliseconds.
            d = d.min(w.max(SLEEP_MIN_NS));
        }
        if let Some(t) = next_trace {
            d = d.min((t - nanotime()).max(0));
        }
        let long = d >= LONG_SLEEP_NS;
        if long {
            // Relaxed: a hint; a caller that misses it is looked at after this sleep,
            // as if SLEEP_KIND did not exist.
            let kind = if watch.is_some() { LONG } else { UNWATCHED };
            SLEEP_KIND.store(kind, Ordering::Relaxed);
        }
        if sleep(Some(d)) {
            // Poked by a blocking call: watch it closely.
            quiet = 0;
            delay = SLEEP_MIN_NS;
        }
        if long {
            // Relaxed: a caller that still reads the old kind writes one needless byte.
            SLEEP_KIND.store(AWAKE, Ordering::Relaxed);
        }
    }
}

/// When every P is idle, something must still watch the pending timers and the
/// sockets with waiters: the M in the poller. This backstop (Go's sysmon has the timer
/// half) catches a lost hand-over to the poller: if a timer is more than
/// [`IDLE_BACKSTOP_NS`] overdue, it breaks the poller's wait and wakes an M; if sockets
/// have waiters and nobody has polled for [`NETPOLL_BACKSTOP_NS`] while no M is in the
/// poller, it polls and wakes an M, which ends up in the poller. Returns how long sysmon
/// may sleep before looking again (None: until poked), so that an idle runtime that
/// waits on an M in the poller costs no CPU.
fn idle_backstop(rt: &Runtime, now: i64) -> Option<i64> {
    let earliest = timers::earliest();
    let in_poller = rt.netpoll.busy();
    let mut wake = false;
    if earliest != 0 && now - earliest > IDLE_BACKSTOP_NS {
        rt.netpoll.notify();
        wake = true;
    }
    let unwatched = rt.netpoll.has_waiters() && !in_poller;
    if unwatched && now - rt.netpoll.last_poll() > NETPOLL_BACKSTOP_NS {
        poll_into_global(rt);
        wake = true;
    }
    if wake {
        super::wakep();
    }
    let mut timeout = None;
    if earliest != 0 {
        // Saturating: `earliest` may be MAX_WHEN (a timer at the end of time).
        timeout = Some((earliest.saturating_add(IDLE_BACKSTOP_NS) - now).max(IDLE_BACKSTOP_NS));
    }
    if unwatched || (earliest != 0 && !in_poller) {
        // Nobody in the poller yet: normally an M is on its way there; look again soon.
        timeout = Some(timeout.map_or(IDLE_BACKSTOP_NS, |t| t.min(IDLE_BACKSTOP_NS)));
    }
    timeout
}

/// A non-blocking poll whose readied coroutines go on the global queue (the caller
/// wakes an M for them). Returns how many it readied.
fn poll_into_global(rt: &Runtime) -> usize {
    let mut woken = Vec::new();
    rt.netpoll.poll_now(&mut woken);
    super::schedule::inject_global(&mut woken)
}

/// Sleeps `ns` (None: until poked) on the wake pipe; handles what the pipe says.
/// Returns whether it was poked.
fn sleep(ns: Option<i64>) -> bool {
    // `start` set the read end before it spawned sysmon.
    let Some(r) = PIPE_R.get() else {
        return false;
    };
    let rfd: RawFd = r.as_raw_fd();
    // ppoll, not poll: a timeout in nanoseconds.
    let ts = ns.map(|n| TimeSpec::from_duration(Duration::from_nanos(n.max(0) as u64)));
    let mut pfd = [PollFd::new(r.as_fd(), PollFlags::POLLIN)];
    let n = nix::poll::ppoll(&mut pfd, ts, None).unwrap_or(0);
    if n > 0 {
        let mut buf = [0u8; 64];
        // From our non-blocking pipe.
        let got = crate::sys::read(rfd, &mut buf).unwrap_or(0);
        if buf[..got].contains(&b'Q') && sigquit_dumps() {
            let dump = super::dump::dump(super::dump::Layout::from_env());
            let _ = writeln!(std::io::stderr().lock(), "SIGQUIT: quit\n\n{dump}");
            std::process::exit(2);
        }
        // A P that merely started running ('R') asks for a look, not for close watch.
        return got > 0 && buf[..got as usize].iter().any(|&b| b != b'R');
    }
    false
}

/// Retakes Ps stuck in blocking calls and flags long-running coroutines. Returns
/// whether it retook a P, and whether a P's preempt flag is (still) set.
fn retake(rt: &Runtime, now: i64, procs: usize, seen: &mut [Seen]) -> (bool, bool, Option<i64>) {
    let mut acted = false;
    let mut any_preempt = false;
    let mut watch: Option<i64> = None;
    for (id, s) in seen.iter_mut().enumerate().take(procs) {
        let p = rt.p(id);
        match p.status() {
            PStatus::Syscall => {
                // Relaxed: compared with the last round's value only; the CAS below is
                // what takes the P.
                let t = p.syscall_tick.load(Ordering::Relaxed);
                if t != s.syscall_tick {
                    s.syscall_tick = t;
                    s.syscall_when = now;
                    continue;
                }
                if now - s.syscall_when < RETAKE_AFTER_NS {
                    continue;
                }
                // Not worth it if the P has nothing queued and others can pick up new
                // work, unless the call has gone on for long (its timers need a P).
                let others = rt.spinning.nmspinning() + rt.spinning.npidle() > 0;
                if runq_empty(p) && others && now - s.syscall_when < PREEMPT_AFTER_NS {
                    continue;
                }
                if p.cas_status(PStatus::Syscall, PStatus::Idle) {
                    super::schedule::handoffp(p);
                    acted = true;
                }
            }
            PStatus::Running => {
                // Relaxed: the tick and the preempt flag are hints (Go's schedtick and preempt are
                // plain fields); a stale tick delays a preemption by one sysmon round.
                let t = p.tick_pub.load(Ordering::Relaxed);
                // A new holder (a retake's hand-off, or any acquire) starts a slice of
                // its own, even if it runs on an inherited one (`runnext`): it must not
                // be judged by its predecessor's run.
                let epoch = p.retake.epoch();
                let fresh = t != s.sched_tick || epoch != s.epoch;
                if fresh {
                    // It schedules (or changed hands): a new slice. Its first sample
                    // is taken below, with no hurry for a second (rounds stay
                    // RETAKE_WATCH_NS apart, so a busy program costs sysmon no more).
                    s.sched_tick = t;
                    s.epoch = epoch;
                    s.sched_when = now;
                    s.slice_since = now;
                    s.cpu = None;
                    s.asked_at = None;
                    s.asked_cpu = None;
                    s.resample_at = None;
                } else if now - s.sched_when >= PREEMPT_AFTER_NS {
                    s.asked_at.get_or_insert(now);
                    // Relaxed: a hint, as above.
                    p.preempt.store(true, Ordering::Relaxed);
                    s.sched_when = now; // ask again in another slice if need be
                }
                let due = fresh || s.resample_at.map_or(true, |at| now >= at);
                if due && retake_running(p, s, t, now, fresh) {
                    acted = true;
                    continue;
                }
                // Look again at the second look if one is wanted, and at least every
                // RETAKE_WATCH_NS.
                let w = match s.resample_at {
                    Some(at) => (at - now).clamp(0, RETAKE_WATCH_NS),
                    None => RETAKE_WATCH_NS,
                };
                watch = Some(watch.map_or(w, |x| x.min(w)));
                any_preempt |= p.preempt.load(Ordering::Relaxed); // Relaxed: a hint
            }
            _ => {}
        }
    }
    // Relaxed: a hint (see `PREEMPT_ANY`).
    PREEMPT_ANY.store(any_preempt, Ordering::Relaxed);
    (acted, any_preempt, watch)
}

/// Looks at a running P (tick `t`, held with `s.epoch` since `s.slice_since`; `fresh`:
/// sysmon sees this slice for the first time, and only takes a first sample): if its
/// holder is outside goro and its thread has not used the CPU since the last sample
/// (blocked in the kernel: a sleep, a futex, a socket, a disk, foreign code), or
/// has run user code for `PREEMPT_GRACE_NS` past the preempt request, takes
/// the P and hands it to another M (see "the retake handshake" in `p.rs`). Returns
/// whether it did.
fn retake_running(p: &'static super::p::P, s: &mut Seen, t: u32, now: i64, fresh: bool) -> bool {
    let Some((_, owner)) = p.owner.lock().clone() else {
        return false;
    };
    // Relaxed: a hint for whether to sample; the handshake below decides.
    let outside = owner.outside.load(Ordering::Relaxed) != 0;
    // The thread's CPU clock (a system call) only where it is used: a holder outside
    // goro, and the first sample after a request to yield.
    let first_after_ask = s.asked_at.is_some() && s.asked_cpu.is_none();
    let cpu = if outside || first_after_ask {
        owner.cpu_ns()
    } else {
        None
    };
    if first_after_ask {
        s.asked_cpu = cpu;
    }
    if !outside {
        // Inside goro now (looking for work, or a goro call that does not schedule): it
        // will schedule or park soon. Look again at the next round.
        if let Some(addr) = s.deferred.take() {
            super::convoy::moved(addr, now);
        }
        s.cpu = None;
        s.resample_at = None;
        return false;
    }
    // The thread's CPU time since the last sample, and the time that has passed.
    let since = match (s.cpu, cpu) {
        (Some((c, at)), Some(n)) => Some((n - c, now - at)),
        _ => None,
    };
    // Stood still past RETAKE_AFTER_NS, and not merely waiting for a CPU.
    let mut runnable = false;
    let mut futex = None;
    let blocked = match since {
        Some((0, elapsed)) if elapsed >= RETAKE_AFTER_NS => match owner.kernel_wait() {
            InKernel::Runnable => {
                runnable = true;
                false
            }
            InKernel::Asleep => true,
            InKernel::Futex(addr) => {
                futex = Some(addr);
                true
            }
        },
        _ => false,
    };
    if let Some(addr) = s.deferred.filter(|&a| futex != Some(a)) {
        // The waiter sysmon left its P to got through (it runs, or waits elsewhere).
        super::convoy::moved(addr, now);
        s.deferred = None;
    }
    // Asked to yield PREEMPT_GRACE_NS ago, and it has run that long since (by its own
    // CPU clock, from the first sample after the request): a thread that waited for a
    // CPU meanwhile (an oversubscribed machine, or sysmon itself late to look) had no
    // chance to honour the request yet, and taking its P would only add a thread to the
    // crowd.
    let ignores_preempt = s.asked_at.is_some_and(|at| now - at >= PREEMPT_GRACE_NS)
        && match (cpu, s.asked_cpu) {
            (Some(c), Some(c0)) => c - c0 >= PREEMPT_GRACE_NS,
            _ => true,
        };
    if let Some(addr) = futex.filter(|&a| !ignores_preempt && super::convoy::defer(a, now)) {
        // A waiter on a moving lock, with enough Ms out already: it gets the lock soon,
        // and a new M would only queue behind it (see `convoy`). Look again shortly.
        s.deferred = Some(addr);
        s.resample_at = Some(now + super::convoy::LOOK_AGAIN_NS);
        s.cpu = cpu.map(|n| (n, now));
        return false;
    }
    if blocked || ignores_preempt {
        let unchanged =
            || p.tick_pub.load(Ordering::Relaxed) == t && p.status() == PStatus::Running;
        // The holder of the epoch requested (not necessarily `owner`, sampled above).
        let mut taken_from = None;
        let holder = |epoch| match &*p.owner.lock() {
            Some((e, m)) if *e == epoch && epoch == s.epoch => {
                taken_from = Some(m.clone());
                // Before the commit, which publishes it to the M (`convoy::mark`).
                if let Some(addr) = futex {
                    super::convoy::mark(m, addr);
                }
                Some(super::m::OutsideOf(m.clone()))
            }
            _ => None,
        };
        let taken = super::p::try_retake(&p.retake, holder, unchanged);
        if !taken && futex.is_some() {
            if let Some(m) = &taken_from {
                super::convoy::unmark(m);
            }
        }
        s.deferred = None;
        if taken {
            // The P is ours: hand it on (the holder learns at its next goro call).
            if let Some(m) = taken_from {
                let why = if blocked {
                    super::m::LOST_BLOCKED
                } else {
                    super::m::LOST_COMPUTING
                };
                // Relaxed: for the dump.
                m.lost_p_why.store(why, Ordering::Relaxed);
                m.lost_p_at.store(now, Ordering::Relaxed);
            }
            p.transition(PStatus::Running, PStatus::Idle, Ordering::Relaxed);
            super::schedule::handoffp(p);
            return true;
        }
    }
    // A second look RETAKE_AFTER_NS from now after a first sample, or if the thread
    // did not use the CPU all the time since the last one (it may have blocked since);
    // else at the next round. A thread found runnable waits for a CPU: no hurry, or
    // sysmon would spin beside an oversubscribed machine.
    s.resample_at = match (cpu, since) {
        _ if fresh => None,
        (Some(_), None) => Some(now + RETAKE_AFTER_NS),
        (Some(_), Some((used, elapsed))) if !runnable && used < elapsed / 10 * 9 => {
            Some(now + RETAKE_AFTER_NS)
        }
        _ => None,
    };
    s.cpu = cpu.map(|n| (n, now));
    false
}

/// Whether nothing can ever wake anything (see "deadlock"), but for a coroutine that
/// runs without a P: everything except the scan of `no_g_runs`.
fn nothing_pending(rt: &Runtime) -> bool {
    // Acquire: pairs with the threads' Release RMWs (see `KNOWN_THREADS`).
    let known = KNOWN_THREADS.load(Ordering::Acquire);
    let waiting = WAITING_THREADS.load(Ordering::Acquire);
    waiting > 0
        && waiting == known
        && rt.injector.is_empty()
        && !super::schedule::work_queued(rt)
        && timers::earliest() == 0
        && rt.netpoll.registered() == 0
        && !rt.netpoll.has_waiters()
}

/// Whether `tid` is one of goro's threads: sysmon or an M.
fn goro_thread(rt: &Runtime, tid: i32) -> bool {
    // Relaxed: written by this thread (`run`).
    tid == SYSMON_TID.load(Ordering::Relaxed) || rt.allm.lock().iter().any(|m| m.tid == tid)
}

/// Whether no coroutine runs or is in a blocking call (a scan of all of them).
fn no_g_runs(rt: &Runtime) -> bool {
    count_gs(rt, |s| matches!(s, GStatus::Running | GStatus::Syscall)) == 0
}

/// How many live coroutines have a status `want` accepts (a scan of all of them: for
/// the deadlock check, when every P is idle, and the trace).
fn count_gs(rt: &Runtime, want: impl Fn(GStatus) -> bool) -> usize {
    let mut n = 0;
    rt.allgs.for_each(|g| n += want(g.status()) as usize);
    n
}

/// Something that moves whenever anything runs: the Ps' scheduling ticks and the
/// count of live coroutines.
fn progress_mark(rt: &Runtime, procs: usize) -> u64 {
    // Relaxed: hints compared across sightings (see `P::tick_pub`).
    let ticks: u64 = (0..procs)
        .map(|id| rt.p(id).tick_pub.load(Ordering::Relaxed) as u64)
        .sum();
    ticks
        .wrapping_mul(1_000_003)
        .wrapping_add(super::num_goroutines() as u64)
}

fn report_deadlock() -> ! {
    let dump = super::dump::dump(super::dump::Layout::from_env());
    let _ = writeln!(
        std::io::stderr().lock(),
        "fatal error: all coroutines are asleep - deadlock!\n\n{dump}"
    );
    std::process::exit(2);
}

/// One GODEBUG=schedtrace-style line.
fn schedtrace(rt: &Runtime, since_start: i64) {
    let procs = rt.procs();
    let mut line = format!(
        "SCHED {}ms: gomaxprocs={} idleprocs={} threads={} spinningthreads={} idlethreads={} blockingcalls={} runqueue={} coroutines={}",
        since_start / 1_000_000,
        procs,
        rt.spinning.npidle(),
        rt.nm_alive.load(Ordering::Relaxed) + 1, // Relaxed: a count for the trace
        rt.spinning.nmspinning(),
        rt.sched.lock().idle_ms.len(),
        count_gs(rt, |s| s == GStatus::Syscall),
        rt.injector.len(),
        super::num_goroutines(),
    );
    for id in 0..procs {
        let p = rt.p(id);
        let status = match p.status() {
            PStatus::Idle => "idle",
            PStatus::Running => "running",
            PStatus::Syscall => "syscall",
            PStatus::Dead => "dead",
        };
        line.push_str(&format!(
            " [P{id}: {status} runq={} next={}]",
            p.stealer.len(),
            !p.runnext.peek().is_null() as u8
        ));
    }
    eprintln!("{line}");
}

/// Whether the SIGQUIT dump is off: `goro::signal` subscribers take SIGQUIT (Go: a
/// `signal.Notify` for SIGQUIT disables the default behaviour). Written by
/// `set_sigquit_dump`; read by the handler and by sysmon before it dumps (Relaxed: a
/// lone flag; a signal racing a subscription may go either way, as in Go).
static SIGQUIT_DUMP_OFF: AtomicBool = AtomicBool::new(false);

/// Turns the SIGQUIT dump off (`goro::signal` has a SIGQUIT subscriber) or back on.
pub(crate) fn set_sigquit_dump(on: bool) {
    // Relaxed: see the static.
    SIGQUIT_DUMP_OFF.store(!on, Ordering::Relaxed);
}

/// Whether SIGQUIT dumps now.
fn sigquit_dumps() -> bool {
    // Relaxed: see the static.
    !SIGQUIT_DUMP_OFF.load(Ordering::Relaxed)
}

/// Whether `install_sigquit` installed the dump. Written once by it, before any
/// signal it handles can come; read by `sigquit_dump_now` (Relaxed: a lone flag).
static SIGQUIT_INSTALLED: AtomicBool = AtomicBool::new(false);

/// Asks sysmon for the SIGQUIT dump and exit, as if SIGQUIT had come, if the dump is
/// installed (for `goro::signal`, when a SIGQUIT finds only dropped subscribers).
pub(crate) fn sigquit_dump_now() {
    // Relaxed: see the static.
    if SIGQUIT_INSTALLED.load(Ordering::Relaxed) {
        poke(b'Q');
    }
}

/// Routes SIGQUIT to sysmon (a byte on the wake pipe), if the program had left it at
/// its default: through signal-hook-registry, so that handlers registered there
/// (`goro::signal`'s, other libraries') run beside this one.
fn install_sigquit() {
    // SAFETY: querying the signal action into a zeroed struct we own.
    let default = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGQUIT, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_DFL
    };
    if !default {
        return; // the program has its own plans for SIGQUIT
    }
    // SAFETY: the action is async-signal-safe: a relaxed load and write(2).
    let r = unsafe {
        signal_hook_registry::register(libc::SIGQUIT, || {
            if sigquit_dumps() {
                poke(b'Q');
            }
        })
    };
    match r {
        // Relaxed: see the static.
        Ok(_) => SIGQUIT_INSTALLED.store(true, Ordering::Relaxed),
        Err(e) => eprintln!("goro: sysmon: cannot install the SIGQUIT dump: {e}"),
    }
}
