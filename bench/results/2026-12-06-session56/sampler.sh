#!/bin/bash
# every 2 s: per pgcrew process pid ppid utime stime vol nonvol ctxt
out=$1; end=$((SECONDS+${2:-200}))
while [ $SECONDS -lt $end ]; do
  ts=$(date +%s)
  for p in $(pgrep -x pgcrew); do
    read -r -a st < /proc/$p/stat 2>/dev/null || continue
    v=$(awk '/^voluntary_ctxt/{print $2}' /proc/$p/status 2>/dev/null); n=$(awk '/^nonvoluntary_ctxt/{print $2}' /proc/$p/status 2>/dev/null)
    echo "$ts $p ${st[3]} ${st[13]} ${st[14]} $v $n"
  done >> $out
  sleep 2
done
