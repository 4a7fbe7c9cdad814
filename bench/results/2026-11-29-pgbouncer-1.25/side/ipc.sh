#!/bin/bash
# usage: ipc.sh INI CLIENTS SECONDS: IPC message types seen by the supervisor under pgbench -S load
set -u
R=/tmp/pgcrew-bench/run
INI=$1; C=$2; S=$3
su postgres -c "exec $R/bin/pgcrew $INI" 2>/dev/null & PID=$!
sleep 0.7
SUP=$(pgrep -P $PID | head -1); [ -z "$SUP" ] && SUP=$PID
export PGPASSWORD=${BENCH_PW:-benchpw} PGSSLMODE=disable
pgbench -h 127.0.0.1 -p 26432 -U bench -S -c $C -j 2 -T $((S+3)) bench > /tmp/ipc.out 2>&1 &
BP=$!
sleep 2
timeout $S strace -p $SUP -e trace=recvmsg,sendmsg -x -s 8 -o /tmp/ipc.strace 2>/dev/null
wait $BP
kill -INT $SUP 2>/dev/null; sleep 0.5; kill -9 $PID 2>/dev/null; wait $PID 2>/dev/null
grep -oP 'tps = \K[0-9.]+' /tmp/ipc.out | head -1
python3 - <<'PY'
import re, collections
names = """WORKER_READY RELOAD RELOAD_DONE SHUTDOWN PAUSE RESUME LOG_REOPEN RELOAD_COMMIT RELOAD_ABORT SLOT_REQ SLOT_GRANT SLOT_DENY SLOT_RELEASE POOL_WANT CANCEL_FWD WELCOME_PUT WELCOME_GET WELCOME LOGIN_FAILED ADMIN_REQ ADMIN_RUN ADMIN_PART ADMIN_DONE CLIENT_FD TAKEOVER LISTEN_FD LISTEN_END TAKEOVER_DONE SERVER_FD TAKEN_CLIENT TAKEN_SERVER SHUTDOWN_READY RELOAD_APPLIED SLOT_WITHDRAW""".split()
c = collections.Counter()
for line in open('/tmp/ipc.strace'):
    m = re.match(r'(recvmsg|sendmsg)\(\d+, \{msg_name=NULL, msg_namelen=0, msg_iov=\[\{iov_base="((?:\\x[0-9a-f]{2}){2})', line)
    if not m: continue
    b = bytes(int(x,16) for x in re.findall(r'\\x([0-9a-f]{2})', m.group(2)))
    t = b[0] | b[1] << 8
    c[(m.group(1), names[t] if t < len(names) else t)] += 1
for k, v in sorted(c.items(), key=lambda kv: -kv[1]): print(k, v)
PY
