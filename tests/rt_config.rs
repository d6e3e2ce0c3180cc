//! `goro::Config`: the runtime started from code. The runtime is global and starts
//! once per process, so every case runs alone in a fresh child process (`alone`).

mod common;

use std::time::Duration;

use common::with_timeout;
use goro::{Config, ConfigError};

const T: Duration = Duration::from_secs(60);

fn invalid_setting(r: Result<(), ConfigError>) -> &'static str {
    match r {
        Err(ConfigError::Invalid { setting, .. }) => setting,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn init_with_maxprocs_3() {
    if common::alone("init_with_maxprocs_3", &[]) {
        return;
    }
    with_timeout(T, || {
        Config::from_env().unwrap().maxprocs(3).init().unwrap();
        assert_eq!(goro::maxprocs(), 3);
        assert_eq!(goro::go!(|| 5).join().unwrap(), 5);
        assert_eq!(goro::debug::stats().gomaxprocs, 3);
    });
}

#[test]
fn init_twice_is_already_started() {
    if common::alone("init_twice_is_already_started", &[]) {
        return;
    }
    with_timeout(T, || {
        Config::new().maxprocs(2).init().unwrap();
        assert_eq!(
            Config::new().maxprocs(1).init(),
            Err(ConfigError::AlreadyStarted)
        );
        // The first configuration stays.
        assert_eq!(goro::maxprocs(), 2);
    });
}

#[test]
fn init_after_go_is_already_started() {
    if common::alone("init_after_go_is_already_started", &[]) {
        return;
    }
    with_timeout(T, || {
        goro::go!(|| ()).join().unwrap();
        let e = Config::from_env().unwrap().maxprocs(1).init().unwrap_err();
        assert_eq!(e, ConfigError::AlreadyStarted);
        assert!(e.to_string().contains("already started"), "{e}");
    });
}

#[test]
fn invalid_values_name_the_setting() {
    if common::alone("invalid_values_name_the_setting", &[]) {
        return;
    }
    with_timeout(T, || {
        assert_eq!(
            invalid_setting(Config::new().maxprocs(0).init()),
            "maxprocs"
        );
        assert_eq!(
            invalid_setting(Config::new().maxprocs(goro::MAX_PROCS + 1).init()),
            "maxprocs"
        );
        assert_eq!(
            invalid_setting(Config::new().stack_size(1).init()),
            "stack_size"
        );
        assert_eq!(
            invalid_setting(Config::new().max_threads(1).init()),
            "max_threads"
        );
        assert_eq!(
            invalid_setting(
                Config::new()
                    .schedtrace(Some(Duration::from_micros(10)))
                    .init()
            ),
            "schedtrace"
        );
        let e = Config::new().stack_size(1).init().unwrap_err();
        assert!(e.to_string().starts_with("stack_size: "), "{e}");
        // Refused configurations did not start the runtime: a good one still can.
        Config::new().maxprocs(1).init().unwrap();
        assert_eq!(goro::maxprocs(), 1);
    });
}

#[test]
fn builder_wins_over_env() {
    if common::alone("builder_wins_over_env", &[("GORO_MAXPROCS", "2")]) {
        return;
    }
    with_timeout(T, || {
        let c = Config::from_env().unwrap();
        c.maxprocs(1).init().unwrap();
        assert_eq!(goro::maxprocs(), 1);
    });
}

#[test]
fn env_is_the_starting_point() {
    if common::alone("env_is_the_starting_point", &[("GORO_MAXPROCS", "2")]) {
        return;
    }
    with_timeout(T, || {
        // A setting the builder leaves alone keeps its environment value.
        Config::from_env()
            .unwrap()
            .stack_size(64 * 1024)
            .init()
            .unwrap();
        assert_eq!(goro::maxprocs(), 2);
    });
}

#[test]
fn bad_env_is_an_error_naming_the_variable() {
    if common::alone(
        "bad_env_is_an_error_naming_the_variable",
        &[("GORO_MAXPROCS", "zero")],
    ) {
        return;
    }
    with_timeout(T, || {
        let e = Config::from_env().unwrap_err();
        match &e {
            ConfigError::Invalid { setting, .. } => assert_eq!(*setting, "GORO_MAXPROCS"),
            other => panic!("expected Invalid, got {other:?}"),
        }
        assert!(e.to_string().starts_with("GORO_MAXPROCS: "), "{e}");
        // The code can still start the runtime without the environment.
        Config::new().maxprocs(2).init().unwrap();
        assert_eq!(goro::maxprocs(), 2);
    });
}

/// The variables goro reads where it needs them (a dump's layout, a fallback for
/// testing) are checked with the others before anything starts: `from_env` and
/// `init` name the variable, and the implicit start panics naming it. Before, junk
/// there was ignored (and a bad `GORO_PIDFD` panicked only after `goro::process` had
/// started the child).
#[test]
fn variables_read_later_are_checked_before_the_start() {
    const JUNK: [(&str, &str); 4] = [
        ("GORO_STACK_GUARD", "mprotekt"),
        ("GORO_DUMP", "every"),
        ("GORO_TRACEBACK", "2"),
        ("GORO_PIDFD", "junk"),
    ];
    let set = JUNK
        .iter()
        .find(|(k, v)| std::env::var(k).as_deref() == Ok(*v));
    let Some(&(name, _)) = set else {
        // The parent: one child per variable.
        for (k, v) in JUNK {
            common::alone(
                "variables_read_later_are_checked_before_the_start",
                &[(k, v)],
            );
        }
        return;
    };
    with_timeout(T, move || {
        let e = Config::from_env().unwrap_err();
        assert!(e.to_string().starts_with(&format!("{name}: ")), "{e}");
        assert_eq!(invalid_setting(Config::new().init()), name);
        let payload = std::panic::catch_unwind(|| goro::go!(|| ()).join()).unwrap_err();
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(msg.contains(name), "{msg}");
    });
}
