//! Ports of Go's runtime-semaphore and `sync.Mutex` benchmarks: goro's `sema` and
//! `Mutex` next to `std::sync::Mutex` and `parking_lot::Mutex`.
//!
//! ```text
//! GORO_MAXPROCS=1 cargo bench -p goro-bench --bench sync
//! GORO_MAXPROCS=2 cargo bench -p goro-bench --bench sync
//! ```
//!
//! Groups, named after Go's benchmarks without `Benchmark`:
//!
//! - `SemaUncontended`, `SemaSyntNonblock`, `SemaSyntBlock`, `SemaWorkNonblock`,
//!   `SemaWorkBlock`: Go 1.19 `sync/runtime_sema_test.go` (the runtime semaphore,
//!   reached through sync's test exports), on `goro_sync::sema`. Functions `goro` and
//!   `goro_no_backoff` (`backoff::set_randomized(false)` for the run).
//! - `MutexUncontended`, `Mutex`, `MutexSlack`, `MutexWork`, `MutexWorkSlack`: Go 1.19
//!   `sync/mutex_test.go`. Functions `goro`, `goro_no_backoff` (`goro::sync::Mutex` on
//!   coroutines), `std` and `parking_lot` (on plain threads).
//! - `WorkOnly/goro`: not in Go's tree; the local work of the `*Work*` benchmarks
//!   alone, to compare with Go's compiled loop (`bench/go/`, `BenchmarkWorkOnly`).
//!
//! Each is Go's `b.RunParallel`: `maxprocs()` workers (coroutines for goro, threads for
//! the peers; ten per P in `*Slack`) share the iterations; time per op = the wall time
//! from a start gate (after spawning) to the last worker's end / iterations. What each
//! does, and where it differs from Go's: `goro_bench::workloads::sync`.
//!
//! For one table with Go's figures from the same run: `compare --suite sync`.

use criterion::Criterion;
use goro_bench::workloads::sync::{run, Bench};

/// One group per benchmark, one function per contender.
fn sync_benches(c: &mut Criterion) {
    for bench in Bench::ALL {
        let mut g = c.benchmark_group(bench.name());
        for &contender in bench.contenders() {
            g.bench_function(contender.name(), |b| {
                b.iter_custom(|iters| run(bench, contender, iters))
            });
        }
        g.finish();
    }
}

goro_bench::bench_main!(sync_benches);
