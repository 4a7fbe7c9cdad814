#!/bin/bash
# rotation (auto only) with each pgcrew process's CPU ticks sampled until it exits
cd /work/main
BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN_AFTER:?set to the binary to measure} bench/rotation --roles 20000 --targets pgcrew-auto --out /tmp/s57/rot-percpu > /tmp/s57/rot-percpu.log 2>&1 &
B=$!
: > /tmp/s57/percpu.txt
while kill -0 $B 2>/dev/null; do
  for p in $(pgrep -x pgcrew); do
    if [ -r /proc/$p/stat ]; then
      echo "$(date +%s) $p $(cat /proc/$p/stat | awk '{print $4, $14+$15}')" >> /tmp/s57/percpu.txt
    fi
  done
  sleep 2
done
echo done
