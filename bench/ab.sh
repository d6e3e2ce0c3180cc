#!/usr/bin/env bash
# Criterion A/B of two builds, alternated, as docs/benchmarks.md reports them:
#   bench/ab.sh BEFORE_DIR AFTER_DIR [ROUNDS]
# Each directory holds the bench binaries `proc`, `chan` and `sync` of one build
# (`cargo bench --no-run -p goro-bench`, then copy target/release/deps/{proc,chan,sync}-*
# there). Prints "round procs build benchmark time" lines; take the median per row.
set -euo pipefail
before=$1; after=$2; rounds=${3:-3}
benches="proc:Gosched/alone proc:SpawnJoin/from_coroutine
chan:PingPong/round_trip chan:Chain/per_hop sync:Mutex/goro sync:MutexUncontended/goro
proc:Syscall/noop"
for round in $(seq "$rounds"); do
    for procs in 1 2; do
        for dir in "$before" "$after"; do
            for spec in $benches; do
                bin=${spec%%:*}; name=${spec#*:}
                t=$(GORO_MAXPROCS=$procs "$dir/$bin" --bench "^${name}\$" --warm-up-time 1 \
                    --measurement-time 3 --noplot 2>/dev/null |
                    grep -A1 "^${name}" | grep -o "time: *\[[^]]*\]" | awk '{print $4, $5}')
                echo "$round $procs $(basename "$dir") $name $t"
            done
        done
    done
done
