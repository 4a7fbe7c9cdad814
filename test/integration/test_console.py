"""The admin console across four workers: PgBouncer's statistics views with
their columns, counts summed over workers, and the control commands (PAUSE
waits for running transactions, KILL, KILL_CLIENT, DISABLE/ENABLE,
RECONNECT, WAIT_CLOSE, SHUTDOWN WAIT_FOR_CLIENTS), access rules and bad
input."""

import subprocess
import threading
import time

import psycopg
import pytest

import util
from pg_cluster import password

pytestmark = pytest.mark.pgcrew_only  # workers = 4; PgBouncer 1.18 lacks several views

WORKERS = 4
INT8, INT4, TEXT = 20, 23, 25

STATS_BASE = ["server_assignment_count", "xact_count", "query_count", "received", "sent",
              "xact_time", "query_time", "wait_time", "client_parse_count",
              "server_parse_count", "bind_count", "client_login_count"]


def bytes_names(names):
    return ["bytes_" + n if n in ("received", "sent") else n for n in names]


EXPECTED = {
    "STATS": ["database"] + ["total_" + n for n in STATS_BASE]
             + ["avg_" + ("recv" if n == "received" else n) for n in STATS_BASE],
    "STATS_TOTALS": ["database"] + bytes_names(STATS_BASE),
    "STATS_AVERAGES": ["database"] + bytes_names(STATS_BASE),
    "TOTALS": ["name", "value"],
    "STATE": ["key", "value"],
    "DNS_HOSTS": ["hostname", "ttl", "addrs"],
    "DNS_ZONES": ["zonename", "serial", "count"],
    "WORKERS": ["worker", "pid", "clients", "servers", "pools", "cpu_user_ms",
                "cpu_system_ms", "restarts", "servers_moved_in", "servers_moved_out",
                "io_uring", "io_batches", "io_batched_ops"],
    "PROTOCOLS": ["type", "id", "user", "database", "worker", "protocol", "key_bytes"],
}


def pooler(pg, make_pooler, **settings):
    base = {"workers": WORKERS, "pool_mode": "transaction", "admin_users": "trust_user",
            "stats_users": "md5_user", "auth_type": "md5", "stats_period": 1}
    base.update(settings)
    return make_pooler(pg, settings=base)


def admin(p, user="trust_user"):
    return p.connect("pgbouncer", user, password=password(user))


def client(p, **kw):
    return p.connect("testdb", "trust_user", password=password("trust_user"), **kw)


def columns(conn, cmd):
    cur = conn.execute(cmd)
    return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


def test_stats_views_have_pgbouncer_columns(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    with admin(p) as a:
        for view, names in EXPECTED.items():
            cols, _ = columns(a, f"SHOW {view}")
            assert [c[0] for c in cols] == names, view
            if view.startswith("STATS"):
                assert cols[0][1] == TEXT and all(t == INT8 for _, t in cols[1:]), view
    psql_shows(p, EXPECTED)


def psql_shows(p, views):
    """psql (simple protocol) runs every SHOW view too."""
    for view in views:
        out = subprocess.run(["psql", "-X", "-h", p.host, "-p", str(p.port), "-U", "trust_user",
                              "-d", "pgbouncer", "-c", f"SHOW {view}"],
                             env={"PGPASSWORD": password("trust_user"), "PATH": "/usr/bin:/bin"},
                             capture_output=True, text=True, timeout=20)
        assert out.returncode == 0, (view, out.stderr)


def test_transactions_are_counted_over_workers(pg15, make_pooler):
    p = pooler(pg15, make_pooler)

    def xacts():
        with admin(p) as a:
            return {r[0]: r[2] for r in a.execute("SHOW STATS").fetchall()}.get("testdb", 0)

    before = xacts()
    conns = [client(p) for _ in range(20)]
    try:
        from test_workers import worker_of
        assert len({worker_of(c) for c in conns}) > 1
        for c in conns:
            for i in range(10):
                # distinct texts: psycopg would prepare a repeated query
                c.execute(f"SELECT {i}")
    finally:
        for c in conns:
            c.close()
    # Current when read, as in PgBouncer: no flush interval to wait out.
    assert xacts() - before == 200
    time.sleep(0.5)
    assert xacts() - before == 200
    with admin(p) as a:
        totals = dict(a.execute("SHOW TOTALS").fetchall())
        stats = {r[0]: r for r in a.execute("SHOW STATS_TOTALS").fetchall()}
    assert totals["total_xact_count"] >= 200 and stats["testdb"][2] - before == 200


def test_pause_waits_for_running_transactions(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    busy = client(p)
    busy.autocommit = False
    busy.execute("SELECT 1")               # a transaction holds a server
    done = {}

    def pause():
        with admin(p) as a:
            a.execute("PAUSE")
            done["at"] = time.monotonic()

    t = threading.Thread(target=pause)
    t.start()
    # PAUSE has begun (every worker stops handing out servers), then it
    # must not return while the transaction runs.
    p.wait_every_worker(lambda a: dict(a.execute("SHOW STATE").fetchall())["paused"] == "yes",
                        WORKERS, what="PAUSE under way in every worker",
                        password=password("trust_user"))
    time.sleep(0.5)
    assert "at" not in done, "PAUSE returned while a transaction was running"
    committed = time.monotonic()
    busy.commit()
    t.join(timeout=5)
    assert "at" in done and done["at"] - committed < 2
    # While paused a new query waits; RESUME releases it.
    other = client(p)
    got = {}
    q = threading.Thread(target=lambda: got.setdefault("r", other.execute("SELECT 2").fetchone()))
    q.start()
    time.sleep(0.7)
    assert "r" not in got, "a query ran while paused"
    with admin(p) as a:
        a.execute("RESUME")
    q.join(timeout=5)
    assert got.get("r") == (2,)
    other.close()
    busy.close()


def test_kill_kill_client_disable_enable(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    victims = [client(p) for _ in range(6)]
    for v in victims:
        v.execute("SELECT 1")
    with admin(p) as a:
        ids = [r for r in a.execute("SHOW CLIENTS").fetchall() if r[2] == "testdb"]
        assert len(ids) == 6
        target = ids[0][-1]
        a.execute(f"KILL_CLIENT {target}")
        with pytest.raises(psycopg.Error, match="^client not found$"):
            a.execute("KILL_CLIENT 987654321")
        with pytest.raises(psycopg.Error, match="^invalid client pointer supplied$"):
            a.execute("KILL_CLIENT not_a_client_id")
        left = [r for r in a.execute("SHOW CLIENTS").fetchall() if r[2] == "testdb"]
        assert len(left) == 5 and target not in [r[-1] for r in left]

        a.execute("KILL testdb")
        for v in victims:
            with pytest.raises(psycopg.OperationalError):
                v.execute("SELECT 1")
        assert not [r for r in a.execute("SHOW SERVERS").fetchall() if r[2] == "testdb"]
        a.execute("RESUME testdb")

        with pytest.raises(psycopg.Error, match="a database is required"):
            a.execute("DISABLE")
        with pytest.raises(psycopg.Error, match="no such database: nosuchdb"):
            a.execute("DISABLE nosuchdb")
        a.execute("DISABLE testdb")
        with pytest.raises(psycopg.OperationalError, match='database "testdb" is disabled'):
            client(p, connect_timeout=5)
        a.execute("ENABLE testdb")
    with client(p) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_reconnect_and_wait_close(pg15, make_pooler):
    p = pooler(pg15, make_pooler, pool_mode="session", workers=1)
    holder = client(p)
    first = holder.execute("SELECT pg_backend_pid()").fetchone()[0]
    with admin(p) as a:
        a.execute("RECONNECT testdb")
        servers = [r for r in a.execute("SHOW SERVERS").fetchall() if r[2] == "testdb"]
        assert servers and all(r[13] == 1 for r in servers), "close_needed not set"
        done = {}

        def wait_close():
            with admin(p) as b:
                b.execute("WAIT_CLOSE testdb")
                done["at"] = time.monotonic()

        t = threading.Thread(target=wait_close)
        t.start()
        time.sleep(0.7)
        assert "at" not in done, "WAIT_CLOSE returned while the old server was in use"
        holder.close()
        t.join(timeout=5)
        assert "at" in done
    with client(p) as c:
        assert c.execute("SELECT pg_backend_pid()").fetchone()[0] != first


def test_console_access_and_bad_input(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    with admin(p, "md5_user") as stats_user:
        assert stats_user.execute("SHOW POOLS").fetchall() is not None
        for cmd in ("PAUSE", "KILL testdb", "KILL_CLIENT 1", "RECONNECT", "SHUTDOWN"):
            with pytest.raises(psycopg.Error, match="admin access needed"):
                stats_user.execute(cmd)
    with pytest.raises(psycopg.OperationalError, match="not allowed"):
        admin(p, "scram_user")
    with admin(p) as a:
        for cmd in ("SHOW NOSUCHVIEW", "FROBNICATE", "PAUSE " + "x" * 1000,
                    "DISABLE testdb; DROP TABLE pgbench_accounts", "KILL_CLIENT 1 OR 1=1",
                    "SHOW POOLS; SHOW CLIENTS"):
            with pytest.raises(psycopg.Error, match="^(bad arguments|invalid command '.*', "
                               "use SHOW HELP;)$"):
                a.execute(cmd)
        assert a.execute("SHOW VERSION").fetchone()[0].startswith("pgcrew")
    with client(p) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_shutdown_wait_for_clients(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    last = client(p)
    last.execute("SELECT 1")
    with admin(p) as a:
        a.execute("SHUTDOWN WAIT_FOR_CLIENTS")
    time.sleep(0.5)
    assert p.proc.poll() is None, "exited while a client was connected"
    assert last.execute("SELECT 3").fetchone() == (3,)
    last.close()
    p.proc.wait(timeout=10)


def test_set_applies_in_every_worker(pg15, make_pooler):
    """SET changes every worker; PgBouncer's answers: the tag "SET
    key=value", "SET failed" for an unknown key or a bad value (the reason
    is in the log), a key that needs a restart accepted and left as it
    runs, and the five fake driver parameters "SET ignored"."""
    p = pooler(pg15, make_pooler)
    with admin(p) as a:
        cur = a.execute("SET server_idle_timeout = 123")
        assert cur.statusmessage == "SET server_idle_timeout=123"
        assert a.execute("SET query_wait_timeout TO '7'").statusmessage == "SET query_wait_timeout=7"
        assert a.execute("SET listen_port = 1").statusmessage == "SET listen_port=1"
        with pytest.raises(psycopg.Error, match="^SET failed$"):
            a.execute("SET max_client_conn = lots")
        with pytest.raises(psycopg.Error, match="^SET failed$"):
            a.execute("SET no_such_key = 1")
        p.wait_for_log(r"ERROR unknown parameter: pgbouncer/no_such_key")
        p.wait_for_log(r'ERROR invalid value "lots" for parameter max_client_conn: ')
        assert a.execute("SET client_encoding = 'UTF8'").statusmessage == "SET"   # ignored
    from test_workers import worker_of

    def values(key, n=16):
        seen = {}
        for _ in range(n):
            with admin(p) as a:
                rows = a.execute("SHOW CONFIG").fetchall()
                seen.setdefault(worker_of(a), set()).update(r[1] for r in rows if r[0] == key)
        return seen

    seen = values("server_idle_timeout")
    assert len(seen) > 1 and all(v == {"123"} for v in seen.values()), seen
    assert all(v == {"7"} for v in values("query_wait_timeout").values())
    # the refused values changed nothing anywhere, nor the restart-only key
    assert all(v == {"100"} for v in values("max_client_conn").values())
    assert all(v == {str(p.port)} for v in values("listen_port").values())


def test_extended_protocol_on_console(pg15, make_pooler):
    """Drivers that always use the extended protocol can run SHOW commands:
    prepared statements, text and binary results, errors up to Sync, and
    control commands."""
    p = pooler(pg15, make_pooler)
    with client(p) as c:
        c.execute("SELECT 1")
    with admin(p) as a:
        for _ in range(2):      # the second run reuses the prepared statement
            cur = a.execute("SHOW POOLS", prepare=True)
            names = [d.name for d in cur.description]
            assert names[:4] == ["database", "user", "cl_active", "cl_waiting"]
            assert any(r[0] == "testdb" for r in cur.fetchall())
        def xacts():
            cur = a.cursor(binary=True)
            cur.execute("SHOW STATS", prepare=True)
            rows = {r[0]: r for r in cur.fetchall()}
            assert isinstance(rows["testdb"][2], int)
            return rows["testdb"][2]

        util.wait_until(lambda: xacts() >= 1, 3, what="binary SHOW STATS counts")
        cur = a.cursor(binary=True)
        cur.execute("SHOW WORKERS", prepare=True)
        assert sorted(r[0] for r in cur.fetchall()) == list(range(WORKERS))
        with pytest.raises(psycopg.Error,
                           match="^invalid command 'SHOW NOTHING', use SHOW HELP;$"):
            a.execute("SHOW NOTHING", prepare=True)
        a.execute("PAUSE testdb", prepare=True)
        a.execute("RESUME testdb", prepare=True)
        assert a.execute("SHOW VERSION", prepare=True).fetchone()[0].startswith("pgcrew")
        with pytest.raises(psycopg.Error, match="no parameters"):
            a.execute("SHOW POOLS %s", (1,))
        assert a.execute("SHOW STATE").fetchone()[0] == "active"


def test_pause_with_min_pool_size_completes(pg15, make_pooler):
    """min_pool_size must not reopen servers while PAUSE waits for them to go;
    DISABLE keeps serving the clients already connected."""
    p = pooler(pg15, make_pooler, workers=2)
    p.databases["testdb"] = pg15.dsn("testdb") + " min_pool_size=2"
    p.write_config()
    p.reload()
    with client(p) as c:
        c.execute("SELECT 1")
        util.wait_until(lambda: pg15.server_connections("testdb") >= 2, 5, what="min_pool_size servers")
        with admin(p) as a:
            a.execute("PAUSE testdb")
            assert pg15.server_connections("testdb") == 0 or util.wait_until(
                lambda: pg15.server_connections("testdb") == 0, 5, what="servers closed by PAUSE")
            time.sleep(0.5)
            assert pg15.server_connections("testdb") == 0, "servers reopened while paused"
            a.execute("RESUME testdb")
            a.execute("DISABLE testdb")
            assert c.execute("SELECT 2").fetchone() == (2,)
            a.execute("ENABLE testdb")


SOCKET_COLUMNS = ["type", "user", "database", "replication", "state", "addr", "port",
                  "local_addr", "local_port", "connect_time", "request_time", "wait",
                  "wait_us", "close_needed", "ptr", "link", "remote_pid", "tls",
                  "application_name", "prepared_statements", "id"]


def test_show_clients_and_servers_have_pgbouncer_columns(pg15, make_pooler):
    """PgBouncer 1.25's socket columns for both views; a client without a
    server is "idle", one inside a transaction "active" with its server as
    link, and the server shows the client as its link and the backend pid."""
    p = pooler(pg15, make_pooler, default_pool_size=2)
    idle, busy = client(p, application_name="idle-one"), client(p, application_name="busy-one")
    try:
        busy.execute("BEGIN")
        backend = busy.execute("SELECT pg_backend_pid()").fetchone()[0]
        with admin(p) as a:
            for view in ("CLIENTS", "SERVERS"):
                cols, _ = columns(a, f"SHOW {view}")
                assert [c[0] for c in cols] == SOCKET_COLUMNS, view
            cur = a.execute("SHOW CLIENTS")
            names = [d.name for d in cur.description]
            rows = [dict(zip(names, r)) for r in cur.fetchall() if r[2] == "testdb"]
            by_app = {r["application_name"]: r for r in rows}
            assert by_app["idle-one"]["state"] == "idle" and by_app["idle-one"]["link"] == ""
            assert by_app["busy-one"]["state"] == "active" and by_app["busy-one"]["link"]
            assert all(r["type"] == "C" and r["replication"] == "none" for r in rows)
            cur = a.execute("SHOW SERVERS")
            names = [d.name for d in cur.description]
            servers = [dict(zip(names, r)) for r in cur.fetchall() if r[2] == "testdb"]
            linked = [s for s in servers if s["link"]]
            assert len(linked) == 1
            assert linked[0]["state"] == "active" and linked[0]["remote_pid"] == backend
            assert linked[0]["link"] == by_app["busy-one"]["ptr"]
            assert by_app["busy-one"]["link"] == linked[0]["ptr"]
        busy.execute("COMMIT")
    finally:
        idle.close()
        busy.close()


@pytest.mark.parametrize("workers", [1, 4])
def test_console_logins_counted_and_limited(pg15, make_pooler, workers):
    """As PgBouncer: console logins count in SHOW USERS / SHOW DATABASES,
    max_user_client_connections and max_db_client_connections apply to them
    (admin_users exempt), the pgbouncer row shows the global limit, and
    SHOW USERS lists every auth_file user, met or not."""
    p = make_pooler(pg15, settings={"workers": workers, "stats_users": "md5_user",
                                    "max_user_client_connections": 1,
                                    "max_db_client_connections": 5})
    admins = [p.admin(), p.admin()]            # admin_users: over the user limit, allowed
    stats = p.connect("pgbouncer", user="md5_user")
    with pytest.raises(psycopg.OperationalError, match="max_user_client_connections"):
        p.connect("pgbouncer", user="md5_user")
    cur = admins[0].execute("SHOW USERS")
    names = [d.name for d in cur.description]
    users = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    assert users["trust_user"]["current_client_connections"] == 2
    assert users["md5_user"]["current_client_connections"] == 1
    assert {"scram_user", "plain_user"} <= set(users), "auth_file users not met yet are listed"
    cur = admins[0].execute("SHOW DATABASES")
    names = [d.name for d in cur.description]
    dbs = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    assert dbs["pgbouncer"]["current_client_connections"] == 3
    assert dbs["pgbouncer"]["max_client_connections"] == 5
    stats.close()
    for a in admins:
        a.close()

