#!/bin/bash
cd /work/main
V=/work/var-noshare/_build/release/pgcrew
run() { local name=$1 targets=$2
  WSETSID=1 BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$V bench/rotation --roles 20000 --targets $targets --out /tmp/s56/rot-$name > /tmp/s56/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"; }
run wsid-1 pgcrew-auto,pgcrew-w1
run wsid-rev-1 pgcrew-w1,pgcrew-auto
echo ALLDONE
