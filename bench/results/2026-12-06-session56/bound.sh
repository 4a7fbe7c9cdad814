#!/bin/bash
# bound: steered to worker 0 and no IPC for slots/welcome (NOSHARE) vs main
cd /work/main
V=/work/var-noshare/_build/release/pgcrew
M=$V   # no env: dd43a86 as is (steer and noshare off)
run() { # name bin envs...
  local name=$1 bin=$2; shift 2
  env "$@" BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$bin bench/rotation --roles 20000 --targets pgcrew-auto,pgcrew-w1 --out /tmp/s56/rot-$name > /tmp/s56/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"
}
run bound-1 $V STEER0=1 NOSHARE=1
run main-1 $M X=1
run steer-1 $V STEER0=1
run bound-2 $V STEER0=1 NOSHARE=1
run main-2 $M X=1
echo ALLDONE
