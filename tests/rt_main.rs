//! `#[goro::main]`: main's body runs as a coroutine named "main" (Go's main
//! goroutine). Here on functions named `main` in modules (the test binary's own main
//! is the harness's); tests/sysmon.rs has the deadlock report that shows it, and the
//! guide's example a whole program.

mod common;

use std::time::Duration;

use common::with_timeout;

mod plain {
    #[goro::main]
    pub fn main() {
        assert_eq!(goro::current_name().as_deref(), Some("main"));
        let me = goro::current_id().expect("main runs on a coroutine");
        let listed = goro::debug::coroutines()
            .into_iter()
            .any(|c| c.id == me && c.name.as_deref() == Some("main"));
        assert!(listed, "debug::coroutines() lists the main coroutine");
        // Blocking calls park it like any coroutine.
        goro::time::sleep(std::time::Duration::from_millis(1));
        assert_eq!(goro::go!(|| 6 * 7).join().unwrap(), 42);
    }
}

mod fails {
    #[goro::main]
    pub fn main() -> Result<(), Box<dyn std::error::Error>> {
        // A result that is not Send (Box<dyn Error>) is fine: it is reported on the
        // coroutine, as std reports main's.
        let n: u32 = "forty-two".parse()?;
        println!("{n}");
        Ok(())
    }
}

mod succeeds {
    #[goro::main]
    pub fn main() -> Result<(), String> {
        if goro::current_name().as_deref() != Some("main") {
            return Err("not on the main coroutine".into());
        }
        Ok(())
    }
}

mod panics {
    #[goro::main]
    pub fn main() {
        panic!("main failed");
    }
}

#[test]
fn main_runs_as_a_coroutine_named_main() {
    with_timeout(Duration::from_secs(60), || {
        let code = plain::main();
        assert_eq!(
            format!("{code:?}"),
            format!("{:?}", std::process::ExitCode::SUCCESS)
        );
    });
}

#[test]
fn a_result_main_reports_as_std_does() {
    with_timeout(Duration::from_secs(60), || {
        let ok = succeeds::main();
        assert_eq!(
            format!("{ok:?}"),
            format!("{:?}", std::process::ExitCode::SUCCESS)
        );
        let err = fails::main();
        assert_eq!(
            format!("{err:?}"),
            format!("{:?}", std::process::ExitCode::FAILURE)
        );
    });
}

#[test]
fn a_panic_in_main_reaches_the_main_thread() {
    with_timeout(Duration::from_secs(60), || {
        let p = std::panic::catch_unwind(panics::main).unwrap_err();
        assert_eq!(goro::panic_message(&*p), "main failed");
    });
}
