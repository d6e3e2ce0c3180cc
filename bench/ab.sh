#!/usr/bin/env bash
# A/B of two builds of goro, alternated run by run:
#   bench/ab.sh BEFORE_DIR AFTER_DIR [ROUNDS]
# Each directory holds one build's `compare` binary (`cargo build --release -p goro-bench
# --bin compare`, then copy target/release/compare there). Each run is one
# `compare worker goro WORKLOAD` at GORO_MAXPROCS=1 and 2; prints "round procs build
# workload figure" lines (the workload's unit: `compare list`); take the median per row.
set -euo pipefail
before=$1; after=$2; rounds=${3:-3}
workloads="yield spawn_join pingpong chain Mutex MutexUncontended"
for round in $(seq "$rounds"); do
    for procs in 1 2; do
        for dir in "$before" "$after"; do
            for w in $workloads; do
                v=$(GORO_MAXPROCS=$procs "$dir/compare" worker goro "$w" | tail -n 1 |
                    grep -o '"value":[^,}]*' | cut -d: -f2)
                echo "$round $procs $(basename "$dir") $w ${v:-failed}"
            done
        done
    done
done
