#!/bin/bash
# usage: cs.sh INI CLIENTS SECONDS: voluntary / involuntary switches per 1000 tx per process
set -u
R=/tmp/pgcrew-bench/run; INI=$1; C=$2; S=$3
su postgres -c "exec $R/bin/${BINNAME:-pgcrew} $INI" 2>/dev/null & PID=$!
sleep 0.8
SUP=$(pgrep -P $PID | head -1)
PIDS="$SUP $(pgrep -P $SUP)"
snap() { for p in $PIDS; do v=$(awk '/^voluntary_ctxt/ {print $2}' /proc/$p/status); n=$(awk '/^nonvoluntary_ctxt/ {print $2}' /proc/$p/status); set -- $(cut -d' ' -f14,15 /proc/$p/stat); echo -n "$v,$n,$(( $1 + $2 )) "; done; echo; }
export PGPASSWORD=benchpw PGSSLMODE=disable
pgbench -h 127.0.0.1 -p 26432 -U bench -S -c $C -j 2 -T $((S+3)) bench > /tmp/cs.out 2>&1 &
BP=$!; sleep 2
a=$(snap); sleep $S; b=$(snap)
wait $BP
tps=$(grep -oP 'tps = \K[0-9.]+' /tmp/cs.out | head -1)
kill -INT $SUP; sleep 0.5; kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
python3 -c "
a=[[int(y) for y in x.split(',')] for x in '$a'.split()]; b=[[int(y) for y in x.split(',')] for x in '$b'.split()]; tx=$tps*$S
print('$(basename $INI) c=$C tps', round($tps), ' '.join(f'vol={1000*(y[0]-x[0])/tx:.0f} invol={1000*(y[1]-x[1])/tx:.0f} cpu={(y[2]-x[2])/100/tx*1e6:.1f}' for x,y in zip(a[1:],b[1:])))"
