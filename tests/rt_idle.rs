//! An idle runtime burns no CPU. Its own test binary, so no other test shares the
//! process while CPU time is measured.

mod common;

use std::time::Duration;

use common::{busy, with_timeout};

fn process_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime with a valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn idle_runtime_uses_no_cpu() {
    with_timeout(Duration::from_secs(30), || {
        // Wake every M once with CPU-bound work, then let them all go idle.
        let hs: Vec<_> = (0..16)
            .map(|_| goro::go!(|| busy(Duration::from_millis(2))))
            .collect();
        hs.into_iter().for_each(|h| h.join().unwrap());
        // A parked coroutine stays behind, as in a real idle program.
        let parked = goro::go!(|| {
            let _u = goro::park::prepare();
            goro::park::park(goro::park::WaitReason::Park);
        });
        std::thread::sleep(Duration::from_millis(100)); // spinning Ms give up
        let before = process_cpu();
        std::thread::sleep(Duration::from_millis(200));
        let used = process_cpu() - before;
        assert!(
            used < Duration::from_millis(10),
            "idle runtime used {used:?} of CPU in 200 ms"
        );
        drop(parked); // leaked on purpose: nobody will wake it
    });
}

#[test]
fn idle_runtime_with_a_pending_timer_uses_no_cpu() {
    with_timeout(Duration::from_secs(30), || {
        let sleeper = goro::go!(|| goro::time::sleep(Duration::from_millis(500)));
        std::thread::sleep(Duration::from_millis(100));
        let before = process_cpu();
        std::thread::sleep(Duration::from_millis(200));
        let used = process_cpu() - before;
        assert!(
            used < Duration::from_millis(10),
            "waiting for a timer used {used:?} of CPU in 200 ms"
        );
        sleeper.join().unwrap();
    });
}
