//! Model-based tests: `TimerHeap` against a plain reference model that
//! implements the timer rules independently (wide `i128` arithmetic instead
//! of checked `i64`, and a linear scan instead of a heap).

use goro_timers::{when_after, Fired, TimerHeap, TimerKey, MAX_WHEN};
use proptest::prelude::*;
use proptest::sample::Index;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

// ---------------------------------------------------------------------------
// Reference model
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelTimer {
    when: i64,
    period: i64,
    data: u64,
}

/// Pins an exact (`i128`) deadline into the `i64` range.
fn pin(exact: i128) -> i64 {
    if exact > i128::from(MAX_WHEN) {
        MAX_WHEN
    } else {
        i64::try_from(exact).expect("deadline below i64::MIN")
    }
}

/// The model's own rule for rescheduling a periodic timer: the first
/// `when + k * period`, `k >= 1`, strictly after `now`, found by exact
/// arithmetic and then pinned.
fn model_next_when(when: i64, period: i64, now: i64) -> i64 {
    let (w, p, n) = (i128::from(when), i128::from(period), i128::from(now));
    assert!(p > 0 && n >= w);
    let k = (n - w) / p + 1;
    let next = w + k * p;
    assert!(next > n && next - p <= n);
    pin(next)
}

#[derive(Default, Debug)]
struct Model {
    timers: HashMap<TimerKey, ModelTimer>,
}

impl Model {
    /// The earliest deadline among all timers and the keys that have it.
    fn earliest(&self) -> Option<(i64, Vec<TimerKey>)> {
        let min = self.timers.values().map(|t| t.when).min()?;
        let keys = self
            .timers
            .iter()
            .filter(|(_, t)| t.when == min)
            .map(|(k, _)| *k)
            .collect();
        Some((min, keys))
    }

    /// Like `earliest`, restricted to timers that are due at `now`
    /// (`when <= now`, and `MAX_WHEN` never fires).
    fn earliest_due(&self, now: i64) -> Option<(i64, Vec<TimerKey>)> {
        self.earliest()
            .filter(|(when, _)| *when <= now && *when != MAX_WHEN)
    }

    /// Applies the firing of `key` at `now`.
    fn fire(&mut self, key: TimerKey, now: i64) {
        let t = self.timers.get_mut(&key).unwrap();
        if t.period == 0 {
            self.timers.remove(&key);
        } else {
            t.when = model_next_when(t.when, t.period, now);
        }
    }
}

/// Checks one fired timer against the model and applies it there.
#[track_caller]
fn check_fired(model: &mut Model, fired: &Fired<u64>, now: i64) {
    let (when, candidates) = model
        .earliest_due(now)
        .unwrap_or_else(|| panic!("heap fired {fired:?} at now={now}, model has nothing due"));
    assert_eq!(
        fired.when, when,
        "fired deadline is not the model's earliest due"
    );
    assert!(
        candidates.contains(&fired.key),
        "fired {fired:?} is not among the model's earliest ({candidates:?})"
    );
    let t = model.timers[&fired.key];
    assert_eq!(fired.data, t.data);
    assert_eq!(fired.periodic, t.period > 0);
    model.fire(fired.key, now);
}

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum WhenSpec {
    /// `now + offset`, at least 1: often in the past, often tied.
    Rel(i64),
    /// `when_after(now, d)` for a duration of `d` nanoseconds.
    After(u64),
    /// `when_after(now, Duration::MAX)`, that is `MAX_WHEN`.
    DurationMax,
    /// `MAX_WHEN - k`.
    NearMax(i64),
}

#[derive(Clone, Debug)]
enum PeriodSpec {
    Zero,
    Small(i64),
    /// `i64::MAX - k`.
    Huge(i64),
    /// `i64::MAX / 2 + k`, where doubling overflows.
    Half(i64),
}

#[derive(Clone, Debug)]
enum Advance {
    Small(i64),
    Big(i64),
    /// Jump to at least `MAX_WHEN - k`.
    ToEnd(i64),
}

#[derive(Clone, Debug)]
enum Op {
    Add(WhenSpec, PeriodSpec),
    Modify(Index, WhenSpec, PeriodSpec),
    Delete(Index),
    SetData(Index, u64),
    Peek,
    PopDue(Advance),
    DrainDue(Advance),
}

fn when_spec() -> impl Strategy<Value = WhenSpec> {
    prop_oneof![
        12 => (-8i64..=24).prop_map(WhenSpec::Rel),
        2 => prop_oneof![
            0u64..=40,
            Just(u64::MAX),
            Just(i64::MAX as u64),
            (0u64..=4).prop_map(|k| i64::MAX as u64 - k),
        ]
        .prop_map(WhenSpec::After),
        1 => Just(WhenSpec::DurationMax),
        1 => (0i64..=3).prop_map(WhenSpec::NearMax),
    ]
}

fn period_spec() -> impl Strategy<Value = PeriodSpec> {
    prop_oneof![
        8 => Just(PeriodSpec::Zero),
        6 => (1i64..=12).prop_map(PeriodSpec::Small),
        1 => (0i64..=2).prop_map(PeriodSpec::Huge),
        1 => (0i64..=2).prop_map(PeriodSpec::Half),
    ]
}

fn advance() -> impl Strategy<Value = Advance> {
    prop_oneof![
        30 => (0i64..=6).prop_map(Advance::Small),
        4 => (0i64..=2_000).prop_map(Advance::Big),
        1 => (0i64..=30).prop_map(Advance::ToEnd),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (when_spec(), period_spec()).prop_map(|(w, p)| Op::Add(w, p)),
        4 => (any::<Index>(), when_spec(), period_spec()).prop_map(|(i, w, p)| Op::Modify(i, w, p)),
        4 => any::<Index>().prop_map(Op::Delete),
        1 => (any::<Index>(), any::<u64>()).prop_map(|(i, d)| Op::SetData(i, d)),
        2 => Just(Op::Peek),
        6 => advance().prop_map(Op::PopDue),
        2 => advance().prop_map(Op::DrainDue),
    ]
}

/// Resolves a deadline spec at clock reading `now`, checking `when_after`
/// against exact arithmetic on the way.
fn resolve_when(spec: &WhenSpec, now: i64) -> i64 {
    match *spec {
        WhenSpec::Rel(off) => now.saturating_add(off).max(1),
        WhenSpec::After(ns) => {
            let got = when_after(now, Duration::from_nanos(ns));
            assert_eq!(got, pin(i128::from(now) + i128::from(ns)));
            got
        }
        WhenSpec::DurationMax => {
            let got = when_after(now, Duration::MAX);
            assert_eq!(got, MAX_WHEN);
            got
        }
        WhenSpec::NearMax(k) => MAX_WHEN - k,
    }
}

fn resolve_period(spec: &PeriodSpec) -> i64 {
    match *spec {
        PeriodSpec::Zero => 0,
        PeriodSpec::Small(p) => p,
        PeriodSpec::Huge(k) => i64::MAX - k,
        PeriodSpec::Half(k) => i64::MAX / 2 + k,
    }
}

fn advance_now(now: i64, adv: &Advance) -> i64 {
    match *adv {
        Advance::Small(d) | Advance::Big(d) => now.saturating_add(d),
        Advance::ToEnd(k) => now.max(MAX_WHEN - k),
    }
}

/// Compares everything observable about the heap with the model.
#[track_caller]
fn compare_state(heap: &TimerHeap<u64>, model: &Model, issued: &[TimerKey]) {
    heap.check_invariants();
    assert_eq!(heap.len(), model.timers.len());
    assert_eq!(heap.is_empty(), model.timers.is_empty());
    for key in issued {
        let want = model.timers.get(key);
        assert_eq!(heap.contains(*key), want.is_some(), "contains({key:?})");
        let got = heap.get(*key).map(|(w, p, d)| (w, p, *d));
        assert_eq!(
            got,
            want.map(|t| (t.when, t.period, t.data)),
            "get({key:?})"
        );
    }
    compare_peek(heap, model);
}

#[track_caller]
fn compare_peek(heap: &TimerHeap<u64>, model: &Model) {
    match (heap.peek(), model.earliest()) {
        (None, None) => assert_eq!(heap.peek_when(), None),
        (Some((key, when)), Some((min, keys))) => {
            assert_eq!(when, min);
            assert_eq!(heap.peek_when(), Some(min));
            assert!(keys.contains(&key), "peek {key:?} not among {keys:?}");
        }
        (got, want) => panic!("peek mismatch: heap {got:?}, model {want:?}"),
    }
}

fn run_ops(ops: &[Op]) {
    let mut heap: TimerHeap<u64> = TimerHeap::new();
    let mut model = Model::default();
    let mut issued: Vec<TimerKey> = Vec::new();
    let mut now: i64 = 1;
    let mut next_data: u64 = 0;

    for op in ops {
        match op {
            Op::Add(w, p) => {
                let when = resolve_when(w, now);
                let period = resolve_period(p);
                next_data += 1;
                let key = heap.add(when, period, next_data);
                assert!(!issued.contains(&key), "key {key:?} issued twice");
                issued.push(key);
                model.timers.insert(
                    key,
                    ModelTimer {
                        when,
                        period,
                        data: next_data,
                    },
                );
            }
            Op::Modify(i, w, p) => {
                if issued.is_empty() {
                    continue;
                }
                let key = *i.get(&issued);
                let when = resolve_when(w, now);
                let period = resolve_period(p);
                let live = heap.modify(key, when, period);
                match model.timers.get_mut(&key) {
                    Some(t) => {
                        assert!(live, "modify of live {key:?} returned false");
                        t.when = when;
                        t.period = period;
                    }
                    None => assert!(!live, "modify of stale {key:?} returned true"),
                }
            }
            Op::Delete(i) => {
                if issued.is_empty() {
                    continue;
                }
                let key = *i.get(&issued);
                let got = heap.delete(key);
                let want = model.timers.remove(&key).map(|t| t.data);
                assert_eq!(got, want, "delete({key:?})");
            }
            Op::SetData(i, d) => {
                if issued.is_empty() {
                    continue;
                }
                let key = *i.get(&issued);
                match (heap.get_mut(key), model.timers.get_mut(&key)) {
                    (Some(got), Some(t)) => {
                        assert_eq!(*got, t.data);
                        *got = *d;
                        t.data = *d;
                    }
                    (None, None) => {}
                    (got, want) => panic!("get_mut({key:?}): heap {got:?}, model {want:?}"),
                }
            }
            Op::Peek => compare_peek(&heap, &model),
            Op::PopDue(adv) => {
                now = advance_now(now, adv);
                match heap.pop_due(now) {
                    Some(fired) => check_fired(&mut model, &fired, now),
                    None => assert_eq!(
                        model.earliest_due(now),
                        None,
                        "heap fired nothing at now={now}"
                    ),
                }
            }
            Op::DrainDue(adv) => {
                now = advance_now(now, adv);
                let fired = heap.drain_due(now);
                for f in &fired {
                    check_fired(&mut model, f, now);
                }
                assert_eq!(
                    model.earliest_due(now),
                    None,
                    "drain left due timers at now={now}"
                );
                // Every periodic timer fires at most once per drain.
                let mut seen = BTreeSet::new();
                for f in fired.iter().filter(|f| f.periodic) {
                    assert!(seen.insert(f.key), "{:?} fired twice in one drain", f.key);
                }
            }
        }
        compare_state(&heap, &model, &issued);
    }
}

/// The number of proptest cases: `PROPTEST_CASES` if set (for example a
/// small number under Miri, or a large one for a soak run), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(128),
        max_shrink_iters: 2_000,
        ..ProptestConfig::default()
    })]

    #[test]
    fn heap_matches_model(ops in prop::collection::vec(op(), 1..300)) {
        run_ops(&ops);
    }
}

// ---------------------------------------------------------------------------
// Timers at MAX_WHEN never fire and do not disturb the others.
// ---------------------------------------------------------------------------

/// Sorted `(when, data)` pairs, so firings with equal deadlines compare as
/// multisets.
fn canonical(fired: &[Fired<u64>]) -> Vec<(i64, u64)> {
    let mut v: Vec<_> = fired.iter().map(|f| (f.when, f.data)).collect();
    v.sort();
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(64),
        ..ProptestConfig::default()
    })]

    #[test]
    fn max_when_timers_never_fire(
        normal in prop::collection::vec((1i64..=200, prop_oneof![Just(0i64), 1i64..=15]), 0..40),
        forever in prop::collection::vec(prop_oneof![Just(0i64), 1i64..=15, Just(i64::MAX)], 1..10),
        steps in prop::collection::vec(prop_oneof![8 => 0i64..=20, 1 => Just(i64::MAX)], 1..40),
    ) {
        let mut with: TimerHeap<u64> = TimerHeap::new();
        let mut without: TimerHeap<u64> = TimerHeap::new();
        for (i, &(when, period)) in normal.iter().enumerate() {
            with.add(when, period, i as u64);
            without.add(when, period, i as u64);
        }
        let mut never = Vec::new();
        for (i, &period) in forever.iter().enumerate() {
            let when = when_after(1 + i as i64, Duration::MAX);
            prop_assert_eq!(when, MAX_WHEN);
            never.push(with.add(when, period, 1_000_000 + i as u64));
        }
        let mut now = 1i64;
        for step in steps {
            // Stay finite: the last reading is MAX_WHEN - 1 at most.
            now = now.saturating_add(step).min(MAX_WHEN - 1);
            let a = with.drain_due(now);
            let b = without.drain_due(now);
            prop_assert!(a.iter().all(|f| f.data < 1_000_000), "a MAX_WHEN timer fired");
            prop_assert_eq!(canonical(&a), canonical(&b));
            with.check_invariants();
            prop_assert_eq!(with.len(), without.len() + never.len());
            for &k in &never {
                prop_assert_eq!(with.get(k).map(|(w, _, _)| w), Some(MAX_WHEN));
            }
            prop_assert_eq!(with.peek_when().is_some_and(|w| w > now), true);
        }
    }
}

#[test]
fn max_when_timer_alone_at_the_end_of_time() {
    let mut heap = TimerHeap::new();
    let k = heap.add(when_after(5, Duration::MAX), 3, 7u64);
    for now in [1, 5, 1 << 40, MAX_WHEN - 1, MAX_WHEN] {
        assert!(heap.pop_due(now).is_none());
        assert!(heap.drain_due(now).is_empty());
    }
    assert_eq!(heap.get(k), Some((MAX_WHEN, 3, &7)));
}

// ---------------------------------------------------------------------------
// A long run: 100k random operations against a cheap ordered model.
// ---------------------------------------------------------------------------

/// xorshift64*: deterministic, good enough to pick operations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Mostly one-shot; periodic timers only leave the heap when deleted or
/// modified, so keep them rare and slow to bound the work per step.
fn random_period(rng: &mut Rng) -> i64 {
    if rng.below(20) == 0 {
        1_000 + rng.below(5_000) as i64
    } else {
        0
    }
}

#[test]
fn hundred_thousand_random_ops() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut heap: TimerHeap<u64> = TimerHeap::new();
    // key -> (when, period, data), and the same ordered by deadline.
    let mut timers: BTreeMap<TimerKey, (i64, i64, u64)> = BTreeMap::new();
    let mut order: BTreeSet<(i64, TimerKey)> = BTreeSet::new();
    let mut issued: Vec<TimerKey> = Vec::new();
    let mut now = 1i64;
    let mut fired_count = 0u64;
    let mut max_len = 0;

    // Miri is far slower; the property tests cover the logic there.
    let steps = if cfg!(miri) { 2_000 } else { 100_000 };
    for step in 0..steps {
        match rng.below(100) {
            0..=39 => {
                let when = now + rng.below(5_000) as i64;
                let period = random_period(&mut rng);
                let key = heap.add(when, period, step);
                issued.push(key);
                timers.insert(key, (when, period, step));
                order.insert((when, key));
            }
            40..=54 => {
                let key = issued[rng.below(issued.len() as u64) as usize];
                let when = now + rng.below(5_000) as i64;
                let period = random_period(&mut rng);
                let live = heap.modify(key, when, period);
                assert_eq!(live, timers.contains_key(&key));
                if let Some(t) = timers.get_mut(&key) {
                    order.remove(&(t.0, key));
                    *t = (when, period, t.2);
                    order.insert((when, key));
                }
            }
            55..=69 => {
                let key = issued[rng.below(issued.len() as u64) as usize];
                let want = timers.remove(&key).map(|t| {
                    order.remove(&(t.0, key));
                    t.2
                });
                assert_eq!(heap.delete(key), want);
            }
            _ => {
                now += rng.below(60) as i64;
                while let Some(f) = heap.pop_due(now) {
                    fired_count += 1;
                    let &(min, _) = order.first().unwrap();
                    assert_eq!(f.when, min);
                    let (when, period, data) = timers[&f.key];
                    assert_eq!((f.when, f.data, f.periodic), (when, data, period > 0));
                    order.remove(&(when, f.key));
                    if period == 0 {
                        timers.remove(&f.key);
                    } else {
                        let next = when + period * ((now - when) / period + 1);
                        assert!(next > now);
                        timers.insert(f.key, (next, period, data));
                        order.insert((next, f.key));
                    }
                }
                assert!(order.first().is_none_or(|&(w, _)| w > now));
            }
        }
        assert_eq!(heap.len(), timers.len());
        max_len = max_len.max(heap.len());
        if step % 2_000 == 0 {
            heap.check_invariants();
            assert_eq!(heap.peek_when(), order.first().map(|&(w, _)| w));
        }
        // Keep the stale-key list from growing without bound.
        if issued.len() > 20_000 {
            issued.drain(..10_000);
        }
    }
    heap.check_invariants();
    assert!(fired_count > steps / 10, "only {fired_count} timers fired");
    eprintln!(
        "fired {fired_count}, largest heap {max_len}, final {}",
        heap.len()
    );
    assert!(
        cfg!(miri) || max_len > 500,
        "heap never grew past {max_len}"
    );
}
