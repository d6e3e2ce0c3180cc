#!/usr/bin/env bash
# Instructions per hot-path operation (callgrind), as docs/benchmarks.md reports them:
#   bench/instructions.sh [OPS_BINARY [MODE:N ...]]   (default: target/release/ops, the
#   scheduler's five hot paths)
# Runs `ops MODE N` and `ops MODE 2N` at GORO_MAXPROCS=1 under callgrind with one
# output file per thread, and prints, per mode, the difference / N of the Ms that ran
# the loop (the busiest thread, and any that did a tenth as much: a second M can take
# the P over midway; start-up and sysmon cancel out or stay near 0).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-target/release/ops}
[ -x "$bin" ] || cargo build --release -q -p goro-bench --bin ops
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shift || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(yield:50000 spawnjoin:50000 pingpong:50000 chain:1000 mutex:50000)
for spec in "${specs[@]}"; do
    mode=${spec%%:*}; n=${spec#*:}
    for k in 1 2; do
        GORO_MAXPROCS=1 valgrind --tool=callgrind --separate-threads=yes \
            --callgrind-out-file="$out/$mode.$k" "$bin" "$mode" $((n * k)) >/dev/null 2>&1
    done
    python3 - "$out" "$mode" "$n" <<'PY'
import glob, sys
out, mode, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
def totals(k):
    t = {}
    for f in glob.glob(f"{out}/{mode}.{k}-*"):
        for line in open(f):
            if line.startswith(("summary:", "totals:")):
                t[f.rsplit("-", 1)[1]] = int(line.split()[1])
                break
    return t
a, b = totals(1), totals(2)
diffs = [b.get(t, 0) - a.get(t, 0) for t in set(a) | set(b)]
# The Ms that ran the loop: the busiest thread, and any other that did a tenth as much
# (valgrind runs ~50x slow, so sysmon may hand the P to a second M midway through a
# time slice); sysmon's own thread and the start-up stay far below that.
busiest = max(diffs)
ms = sum(d for d in diffs if d >= busiest / 10)
print(f"{mode}: {ms / n:.1f} instructions per op" + (" (100 hops)" if mode == "chain" else ""))
PY
done
