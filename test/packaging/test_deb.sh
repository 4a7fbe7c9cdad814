#!/usr/bin/env bash
# The .deb, end to end, on this Debian machine (as root):
#  1. dpkg-buildpackage -b from the "make dist" tarball; lintian (errors fail);
#  2. dpkg -i (apt-get install -f for dependencies); files, modes, user;
#  3. pgcrew started the way pgcrew.service starts it, without systemd: the
#     unit's ExecStart, User, Group and UMask, its RuntimeDirectory made by
#     hand, the packaged configuration (%include'd by a test file that adds a
#     database on a throwaway PostgreSQL 15 and a free port); psql through
#     TCP and the unix socket, the admin console, SIGHUP reload (ExecReload),
#     logrotate, SIGINT stop (KillSignal); then the unit's own command line
#     with the packaged file alone, when port 6432 is free;
#  4. man -l on both installed pages;
#  5. dpkg --purge, then nothing of the package is left.
# usage: test/packaging/test_deb.sh [pgcrew-VERSION.tar.gz]
# Every step is bounded in time; only processes started here are stopped.
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || bail "test_deb.sh needs root (dpkg -i, the pgcrew user)"
# A package left by an interrupted run of this test (it leaves a mark) is
# purged; any other installed pgcrew is someone's, and stops the test.
mark=/var/tmp/pgcrew-packaging-test.installed
pkg_present() { dpkg-query -W -f='${Status}' pgcrew 2>/dev/null | grep -q 'installed\|config-files'; }
if pkg_present && [ -f "$mark" ]; then
    note "purging the pgcrew package an interrupted run left"
    timeout 300 dpkg --purge pgcrew >/dev/null 2>&1
fi
if pkg_present; then
    bail "a pgcrew package is already on this machine; this test installs and purges its own"
fi
rm -f "$mark"

work=$(mktemp -d /tmp/pgcrew-deb.XXXXXX)
chmod 0755 "$work"
pgbin=/usr/lib/postgresql/15/bin
pgcrew_pid=
pg_started=no
installed=no

cleanup() {
    if [ -n "$pgcrew_pid" ] && kill -0 "$pgcrew_pid" 2>/dev/null; then
        kill -QUIT "$pgcrew_pid" 2>/dev/null
        wait_for 5 bash -c "! kill -0 $pgcrew_pid" || kill -KILL "$pgcrew_pid" 2>/dev/null
    fi
    if [ $pg_started = yes ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups \
            "$pgbin/pg_ctl" -D "$work/pg/data" -m immediate -w stop >/dev/null 2>&1
    fi
    if [ $installed = yes ]; then
        timeout 300 dpkg --purge pgcrew >/dev/null 2>&1 && rm -f "$mark"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# ---- 1. build ---------------------------------------------------------------
tarball=${1:-}
if [ -z "$tarball" ]; then
    note "make dist"
    tarball=$(make_tarball "$work/dist") || bail "make dist"
fi
tarball=$(readlink -f "$tarball")
note "building the .deb from $(basename "$tarball")"
mkdir -p "$work/deb"
tar -xzf "$tarball" -C "$work/deb" || bail "unpack $tarball"
src=$(ls -d "$work"/deb/pgcrew-*/)
check "debian/ is in the tarball" test -f "$src/debian/control" || exit 1
# The unit tests ran in the project's test command already: nocheck.
(cd "$src" && DEB_BUILD_OPTIONS="nocheck parallel=2" \
    timeout 1200 dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1)
check "dpkg-buildpackage -b -us -uc" test $? -eq 0 || { tail -n 40 "$work/build.log"; exit 1; }
deb=$(ls "$work"/deb/pgcrew_*.deb)
changes=$(ls "$work"/deb/pgcrew_*.changes)

note "lintian"
timeout 600 lintian --fail-on none --display-info "$changes" >"$work/lintian.out" 2>&1
lintian_rc=$?
sed 's/^/    /' "$work/lintian.out"
check "lintian: no errors" bash -c "[ $lintian_rc -eq 0 ] && ! grep -q '^E:' '$work/lintian.out'"
note "lintian warnings: $(grep -c '^W:' "$work/lintian.out")"

contents=$(dpkg-deb -c "$deb")
for f in ./usr/sbin/pgcrew ./etc/pgcrew/pgcrew.ini ./etc/pgcrew/userlist.txt \
    ./etc/logrotate.d/pgcrew ./lib/systemd/system/pgcrew.service \
    ./lib/systemd/system/pgcrew.socket ./usr/lib/tmpfiles.d/pgcrew.conf \
    ./usr/share/man/man1/pgcrew.1.gz ./usr/share/man/man5/pgcrew.ini.5.gz \
    ./usr/share/doc/pgcrew/examples/pgcrew.ini; do
    check "the .deb has ${f#.}" grep -q " $f\$" <<<"$contents"
done

# ---- 2. install ---------------------------------------------------------------
note "installing $(basename "$deb")"
find_ours() {
    find /etc /usr /lib /var /run /opt /srv -xdev -name '*pgcrew*' \
        -not -path '/var/log/journal/*' 2>/dev/null | sort
}
find_ours >"$work/before.txt"
user_before=$(getent passwd pgcrew || true)
installed=yes
touch "$mark"
if ! timeout 300 dpkg -i "$deb" >"$work/install.log" 2>&1; then
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -f -y -qq >>"$work/install.log" 2>&1
fi
check "dpkg -i (and apt-get install -f)" \
    bash -c "dpkg-query -W -f='\${Status}' pgcrew | grep -q 'install ok installed'" ||
    { cat "$work/install.log"; exit 1; }

# Where systemd runs, the package has started the service: stop it, the
# test runs its own instance.
if [ -d /run/systemd/system ]; then
    note "systemd is running: checking the service, then stopping it"
    check "systemctl is-active pgcrew" systemctl is-active --quiet pgcrew.service
    timeout 120 systemctl stop pgcrew.service
fi

check "conffiles: pgcrew.ini, userlist.txt, logrotate" bash -c "
    c=\$(dpkg-query -W -f='\${Conffiles}' pgcrew)
    grep -q ' /etc/pgcrew/pgcrew.ini ' <<<\"\$c\" &&
    grep -q ' /etc/pgcrew/userlist.txt ' <<<\"\$c\" &&
    grep -q ' /etc/logrotate.d/pgcrew ' <<<\"\$c\""
check "pgcrew is a system user with a system group" bash -c '
    uid=$(id -u pgcrew) && gid=$(getent group pgcrew | cut -d: -f3) &&
    [ "$uid" -lt 1000 ] && [ "$gid" -lt 1000 ] &&
    [ "$(getent passwd pgcrew | cut -d: -f7)" != /bin/bash ]'
check "pgcrew.ini and userlist.txt: root:pgcrew 0640" bash -c '
    [ "$(stat -c "%U:%G %a" /etc/pgcrew/pgcrew.ini)" = "root:pgcrew 640" ] &&
    [ "$(stat -c "%U:%G %a" /etc/pgcrew/userlist.txt)" = "root:pgcrew 640" ]'
check "/var/log/pgcrew: pgcrew:adm 2750" \
    test "$(stat -c '%U:%G %a' /var/log/pgcrew 2>&1)" = "pgcrew:adm 2750"
check "/run/pgcrew made by systemd-tmpfiles: pgcrew:pgcrew 0755" \
    test "$(stat -c '%U:%G %a' /run/pgcrew 2>&1)" = "pgcrew:pgcrew 755"
check "pgcrew.service enabled" test -L /etc/systemd/system/multi-user.target.wants/pgcrew.service
check "pgcrew.socket not enabled" test ! -e /etc/systemd/system/sockets.target.wants/pgcrew.socket
check "pgcrew -V runs" bash -c '/usr/sbin/pgcrew -V | grep -q "^pgcrew "'
if command -v systemd-analyze >/dev/null; then
    check "systemd-analyze verify pgcrew.service pgcrew.socket" \
        systemd-analyze verify --man=no /lib/systemd/system/pgcrew.service \
        /lib/systemd/system/pgcrew.socket
fi

# ---- 3. run it as the unit would ----------------------------------------------
unit=/lib/systemd/system/pgcrew.service
unit_key() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }
exec_start=$(unit_key ExecStart)
run_user=$(unit_key User)
run_group=$(unit_key Group)
run_umask=$(unit_key UMask)
check "the unit: Type=notify, KillSignal=SIGINT, ExecReload=kill -HUP" bash -c "
    grep -qx 'Type=notify' $unit && grep -qx 'KillSignal=SIGINT' $unit &&
    grep -qx 'ExecReload=/bin/kill -HUP \$MAINPID' $unit"
check "the unit runs pgcrew /etc/pgcrew/pgcrew.ini as pgcrew:pgcrew" bash -c "
    [ '$exec_start' = '/usr/sbin/pgcrew /etc/pgcrew/pgcrew.ini' ] &&
    [ '$run_user' = pgcrew ] && [ '$run_group' = pgcrew ]" || exit 1

note "starting PostgreSQL 15"
mkdir -p "$work/pg" && chown postgres:postgres "$work/pg"
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
pgport=$(free_port 25432)
as_postgres "$pgbin/initdb" -D "$work/pg/data" -U postgres -A trust -E UTF8 --no-locale \
    >"$work/pg/initdb.log" 2>&1 || bail "initdb"
cat >>"$work/pg/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $pgport
unix_socket_directories = '$work/pg'
password_encryption = 'scram-sha-256'
CONF
printf 'local all postgres trust\nhost all app 127.0.0.1/32 scram-sha-256\n' \
    >"$work/pg/data/pg_hba.conf"
timeout 60 setpriv --reuid=postgres --regid=postgres --init-groups \
    "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w start >/dev/null ||
    bail "pg_ctl start"
pg_started=yes
password=$(openssl rand -hex 12)
psql_pg() { as_postgres timeout 20 "$pgbin/psql" -h "$work/pg" -p "$pgport" -U postgres -qAtX "$@"; }
psql_pg -d postgres -c "CREATE ROLE app LOGIN PASSWORD '$password'" &&
    psql_pg -d postgres -c "CREATE DATABASE appdb OWNER app" || bail "create role and database"
verifier=$(psql_pg -d postgres -c "SELECT rolpassword FROM pg_authid WHERE rolname = 'app'")

# The packaged file stays as installed: a test file includes it and adds a
# database, a port and a userlist (the packaged one lists nobody).
port=$(free_port 16432)
run=$work/run
mkdir -p "$run"
printf '"app" "%s"\n' "$verifier" >"$run/userlist.txt"
write_config() {
    cat >"$run/test.ini" <<INI
%include /etc/pgcrew/pgcrew.ini
[databases]
appdb = host=127.0.0.1 port=$pgport dbname=appdb
$1
[pgbouncer]
listen_port = $port
auth_file = $run/userlist.txt
admin_users = app
INI
}
write_config ""
chown -R root:pgcrew "$run" && chmod 0750 "$run" && chmod 0640 "$run"/*
cmdline=${exec_start% /etc/pgcrew/pgcrew.ini}
note "running as $run_user: $cmdline $run/test.ini (umask $run_umask)"
# start_like_unit [CONFIG] STDERR: as systemd would, with the runtime
# directory, a clean environment, the unit's user, group and umask, no new
# privileges, cwd /. Sets pgcrew_pid.
start_like_unit() {
    install -d -o "$run_user" -g "$run_group" -m 0755 /run/pgcrew
    (
        cd / && umask "$run_umask" &&
        exec env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
            setpriv --reuid="$run_user" --regid="$run_group" --init-groups --no-new-privs \
            $cmdline ${1:+"$1"}
    ) >"$2" 2>&1 </dev/null &
    pgcrew_pid=$!
}
# stop_like_unit WHAT: SIGINT (KillSignal), at most 30 s, exit status 0.
stop_like_unit() {
    kill -INT "$pgcrew_pid"
    if wait_for 30 bash -c "! kill -0 $pgcrew_pid 2>/dev/null"; then
        wait "$pgcrew_pid"
        check "SIGINT stops $1 with status 0" test $? -eq 0
        pgcrew_pid=
    else
        not_ok "SIGINT stops $1 within 30 s"
    fi
}
start_like_unit "$run/test.ini" "$work/pgcrew.stderr"
if ! wait_for 20 port_in_use "$port"; then
    cat "$work/pgcrew.stderr" /var/log/pgcrew/pgcrew.log 2>/dev/null | tail -n 30
    bail "pgcrew listens on 127.0.0.1:$port"
fi
ok "pgcrew listens on 127.0.0.1:$port"
check "it runs as pgcrew" test "$(ps -o user= -p "$pgcrew_pid" | tr -d ' ')" = pgcrew
check "pidfile /run/pgcrew/pgcrew.pid names it" \
    test "$(cat /run/pgcrew/pgcrew.pid 2>&1)" = "$pgcrew_pid"
check "unix socket /run/pgcrew/.s.PGSQL.$port" test -S "/run/pgcrew/.s.PGSQL.$port"
check "it does not listen beyond 127.0.0.1" bash -c \
    "! ss -Hltn | awk '{print \$4}' | grep -E ':$port\$' | grep -vq '^127\.0\.0\.1:'"
check "log file /var/log/pgcrew/pgcrew.log: pgcrew, 0640" \
    test "$(stat -c '%U %a' /var/log/pgcrew/pgcrew.log 2>&1)" = "pgcrew 640"

export PGPASSWORD=$password PGCONNECT_TIMEOUT=10
q() { timeout 20 psql "$1" -qAtX -c "$2" 2>&1; }
check "psql through TCP (SCRAM)" \
    test "$(q "host=127.0.0.1 port=$port dbname=appdb user=app" "SELECT 40 + 2")" = 42
check "psql through the unix socket" \
    test "$(q "host=/run/pgcrew port=$port dbname=appdb user=app" "SELECT current_user")" = app
check "admin console: SHOW VERSION" bash -c \
    "q() { timeout 20 psql \"\$1\" -qAtX -c \"\$2\"; }; q 'host=127.0.0.1 port=$port dbname=pgbouncer user=app' 'SHOW VERSION' | grep -q '^pgcrew '"
check "a wrong password is refused" bash -c \
    "! PGPASSWORD=wrong timeout 20 psql 'host=127.0.0.1 port=$port dbname=appdb user=app' -c 'SELECT 1'"

# ExecReload: a database added to the file appears after SIGHUP.
write_config "appdb2 = host=127.0.0.1 port=$pgport dbname=appdb"
exec_reload=$(unit_key ExecReload)
${exec_reload//\$MAINPID/$pgcrew_pid}
check "SIGHUP (ExecReload) re-reads the configuration" wait_for 10 bash -c \
    "[ \"\$(timeout 5 psql 'host=127.0.0.1 port=$port dbname=appdb2 user=app' -qAtX -c 'SELECT 7' 2>/dev/null)\" = 7 ]"

if command -v logrotate >/dev/null; then
    timeout 60 logrotate -f -s "$work/logrotate.state" /etc/logrotate.d/pgcrew >"$work/logrotate.out" 2>&1
    check "logrotate rotates pgcrew.log" bash -c \
        "[ -s /var/log/pgcrew/pgcrew.log.1 ] || { cat '$work/logrotate.out'; false; }"
    # A login after logrotate's SIGHUP is logged to the new file.
    check "pgcrew reopens its log after logrotate's SIGHUP" wait_for 10 bash -c "
        timeout 5 psql 'host=127.0.0.1 port=$port dbname=appdb user=app' -qAtX -c 'SELECT 1' &&
        grep -q 'appdb/app@' /var/log/pgcrew/pgcrew.log"
else
    note "logrotate not installed: rotation not tested"
fi

# KillSignal=SIGINT: the supervisor stops itself and its workers.
stop_like_unit pgcrew
check "no pgcrew process of the pgcrew user is left" bash -c "! pgrep -u pgcrew -x pgcrew"
check "pidfile removed at exit" test ! -e /run/pgcrew/pgcrew.pid
check "stderr (the journal's copy) has the log lines" grep -q "got SIGHUP" "$work/pgcrew.stderr"

# The unit's exact command line, with the packaged file alone (no database,
# no user yet): it starts, listens on 127.0.0.1:6432 and stops.
if port_in_use 6432; then
    note "port 6432 is taken here: the packaged file alone is not started"
else
    cmdline=$exec_start
    start_like_unit "" "$work/pgcrew-packaged.stderr"
    check "'$exec_start' listens on 127.0.0.1:6432" wait_for 20 port_in_use 6432 ||
        cat "$work/pgcrew-packaged.stderr"
    check "... and on /run/pgcrew/.s.PGSQL.6432" test -S /run/pgcrew/.s.PGSQL.6432
    stop_like_unit "'$exec_start'"
fi

# ---- 4. man pages -----------------------------------------------------------
check "man -l pgcrew.1: no warnings" man_check /usr/share/man/man1/pgcrew.1.gz
check "man -l pgcrew.ini.5: no warnings" man_check /usr/share/man/man5/pgcrew.ini.5.gz
check "pgcrew.ini(5) lists every setting of doc/config.md" bash -c "
    page=\$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l /usr/share/man/man5/pgcrew.ini.5.gz 2>/dev/null)
    for key in \$(sed -n 's/^| \`\([a-z_0-9]*\)\` | [a-z]* | .* | \(yes\|no\) |.*/\1/p' '$pkg_root/doc/config.md'); do
        grep -Eq \"^ +\$key \\(\" <<<\"\$page\" || { echo \"missing: \$key\"; exit 1; }
    done"

# ---- 5. purge -----------------------------------------------------------------
timeout 300 dpkg --purge pgcrew >"$work/purge.log" 2>&1
check "dpkg --purge pgcrew" test $? -eq 0 || cat "$work/purge.log"
installed=no
rm -f "$mark"
check "the package is gone, config files too" bash -c \
    "! dpkg-query -W -f='\${Status}' pgcrew 2>/dev/null | grep -q 'installed\|config-files'"
find_ours >"$work/after.txt"
check "no file named pgcrew is left (as before installation)" \
    diff "$work/before.txt" "$work/after.txt"
check "/etc/pgcrew, /var/log/pgcrew, /run/pgcrew are gone" bash -c \
    "[ ! -e /etc/pgcrew ] && [ ! -e /var/log/pgcrew ] && [ ! -e /run/pgcrew ]"
check "no statoverride is left" bash -c "! dpkg-statoverride --list | grep -q pgcrew"
if [ -z "$user_before" ]; then
    check "the pgcrew user and group are removed" bash -c \
        "! getent passwd pgcrew && ! getent group pgcrew"
fi

summary "packaging (deb)"
