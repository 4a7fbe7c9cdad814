#!/usr/bin/env bash
set -eu
repo=/work/main; out=/tmp/prof10k; rm -rf $out; mkdir -p $out
export BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$repo/_build/release/pgcrew
cd "$repo"
bench/tenants --pools 10000 --targets pgcrew-w1 --samples 100 --duration 10 --rounds 1 --out "$out/run" > "$out/run.log" 2>&1 &
bench_pid=$!
until grep -q "tps pgcrew-w1 *round 0: 10" "$out/run.log"; do sleep 0.2; done
sleep 2
pids=$(paste -sd, "$BENCH_DIR/tenants/tenants-pgcrew-w1.pid")
perf record -F 999 -g -p "$pids" -o "$out/w1.perf.data" -- sleep 5 >/dev/null 2>&1
wait "$bench_pid"
perf report -i "$out/w1.perf.data" --no-children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -40 > "$out/w1.flat.txt"
perf report -i "$out/w1.perf.data" --children --sort symbol --stdio -g none 2>/dev/null | grep '%' | head -40 > "$out/w1.children.txt"
grep TPS "$out/run.log" | tail -2
