#!/bin/bash
# Many short bench/rotation runs (6,000 roles: 1,000 warm-up, one
# 5,000-role chunk), workers = auto and 1 in each, the order alternating,
# to compare the two by paired differences rather than by a few long runs.
# usage: many.sh OUTDIR N   (PGCREW_BIN: the binary; SET=KEY=VALUE: one more
# pgcrew setting, as bench/rotation's --pgcrew-set)
cd /work/main
out=$1; n=${2:-10}
mkdir -p "$out"
for i in $(seq 1 "$n"); do
  if [ $((i % 2)) = 1 ]; then t=pgcrew-auto,pgcrew-w1; else t=pgcrew-w1,pgcrew-auto; fi
  BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN:?} \
    bench/rotation --roles 6000 --warm 1000 --every 5000 --settle 2 --final-settle 2 --late 0 \
    --targets $t ${SET:+--pgcrew-set $SET} --out "$out/r$i" > "$out/r$i.log" 2>&1
  echo "r$i done $(date +%T) rc=$?"
done
