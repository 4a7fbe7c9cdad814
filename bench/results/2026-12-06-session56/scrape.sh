#!/bin/bash
# keep the last /metrics of each port while the bench runs
end=$((SECONDS+200))
while [ $SECONDS -lt $end ]; do
  for p in 26433 26435; do curl -s -m 2 http://127.0.0.1:$p/metrics > /tmp/s56/m-$p.tmp 2>/dev/null && [ -s /tmp/s56/m-$p.tmp ] && mv /tmp/s56/m-$p.tmp /tmp/s56/metrics-$p.txt; done
  sleep 3
done
