#!/bin/bash
# bench/rotation (20,000 roles, workers = auto unless TARGET says) with each pgcrew
# process's CPU ticks and context switches (voluntary, involuntary) sampled
# every 2 s until it exits. usage: [TARGET=pgcrew-w1] ctx.sh OUTDIR BATCH(0|1)
cd /work/main
out=$1; b=$2
mkdir -p "$out"
BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN:?} \
  bench/rotation --roles 20000 --targets ${TARGET:-pgcrew-auto} --pgcrew-set supervisor_sched_batch=$b \
  --out "$out/run" > "$out/run.log" 2>&1 &
B=$!
: > "$out/ctx.txt"
while kill -0 $B 2>/dev/null; do
  for p in $(pgrep -x pgcrew); do
    s=$(awk '{print $4, $14+$15}' /proc/$p/stat 2>/dev/null) || continue
    c=$(awk '/^voluntary_ctxt/{v=$2} /^nonvoluntary_ctxt/{n=$2} END{print v, n}' /proc/$p/status 2>/dev/null) || continue
    echo "$(date +%s) $p $s $c" >> "$out/ctx.txt"
  done
  sleep 2
done
echo "done $(date +%T)"
