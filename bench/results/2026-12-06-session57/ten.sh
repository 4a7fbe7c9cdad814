#!/bin/bash
cd /work/main
while pgrep -f "/tmp/s57/ab.sh" >/dev/null; do sleep 5; done
for side in before after; do
  BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=/tmp/s57/pgcrew-$side bench/tenants --pools 1000 --targets pgcrew-auto,pgcrew-w1 --out /tmp/s57/ten-$side > /tmp/s57/ten-$side.log 2>&1
  echo "ten-$side rc=$? $(date +%T)"
done
echo ALLDONE
