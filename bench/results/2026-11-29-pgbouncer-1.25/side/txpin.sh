#!/bin/bash
# usage: [PIN="taskset -c 0"] txpin.sh BIN INI CLIENTS SECONDS [pgbench -M mode]: pooler CPU (and its user part), syscalls and switches per transaction
set -u
R=/tmp/pgcrew-bench/run
BIN=$1; INI=$2; C=$3; S=$4; M=${5:-simple}
$PIN su postgres -c "exec $BIN $INI" 2>/dev/null & PID=$!
sleep 0.7
PPID_=$(pgrep -P $PID | head -1); [ -z "$PPID_" ] && PPID_=$PID
PIDS="$PPID_ $(pgrep -P $PPID_)"
cpu() { local t=0; for p in $PIDS; do set -- $(cut -d' ' -f14,15 /proc/$p/stat); t=$((t+$1+$2)); done; echo $t; }
ucpu() { local t=0; for p in $PIDS; do set -- $(cut -d' ' -f14 /proc/$p/stat); t=$((t+$1)); done; echo $t; }
export PGPASSWORD=${BENCH_PW:-benchpw} PGSSLMODE=disable
pgbench -h 127.0.0.1 -p 26432 -U bench -S -M $M -c $C -j 2 -T $((S+2)) bench > /tmp/tx.out 2>&1 &
BP=$!
sleep 2
c0=$(cpu); u0=$(ucpu); n0=$(date +%s.%N)
perf stat -e 'raw_syscalls:sys_enter,context-switches' -p $(echo $PIDS | tr ' ' ',') -o /tmp/tx.stat -- sleep $((S-1)) >/dev/null 2>&1
c1=$(cpu); u1=$(ucpu)
wait $BP
tps=$(grep -oP 'tps = \K[0-9.]+' /tmp/tx.out | head -1)
sc=$(awk '/raw_syscalls/ {gsub(",","",$1); print $1}' /tmp/tx.stat)
cs=$(awk '/context-switches/ {gsub(",","",$1); print $1}' /tmp/tx.stat)
kill -INT $PPID_ 2>/dev/null; sleep 0.5; kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
python3 -c "
tps=$tps; s=$S-1
print(f'$(basename $BIN) $(basename $INI) c=$C tps={tps:.0f} cpu_us={($c1-$c0)/100/(tps*s)*1e6:.1f} sc/tx={$sc/(tps*s):.2f} cs/tx={$cs/(tps*s):.3f} user_us={($u1-$u0)/100/(tps*s)*1e6:.1f}')"
