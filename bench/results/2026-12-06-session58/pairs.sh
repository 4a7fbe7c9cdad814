#!/bin/bash
# bench/rotation (20,000 roles, pooler in its own session), workers = auto and
# 1, supervisor_sched_batch = 0 then 1 (the order alternating), N pairs.
# usage: pairs.sh OUTDIR N   (PGCREW_BIN: the binary, one for every run)
cd /work/main
out=$1; n=${2:-3}
mkdir -p "$out"
for i in $(seq 1 "$n"); do
  if [ $((i % 2)) = 1 ]; then order="0 1"; else order="1 0"; fi
  for b in $order; do
    name=p$i-batch$b
    BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN:?} \
      bench/rotation --roles 20000 --targets ${TARGETS:-pgcrew-auto,pgcrew-w1} \
      --pgcrew-set supervisor_sched_batch=$b --out "$out/$name" > "$out/$name.log" 2>&1
    echo "$name done $(date +%T) rc=$?"
  done
done
