#!/usr/bin/env bash
# syscalls and context switches per process during each target's TPS slice of bench/tenants (1,000 pools)
set -eu
repo=${1:-/work/main}
out=${2:-/tmp/sys}
export BENCH_DIR=/tmp/pgcrew-bench-side PGCREW_BIN=$repo/_build/release/pgcrew
cd "$repo"
bench/tenants --pools 1000 --targets pgcrew-w1,pgcrew-auto,pgbouncer --samples 100 --duration 10 \
    --rounds 1 --out "$out/run" > "$out/run.log" 2>&1 &
bench_pid=$!
ev=raw_syscalls:sys_enter,context-switches,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_close,syscalls:sys_enter_connect,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_accept4,syscalls:sys_enter_socket,syscalls:sys_enter_setsockopt,syscalls:sys_enter_getsockopt,syscalls:sys_enter_getsockname,syscalls:sys_enter_clock_gettime
for t in pgcrew-w1 pgcrew-auto pgbouncer; do
  until grep -q "tps $t *round 0: 10" "$out/run.log"; do sleep 0.2; done
  sleep 2
  pids=$(paste -sd, "$BENCH_DIR/tenants/tenants-$t.pid")
  perf stat --per-thread -e $ev -p "$pids" -- sleep 5 > "$out/$t.stat.txt" 2>&1 || true
done
wait "$bench_pid"
grep "TPS" "$out/run.log" | tail -6
