//! The Go side, built once per `compare` run: `bench/go/` (standard library only) and for
//! the `time` suite Go's own `time` benchmarks; without `go` the Go column says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::child::run_with_timeout;

/// Bound of one `go build` or `go test -c`; past it Go is not measured.
const BUILD_BOUND: Duration = Duration::from_secs(300);

#[derive(Clone, Debug)]
pub struct GoBuild {
    pub version: String,
    pub bin: PathBuf,
    /// Go's `time` tests, for the `time` suite: their benchmarks are Go's timer latency rows.
    pub time_tests: Option<PathBuf>,
}

/// `go version`'s line, or why `go` cannot be used.
fn version() -> Result<String, String> {
    match Command::new("go").arg("version").output() {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => Err(format!("`go version` failed ({})", o.status)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err("no go toolchain on PATH (bash bench/go/install.sh)".into())
        }
        Err(e) => Err(format!("`go` is not runnable from the PATH ({e})")),
    }
}

/// Runs `go ARGS` in `dir`; if it fails, an error with its first line of output.
fn go(dir: &Path, args: &[&str], what: &str) -> Result<(), String> {
    let mut cmd = Command::new("go");
    cmd.args(args).current_dir(dir);
    let f = run_with_timeout(cmd, BUILD_BOUND, what)?;
    if !f.status.success() {
        let first = (f.stderr.lines().chain(f.stdout.lines()).map(str::trim))
            .find(|l| !l.is_empty() && !l.starts_with('#'))
            .unwrap_or("no output");
        return Err(format!("{what} failed: {first}"));
    }
    Ok(())
}

/// Builds bench/go into `tmp` (and Go's `time` tests if `time_tests`).
pub fn build(tmp: &Path, time_tests: bool) -> Result<GoBuild, String> {
    let version = version()?;
    std::fs::create_dir_all(tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("go");
    let bin = tmp.join("goro-bench-go");
    let out = bin.to_string_lossy();
    go(&src, &["build", "-o", &out, "."], "go build")?;
    let time_tests = time_tests.then(|| tmp.join("go-time.test"));
    if let Some(out) = &time_tests {
        let out = out.to_string_lossy();
        let args = ["test", "-c", "-tags=timetzdata", "-o", &out, "time"];
        go(tmp, &args, "go test -c time")?;
    }
    Ok(GoBuild {
        version,
        bin,
        time_tests,
    })
}

/// A `go test -bench` result: the name (without `Benchmark` and `-P`), metrics by unit.
#[derive(Debug, PartialEq)]
pub struct BenchLine {
    pub name: String,
    pub metrics: BTreeMap<String, f64>,
}

/// Parses `BenchmarkName[-P]  N  v1 unit1  v2 unit2 ...` lines, leaving out skipped ones (N = 0).
pub fn parse_bench_output(out: &str) -> Vec<BenchLine> {
    out.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let full = f.first()?.strip_prefix("Benchmark")?;
            let name = match full.rsplit_once('-') {
                Some((n, p)) if p.parse::<usize>().is_ok() => n,
                _ => full,
            };
            f.get(1)?.parse::<u64>().ok().filter(|&n| n > 0)?;
            let metrics = f[2..]
                .chunks(2)
                .filter_map(|c| Some((c.get(1)?.to_string(), c[0].parse().ok()?)))
                .collect();
            Some(BenchLine {
                name: name.to_string(),
                metrics,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_output() {
        let out = "\
BenchmarkParallelTimerLatency-2   \t     100\t    112687 avg-late-ns\t   3786028 max-late-ns
BenchmarkStaggeredTickerLatency/work-dur=300µs/tickers-per-P=1-2  100  587822 avg-late-ns  3706713 max-late-ns
BenchmarkSkipped  \t       0\t               NaN ns/op
PASS
";
        let r = parse_bench_output(out);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "ParallelTimerLatency");
        assert_eq!(r[0].metrics["max-late-ns"], 3786028.0);
        assert_eq!(
            r[1].name,
            "StaggeredTickerLatency/work-dur=300µs/tickers-per-P=1"
        );
    }
}
