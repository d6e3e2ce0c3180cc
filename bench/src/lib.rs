//! goro's benchmarks and measurement tools.
//!
//! - [`workloads`]: what is measured, one function per workload (the ports of Go's
//!   benchmarks and the comparison's workloads), used by the criterion benches
//!   (`benches/`), by the comparison and by the examples (`examples/`) alike.
//! - [`contenders`]: goro, may, tokio, plain threads and Go behind one trait.
//! - [`harness`]: child processes under timeouts, the Go side (`bench/go/`, one Go
//!   module), medians and spreads, markdown / JSON / SVG output, `/proc` readers.
//! - `src/bin/compare.rs`: the one command,
//!   `compare --suite chan|sync|time|proc|echo|blocking|async|all`; `src/bin/ops.rs`: one
//!   hot-path operation in a loop, for `bench/instructions.sh` (callgrind).

pub mod contenders;
pub mod harness;
pub mod workloads;
