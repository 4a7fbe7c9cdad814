#!/usr/bin/env bash
# Side run: where pgcrew spends its CPU in bench/tenants' TPS slices (1,000
# pools): perf record of the pooler's processes (supervisor and workers)
# for 5 s, 2 s into each target's slice.
set -eu   # (no pipefail: head closes the report pipes early)
repo=${1:-/tmp/wt-bench}
out=${2:-/tmp/tenants-side}
export BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$repo/_build/release/pgcrew
cd "$repo"
bench/tenants --pools 1000 --targets pgcrew-w1,pgcrew-auto --samples 100 --duration 10 \
    --rounds 1 --out "$out/run" > "$out/run.log" 2>&1 &
bench_pid=$!
prof() {   # $1 = target
    until grep -q "tps $1 *round 0: 10" "$out/run.log"; do sleep 0.2; done
    sleep 2
    pids=$(paste -sd, "$BENCH_DIR/tenants/tenants-$1.pid")
    perf record -F 499 -p "$pids" -o "$out/$1.perf.data" -- sleep 5 >/dev/null 2>&1
    perf report -i "$out/$1.perf.data" --no-children --sort comm,dso,symbol --stdio -g none \
        2>/dev/null | grep -v '^#' | grep '%' | head -40 > "$out/$1.perf.txt"
    # by process (the lowest pid is the supervisor)
    perf report -i "$out/$1.perf.data" --no-children --sort pid,symbol --stdio -g none \
        2>/dev/null | grep '%' | head -14 > "$out/$1.by-pid.txt"
}
prof pgcrew-w1
prof pgcrew-auto
wait "$bench_pid"
