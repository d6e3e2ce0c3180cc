//! Stacks: overflow detection (in child processes, since it aborts), faults that are
//! not ours, many live coroutines with guard pages, and resource exhaustion as a typed
//! error.

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::with_timeout;
use goro::park::{self, Unparker, WaitReason};

/// Which child behaviour to run, when set.
const CHILD_ENV: &str = "GORO_TEST_STACK_CHILD";

/// Runs this test binary's `child_entry` test in a child process with `what` and
/// returns (exit status, stderr). The child is killed if it runs over the limit.
fn run_child(what: &str, envs: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.env(CHILD_ENV, what).env("RUST_BACKTRACE", "0").args([
        "--exact",
        "child_entry",
        "--nocapture",
        "--test-threads=1",
    ]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = with_timeout(Duration::from_secs(120), move || cmd.output().unwrap());
    (
        out.status,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The child side: does what CHILD_ENV says. A no-op in a normal test run.
#[test]
fn child_entry() {
    let Ok(what) = std::env::var(CHILD_ENV) else {
        return;
    };
    match what.as_str() {
        "overflow" => {
            let h = goro::Builder::new()
                .name("deep")
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap();
            let _ = h.join();
            unreachable!("the overflow must abort the process");
        }
        "overflow_default" => {
            let _ = goro::go!(|| recurse(0)).join();
            unreachable!("the overflow must abort the process");
        }
        "null_deref_on_coroutine" => {
            let _ = goro::go!(|| {
                // SAFETY: none; this deliberately faults to check that faults which
                // are not stack overflows reach the default action.
                unsafe { std::ptr::read_volatile(16 as *const u64) }
            })
            .join();
            unreachable!("the fault must kill the process");
        }
        "thread_overflow" => {
            // A plain thread's overflow is std's to report; our handler passes it on.
            let _ = std::thread::Builder::new()
                .stack_size(64 * 1024)
                .spawn(|| recurse(0))
                .unwrap()
                .join();
            unreachable!("the overflow must abort the process");
        }
        "exhaust_mprotect" => {
            // With mprotect guards every stack costs two mappings: spawning parked
            // coroutines must end in an io::Error naming vm.max_map_count, not a panic.
            let parked = Arc::new(Mutex::new(Vec::<Unparker>::new()));
            let mut n = 0usize;
            let err = loop {
                let p = parked.clone();
                match goro::Builder::new().spawn(move || {
                    p.lock().unwrap().push(park::prepare());
                    park::park(WaitReason::Park);
                }) {
                    Ok(_) => n += 1,
                    Err(e) => break e,
                }
                assert!(n < 200_000, "no mapping limit was hit");
            };
            eprintln!("spawned {n} then: {err}");
        }
        other => panic!("unknown child {other}"),
    }
}

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64) -> u64 {
    let buf = [depth as u8; 512];
    std::hint::black_box(&buf);
    recurse(depth + 1) + buf[100] as u64
}

#[test]
fn overflow_prints_the_coroutine_and_aborts() {
    let (status, stderr) = run_child("overflow", &[]);
    assert!(!status.success());
    assert!(
        stderr.contains("('deep') overflowed its 64 KiB stack"),
        "no overflow message in stderr:\n{stderr}"
    );
    assert!(
        stderr.starts_with("coroutine ") || stderr.contains("\ncoroutine "),
        "{stderr}"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGABRT), "{status:?}");
}

#[test]
fn overflow_of_default_stack_names_its_size() {
    let (status, stderr) = run_child("overflow_default", &[]);
    assert!(!status.success());
    assert!(
        stderr.contains("('<unnamed>') overflowed its 256 KiB stack"),
        "no overflow message in stderr:\n{stderr}"
    );
}

#[test]
fn other_faults_keep_their_default_action() {
    use std::os::unix::process::ExitStatusExt;
    let (status, stderr) = run_child("null_deref_on_coroutine", &[]);
    assert_eq!(status.signal(), Some(libc::SIGSEGV), "{status:?}\n{stderr}");
    assert!(!stderr.contains("overflowed"), "{stderr}");
}

#[test]
fn thread_overflow_goes_to_std() {
    let (status, stderr) = run_child("thread_overflow", &[]);
    assert!(!status.success());
    assert!(
        stderr.contains("has overflowed its stack"),
        "std did not report it:\n{stderr}"
    );
    assert!(!stderr.contains("coroutine"), "{stderr}");
}

#[test]
fn exhaustion_is_an_error_naming_max_map_count() {
    let (status, stderr) = run_child("exhaust_mprotect", &[("GORO_STACK_GUARD", "mprotect")]);
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("vm.max_map_count"), "{stderr}");
}

/// Spawns `n` coroutines that all park at once, checks they are all alive, then wakes
/// and joins them.
fn park_many(n: usize) {
    let parked = Arc::new(AtomicUsize::new(0));
    let unparkers = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let (parked, unparkers) = (parked.clone(), unparkers.clone());
            goro::go!(move || {
                unparkers.lock().unwrap().push(park::prepare());
                parked.fetch_add(1, Ordering::SeqCst);
                park::park(WaitReason::Park);
                i
            })
        })
        .collect();
    while parked.load(Ordering::SeqCst) < n {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(goro::num_goroutines() >= n);
    for u in unparkers.lock().unwrap().drain(..) {
        u.unpark();
    }
    let sum: usize = hs.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(sum, n * (n - 1) / 2);
}

#[test]
fn hundred_thousand_alive_at_once() {
    with_timeout(Duration::from_secs(120), || park_many(100_000));
}

#[test]
fn million_alive_at_once_with_guard_installs() {
    if goro::debug::stack_guard_kind() != goro::debug::GuardKind::GuardInstall {
        eprintln!("skipped: this kernel has no MADV_GUARD_INSTALL (Linux 6.13+); with mprotect guards vm.max_map_count caps a process near 32k coroutines");
        return;
    }
    with_timeout(Duration::from_secs(300), || park_many(1_000_000));
}
