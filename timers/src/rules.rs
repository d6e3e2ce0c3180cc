//! The arithmetic rules every timer obeys.
//!
//! Time is an `i64` count of nanoseconds on a monotonic clock chosen by the
//! caller. Clock readings (`now`) and deadlines (`when`) are always positive.
//! Deadlines that would overflow are pinned at [`MAX_WHEN`] instead of
//! wrapping around to the past, so "far in the future" can never turn into
//! "already expired".

use std::time::Duration;

/// The latest possible deadline, `i64::MAX` nanoseconds.
///
/// Every computation in this crate that would overflow yields `MAX_WHEN`.
/// A timer at `MAX_WHEN` means "never": no clock reading ever gets there in
/// practice (it is about 292 years after the clock's origin), and
/// [`TimerHeap::pop_due`](crate::TimerHeap::pop_due) never fires a timer
/// whose deadline is `MAX_WHEN`, whatever `now` it is given.
pub const MAX_WHEN: i64 = i64::MAX;

/// The deadline `d` after `now`: `now + d` in nanoseconds.
///
/// If `d` does not fit in an `i64` count of nanoseconds, or the sum
/// overflows, the result is pinned at [`MAX_WHEN`] (it never wraps). A zero
/// duration gives `now`.
///
/// `now` must be positive (checked in debug builds only).
pub fn when_after(now: i64, d: Duration) -> i64 {
    debug_assert!(now > 0, "when_after: now must be positive, got {now}");
    match i64::try_from(d.as_nanos()) {
        Ok(ns) => now.checked_add(ns).unwrap_or(MAX_WHEN),
        Err(_) => MAX_WHEN,
    }
}

/// The next deadline of a periodic timer that fired for deadline `when` at
/// clock reading `now`.
///
/// Returns the first deadline of the form `when + k * period` (`k >= 1`)
/// that lies strictly after `now`, computed in one step rather than by
/// stepping period by period, so a timer that fell far behind (for example
/// because the process was stopped) fires once and then catches up instead
/// of firing once per missed period:
/// `when + period * (1 + (now - when) / period)`.
///
/// Any overflow in that computation yields [`MAX_WHEN`].
///
/// Preconditions (checked in debug builds only): `when > 0`,
/// `period > 0` and `now >= when`. Because both `when` and `now` are
/// positive, `now - when` itself cannot overflow.
pub fn next_periodic_when(when: i64, period: i64, now: i64) -> i64 {
    debug_assert!(
        when > 0,
        "next_periodic_when: when must be positive, got {when}"
    );
    debug_assert!(
        period > 0,
        "next_periodic_when: period must be positive, got {period}"
    );
    debug_assert!(
        now >= when,
        "next_periodic_when: now ({now}) is before when ({when})"
    );
    let elapsed = now - when;
    (elapsed / period)
        .checked_add(1)
        .and_then(|periods| period.checked_mul(periods))
        .and_then(|delta| when.checked_add(delta))
        .unwrap_or(MAX_WHEN)
}

/// Panics with `"timer when must be positive"` if `when <= 0`.
///
/// [`TimerHeap::add`](crate::TimerHeap::add) and
/// [`TimerHeap::modify`](crate::TimerHeap::modify) call this before doing
/// anything else; the runtime may call it to validate input early.
#[track_caller]
pub fn check_when(when: i64) {
    if when <= 0 {
        panic!("timer when must be positive");
    }
}

/// Panics with `"timer period must be non-negative"` if `period < 0`.
///
/// A period of zero means a one-shot timer. Called by
/// [`TimerHeap::add`](crate::TimerHeap::add) and
/// [`TimerHeap::modify`](crate::TimerHeap::modify) before anything else.
#[track_caller]
pub fn check_period(period: i64) {
    if period < 0 {
        panic!("timer period must be non-negative");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reference for `next_periodic_when` computed in `i128`, where nothing
    /// can overflow, then pinned.
    fn wide_next(when: i64, period: i64, now: i64) -> i64 {
        let (w, p, n) = (i128::from(when), i128::from(period), i128::from(now));
        let next = w + p * (1 + (n - w) / p);
        i64::try_from(next).unwrap_or(MAX_WHEN)
    }

    #[test]
    fn max_when_is_i64_max() {
        assert_eq!(MAX_WHEN, i64::MAX);
    }

    #[test]
    fn when_after_adds() {
        assert_eq!(when_after(1, Duration::from_nanos(1)), 2);
        assert_eq!(when_after(100, Duration::from_secs(1)), 1_000_000_100);
        assert_eq!(when_after(7, Duration::from_nanos(0)), 7);
        assert_eq!(when_after(7, Duration::ZERO), 7);
        assert_eq!(when_after(i64::MAX, Duration::ZERO), i64::MAX);
    }

    #[test]
    fn when_after_pins_duration_max() {
        assert_eq!(when_after(1, Duration::MAX), MAX_WHEN);
        assert_eq!(when_after(1_000_000, Duration::MAX), MAX_WHEN);
        assert_eq!(when_after(i64::MAX, Duration::MAX), MAX_WHEN);
    }

    #[test]
    fn when_after_pins_sum_overflow() {
        assert_eq!(when_after(i64::MAX - 5, Duration::from_nanos(10)), MAX_WHEN);
        assert_eq!(when_after(i64::MAX - 5, Duration::from_nanos(5)), MAX_WHEN);
        assert_eq!(
            when_after(i64::MAX - 5, Duration::from_nanos(4)),
            i64::MAX - 1
        );
        assert_eq!(
            when_after(2, Duration::from_nanos(i64::MAX as u64)),
            MAX_WHEN
        );
        assert_eq!(
            when_after(1, Duration::from_nanos(i64::MAX as u64 - 1)),
            i64::MAX
        );
    }

    #[test]
    fn when_after_pins_duration_just_past_i64() {
        // i64::MAX + 1 nanoseconds does not fit in an i64 at all.
        let d = Duration::from_nanos(i64::MAX as u64) + Duration::from_nanos(1);
        assert_eq!(when_after(1, d), MAX_WHEN);
        assert_eq!(when_after(1, Duration::from_nanos(u64::MAX)), MAX_WHEN);
    }

    #[test]
    fn next_periodic_when_one_period() {
        assert_eq!(next_periodic_when(10, 5, 10), 15);
        assert_eq!(next_periodic_when(10, 5, 11), 15);
        assert_eq!(next_periodic_when(10, 5, 14), 15);
        assert_eq!(next_periodic_when(1, 1, 1), 2);
    }

    #[test]
    fn next_periodic_when_skips_several_periods_in_one_step() {
        // Exactly on a later boundary: that boundary is not "after now".
        assert_eq!(next_periodic_when(10, 5, 15), 20);
        assert_eq!(next_periodic_when(10, 5, 30), 35);
        assert_eq!(next_periodic_when(10, 5, 33), 35);
        assert_eq!(next_periodic_when(100, 7, 1_000), 1_003);
        let sec = 1_000_000_000;
        assert_eq!(next_periodic_when(sec, sec, 3600 * sec + 1), 3601 * sec);
    }

    #[test]
    fn next_periodic_when_is_strictly_after_now() {
        for when in 1..40 {
            for period in 1..12 {
                for now in when..when + 60 {
                    let next = next_periodic_when(when, period, now);
                    assert!(next > now, "{when} {period} {now} -> {next}");
                    assert!(next - period <= now, "{when} {period} {now} -> {next}");
                    assert_eq!((next - when) % period, 0);
                    assert_eq!(next, wide_next(when, period, now));
                }
            }
        }
    }

    #[test]
    fn next_periodic_when_max_period_fired_immediately() {
        // A ticker with period i64::MAX whose first deadline is "now":
        // the next deadline is far beyond the end of time, so it pins.
        assert_eq!(next_periodic_when(1, i64::MAX, 1), MAX_WHEN);
        assert_eq!(next_periodic_when(5, i64::MAX, 5), MAX_WHEN);
        assert_eq!(next_periodic_when(5, i64::MAX, 1_000), MAX_WHEN);
    }

    #[test]
    fn next_periodic_when_overflow_cases_match_wide_arithmetic() {
        let big = [
            i64::MAX,
            i64::MAX - 1,
            i64::MAX / 2,
            i64::MAX / 2 + 1,
            i64::MAX / 3,
            1 << 62,
        ];
        let small = [1i64, 2, 3, 10, 1_000];
        let mut whens: Vec<i64> = small.to_vec();
        whens.extend(big);
        let mut periods: Vec<i64> = small.to_vec();
        periods.extend(big);
        for &when in &whens {
            for &period in &periods {
                for now in [
                    when,
                    when.saturating_add(1),
                    when.saturating_add(period / 2),
                    i64::MAX - 1,
                    i64::MAX,
                ] {
                    if now < when {
                        continue;
                    }
                    assert_eq!(
                        next_periodic_when(when, period, now),
                        wide_next(when, period, now),
                        "when={when} period={period} now={now}"
                    );
                }
            }
        }
    }

    #[test]
    fn next_periodic_when_pins_near_the_end() {
        // Would land exactly on i64::MAX: fits, no pinning needed.
        assert_eq!(
            next_periodic_when(i64::MAX - 10, 10, i64::MAX - 10),
            i64::MAX
        );
        // One past: pinned.
        assert_eq!(
            next_periodic_when(i64::MAX - 10, 11, i64::MAX - 10),
            MAX_WHEN
        );
        // The multiplication overflows even though the final sum would not
        // be the problem on its own.
        assert_eq!(
            next_periodic_when(1, i64::MAX / 2 + 1, i64::MAX / 2 + 2),
            MAX_WHEN
        );
        // Reaching past the end by skipping periods (2 + 3k is never
        // i64::MAX, which is 1 modulo 3, so the true value exceeds it).
        assert_eq!(next_periodic_when(2, 3, i64::MAX - 1), MAX_WHEN);
        assert_eq!(wide_next(2, 3, i64::MAX - 1), MAX_WHEN);
    }

    #[test]
    fn check_when_accepts_positive() {
        check_when(1);
        check_when(i64::MAX);
    }

    #[test]
    #[should_panic(expected = "timer when must be positive")]
    fn check_when_rejects_zero() {
        check_when(0);
    }

    #[test]
    #[should_panic(expected = "timer when must be positive")]
    fn check_when_rejects_negative() {
        check_when(i64::MIN);
    }

    #[test]
    fn check_period_accepts_non_negative() {
        check_period(0);
        check_period(1);
        check_period(i64::MAX);
    }

    #[test]
    #[should_panic(expected = "timer period must be non-negative")]
    fn check_period_rejects_negative() {
        check_period(-1);
    }

    #[test]
    #[should_panic(expected = "timer period must be non-negative")]
    fn check_period_rejects_min() {
        check_period(i64::MIN);
    }
}
