#!/bin/bash
cd /work/main
V=/tmp/wt-bound/_build/release/pgcrew
M=/work/main/_build/release/pgcrew
run() { local name=$1 bin=$2 targets=$3; shift 3
  env "$@" BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$bin bench/rotation --roles 20000 --targets $targets --out /tmp/s57/rot-$name > /tmp/s57/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"; }
run main-1 $M pgcrew-auto,pgcrew-w1 X=1
run bound-1 $V pgcrew-auto,pgcrew-w1 STEER0=1 NOSHARE=1
run noput-1 $V pgcrew-auto,pgcrew-w1 NOPUT=1
run noput-rev $V pgcrew-w1,pgcrew-auto NOPUT=1
run bound-rev $V pgcrew-w1,pgcrew-auto STEER0=1 NOSHARE=1
echo ALLDONE
