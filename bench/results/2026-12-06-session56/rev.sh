#!/bin/bash
cd /work/main
V=/work/var-noshare/_build/release/pgcrew
while pgrep -f "bound.sh" >/dev/null; do sleep 5; done
run() { local name=$1 bin=$2 targets=$3; shift 3
  env "$@" BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$bin bench/rotation --roles 20000 --targets $targets --out /tmp/s56/rot-$name > /tmp/s56/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"; }
run rev-main-1 $V pgcrew-w1,pgcrew-auto X=1
run rev-bound-1 $V pgcrew-w1,pgcrew-auto STEER0=1 NOSHARE=1
echo ALLDONE
