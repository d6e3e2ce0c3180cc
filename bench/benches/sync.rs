//! Go 1.19's runtime-semaphore and `sync.Mutex` benchmarks (names without `Benchmark`), one
//! function per contender; how they run and where they depart from Go's:
//! `goro_bench::workloads::sync`. `compare --suite sync` puts Go's figures beside them.
//!
//! - `SemaUncontended`, `SemaSyntNonblock`, `SemaSyntBlock`, `SemaWorkNonblock`,
//!   `SemaWorkBlock` (`sync/runtime_sema_test.go`): `goro_sync::sema` as `goro` and
//!   `goro_no_backoff` (`backoff::set_randomized(false)`).
//! - `MutexUncontended`, `Mutex`, `MutexSlack`, `MutexWork`, `MutexWorkSlack`
//!   (`sync/mutex_test.go`): `goro`, `goro_no_backoff` on coroutines, `std` and
//!   `parking_lot` on threads.
//! - `WorkOnly/goro`: the local work of the `*Work*` benchmarks alone (not in Go's tree;
//!   Go's side is `BenchmarkWorkOnly` in `bench/go/`).

use criterion::Criterion;
use goro_bench::workloads::sync::{run, Bench};

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
