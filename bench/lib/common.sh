# Sourced by bench/run, bench/connect, bench/idle, bench/smallpool and
# bench/tenants (from the repository root): dependencies, the release build,
# resource limits and the scratch directory.

BENCH_DIR=${BENCH_DIR:-/tmp/pgcrew-bench}
BENCH_BUILD_DIR=${BENCH_BUILD_DIR:-_build/release}

bench_say() { printf '==> %s\n' "$*"; }

# bench_prepare NAME: NAME (run, connect, idle, smallpool, tenants) is the scratch
# subdirectory this command owns and wipes; the others' are left alone.
bench_prepare() {
    BENCH_SCRATCH=$BENCH_DIR/$1
    case $BENCH_DIR in
        /tmp/?*) ;;
        *) echo "BENCH_DIR must be under /tmp (it is wiped): $BENCH_DIR" >&2; exit 2 ;;
    esac
    if [ "$(id -u)" != 0 ]; then
        echo "bench: run as root (PostgreSQL and the poolers run as the postgres user," \
             "and /proc/PID/clear_refs needs root)" >&2
        exit 2
    fi
    # pgbench, PostgreSQL 15, PgBouncer, the venv; gnuplot for the plots.
    scripts/deps.sh test >/dev/null
    if ! command -v gnuplot >/dev/null 2>&1; then
        bench_say "installing gnuplot-nox"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            gnuplot-nox >/dev/null 2>&1 ||
            { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
                apt-get install -y -qq --no-install-recommends gnuplot-nox >/dev/null; }
    fi
    BENCH_PY=$PWD/.venv/bin/python

    if [ -n "${PGCREW_BIN:-}" ]; then
        PGCREW=$(readlink -f "$PGCREW_BIN")
    else
        bench_say "building pgcrew ($BENCH_BUILD_DIR, no sanitizers)"
        scripts/build.sh "$BENCH_BUILD_DIR" >/dev/null
        PGCREW=$PWD/$BENCH_BUILD_DIR/pgcrew
    fi

    # 2000 pgbench clients, 10,000 idle clients: each end needs a descriptor.
    ulimit -Hn 1048576 2>/dev/null || ulimit -Hn "$(ulimit -Hn)"
    ulimit -n 200000 2>/dev/null || ulimit -n "$(ulimit -Hn)"
    # Reconnect cells open thousands of connections a second from the
    # ephemeral range; on loopback the kernel may reuse TIME_WAIT ports only
    # with tcp_tw_reuse = 1 or 2 (Debian's default 2).
    if [ "$(cat /proc/sys/net/ipv4/tcp_tw_reuse)" = 0 ]; then
        echo "bench: warning: net.ipv4.tcp_tw_reuse = 0; reconnect cells may run out of" \
             "ephemeral ports (sysctl -w net.ipv4.tcp_tw_reuse=2)" >&2
    fi

    # One bench at a time: they measure the machine, and a second run
    # would stop the first one's processes below (its pid files). The lock
    # is held by this shell until it exits.
    mkdir -p "$BENCH_DIR"
    exec {BENCH_LOCK_FD}>>"$BENCH_DIR/.lock"
    if ! flock -n "$BENCH_LOCK_FD"; then
        echo "bench: another bench is running in $BENCH_DIR (pid" \
             "$(cat "$BENCH_DIR/.lock.pid" 2>/dev/null || echo unknown)); run one at a time" >&2
        exit 2
    fi
    echo $$ > "$BENCH_DIR/.lock.pid"
    bench_autogroup

    # A previous run's processes (by their pid files) are stopped, then the
    # scratch directory is wiped.
    bench_stop_leftovers
    rm -rf "$BENCH_SCRATCH"
    mkdir -p "$BENCH_DIR"
    chmod 755 "$BENCH_DIR"
}

# The pooler and PostgreSQL an interrupted run of the same command left in
# its scratch directory: stopped through their pid files. (bench/run,
# bench/connect and bench/idle have separate scratch directories and ports,
# but they measure the machine: run one at a time.)
bench_stop_leftovers() {
    local d f pid
    for f in "$BENCH_SCRATCH"/*.pid; do
        [ -f "$f" ] || continue
        # one pid per line: pgbouncer-auto lists its launcher and each PgBouncer
        for pid in $(cat "$f"); do
            case $(cat "/proc/$pid/comm" 2>/dev/null) in
                pgcrew|pgbouncer)
                    bench_say "stopping the pooler (pid $pid) left by an earlier run"
                    kill -INT "$pid" 2>/dev/null || true
                    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
                    case $(cat "/proc/$pid/comm" 2>/dev/null) in
                        pgcrew|pgbouncer) kill -KILL "$pid" 2>/dev/null || true ;;
                    esac ;;
            esac
        done
    done
    for d in "$BENCH_SCRATCH"/pgdata; do
        [ -f "$d/postmaster.pid" ] || continue
        bench_say "stopping the PostgreSQL left in $d"
        setpriv --reuid=postgres --regid=postgres --init-groups \
            /usr/lib/postgresql/15/bin/pg_ctl -D "$d" -m immediate -w -t 30 stop >/dev/null 2>&1 || true
    done
}

# Linux's autogroup (kernel.sched_autogroup_enabled = 1) schedules each
# session as one group. PostgreSQL starts every backend in a session of its
# own, while the pooler shares the bench's session with the client driver:
# the CPU split between them then depends on how many CPUs the pooler's
# processes span, which is not what a bench compares (bench/RESULTS.md,
# session 56). BENCH_AUTOGROUP=off turns it off for the run and back on
# when the command exits; the setting of each run is in its versions.
bench_autogroup() {
    local f=/proc/sys/kernel/sched_autogroup_enabled
    [ -r "$f" ] || return 0
    if [ "${BENCH_AUTOGROUP:-}" = off ] && [ "$(cat "$f")" = 1 ]; then
        echo 0 > "$f"
        trap 'echo 1 > /proc/sys/kernel/sched_autogroup_enabled' EXIT
        bench_say "kernel.sched_autogroup_enabled = 0 for this run (BENCH_AUTOGROUP=off)"
    elif [ "$(cat "$f")" = 1 ]; then
        bench_say "note: kernel.sched_autogroup_enabled = 1: every PostgreSQL backend is a" \
                  "scheduling group of its own, the pooler shares one with the client driver" \
                  "(BENCH_AUTOGROUP=off to turn it off for the run)"
    fi
}
