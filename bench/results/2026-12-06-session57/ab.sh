#!/bin/bash
cd /work/main
run() { local name=$1 bin=$2 targets=$3
  BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$bin bench/rotation --roles 20000 --targets $targets --out /tmp/s57/rot-$name > /tmp/s57/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"; }
run before-1 /tmp/s57/pgcrew-before pgcrew-auto
run after-1 /tmp/s57/pgcrew-after pgcrew-auto,pgcrew-w1
run before-2 /tmp/s57/pgcrew-before pgcrew-auto
run after-2 /tmp/s57/pgcrew-after pgcrew-w1,pgcrew-auto
echo ALLDONE
