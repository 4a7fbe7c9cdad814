#!/bin/bash
# rotation (auto only); the supervisor made SCHED_BATCH as soon as it runs (MODE=batch), or left alone
cd /work/main
name=$1; mode=$2
BENCH_POOLER_SESSION=own BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=${PGCREW_BIN_AFTER:?set to the binary to measure} bench/rotation --roles 20000 --targets ${TARGETS:-pgcrew-auto} --out /tmp/s57/rot-$name > /tmp/s57/rot-$name.log 2>&1 &
B=$!
done_pids=""
while kill -0 $B 2>/dev/null; do
  for p in $(pgrep -x pgcrew); do
    pp=$(awk '{print $4}' /proc/$p/stat 2>/dev/null)
    [ -z "$pp" ] && continue
    if [ "$(cat /proc/$pp/comm 2>/dev/null)" != pgcrew ]; then
      case " $done_pids " in *" $p "*) ;; *)
        [ "$mode" = batch ] && chrt -b -p 0 $p && echo "batch $p $(date +%T)"
        done_pids="$done_pids $p";;
      esac
    fi
  done
  sleep 0.5
done
echo "$name done $(date +%T)"
