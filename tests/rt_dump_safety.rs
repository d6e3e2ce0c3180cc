//! A dump never hurts the program it inspects (issue 39): a coroutine parked with only
//! a few bytes of stack left is reported as too short to walk, never faulted on; a
//! coroutine holding the unwinder's lock neither hangs a dump nor stops SIGQUIT; a
//! frame with wrong unwind information is reported as not walkable, not followed into
//! a crash; a coroutine with the smallest stack may dump, and its panic report says
//! what panicked before it walks anything.
//!
//! Each scenario runs in a child process (a fault there would abort it) at
//! `GORO_MAXPROCS` 1 and 2; the suite runs again with the `hooks` feature in CI.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{output_text as text, run_scenario_child};

const SCENARIO_ENV: &str = "GORO_TEST_DUMP_SAFETY";

/// The byte the calibration paints below its frame.
const PAINT: u8 = 0xA5;
/// The coroutines' stack: small, so that reaching its end is quick (a debug build's
/// park alone takes several KiB).
const STACK: usize = 64 * 1024;

/// Recurses until at most `target` bytes of stack are left (measured in this frame),
/// then runs `at_bottom` with that figure. Returns it.
#[inline(never)]
fn descend(target: usize, at_bottom: &mut dyn FnMut(usize)) -> usize {
    let left = goro::debug::stack_headroom().expect("on a coroutine");
    if left > target {
        let r = descend(target, at_bottom);
        std::hint::black_box(&left);
        return r;
    }
    at_bottom(left);
    left
}

/// Calls `f` from a frame `N` bytes larger than `pad::<0>`'s.
#[inline(never)]
fn pad<const N: usize>(f: &mut dyn FnMut()) {
    // Uninitialised: an initialised array may be built in a temporary first (a debug
    // build's), which would double the step.
    let buf = std::mem::MaybeUninit::<[u8; N]>::uninit();
    std::hint::black_box(&buf);
    f();
    std::hint::black_box(&buf);
}

/// `pad::<{8 k}>(f)` for `k` in 0..128: the fine step of a descent, 8 bytes at a time.
fn pad_by(k: usize, f: &mut dyn FnMut()) {
    macro_rules! pads {
        ($($k:literal)*) => {
            match k {
                $($k => pad::<{ $k * 8 }>(f),)*
                _ => panic!("pad_by({k}): at most 127"),
            }
        };
    }
    pads!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119 120 121 122 123 124 125 126 127)
}

/// Where a parked coroutine's stack was painted: the range, its guard's top (at most),
/// and the headroom its park began with.
#[derive(Clone, Copy, Default)]
struct Painted {
    lo: usize,
    hi: usize,
    guard_hi: usize,
    here: usize,
}

/// What the bottom of a descent does: records the headroom it parks with in `at`
/// (with `paint`, paints the stack below first and records where), counts itself in
/// `parked`, and parks on `rx` until woken (if ever).
fn park_at_bottom(
    paint: bool,
    at: &Mutex<Painted>,
    parked: &AtomicUsize,
    rx: &goro::chan::Receiver<()>,
) {
    // `stack_headroom` measures from its own frame, below this one: this frame's
    // address less its figure is at or above the guard's top.
    let here = goro::debug::stack_headroom().unwrap();
    let frame = &here as *const usize as usize;
    let guard_hi = frame - here;
    // The painting's own calls (a debug build makes some) run below this frame.
    let under = if cfg!(debug_assertions) { 1024 } else { 256 };
    let (lo, hi) = (guard_hi + 64, frame - under);
    if paint {
        for a in lo..hi {
            // SAFETY: inside this coroutine's stack, below every live frame (`under`
            // bytes under this one), above its guard.
            unsafe { (a as *mut u8).write_volatile(PAINT) };
        }
    }
    *at.lock().unwrap() = Painted {
        lo,
        hi,
        guard_hi,
        here,
    };
    parked.fetch_add(1, Ordering::Release);
    let _ = rx.recv();
}

/// The headroom a park needs, as `park_at_bottom` measures it, seen while the park
/// lasts: the lowest byte of the painted range it overwrote (read from this thread,
/// while the coroutine is parked and nothing runs on its stack).
fn park_need(p: Painted) -> usize {
    let lowest = (p.lo..p.hi)
        // SAFETY: the parked coroutine's stack, mapped while it lives (it is parked
        // until we wake it), written by nobody while it is parked.
        .find(|&a| unsafe { (a as *const u8).read_volatile() } != PAINT)
        .unwrap_or(p.hi);
    p.here - (lowest - p.guard_hi)
}

/// Spawns a coroutine that descends to `coarse` (`descend`), then `pad_by(k)` deeper
/// with `k` from `fine(headroom there)`, and parks (`park_at_bottom`). Returns the
/// headroom at the coarse bottom.
fn parked_at(
    name: String,
    coarse: usize,
    fine: impl Fn(usize) -> usize + Send + 'static,
    paint: bool,
    at: Arc<Mutex<Painted>>,
    parked: Arc<AtomicUsize>,
    rx: goro::chan::Receiver<()>,
) -> goro::JoinHandle<usize> {
    goro::Builder::new()
        .name(name)
        .stack_size(STACK)
        .spawn(move || {
            descend(coarse, &mut |left| {
                pad_by(fine(left), &mut || park_at_bottom(paint, &at, &parked, &rx));
            })
        })
        .unwrap()
}

/// Parks 64 coroutines with 0 to ~500 bytes more stack left than their park took,
/// dumps them from a plain thread and from a coroutine, and exits without waking them
/// (their wake-ups may go deeper than their parks did).
fn dump_low_headroom() {
    let parked = Arc::new(AtomicUsize::new(0));
    let at = Arc::new(Mutex::new(Painted::default()));
    let (tx, rx) = goro::chan::channel::<()>(0);
    let calibration = parked_at(
        "calibration".into(),
        40 * 1024,
        |_| 0,
        true,
        at.clone(),
        parked.clone(),
        rx,
    );
    common::wait_until("the calibration to park", || {
        parked.load(Ordering::Acquire) == 1
    });
    std::thread::sleep(Duration::from_millis(20));
    let painted = *at.lock().unwrap();
    let need = park_need(painted);
    tx.send(()).unwrap();
    let left0 = calibration.join().unwrap();
    // From the coarse bottom to the park, with no pad: the frames in between.
    let between = left0 - painted.here;
    // Each coroutine descends to about `need + between + 1 KiB`, then pads its way
    // down to `need + 8 i` bytes at the park (i = 0..64).
    // And 8 more with 3 KiB to spare, which a walk (2 KiB on the coroutine's stack,
    // the rest on its own) has room for.
    let (txs, rxs): (Vec<_>, Vec<_>) = (0..72).map(|_| goro::chan::channel::<()>(0)).unzip();
    let parked = Arc::new(AtomicUsize::new(0));
    let ats: Vec<_> = (0..72)
        .map(|_| Arc::new(Mutex::new(Painted::default())))
        .collect();
    let hs: Vec<_> = rxs
        .into_iter()
        .enumerate()
        .map(|(i, rx)| {
            let (spare, coarse, name) = match i {
                0..64 => (8 * i, need + between + 1024, format!("low-{i}")),
                _ => (3072 + 8 * i, need + between + 4096, format!("room-{i}")),
            };
            let fine = move |left: usize| (left - between - need - spare) / 8;
            parked_at(
                name,
                coarse,
                fine,
                false,
                ats[i].clone(),
                parked.clone(),
                rx,
            )
        })
        .collect();
    common::wait_until("the coroutines to park", || {
        parked.load(Ordering::Acquire) == 72
    });
    std::thread::sleep(Duration::from_millis(20));
    let from_thread = goro::debug::dump_each();
    let from_coroutine = goro::go!(goro::debug::dump_each).join().unwrap();
    let spare: Vec<usize> = ats[..64]
        .iter()
        .map(|a| a.lock().unwrap().here - need)
        .collect();
    let refused = from_thread
        .matches("too little stack left to walk it")
        .count();
    println!(
        "a park takes {need} B ({between} B between the coarse bottom and the park); \
         parked with {}..{} B to spare; {refused} of 72 not walked",
        spare.iter().min().unwrap(),
        spare.iter().max().unwrap(),
    );
    // A walk wants 2 KiB of the coroutine's stack; none of the first 64 has it, the
    // last 8 have.
    assert_eq!(refused, 64, "dump:\n{from_thread}");
    assert!(from_coroutine.contains("too little stack left to walk it"));
    for h in &hs[64..] {
        let stack = goro::debug::stack(h.id()).unwrap();
        assert!(
            stack
                .frames
                .iter()
                .any(|f| f.function.contains("park_at_bottom")),
            "{stack}"
        );
    }
    println!("DUMPED");
    drop(txs);
    // The parked coroutines are never woken: their wake-ups may need more stack than
    // their parks took.
    std::process::exit(0);
}

/// A coroutine parks (a 300 ms sleep) inside `backtrace::trace`'s callback, holding the
/// crate's process-wide lock, while a dump runs: the dump's walks must not wait for
/// that lock (the coroutine could never be resumed while its walk is claimed), and the
/// dump ends once the sleep does.
fn dump_beside_backtrace_lock() {
    let inside = Arc::new(AtomicUsize::new(0));
    let h = {
        let inside = inside.clone();
        // Pinned: the crate's lock checks, on release, a thread-local its taking set.
        goro::Builder::new()
            .pinned(true)
            .spawn(move || {
                let mut frames = 0;
                backtrace::trace(|_| {
                    inside.store(1, Ordering::Release);
                    goro::time::sleep(Duration::from_millis(300));
                    frames += 1;
                    false
                });
                frames
            })
            .unwrap()
    };
    common::wait_until("the coroutine to hold the lock", || {
        inside.load(Ordering::Acquire) == 1
    });
    std::thread::sleep(Duration::from_millis(20));
    let dump = goro::debug::dump_each();
    assert_eq!(h.join().unwrap(), 1);
    assert!(dump.contains("[sleep"), "{dump}");
    println!("DUMPED");
}

// A function whose unwind information is wrong on purpose, as hand-written assembly's
// or JIT code's may be: it calls `f(arg)` with its canonical frame address declared to
// be the constant 0x1000 (DW_CFA_def_cfa_expression, DW_OP_constu 4096), a page that is
// never mapped, so an unwinder that follows it reads its return address from 0xff8.
// Its code is sound: it keeps the stack aligned and returns normally.
#[cfg(target_arch = "x86_64")]
std::arch::global_asm!(
    ".text",
    ".globl goro_test_call_with_bad_unwind_info",
    ".type goro_test_call_with_bad_unwind_info, @function",
    "goro_test_call_with_bad_unwind_info:",
    ".cfi_startproc",
    "push rbp",
    ".cfi_escape 0x0f, 0x03, 0x10, 0x80, 0x20",
    "mov rax, rdi",
    "mov rdi, rsi",
    "call rax",
    "pop rbp",
    "ret",
    ".cfi_endproc",
    ".size goro_test_call_with_bad_unwind_info, . - goro_test_call_with_bad_unwind_info",
);

#[cfg(target_arch = "x86_64")]
extern "C" {
    fn goro_test_call_with_bad_unwind_info(
        f: extern "C" fn(*mut std::ffi::c_void),
        arg: *mut std::ffi::c_void,
    );
}

/// Called through the badly described frame: parks on the receiver behind `arg` until
/// a value or a close. Never panics (a panic must not unwind through that frame).
#[cfg(target_arch = "x86_64")]
extern "C" fn park_in_bad_frame(arg: *mut std::ffi::c_void) {
    // SAFETY: `parked_behind_bad_frame` passes a pointer to its receiver, alive during
    // the call.
    let rx = unsafe { &*arg.cast::<goro::chan::Receiver<()>>() };
    let _ = rx.recv();
}

/// A coroutine parked beneath a frame whose unwind information is wrong is dumped
/// (from a thread, from a coroutine, and alone by `debug::stack`): its stack is shown
/// as far as the walk got and reported as not walkable, the process goes on, and the
/// coroutine, woken, returns through that frame as if nothing had happened.
#[cfg(target_arch = "x86_64")]
fn dump_of_a_badly_described_frame() {
    let (tx, rx) = goro::chan::channel::<()>(0);
    let h = goro::Builder::new()
        .name("beneath-asm".to_string())
        .spawn(move || {
            // SAFETY: the function calls `park_in_bad_frame(&rx)` and returns; `rx`
            // outlives the call.
            unsafe {
                goro_test_call_with_bad_unwind_info(
                    park_in_bad_frame,
                    (&rx as *const goro::chan::Receiver<()>).cast_mut().cast(),
                )
            };
            7
        })
        .unwrap();
    let id = h.id();
    common::wait_until("the coroutine to park", || {
        goro::debug::coroutines()
            .iter()
            .any(|c| c.id == id && c.wait_reason.is_some())
    });
    let from_thread = goro::debug::dump_each();
    let from_coroutine = goro::go!(goro::debug::dump).join().unwrap();
    let alone = goro::debug::stack(id).unwrap();
    for dump in [&from_thread, &from_coroutine] {
        assert!(dump.contains("('beneath-asm')"), "{dump}");
        assert!(dump.contains("stack not walkable"), "{dump}");
        assert!(dump.contains("park_in_bad_frame"), "{dump}");
    }
    assert!(
        alone
            .unavailable
            .as_deref()
            .is_some_and(|u| u.contains("stack not walkable")),
        "{alone:?}"
    );
    tx.send(()).unwrap();
    assert_eq!(h.join().unwrap(), 7);
    println!("DUMPED");
}

/// Parks here (a 16 KiB coroutine's frame in the dumps).
#[inline(never)]
fn small_and_parked(rx: goro::chan::Receiver<()>) {
    let _ = rx.recv();
}

/// Panics here, on a 16 KiB stack.
#[inline(never)]
fn small_and_panicking() {
    panic!("a small coroutine's panic");
}

/// Coroutines with the smallest stack (16 KiB) are walked, dump, and panic with a
/// report (`RUST_BACKTRACE=1`): before, a dump from one overflowed its stack (walking
/// and naming ran on it), and its panic report lost even its message.
fn small_stacks() {
    let small = || goro::Builder::new().stack_size(16 * 1024);
    let (tx, rx) = goro::chan::channel::<()>(0);
    let parked: Vec<_> = (0..3)
        .map(|_| {
            let rx = rx.clone();
            small().spawn(move || small_and_parked(rx)).unwrap()
        })
        .collect();
    common::wait_until("the coroutines to park", || {
        goro::debug::coroutines()
            .iter()
            .filter(|c| c.wait_reason.is_some())
            .count()
            >= 3
    });
    let id = parked[0].id();
    let (dump, each, stack) = small()
        .name("small-dumper".to_string())
        .spawn(move || {
            (
                goro::debug::dump(),
                goro::debug::dump_each(),
                goro::debug::stack(id).unwrap(),
            )
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(dump.contains("3 coroutines [chan receive"), "{dump}");
    assert!(dump.contains("small_and_parked"), "{dump}");
    assert!(
        each.contains("('small-dumper') [running, making this dump"),
        "{each}"
    );
    assert!(
        stack
            .frames
            .iter()
            .any(|f| f.function.contains("small_and_parked")),
        "{stack}"
    );
    drop(tx);
    parked.into_iter().for_each(|h| h.join().unwrap());
    let panicked = small()
        .name("small-panicker".to_string())
        .spawn(small_and_panicking)
        .unwrap()
        .join();
    assert!(panicked.is_err());
    println!("DUMPED");
}

/// A coroutine parks for good inside `backtrace::trace`'s callback, holding the
/// crate's process-wide lock, and the process gets SIGQUIT: the dump's walks take no
/// such lock, and naming the frames gives up after its stall, so the dump is printed,
/// frames as addresses, and the process exits.
fn sigquit_beside_backtrace_lock() {
    // SAFETY: setting a signal's disposition to its default (a background job may
    // inherit it ignored; goro leaves an inherited disposition alone).
    unsafe { libc::signal(libc::SIGQUIT, libc::SIG_DFL) };
    let inside = Arc::new(AtomicUsize::new(0));
    let (_tx, rx) = goro::chan::channel::<()>(0);
    let _holder = {
        let inside = inside.clone();
        goro::Builder::new()
            .pinned(true)
            .name("lock-holder".to_string())
            .spawn(move || {
                backtrace::trace(|_| {
                    inside.store(1, Ordering::Release);
                    let _ = rx.recv();
                    false
                });
            })
            .unwrap()
    };
    common::wait_until("the coroutine to hold the lock", || {
        inside.load(Ordering::Acquire) == 1
    });
    std::thread::sleep(Duration::from_millis(20));
    println!("QUITTING");
    // SAFETY: raising a signal has no preconditions.
    unsafe { libc::raise(libc::SIGQUIT) };
    std::thread::sleep(Duration::from_secs(30));
    println!("STILL HERE");
}

#[test]
fn scenario_child() {
    let Ok(scenario) = std::env::var(SCENARIO_ENV) else {
        return;
    };
    match scenario.as_str() {
        "low_headroom" => dump_low_headroom(),
        "backtrace_lock" => dump_beside_backtrace_lock(),
        #[cfg(target_arch = "x86_64")]
        "bad_unwind_info" => dump_of_a_badly_described_frame(),
        "small_stacks" => small_stacks(),
        "sigquit_lock" => sigquit_beside_backtrace_lock(),
        other => panic!("unknown scenario {other}"),
    }
}

/// A dump of coroutines parked with 0 to ~700 bytes to spare: before, those with under
/// ~160 had the walk's first frames pushed onto their guard, and the process aborted
/// with "coroutine N overflowed its 64 KiB stack".
#[test]
fn dump_of_coroutines_parked_at_their_stacks_end() {
    dumped_at_1_and_2_ps("low_headroom");
}

/// Runs `scenario` in a child at 1 and 2 Ps, killed after 30 s; each must print DUMPED
/// and exit 0. Returns the children's output.
fn dumped_at_1_and_2_ps(scenario: &str) -> Vec<String> {
    at_1_and_2_ps(scenario, &[], |o, t| {
        o.status.success() && t.contains("DUMPED")
    })
}

/// Runs `scenario` in a child at 1 and 2 Ps, with `env`, killed after 30 s; `ok` must
/// hold of each child's output (and its text). Returns the texts.
fn at_1_and_2_ps(
    scenario: &str,
    env: &[(&str, &str)],
    ok: impl Fn(&std::process::Output, &str) -> bool,
) -> Vec<String> {
    ["1", "2"]
        .into_iter()
        .map(|procs| {
            let mut all = vec![("GORO_MAXPROCS", procs)];
            all.extend_from_slice(env);
            let o = run_scenario_child(SCENARIO_ENV, scenario, &all, &[], Duration::from_secs(30));
            let t = text(&o);
            assert!(ok(&o, &t), "{scenario}, GORO_MAXPROCS={procs}:\n{t}");
            t
        })
        .collect()
}

/// A dump beside a coroutine parked with the `backtrace` crate's lock held: before, the
/// walk waited for the lock holding its claim on that coroutine, which then could not
/// run again (an M spun for it holding its P): the dump and the runtime hung for good.
#[test]
fn dump_beside_a_coroutine_holding_the_unwinders_lock() {
    dumped_at_1_and_2_ps("backtrace_lock");
}

/// A dump of a coroutine parked beneath a frame with wrong unwind information: before,
/// the unwinder followed it to a wild address and the process died of SIGSEGV (4 runs
/// of 4).
#[cfg(target_arch = "x86_64")]
#[test]
fn dump_of_a_coroutine_beneath_a_frame_the_unwinder_cannot_follow() {
    dumped_at_1_and_2_ps("bad_unwind_info");
}

/// Dumps from a 16 KiB coroutine, of 16 KiB coroutines, and a 16 KiB coroutine's panic
/// report with `RUST_BACKTRACE=1`: the message, where and who, then the backtrace.
#[test]
fn the_smallest_stacks_dump_and_report_their_panics() {
    for t in at_1_and_2_ps("small_stacks", &[("RUST_BACKTRACE", "1")], |o, t| {
        o.status.success() && t.contains("DUMPED")
    }) {
        let at = t.find("('small-panicker') panicked at").expect(&t);
        let msg = t.find("a small coroutine's panic").expect(&t);
        let walked = t.find("stack backtrace (coroutine ").expect(&t);
        let frame = t.find("small_and_panicking").expect(&t);
        assert!(at < msg && msg < walked && walked < frame, "{t}");
    }
}

/// SIGQUIT while a parked coroutine holds the `backtrace` crate's lock for good: the
/// dump is printed (frames unnamed past the naming stall) and the process exits 2.
#[test]
fn sigquit_prints_and_exits_while_the_unwinders_lock_is_held() {
    for t in at_1_and_2_ps("sigquit_lock", &[], |o, _| o.status.code() == Some(2)) {
        assert!(t.contains("SIGQUIT: quit"), "{t}");
        assert!(t.contains("('lock-holder')"), "{t}");
        assert!(t.contains("some frames are addresses"), "{t}");
        assert!(!t.contains("STILL HERE"), "{t}");
    }
}
