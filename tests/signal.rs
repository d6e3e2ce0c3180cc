//! `goro::signal`: delivery to coroutine and thread receivers, two subscribers, a full
//! channel that drops rather than blocks, chaining with the program's own handler,
//! forbidden signals, and, in child processes whose exit is inspected, the SIGQUIT
//! dump (on when nobody subscribes, off while someone does), `stop` giving a signal
//! its default action back, and a dropped receiver counting as stopped.
//!
//! Signals are process-wide, so every test that raises one runs alone in a child
//! process (`common::alone`).

mod common;

use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::with_timeout;
use goro::chan::{RecvTimeoutError, TryRecvError};
use goro::signal::{self, Signal};

const T: Duration = Duration::from_secs(60);
/// How long a test waits for a signal that must come.
const COMES: Duration = Duration::from_secs(10);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs(
        "under_maxprocs_1_and_2",
        &[
            "scenario_child",
            "sigquit_dumps_when_nobody_subscribes",
            "sigquit_subscribed_suppresses_the_dump_until_stop",
            "stop_gives_the_default_action_back",
            "notify_context_ends_the_context_and_stop_restores_the_default",
            "a_dropped_receiver_counts_as_stopped",
            "forbidden_signals_are_rejected",
        ],
    );
}

/// Sends `sig` to this process (any thread may take it).
fn raise(sig: Signal) {
    // SAFETY: kill(2) of our own process; no memory arguments.
    assert_eq!(unsafe { libc::kill(libc::getpid(), sig.as_raw()) }, 0);
}

#[test]
fn delivered_to_a_coroutine_receiver() {
    if common::alone("delivered_to_a_coroutine_receiver", &[]) {
        return;
    }
    with_timeout(T, || {
        let rx = signal::notify(&[Signal::USR1, Signal::HUP]);
        let h = goro::go!(move || {
            let a = rx.recv_timeout(COMES).unwrap();
            let b = rx.recv_timeout(COMES).unwrap();
            (a, b)
        });
        goro::time::sleep(Duration::from_millis(10));
        raise(Signal::USR1);
        goro::time::sleep(Duration::from_millis(10));
        raise(Signal::HUP);
        assert_eq!(h.join().unwrap(), (Signal::USR1, Signal::HUP));
    });
}

#[test]
fn delivered_to_a_thread_receiver() {
    if common::alone("delivered_to_a_thread_receiver", &[]) {
        return;
    }
    with_timeout(T, || {
        let rx = signal::notify(&[Signal::USR2]);
        let h = std::thread::spawn(move || rx.recv_timeout(COMES));
        std::thread::sleep(Duration::from_millis(10));
        raise(Signal::USR2);
        assert_eq!(h.join().unwrap(), Ok(Signal::USR2));
    });
}

/// A program that waits for nothing but a signal is not a deadlock: the dispatcher's
/// eventfd keeps the poller watched, and the signal arrives from a plain thread
/// the runtime has never seen.
#[test]
fn waiting_only_for_a_signal_is_not_a_deadlock() {
    if common::alone("waiting_only_for_a_signal_is_not_a_deadlock", &[]) {
        return;
    }
    with_timeout(T, || {
        let rx = signal::notify(&[Signal::TERM]);
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            raise(Signal::TERM);
        });
        let got = goro::go!(move || rx.recv()).join().unwrap();
        assert_eq!(got, Ok(Signal::TERM));
    });
}

#[test]
fn two_subscribers_both_get_it() {
    if common::alone("two_subscribers_both_get_it", &[]) {
        return;
    }
    with_timeout(T, || {
        let a = signal::notify(&[Signal::USR1]);
        let (tx, b) = goro::chan::channel(4);
        signal::notify_with(&tx, &[Signal::USR1, Signal::WINCH]);
        raise(Signal::USR1);
        assert_eq!(a.recv_timeout(COMES), Ok(Signal::USR1));
        assert_eq!(b.recv_timeout(COMES), Ok(Signal::USR1));
        // WINCH only to `b`.
        raise(Signal::WINCH);
        assert_eq!(b.recv_timeout(COMES), Ok(Signal::WINCH));
        assert_eq!(
            a.recv_timeout(Duration::from_millis(50)),
            Err(RecvTimeoutError::Timeout)
        );
        // After `stop`, `a` gets nothing (its channel, whose only sender the
        // subscription held, is closed); `b` still gets its signals.
        signal::stop(&a);
        raise(Signal::USR1);
        assert_eq!(b.recv_timeout(COMES), Ok(Signal::USR1));
        assert_eq!(a.try_recv(), Err(TryRecvError::Closed));
        signal::stop_sender(&tx);
    });
}

/// A subscriber whose buffer is full misses the signal; the dispatcher does not wait
/// for it, so the others still get theirs.
#[test]
fn a_full_channel_drops_and_does_not_block() {
    if common::alone("a_full_channel_drops_and_does_not_block", &[]) {
        return;
    }
    with_timeout(T, || {
        let full = signal::notify(&[Signal::USR1]); // room for one
        assert_eq!(full.capacity(), 1);
        let (tx, counter) = goro::chan::unbounded();
        signal::notify_with(&tx, &[Signal::USR1]);
        for i in 1..=3 {
            raise(Signal::USR1);
            // Each raise delivered on its own (not merged with the next).
            assert_eq!(counter.recv_timeout(COMES), Ok(Signal::USR1), "raise {i}");
        }
        assert_eq!(full.len(), 1);
        assert_eq!(full.try_recv(), Ok(Signal::USR1));
        assert_eq!(full.try_recv(), Err(TryRecvError::Empty));
        // Room again: the next one arrives.
        raise(Signal::USR1);
        assert_eq!(full.recv_timeout(COMES), Ok(Signal::USR1));
    });
}

/// The program's own handler, installed before, still runs: the handlers chain.
#[test]
fn chains_with_the_programs_own_handler() {
    if common::alone("chains_with_the_programs_own_handler", &[]) {
        return;
    }
    static HITS: AtomicUsize = AtomicUsize::new(0);
    extern "C" fn on_usr2(_: libc::c_int) {
        HITS.fetch_add(1, Ordering::SeqCst);
    }
    with_timeout(T, || {
        // SAFETY: installing a handler that only bumps an atomic, with a zeroed
        // sigaction we own.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_usr2 as *const () as usize;
            libc::sigemptyset(&mut act.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()),
                0
            );
        }
        let rx = signal::notify(&[Signal::USR2]);
        raise(Signal::USR2);
        assert_eq!(rx.recv_timeout(COMES), Ok(Signal::USR2));
        assert_eq!(HITS.load(Ordering::SeqCst), 1);
        // Stopped: the program's handler alone (its disposition was not the default,
        // so goro does not take the default action either).
        signal::stop(&rx);
        raise(Signal::USR2);
        common::wait_until("the program's handler ran again", || {
            HITS.load(Ordering::SeqCst) == 2
        });
    });
}

#[test]
fn forbidden_signals_are_rejected() {
    for (raw, name) in [
        (libc::SIGKILL, "SIGKILL"),
        (libc::SIGSTOP, "SIGSTOP"),
        (libc::SIGSEGV, "SIGSEGV"),
        (libc::SIGBUS, "SIGBUS"),
        (libc::SIGILL, "SIGILL"),
        (libc::SIGFPE, "SIGFPE"),
        (0, "signal 0"),
        (65, "signal 65"),
        (-1, "signal -1"),
        (32, "signal 32"),
    ] {
        let e = Signal::new(raw).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{raw}");
        assert!(e.to_string().contains(name), "{raw}: {e}");
    }
    assert_eq!(Signal::new(libc::SIGINT).unwrap(), Signal::INT);
    assert_eq!(Signal::INT.name(), "SIGINT");
    assert_eq!(format!("{:?}", Signal::TERM), "Signal(SIGTERM)");
    // Display is Go's text (`fmt.Println(sig)`), the C name a method.
    for (sig, go) in [
        (Signal::INT, "interrupt"),
        (Signal::TERM, "terminated"),
        (Signal::HUP, "hangup"),
        (Signal::QUIT, "quit"),
        (Signal::USR1, "user defined signal 1"),
        (Signal::USR2, "user defined signal 2"),
        (Signal::PIPE, "broken pipe"),
        (Signal::CHLD, "child exited"),
        (Signal::WINCH, "window changed"),
    ] {
        assert_eq!(sig.to_string(), go, "{}", sig.name());
    }
    let rt = Signal::new(libc::SIGRTMIN() + 1).unwrap();
    assert_eq!(
        (rt.name(), rt.to_string()),
        (
            "SIGRTMIN+1".to_string(),
            format!("signal {}", libc::SIGRTMIN() + 1)
        )
    );
    assert_eq!(libc::c_int::from(Signal::HUP), libc::SIGHUP);
    let p = std::panic::catch_unwind(|| signal::notify(&[])).unwrap_err();
    assert!(goro::panic_message(&*p).contains("no signals given"));
}

/// The environment variable that makes `scenario_child` play a scenario.
const SCENARIO: &str = "GORO_TEST_SIGNAL_SCENARIO";

/// Runs `scenario_child` in a child process playing `name`, and returns its output.
fn scenario(name: &str) -> Output {
    scenario_with(name, &[])
}

/// [`scenario`] with `env` added.
fn scenario_with(name: &str, env: &[(&str, &str)]) -> Output {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.envs(env.iter().copied());
    cmd.env(SCENARIO, name)
        .env(common::NESTED_ENV, "1")
        .env("RUST_BACKTRACE", "0")
        .args([
            "--exact",
            "scenario_child",
            "--test-threads=1",
            "--nocapture",
        ]);
    with_timeout(T, move || cmd.output().unwrap())
}

fn report(out: &Output) -> String {
    format!(
        "{:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Plays the scenario named in `SCENARIO` (nothing without it). Each ends the
/// process in the way its test expects.
#[test]
fn scenario_child() {
    let Ok(name) = std::env::var(SCENARIO) else {
        return;
    };
    // The runtime (and sysmon, with its SIGQUIT handler) is up.
    goro::go!(|| ()).join().unwrap();
    match name.as_str() {
        "quit_unsubscribed" => {
            raise(Signal::QUIT);
        }
        "quit_subscribed" => {
            let rx = signal::notify(&[Signal::QUIT]);
            raise(Signal::QUIT);
            assert_eq!(rx.recv_timeout(COMES), Ok(Signal::QUIT));
            println!("got SIGQUIT");
            // Time for a dump that should not come.
            goro::time::sleep(Duration::from_millis(200));
            signal::stop(&rx);
            println!("stopped");
            raise(Signal::QUIT);
        }
        "stop_default" => {
            let rx = signal::notify(&[Signal::USR1]);
            raise(Signal::USR1);
            assert_eq!(rx.recv_timeout(COMES), Ok(Signal::USR1));
            signal::stop(&rx);
            println!("stopped");
            raise(Signal::USR1);
        }
        "notify_context" => {
            // Go's signal.NotifyContext: the context ends on the signal; the second
            // arrival is still caught until stop; after stop the default action kills.
            let (ctx, stop) = signal::notify_context(&goro::context::background(), &[Signal::USR1]);
            assert!(ctx.err().is_none());
            raise(Signal::USR1);
            assert!(
                ctx.done().recv_timeout(COMES).is_err(),
                "closed, not timed out"
            );
            assert_eq!(ctx.err(), Some(goro::context::Error::Canceled));
            // Go 1.26's cause: "<signal> signal received".
            let cause = ctx.cause().expect("done").to_string();
            assert_eq!(cause, "user defined signal 1 signal received");
            raise(Signal::USR1); // caught still: no default action yet
            goro::time::sleep(Duration::from_millis(100));
            println!("still alive");
            stop.cancel();
            println!("stopped");
            raise(Signal::USR1);
        }
        "notify_context_stop_first" => {
            // stop before any signal ends the context and the subscription.
            let (ctx, stop) = signal::notify_context(&goro::context::background(), &[Signal::USR2]);
            drop(stop); // dropping is stop too
            assert_eq!(ctx.err(), Some(goro::context::Error::Canceled));
            println!("stopped");
            raise(Signal::USR2);
        }
        "dropped_receiver" => {
            drop(signal::notify(&[Signal::TERM]));
            println!("dropped");
            raise(Signal::TERM);
        }
        other => panic!("unknown scenario {other}"),
    }
    // Every scenario ends the process before this.
    std::thread::sleep(COMES);
    println!("still alive");
}

#[test]
fn sigquit_dumps_when_nobody_subscribes() {
    let out = scenario("quit_unsubscribed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
    assert!(err.contains("SIGQUIT: quit"), "{}", report(&out));
}

#[test]
fn sigquit_subscribed_suppresses_the_dump_until_stop() {
    let out = scenario("quit_subscribed");
    let (o, e) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        o.contains("got SIGQUIT") && o.contains("stopped"),
        "{}",
        report(&out)
    );
    // One dump: for the SIGQUIT after `stop`, none for the one subscribed.
    assert_eq!(e.matches("SIGQUIT: quit").count(), 1, "{}", report(&out));
    assert_eq!(out.status.code(), Some(2), "{}", report(&out));
}

/// Plays `name`, which prints `marker` and then raises a signal that nobody is
/// subscribed to any more: the process must die of `sig`, its default action.
fn dies_of(name: &str, marker: &str, sig: libc::c_int) {
    dies_of_with(name, &[], marker, sig)
}

/// [`dies_of`] with `env` added.
fn dies_of_with(name: &str, env: &[(&str, &str)], marker: &str, sig: libc::c_int) {
    use std::os::unix::process::ExitStatusExt;
    let out = scenario_with(name, env);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(marker),
        "{}",
        report(&out)
    );
    assert_eq!(out.status.signal(), Some(sig), "{}", report(&out));
}

#[test]
fn stop_gives_the_default_action_back() {
    dies_of("stop_default", "stopped", libc::SIGUSR1);
}

/// Go's `signal.NotifyContext`: the signal ends the context; a second one is caught
/// until `stop`, after which it kills as by default.
#[test]
fn notify_context_ends_the_context_and_stop_restores_the_default() {
    for procs in ["1", "2"] {
        let env = [("GORO_MAXPROCS", procs)];
        dies_of_with("notify_context", &env, "still alive", libc::SIGUSR1);
        dies_of_with("notify_context", &env, "stopped", libc::SIGUSR1);
        dies_of_with("notify_context_stop_first", &env, "stopped", libc::SIGUSR2);
    }
}

#[test]
fn a_dropped_receiver_counts_as_stopped() {
    dies_of("dropped_receiver", "dropped", libc::SIGTERM);
}
