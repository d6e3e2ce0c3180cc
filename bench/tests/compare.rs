//! `compare` end to end, at its smallest settings: the rows it prints and the JSON it
//! writes, a contender without an implementation, and an echo run (server, load, CPU
//! sampling, stop). Every run is bounded by the harness's own timeouts and by the
//! bound here.

use std::process::Command;
use std::time::Duration;

use goro_bench::harness::child::run_with_timeout;

/// Runs `compare ARGS --json FILE` and returns its stdout and the JSON (`tag` names
/// the file).
fn compare(tag: &str, args: &[&str]) -> (String, serde_json::Value) {
    let name = format!("goro-compare-test-{tag}-{}.json", std::process::id());
    let json = std::env::temp_dir().join(name);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_compare"));
    cmd.args(args).arg("--json").arg(&json);
    let f = run_with_timeout(cmd, Duration::from_secs(300), "compare").unwrap();
    assert!(f.status.success(), "{}\n{}", f.stdout, f.stderr);
    let doc = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(json);
    (f.stdout, doc)
}

#[test]
fn a_suite_prints_a_table_and_writes_every_run() {
    let (out, doc) = compare(
        "suite",
        &[
            "--only",
            "yield,mutex2,SemaUncontended",
            "--contenders",
            "goro,threads",
            "--rounds",
            "1",
            "--target-ms",
            "20",
        ],
    );
    assert!(
        out.contains("| workload | unit | Ps | goro | threads |"),
        "{out}"
    );
    assert!(out.contains("| yield | ns/yield | 2 |"), "{out}");
    let rows = doc["rows"].as_array().unwrap();
    // yield and mutex2 at 2 Ps, SemaUncontended at 1 and 2.
    assert_eq!(rows.len(), 4);
    for row in rows {
        let goro = &row["cells"][0];
        assert!(goro["median"].as_f64().unwrap() > 0.0, "{row}");
        let threads = &row["cells"][1];
        // threads has no port of the semaphore benchmarks: no run, an empty cell.
        let runs = threads["runs"].as_array().unwrap().len();
        assert_eq!(runs, usize::from(row["name"] != "SemaUncontended"), "{row}");
    }
}

#[test]
fn an_echo_run_measures_a_server() {
    let (out, doc) = compare(
        "echo",
        &[
            "--only",
            "echo/1",
            "--contenders",
            "goro",
            "--rounds",
            "1",
            "--secs",
            "0.3",
            "--warmup",
            "0.1",
        ],
    );
    let rows = doc["rows"].as_array().unwrap();
    let rps = rows[0]["cells"][0]["median"].as_f64();
    assert!(rps.is_some_and(|r| r > 0.0), "{out}");
    assert!(rows.iter().any(|r| r["name"] == "echo/1/p99"), "{out}");
}

/// The shared workload code (`workloads/tasks.rs`) on may's coroutines and tokio's
/// futures: a channel workload and spawn-and-park each give a figure, not a skip or a
/// failure (goro's and the threads' runs are the first test's).
#[test]
fn may_and_tokio_run_the_shared_workloads() {
    let (out, doc) = compare(
        "tasks",
        &[
            "--only",
            "pingpong,spawn_park_10k",
            "--contenders",
            "may,tokio",
            "--rounds",
            "1",
        ],
    );
    let rows = doc["rows"].as_array().unwrap();
    let own = |r: &&serde_json::Value| r["name"] == "pingpong" || r["name"] == "spawn_park_10k";
    assert_eq!(rows.iter().filter(own).count(), 2, "{out}");
    for row in rows.iter().filter(own) {
        for cell in row["cells"].as_array().unwrap() {
            let median = cell["median"].as_f64();
            assert!(median.is_some_and(|m| m > 0.0), "{row}\n{out}");
        }
    }
}
