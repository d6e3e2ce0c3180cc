//! Another executor's `block_on` on a coroutine (docs/caveats.md, "Another executor
//! inside a coroutine"): run inside `goro::blocking`, where the coroutine is a plain
//! thread and hooked std calls are real calls, the executor's thread-local state is
//! never seen by another coroutine, with or without the `hooks` feature, at 1 and 2 Ps.
//!
//! Without `blocking`, under the `hooks` feature, a `std::thread::sleep` inside the
//! executor parks the coroutine with the executor's "inside a runtime" flag still set
//! on its thread; the next coroutine to run there and enter a runtime of its own
//! panics with "Cannot start a runtime from within a runtime".

#[path = "../../tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::with_timeout;

#[test]
fn under_maxprocs_1_and_2() {
    common::rerun_under_maxprocs("under_maxprocs_1_and_2", &[]);
}

/// The answer of one coroutine's own current-thread tokio runtime, with a std sleep
/// (hooked under the feature) and a tokio timer inside its `block_on`.
fn tokio_in_blocking(i: u64) -> u64 {
    goro::blocking(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a current-thread runtime");
        rt.block_on(async move {
            std::thread::sleep(Duration::from_millis(2));
            tokio::time::sleep(Duration::from_millis(2)).await;
            std::thread::sleep(Duration::from_millis(2));
            i * 2
        })
    })
}

#[test]
fn tokio_block_on_inside_blocking_from_many_coroutines() {
    with_timeout(Duration::from_secs(60), || {
        let hs: Vec<_> = (0..16u64)
            .map(|i| goro::go!(move || (0..5).map(|_| tokio_in_blocking(i)).sum::<u64>()))
            .collect();
        for (i, h) in hs.into_iter().enumerate() {
            assert_eq!(h.join().unwrap(), i as u64 * 10);
        }
    });
}
