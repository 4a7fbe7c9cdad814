#!/usr/bin/env bash
# One-command demo: installs dependencies, builds pgcrew, starts a throwaway
# PostgreSQL 15 (SCRAM, 127.0.0.1 only) and pgcrew in front of it with TLS
# required, then prints how to connect and how to stop everything.
# Environment: DEMO_DIR (default /tmp/pgcrew-demo); DEMO_BIN to run another
# PgBouncer-compatible binary instead of building pgcrew.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
demo=${DEMO_DIR:-/tmp/pgcrew-demo}
pgbin=/usr/lib/postgresql/15/bin

say() { printf '==> %s\n' "$*"; }

say "installing dependencies"
scripts/deps.sh demo

if [ -n "${DEMO_BIN:-}" ]; then
    bin=$DEMO_BIN
else
    say "building pgcrew (_build/release)"
    scripts/build.sh _build/release >/dev/null
    bin=$root/_build/release/pgcrew
fi

# A previous demo in the same place is stopped and replaced.
if [ -x "$demo/stop.sh" ]; then
    say "stopping the previous demo in $demo"
    "$demo/stop.sh" || true
fi
rm -rf "$demo"
mkdir -p "$demo/bin"
cp "$bin" "$demo/bin/pgcrew"

# PostgreSQL (and a PgBouncer-compatible pooler) refuse to run as root.
if [ "$(id -u)" = 0 ]; then
    runas=(setpriv --reuid=postgres --regid=postgres --init-groups)
    chown -R postgres:postgres "$demo"
else
    runas=()
fi
as_service() { "${runas[@]}" "$@"; }

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
free_port() {
    local p=$1
    while port_in_use "$p"; do p=$((p + 1)); done
    echo "$p"
}
pgport=$(free_port 15432)
port=$(free_port 6432)
password=$(openssl rand -hex 12)

say "starting PostgreSQL 15 on 127.0.0.1:$pgport (data in $demo/pgdata)"
as_service "$pgbin/initdb" -D "$demo/pgdata" -U postgres -A trust -E UTF8 \
    --no-locale >"$demo/initdb.log"
cat >>"$demo/pgdata/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pgport
unix_socket_directories = '$demo'
password_encryption = 'scram-sha-256'
CONF
cat >"$demo/pgdata/pg_hba.conf" <<HBA
local all postgres trust
host  all demo 127.0.0.1/32 scram-sha-256
HBA
as_service "$pgbin/pg_ctl" -D "$demo/pgdata" -l "$demo/postgres.log" -w start >/dev/null
psql_admin() { as_service "$pgbin/psql" -h "$demo" -p "$pgport" -U postgres -qAtX "$@"; }
psql_admin -d postgres -c "CREATE ROLE demo LOGIN PASSWORD '$password'"
psql_admin -d postgres -c "CREATE DATABASE demo OWNER demo"
verifier=$(psql_admin -d postgres -c "SELECT rolpassword FROM pg_authid WHERE rolname = 'demo'")

say "making a self-signed CA and a server certificate ($demo/tls)"
mkdir -p "$demo/tls"
(
    cd "$demo/tls"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 30 \
        -subj "/CN=pgcrew demo CA" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
        -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName = IP:127.0.0.1, DNS:localhost\n' >san.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial \
        -out server.crt -days 30 -extfile san.cnf 2>/dev/null
    chmod 600 server.key ca.key
)

# The userlist holds the SCRAM verifier, not the password: pgcrew logs in to
# PostgreSQL with the keys the client's own SCRAM exchange proves.
printf '"demo" "%s"\n' "$verifier" >"$demo/userlist.txt"
cat >"$demo/pgcrew.ini" <<INI
[databases]
demo = host=127.0.0.1 port=$pgport dbname=demo

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir = $demo
logfile = $demo/pgcrew.log
auth_type = scram-sha-256
auth_file = $demo/userlist.txt
admin_users = demo
pool_mode = transaction
default_pool_size = 10
client_tls_sslmode = require
client_tls_cert_file = $demo/tls/server.crt
client_tls_key_file = $demo/tls/server.key
client_tls_ca_file = $demo/tls/ca.crt
INI
[ "$(id -u)" = 0 ] && chown -R postgres:postgres "$demo"

say "starting pgcrew on 127.0.0.1:$port"
nohup "${runas[@]}" "$demo/bin/pgcrew" "$demo/pgcrew.ini" \
    >"$demo/pgcrew.out" 2>&1 </dev/null &
pid=$!
echo "$pid" >"$demo/pgcrew.pid"
for _ in $(seq 1 100); do
    port_in_use "$port" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if ! kill -0 "$pid" 2>/dev/null || ! port_in_use "$port"; then
    echo "pgcrew did not start; its output:" >&2
    cat "$demo/pgcrew.out" "$demo/pgcrew.log" >&2 2>/dev/null || true
    exit 1
fi

cat >"$demo/stop.sh" <<STOP
#!/usr/bin/env bash
# Stops the pgcrew demo started by scripts/demo.sh.
if kill -0 $pid 2>/dev/null; then
    kill -INT $pid
    for _ in \$(seq 1 50); do kill -0 $pid 2>/dev/null || break; sleep 0.2; done
    kill -0 $pid 2>/dev/null && kill -KILL $pid
fi
if [ -f "$demo/pgdata/postmaster.pid" ]; then
    ${runas[*]} "$pgbin/pg_ctl" -D "$demo/pgdata" -m fast -w stop >/dev/null
fi
echo "pgcrew demo stopped"
STOP
chmod +x "$demo/stop.sh"

# Prove the printed commands work before printing them.
conn="host=127.0.0.1 port=$port dbname=demo user=demo sslmode=require"
admin="host=127.0.0.1 port=$port dbname=pgbouncer user=demo sslmode=require"
PGPASSWORD=$password psql "$conn" -qAtX -c "SELECT 'ok'" >/dev/null ||
    { echo "self-check through pgcrew failed; see $demo/pgcrew.log" >&2; exit 1; }

cat <<MSG

pgcrew is running (pid $pid) in front of PostgreSQL 15 (port $pgport).
Password for user demo: $password

  Connect through pgcrew (TLS is required):
    PGPASSWORD=$password psql "$conn"

  Admin console (SHOW POOLS; SHOW CLIENTS; ...):
    PGPASSWORD=$password psql "$admin"

  Files: $demo (pgcrew.ini, userlist.txt, pgcrew.log, tls/)
  Stop everything:
    $demo/stop.sh
MSG
