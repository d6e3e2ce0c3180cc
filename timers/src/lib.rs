//! Timer heaps for the goro runtime.
//!
//! This crate is the pure data-structure half of goro's timers: a
//! [`TimerHeap`] ordered by deadline, and the arithmetic rules in [`rules`]
//! that every timer obeys. It has no threads, no locks and no clock, and it
//! contains no unsafe code; the runtime supplies the clock readings and the
//! synchronization.
//!
//! # The rules
//!
//! They follow the Go runtime's timer rules (including its strict checking
//! of deadlines and periods):
//!
//! 1. Time is an `i64` count of nanoseconds on a monotonic clock chosen by
//!    the runtime. Clock readings and deadlines (`when`) are always positive.
//! 2. A deadline must be positive and a period non-negative: adding or
//!    modifying a timer with `when <= 0` panics with
//!    `"timer when must be positive"`, and with `period < 0` panics with
//!    `"timer period must be non-negative"` ([`check_when`],
//!    [`check_period`]). The checks run before anything else, so bad input
//!    panics even when it targets a stale timer.
//! 3. A period of zero means a one-shot timer; a positive period means a
//!    periodic timer (a ticker).
//! 4. Deadline arithmetic never wraps: a deadline that would overflow is
//!    pinned at [`MAX_WHEN`] (`i64::MAX`). [`when_after`]`(now, d)` is
//!    `now + d`, so for example `Duration::MAX` gives `MAX_WHEN`.
//! 5. A timer is due when its deadline is `<= now`. A timer at `MAX_WHEN`
//!    means "never" and does not fire.
//! 6. When a periodic timer fires, its next deadline is the first one of the
//!    form `when + k * period` strictly after `now`, computed in one step
//!    ([`next_periodic_when`]): a ticker that fell behind fires once, not
//!    once per missed period. Overflow pins it at `MAX_WHEN`.
//! 7. Timers with equal deadlines fire in an unspecified order.
//!
//! # How the runtime uses it
//!
//! The runtime keeps one `TimerHeap` per P (processor), each behind its own
//! lock, and stores in each timer whatever it needs to run it (typically a
//! function to call and its argument). To run the timers due on a P it
//! repeats:
//!
//! 1. take the heap's lock and read the clock (`now`);
//! 2. call [`TimerHeap::pop_due`]`(now)`: it fires at most one timer,
//!    removing a one-shot timer or rescheduling a periodic one;
//! 3. release the lock;
//! 4. if a timer fired, run its function, then go back to 1; otherwise stop
//!    (and use [`TimerHeap::peek_when`] to decide how long to sleep).
//!
//! Timer functions must run with the heap's lock released. A timer's
//! function may itself need the timer lock (to reset a timer, or to stop
//! one), and code elsewhere takes other locks before the timer lock: socket
//! deadlines, for example, take the poll descriptor's lock and then the
//! timer lock to arm a deadline timer, while the deadline timer's function
//! takes the poll descriptor's lock. Calling that function while holding the
//! timer lock takes the two locks in the opposite order and can deadlock
//! (Go issue 35532). Popping one timer at a time, rather than collecting all
//! due timers under the lock, also lets a function's effect on the heap
//! (deleting or modifying another due timer) be seen by the next pop.
//!
//! ```
//! use goro_timers::{when_after, TimerHeap};
//! use std::time::Duration;
//!
//! let mut heap = TimerHeap::new();
//! let now = 1_000;
//! let tick = heap.add(when_after(now, Duration::from_nanos(10)), 10, "tick");
//! heap.add(when_after(now, Duration::from_nanos(15)), 0, "once");
//!
//! let mut ran = Vec::new();
//! // In the runtime: lock, pop one, unlock, run it, repeat.
//! while let Some(fired) = heap.pop_due(1_025) {
//!     ran.push((fired.when, fired.data));
//! }
//! assert_eq!(ran, [(1_010, "tick"), (1_015, "once")]);
//! // The ticker skipped the missed deadline 1_020 and is due next at 1_030.
//! assert_eq!(heap.get(tick).map(|(when, _, _)| when), Some(1_030));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod heap;
pub mod rules;

pub use heap::{Fired, TimerHeap, TimerKey};
pub use rules::{check_period, check_when, next_periodic_when, when_after, MAX_WHEN};
