#!/bin/bash
# autogroup off for these runs only, restored after
cd /work/main
V=/work/var-noshare/_build/release/pgcrew
echo 0 > /proc/sys/kernel/sched_autogroup_enabled
run() { local name=$1 targets=$2
  BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$V bench/rotation --roles 20000 --targets $targets --out /tmp/s56/rot-$name > /tmp/s56/rot-$name.log 2>&1
  echo "$name rc=$? $(date +%T)"; }
run noag-rev-1 pgcrew-w1,pgcrew-auto
run noag-2 pgcrew-auto,pgcrew-w1
echo 1 > /proc/sys/kernel/sched_autogroup_enabled
echo "ALLDONE autogroup=$(cat /proc/sys/kernel/sched_autogroup_enabled)"
