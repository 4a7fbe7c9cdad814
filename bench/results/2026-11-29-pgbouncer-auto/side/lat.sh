#!/bin/bash
# usage: lat.sh TARGET CLIENTS SECONDS [pool]: TARGET pgb1|pgb2|w1|auto; tps, p50/p99, pooler CPU us/tx
set -u
R=/tmp/pgcrew-bench/run; T=$1; C=$2; S=$3; POOL=${4:-20}
D=/work/prof/lat; mkdir -p $D; chown postgres $D
PIDS=()
start() { su postgres -c "exec $1 $2" 2>/dev/null & PIDS+=($!); }
case $T in
pgb1) sed "s/^default_pool_size = .*/default_pool_size = $POOL/" $R/pgbouncer.ini > $D/p1.ini
      start $R/bin/pgbouncer $D/p1.ini ;;
pgb2) for i in 1 2; do mkdir -p $D/s$i; chown postgres $D/s$i
      sed -e "s/^default_pool_size = .*/default_pool_size = $((POOL/2))/" -e "s#^unix_socket_dir = .*#unix_socket_dir = $D/s$i\nso_reuseport = 1#" $R/pgbouncer.ini > $D/p2$i.ini
      start $R/bin/pgbouncer $D/p2$i.ini; done ;;
w1|auto|nm|co*) W=1; case $T in auto|nm|co*-auto) W=auto;; esac
      printf '%%include %s/pgbouncer.ini\n[pgbouncer]\nworkers = %s\ndefault_pool_size = %s\n' $R $W $POOL > $D/c.ini
      B=$R/bin/pgcrew; [ $T = nm ] && B="env PGCREW_EXP_NOMOVE=1 $R/bin/pgcrew-nm"
      case $T in co*) DL=${T#co}; DL=${DL%-*}; B="env PGCREW_EXP_COALESCE=$DL $R/bin/pgcrew-co";; esac
      start "$B" $D/c.ini ;;
esac
chown postgres $D/*.ini
sleep 1
ALL=""; for p in ${PIDS[@]}; do ALL="$ALL $p $(pgrep -P $p) $(for q in $(pgrep -P $p); do pgrep -P $q; done)"; done
cpu() { local t=0; for p in $ALL; do [ -r /proc/$p/stat ] || continue; set -- $(cut -d' ' -f14,15 /proc/$p/stat); t=$((t+$1+$2)); done; echo $t; }
export PGPASSWORD=benchpw PGSSLMODE=disable
rm -rf /tmp/latlog; mkdir -p /tmp/latlog; cd /tmp/latlog
pgbench -h 127.0.0.1 -p 26432 -U bench -S -c $C -j 2 -T 2 bench > /dev/null 2>&1
c0=$(cpu)
pgbench -h 127.0.0.1 -p 26432 -U bench -S -c $C -j 2 -T $S -l --log-prefix=l bench > /tmp/lat.out 2>&1
c1=$(cpu)
for p in ${PIDS[@]}; do for q in $(pgrep -P $p); do kill -INT $q 2>/dev/null; done; kill -INT $p 2>/dev/null; done
sleep 0.7; for p in ${PIDS[@]}; do kill -9 $p 2>/dev/null; wait $p 2>/dev/null; done
python3 - <<PY
import glob
lat=[]
for f in glob.glob('/tmp/latlog/l*'):
    for line in open(f):
        lat.append(int(line.split()[2]))
lat.sort(); n=len(lat)
if n == 0: print("$T no transactions"); raise SystemExit
tps=n/$S
cpu=($c1-$c0)/100/n*1e6
print(f"$T c=$C pool=$POOL tps={tps:.0f} p50={lat[n//2]/1000:.2f} p99={lat[int(n*0.99)]/1000:.2f} r={lat[int(n*0.99)]/lat[n//2]:.2f} cpu_us={cpu:.1f}")
PY
