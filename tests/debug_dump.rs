//! The coroutine dump with stacks and spawn sites: a parked coroutine's function in
//! `debug::dump` and `debug::stack`, the spawn site of every way to spawn, grouping,
//! and dumps taken over and over while thousands of coroutines park and wake. (The
//! deadlock report, the SIGQUIT dump and panic reports run in child processes:
//! tests/sysmon.rs.)

mod common;

use std::hint::black_box;
use std::panic::Location;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{wait_until, with_timeout};
use goro::chan::{channel, Receiver, Sender};
use goro::debug::CoroutineState;

const T: Duration = Duration::from_secs(120);

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// Parks on `rx` until it closes; a frame of its own (not inlined, no tail call).
#[inline(never)]
fn parked_in_a_known_place(rx: Receiver<u32>) -> u32 {
    let mut got = 0;
    while let Ok(v) = rx.recv() {
        got += v;
    }
    black_box(got)
}

/// Waits until coroutine `id` is parked.
fn wait_parked(id: u64) {
    wait_until("the coroutine to park", || {
        goro::debug::coroutines()
            .iter()
            .any(|c| c.id == id && c.state == CoroutineState::Waiting)
    });
}

#[test]
fn a_parked_coroutines_function_is_in_its_stack_and_the_dump() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let h = goro::Builder::new()
            .name("known")
            .spawn(move || parked_in_a_known_place(rx))
            .unwrap();
        let line = line!() - 2;
        wait_parked(h.id());
        let stack = goro::debug::stack(h.id()).expect("a live coroutine");
        let names: Vec<&str> = stack.frames.iter().map(|f| f.function.as_str()).collect();
        assert!(
            names[0].ends_with("parked_in_a_known_place"),
            "the innermost frame shown is the program's: {names:?}"
        );
        assert!(
            !names.iter().any(|n| n.starts_with("goro_runtime::sched")),
            "runtime frames hidden: {names:?}"
        );
        let first = &stack.frames[0];
        assert!(
            first
                .file
                .as_ref()
                .is_some_and(|f| f.ends_with("debug_dump.rs")),
            "{first:?}"
        );
        let at = stack.spawned_at.expect("a spawn site");
        assert_eq!((at.file(), at.line()), (file!(), line));
        let dump = goro::debug::dump();
        let entry = dump
            .split("\n\n")
            .find(|e| e.contains("('known')"))
            .unwrap_or_else(|| panic!("no entry for the coroutine:\n{dump}"));
        assert!(entry.contains("[chan receive, "), "{entry}");
        assert!(entry.contains("parked_in_a_known_place"), "{entry}");
        assert!(
            entry.contains(&format!("created at {}:{line}:", file!())),
            "{entry}"
        );
        // The same, one entry per coroutine.
        assert!(goro::debug::dump_each().contains("parked_in_a_known_place"));
        drop(tx);
        let id = h.id();
        assert_eq!(h.join().unwrap(), 0);
        wait_until("the coroutine to leave the registry", || {
            goro::debug::stack(id).is_none()
        });
    });
}

#[test]
fn a_running_coroutines_stack_is_not_walked() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let (tx, rx) = channel::<u64>(1);
        let h = goro::go!(move || {
            tx.send(goro::current_id().unwrap()).unwrap();
            let start = Instant::now();
            // Relaxed: a stop flag.
            while !s.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                std::hint::spin_loop();
            }
        });
        let id = rx.recv().unwrap();
        let stack = goro::debug::stack(id).unwrap();
        // Running (on an M, or retaken and computing outside goro): no frames, and the
        // reason says it runs.
        let why = stack.unavailable.clone().unwrap_or_default();
        assert!(
            stack.frames.is_empty() && why.contains("on M "),
            "{stack:?}"
        );
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        // The caller's own stack, from a coroutine: walked in place.
        let me = goro::go!(|| goro::debug::stack(goro::current_id().unwrap()).unwrap());
        let me = me.join().unwrap();
        assert!(me.unavailable.is_none(), "{me:?}");
        assert!(
            me.frames[0].function.contains("a_running_coroutines_stack"),
            "{me:?}"
        );
    });
}

/// Every way to spawn records the caller's line.
#[test]
fn spawn_sites_name_the_callers_line() {
    with_timeout(T, || {
        let (tx, rx) = channel::<()>(0);
        let mut expect: Vec<(u64, u32)> = Vec::new();
        let r = rx.clone();
        let a = goro::go!(move || r.recv().is_ok());
        expect.push((a.id(), line!() - 1));
        let r = rx.clone();
        let b = goro::spawn(move || r.recv().is_ok());
        expect.push((b.id(), line!() - 1));
        let r = rx.clone();
        let builder = goro::Builder::new();
        let c = builder.spawn(move || r.recv().is_ok()).unwrap();
        expect.push((c.id(), line!() - 1));
        let mut set = goro::JoinSet::new();
        let r = rx.clone();
        let d = set.spawn(move || r.recv().is_ok());
        expect.push((d, line!() - 1));
        let wg = goro::sync::WaitGroup::new();
        // The spawns goro makes on the program's behalf report (their id, the line of
        // the call that made them), checked below against the registry.
        let (ids_tx, ids_rx) = channel::<(u64, u32)>(8);
        let (r, i) = (rx.clone(), ids_tx.clone());
        let l = line!() + 1;
        wg.go(move || {
            i.send((goro::current_id().unwrap(), l)).unwrap();
            let _ = r.recv();
        });
        let eg = goro::sync::ErrGroup::<()>::new();
        let (r, i) = (rx.clone(), ids_tx.clone());
        let l = line!() + 1;
        eg.go(move || {
            i.send((goro::current_id().unwrap(), l)).unwrap();
            let _ = r.recv();
            Ok(())
        });
        let (r, i) = (rx.clone(), ids_tx.clone());
        let l = line!() + 1;
        let _timer = goro::time::after_func(Duration::ZERO, move || {
            let _ = i.send((goro::current_id().unwrap(), l));
            let _ = r.recv();
        });
        let (ctx, cancel) = goro::context::background().with_cancel();
        let (r, i) = (rx.clone(), ids_tx.clone());
        let l = line!() + 1;
        let _af = ctx.after_func(move || {
            let _ = i.send((goro::current_id().unwrap(), l));
            let _ = r.recv();
        });
        cancel.cancel();
        for _ in 0..4 {
            expect.push(ids_rx.recv().unwrap());
        }
        goro::scope(|s| {
            let r = rx.clone();
            let e = s.spawn(move || r.recv().is_ok());
            expect.push((e.id(), line!() - 1));
            // All of them wait on the channel: every one is in the registry now.
            let infos = goro::debug::coroutines();
            for (id, line) in &expect {
                let info = infos
                    .iter()
                    .find(|i| i.id == *id)
                    .unwrap_or_else(|| panic!("coroutine {id} is not live"));
                let at: &Location = info.spawned_at.expect("a spawn site");
                assert_eq!((at.file(), at.line()), (file!(), *line), "coroutine {id}");
            }
            drop(tx); // lets every one of them end
        });
        a.join().unwrap();
        b.join().unwrap();
        c.join().unwrap();
        while set.join_next().is_some() {}
        wg.wait();
        let _ = eg.wait();
    });
}

/// 1 000 coroutines parked alike are one entry of the dump, with their count.
#[test]
fn alike_coroutines_are_one_entry() {
    with_timeout(T, || {
        let (tx, rx) = channel::<u32>(0);
        let hs: Vec<_> = (0..1000)
            .map(|_| {
                let rx = rx.clone();
                goro::go!(move || parked_in_a_known_place(rx))
            })
            .collect();
        let line = line!() - 3;
        let ids: Vec<u64> = hs.iter().map(|h| h.id()).collect();
        wait_until("1000 coroutines parked", || {
            let parked = goro::debug::coroutines()
                .into_iter()
                .filter(|c| ids.contains(&c.id) && c.state == CoroutineState::Waiting)
                .count();
            parked == 1000
        });
        let dump = goro::debug::dump();
        let site = format!("created at {}:{line}:", file!());
        let entries: Vec<&str> = dump.split("\n\n").filter(|e| e.contains(&site)).collect();
        assert_eq!(entries.len(), 1, "one entry for the 1000:\n{dump}");
        assert!(
            entries[0].starts_with("1000 coroutines [chan receive, "),
            "{}",
            entries[0]
        );
        assert!(entries[0].contains("and 992 more"), "{}", entries[0]);
        assert!(
            entries[0].contains("parked_in_a_known_place"),
            "{}",
            entries[0]
        );
        let each = goro::debug::dump_each();
        assert_eq!(each.matches(&site).count(), 1000);
        drop(tx);
        for h in hs {
            h.join().unwrap();
        }
    });
}

/// One side of a ping-pong: receives, then sends on, `rounds` times.
#[inline(never)]
fn pinger(rx: Receiver<u32>, tx: Sender<u32>, rounds: u32) {
    for _ in 0..rounds {
        let Ok(v) = rx.recv() else { return };
        if tx.send(black_box(v + 1)).is_err() {
            return;
        }
    }
    black_box(());
}

/// Dumps over and over while a plain thread spawns 20 000 coroutines (whose coroutines
/// the Ms make at their first run, issue 38) that park and end: a dump never inspects
/// a coroutine while its M makes it, and every coroutine runs once and ends.
#[test]
fn dumps_while_a_plain_thread_spawns() {
    with_timeout(T, || {
        let stop = Arc::new(AtomicBool::new(false));
        let dumper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let start = Instant::now();
                let mut dumps = 0;
                while !stop.load(Ordering::Relaxed) && start.elapsed() < Duration::from_secs(30) {
                    let dump = goro::debug::dump();
                    assert!(dump.starts_with("coroutine dump:"), "{dump}");
                    dumps += 1;
                }
                dumps
            })
        };
        let (tx, rx) = channel::<u32>(0);
        let hs: Vec<_> = (0..20_000u32)
            .map(|i| {
                let rx = rx.clone();
                goro::go!(move || {
                    goro::yield_now();
                    if i % 2 == 0 {
                        i
                    } else {
                        rx.recv().unwrap_or(i)
                    }
                })
            })
            .collect();
        drop(tx);
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i as u32);
        }
        stop.store(true, Ordering::Relaxed);
        assert!(dumper.join().unwrap() >= 1);
    });
}

/// Dumps over and over while 2 000 coroutines ping-pong in pairs (parking and waking
/// all the time): no crash, no hang, and every frame shown belongs to the test (the
/// runtime's own are hidden).
#[test]
fn stress_dumps_while_coroutines_park_and_wake() {
    with_timeout(T, || {
        let mut hs = Vec::new();
        let mut kick = Vec::new();
        for _ in 0..1000 {
            let (a_tx, a_rx) = channel::<u32>(0);
            let (b_tx, b_rx) = channel::<u32>(0);
            kick.push(a_tx.clone());
            hs.push(goro::go!(move || pinger(a_rx, b_tx, 200)));
            hs.push(goro::go!(move || pinger(b_rx, a_tx, 200)));
        }
        let kicker = goro::go!(move || {
            for k in kick {
                let _ = k.send(0);
            }
        });
        let start = Instant::now();
        let mut dumps = 0;
        while dumps < 20 && start.elapsed() < Duration::from_secs(30) {
            let dump = if dumps % 2 == 0 {
                goro::debug::dump()
            } else {
                goro::debug::dump_each()
            };
            for line in dump.lines() {
                let Some(f) = line.strip_prefix("    ") else {
                    continue;
                };
                if f.starts_with("    at ") || f.starts_with("created at") || f.starts_with('(') {
                    continue;
                }
                assert!(
                    f.starts_with("debug_dump::")
                        || f.starts_with("goro_sync::")
                        || f.starts_with("goro_runtime::"),
                    "a frame that is neither the test's nor goro's: {f}\n{dump}"
                );
            }
            dumps += 1;
        }
        kicker.join().unwrap();
        for h in hs {
            h.join().unwrap();
        }
        assert!(dumps >= 20, "only {dumps} dumps in 30 s");
    });
}
