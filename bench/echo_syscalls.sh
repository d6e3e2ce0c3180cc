#!/usr/bin/env bash
# System calls per round trip of goro's and tokio's echo servers under `compare load`, as
# docs/benchmarks.md reports them:
#   bench/echo_syscalls.sh [CONNS]     (default 50; needs perf)
# Each server runs alone at 2 Ps / worker threads; `perf stat` counts its calls for 3 s
# in the middle of a 5 s load (the round trips are the load's whole-run rate x 3 s).
set -euo pipefail
cd "$(dirname "$0")/.."
conns=${1:-50}
command -v perf >/dev/null || { echo "needs perf" >&2; exit 1; }
cargo build --release -q --example echo_server
cargo build --release -q -p goro-bench --bin compare
addr=127.0.0.1:7313
events='syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendto,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_read,context-switches'
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for who in goro tokio; do
    if [ "$who" = goro ]; then
        GORO_MAXPROCS=2 target/release/examples/echo_server --addr $addr >/dev/null 2>&1 &
    else
        GORO_MAXPROCS=2 target/release/compare serve tokio --addr $addr >/dev/null 2>&1 </dev/null &
    fi
    srv=$!
    sleep 0.5
    GORO_MAXPROCS=2 timeout 60 target/release/compare load --addr $addr --conns "$conns" \
        --secs 5 --warmup 1 >"$out/load" 2>&1 &
    load=$!
    sleep 1.5
    perf stat -x, -e "$events" -p $srv -- sleep 3 2>"$out/stat"
    wait $load
    kill -INT $srv
    wait $srv 2>/dev/null || true
    rps=$(grep -o '[0-9]* req/s' "$out/load" | head -1 | awk '{print $1}')
    echo "$who, $conns conns: $rps req/s"
    awk -F, -v r="$rps" '{ printf "  %-34s %.3f per round trip\n", $3, $1 / (r * 3) }' "$out/stat"
done
