#!/usr/bin/env bash
set -eu
repo=/work/main; out=/tmp/s51/prof; rm -rf $out; mkdir -p $out
export BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$repo/_build/release/pgcrew
cd "$repo"
bench/tenants --pools 1000 --targets pgcrew-auto --samples 100 --duration 10 --rounds 1 --out "$out/run" > "$out/run.log" 2>&1 &
bench_pid=$!
until grep -q "tps pgcrew-auto *round 0: 10" "$out/run.log"; do sleep 0.2; done
sleep 2
pids=$(paste -sd, "$BENCH_DIR/tenants/tenants-pgcrew-auto.pid")
perf record -F 999 -g -p "$pids" -o "$out/auto.perf.data" -- sleep 5 >/dev/null 2>&1
wait "$bench_pid"
perf report -i "$out/auto.perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -40 > "$out/auto.flat.txt"
perf report -i "$out/auto.perf.data" --children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -40 > "$out/auto.children.txt"
grep TPS "$out/run.log" | tail -2
