#!/usr/bin/env bash
set -eu
repo=/work/main; out=/tmp/s51/st; rm -rf $out; mkdir -p $out
export BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$repo/_build/release/pgcrew
cd "$repo"
bench/tenants --pools 1000 --targets pgcrew-auto --samples 100 --duration 10 \
    --rounds 1 --out "$out/run" > "$out/run.log" 2>&1 &
bench_pid=$!
until grep -q "tps pgcrew-auto *round 0: 10" "$out/run.log"; do sleep 0.2; done
sleep 2
pids=$(cat "$BENCH_DIR/tenants/tenants-pgcrew-auto.pid")
args=""; for p in $pids; do args="$args -p $p"; done
timeout -s INT 2 strace -qq -e trace=sendmsg -e signal=none -s 200 -x $args -o $out/strace.txt || true
wait "$bench_pid"
grep TPS $out/run.log | tail -1
