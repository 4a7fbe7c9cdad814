#!/usr/bin/env bash
# How side/auto-first-logins.perf.txt was taken (2026-12-05 02:41 UTC): 5 s
# of perf samples of pgcrew workers = auto (supervisor and both workers)
# while bench/tenants' first run (the one that stopped at the descriptor
# limit) was logging the first client of pools 6,000-8,000 in. The release
# build has no frame pointers, so only the flat profile means something.
# usage: perf.sh PIDFILE   (BENCH_DIR/tenants/tenants-pgcrew-auto.pid)
set -euo pipefail
pids=$(paste -sd, "$1")
perf record -F 199 -g -p "$pids" -o auto-first-logins.perf.data -- sleep 5
perf report -i auto-first-logins.perf.data --no-children --sort comm,dso,symbol --stdio \
    -g none | grep -v '^$' | head -40 > auto-first-logins.perf.txt
