#!/bin/bash
# bench/rotation (20,000 roles) for TARGET; 40 s in, every syscall entry of
# each pgcrew process counted by perf for 20 s (tracepoints; root).
# usage: TARGET=pgcrew-auto|pgcrew-w1 sysc.sh OUTDIR
cd /work/main
out=$1
mkdir -p "$out"
BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN:?} \
  bench/rotation --roles 20000 --targets ${TARGET:?} --out "$out/run" > "$out/run.log" 2>&1 &
B=$!
sleep 40
for p in $(pgrep -x pgcrew); do
  perf stat -x, -e 'syscalls:sys_enter_*' -e 'sched:sched_switch' -e 'sched:sched_wakeup' -p $p -o "$out/perf-$p.csv" -- sleep 20 &
done
wait %2 %3 %4 2>/dev/null
wait $B
echo "done $(date +%T)"
