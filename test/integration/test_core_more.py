"""Core PgBouncer behaviours not covered elsewhere: transaction_timeout,
query_wait_notify, autodb_idle_timeout, server_check_query, the cached
server-login error, the reserve pool, min_pool_size, connect_query, the
per-database and per-user client limits, server_reset_query, SIGUSR1/SIGUSR2,
daemon mode, multi-host databases and the unix socket listener.

Each test asserts what a client, the server (pg_stat_activity, tables written
by the pooler's own queries, the PostgreSQL log) or the pooler's log can see,
with the texts of PgBouncer 1.25. Tests of settings Debian's PgBouncer 1.18
does not have are marked pgcrew_only. Tests that need one server to be reused
run one worker; the last section checks that state PgBouncer keeps in its one
process (pool parameters, failed logins, host choice, the console's view,
client counts) is shared by pgcrew's workers. Every wait is bounded."""

import os
import re
import signal
import socket
import subprocess
import threading
import time

import psycopg
import pytest

import util
import wire
from pooler import pid_alive

# -- helpers -------------------------------------------------------------------


def login_error(port, user, dbname, host=util.HOST, timeout=5.0):
    """Log in over a raw socket (trust); return the ErrorResponse fields, or
    None when the login completes (ReadyForQuery)."""
    with wire.RawConn(port, host=host, timeout=timeout) as raw:
        raw.send(wire.startup_packet(user, dbname))
        deadline = time.monotonic() + timeout
        while True:
            kind, payload = raw.read_message(max(0.01, deadline - time.monotonic()))
            if kind == b"E":
                return wire.error_fields(payload)
            if kind == b"Z":
                return None


def admin_database_names(admin):
    # The console speaks only the simple query protocol: a ClientCursor uses it.
    cur = psycopg.ClientCursor(admin)
    return {row[0] for row in cur.execute("SHOW DATABASES").fetchall()}


def fresh_table(pg, name, dbname="testdb"):
    """(Re)create an empty log table `name (pid int)` anyone may write to."""
    with pg.connect(dbname) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(f"CREATE TABLE {name} (pid int)")
        conn.execute(f"GRANT ALL ON {name} TO PUBLIC")


def table_pids(pg, name, dbname="testdb"):
    with pg.connect(dbname) as conn:
        return sorted(r[0] for r in conn.execute(f"SELECT pid FROM {name}").fetchall())


def pg_log_count(pg, needle):
    try:
        with open(pg.logfile, errors="replace") as f:
            return f.read().count(needle)
    except OSError:
        return 0


def connect_retrying(p, timeout=5.0, **kw):
    """A client once a slot frees up (closes are asynchronous): bounded retry."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return p.connect(**kw)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def run_in_thread(fn):
    """Start fn in a thread; returns (thread, result dict with 'value'/'error'/'at')."""
    result = {}

    def body():
        try:
            result["value"] = fn()
        except Exception as exc:  # reported by the caller
            result["error"] = exc
        result["at"] = time.monotonic()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, result


# -- 1. transaction_timeout -----------------------------------------------------


@pytest.mark.pgcrew_only  # transaction_timeout is new in PgBouncer 1.25
def test_transaction_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"transaction_timeout": 1})
    # Short autocommit statements for longer than the timeout are not a
    # transaction that lasts: they are left alone.
    steady = p.connect()
    until = time.monotonic() + 1.6
    while time.monotonic() < until:
        assert steady.execute("SELECT 1").fetchone() == (1,)
        time.sleep(0.2)

    conn = p.connect(autocommit=False)
    conn.execute("SELECT 1")  # BEGIN + SELECT: the transaction starts here
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError) as err:
        conn.execute("SELECT pg_sleep(4)")  # still busy, not idle in transaction
    elapsed = time.monotonic() - started
    assert err.value.diag.message_primary == "transaction timeout", str(err.value)
    assert err.value.sqlstate == "08P01"
    assert 0.5 <= elapsed < 3.5, f"closed after {elapsed:.2f}s of a 1s transaction_timeout"
    p.wait_for_log(r"closing because: transaction timeout")
    assert steady.execute("SELECT 2").fetchone() == (2,)
    with p.connect() as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.pgcrew_only  # transaction_timeout is new in PgBouncer 1.25
@pytest.mark.parametrize("workers", [1, 4])
def test_transaction_timeout_per_user(pg15, make_pooler, workers):
    """[users] transaction_timeout applies to that user only."""
    p = make_pooler(pg15, settings={"workers": workers},
                    users={"trust_user": "transaction_timeout=1"})
    conn = p.connect(autocommit=False)
    conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError, match="transaction timeout"):
        conn.execute("SELECT pg_sleep(4)")
    other = p.connect(user="md5_user", password="md5-secret", autocommit=False)
    assert other.execute("SELECT 1 FROM pg_sleep(1.5)").fetchone() == (1,)
    other.commit()


# -- 2. query_wait_notify -------------------------------------------------------


@pytest.mark.pgcrew_only  # query_wait_notify is new in PgBouncer 1.25
def test_query_wait_notify(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_wait_notify": 1, "query_wait_timeout": 10,
                                    "workers": 1})
    holder = p.connect()
    holder.execute("SELECT 1")  # session mode: holds the only server
    with wire.RawConn(p.port, timeout=10) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message("SELECT 42"))
        started = time.monotonic()
        kind, payload = raw.read_message(timeout=5)
        waited = time.monotonic() - started
        assert kind == b"N", f"expected a NoticeResponse while queued, got {kind!r} {payload!r}"
        fields = wire.error_fields(payload)
        assert fields.get("M") == ("No server connection available in postgres backend, "
                                   "client being queued"), fields
        assert fields.get("S") == "NOTICE", fields
        assert fields.get("C") == "00000", fields
        # PgBouncer compares whole seconds: notified after 1-2 s of waiting.
        assert 0.9 <= waited < 4.0, f"notice after {waited:.2f}s with query_wait_notify=1"
        holder.close()  # frees the server: the queued query runs
        msgs = raw.read_until(b"Z", timeout=5)
    kinds = [k for k, _ in msgs]
    assert b"E" not in kinds, msgs
    assert kinds.count(b"N") == 0, "the wait notice must be sent once"
    rows = [payload for k, payload in msgs if k == b"D"]
    assert rows and rows[0].endswith(b"42"), msgs


@pytest.mark.pgcrew_only  # query_wait_notify is new in PgBouncer 1.25
@pytest.mark.parametrize("workers", [1, 4])
def test_query_wait_notify_every_wait(pg15, make_pooler, workers):
    """The notice comes with every wait longer than query_wait_notify, not
    only the first one of a connection (as PgBouncer 1.25: the flag is
    cleared when the client gets its server)."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "query_wait_notify": 1, "query_wait_timeout": 10,
                                    "workers": workers})
    holder = p.connect(autocommit=False)
    with wire.RawConn(p.port, timeout=10) as raw:
        raw.login_trust("trust_user", "testdb")
        for i in range(2):
            holder.execute("SELECT 1")       # a transaction holds the pool's only server
            raw.send(wire.query_message(f"SELECT {i}"))
            kind, payload = raw.read_message(timeout=5)
            assert kind == b"N", f"wait {i}: expected the queue notice, got {kind!r} {payload!r}"
            assert "client being queued" in wire.error_fields(payload).get("M", "")
            holder.commit()                  # the server goes to the queued query
            msgs = raw.read_until(b"Z", timeout=5)
            assert [k for k, _ in msgs if k in (b"N", b"E")] == [], msgs
    holder.close()


# -- 3. autodb_idle_timeout -----------------------------------------------------


def test_autodb_idle_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "autodb_idle_timeout": 1,
                                    "server_idle_timeout": 1, "workers": 1},
                    databases={"*": f"host={pg15.host} port={pg15.port}"})
    with p.connect(dbname="otherdb") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("otherdb",)
    admin = p.admin()
    assert "otherdb" in admin_database_names(admin)
    # The idle server goes after server_idle_timeout, then the unused
    # auto-database after autodb_idle_timeout.
    util.wait_until(lambda: "otherdb" not in admin_database_names(admin), 10,
                    what="auto-database otherdb to leave SHOW DATABASES")
    p.wait_for_log(r"dropping database 'otherdb' as it does not exist anymore "
                   r"or inactive auto-database")
    # The server was closed before; its backend exits in its own time.
    util.wait_until(lambda: pg15.server_connections("otherdb") == 0, 10,
                    what="the closed server's backend to exit")
    # A new client makes it again.
    with p.connect(dbname="otherdb") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("otherdb",)
    assert "otherdb" in admin_database_names(admin)


# -- 4. server_check_query / server_check_delay ---------------------------------


@pytest.mark.parametrize("delay,checked", [(0, True), (30, False)],
                         ids=["delay0", "delay30"])
def test_server_check_query(pg15, make_pooler, delay, checked):
    """The check query writes the backend pid into a table: with
    server_check_delay=0 an idle server is checked before it is reused; with a
    long delay it is reused unchecked."""
    table = f"pgcrew_check_log_{delay}"
    fresh_table(pg15, table)
    p = make_pooler(pg15, settings={
        "pool_mode": "transaction", "default_pool_size": 1, "workers": 1,
        "server_check_delay": delay,
        "server_check_query": f"INSERT INTO {table} VALUES (pg_backend_pid())"})
    conn = p.connect()
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert table_pids(pg15, table) == [], "a freshly connected server was checked"
    for n in (1, 2):
        time.sleep(0.5)  # idle long enough for the janitor to mark it for a check
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
        expected = [pid] * n if checked else []
        assert table_pids(pg15, table) == expected, f"after reuse {n}"


def test_server_failing_check_is_replaced(pg15, make_pooler):
    """A server that dies during its check (the check query terminates its own
    backend) is dropped and the waiting client is served by a new server,
    without seeing an error."""
    p = make_pooler(pg15, settings={
        "pool_mode": "transaction", "default_pool_size": 1, "workers": 1,
        "server_check_delay": 0,
        "server_check_query": "SELECT pg_terminate_backend(pg_backend_pid())"})
    conn = p.connect()
    first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    time.sleep(0.5)
    started = time.monotonic()
    second = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert time.monotonic() - started < 5
    assert second != first
    util.wait_until(lambda: first not in pg15.backend_pids("testdb", "trust_user"), 5,
                    what="the checked-to-death backend to be gone")
    assert pg15.backend_pids("testdb", "trust_user") == [second]


# -- 5. server_login_retry and the cached login error ---------------------------


MISSING_DB = "pgcrew_missing_db"
MISSING_NEEDLE = f'database "{MISSING_DB}" does not exist'


def missing_db_pooler(pg, make_pooler, retry, workers=1):
    return make_pooler(pg, settings={"server_login_retry": retry, "workers": workers},
                       databases={"testdb": pg.dsn("testdb"), "missing": pg.dsn(MISSING_DB)})


def first_failed_login(p, pg, pooler_kind):
    """Log in to the broken database once; returns the server-log baseline."""
    before = pg_log_count(pg, MISSING_NEEDLE)
    first = login_error(p.port, "trust_user", "missing")
    assert first is not None, "login to a database the server lacks succeeded"
    assert first.get("M") == MISSING_NEEDLE, first
    # PgBouncer 1.18 sent the server's text with 08P01; 1.25 keeps its SQLSTATE.
    expected_codes = ("3D000", "08P01") if pooler_kind == "pgbouncer" else ("3D000",)
    assert first.get("C") in expected_codes, first
    util.wait_until(lambda: pg_log_count(pg, MISSING_NEEDLE) == before + 1, 5,
                    what="the server's FATAL for the failed login")
    return before


def test_server_login_retry_delay(pg15, make_pooler, pooler_kind):
    """After a failed server login, no new login is tried for
    server_login_retry (counted in the server's log); after it one is."""
    # 4 s: the check 1.2 s in stays well inside it on a busy machine too.
    p = missing_db_pooler(pg15, make_pooler, retry=4)
    before = first_failed_login(p, pg15, pooler_kind)
    failed_at = time.monotonic()
    t, res = run_in_thread(lambda: login_error(p.port, "trust_user", "missing", timeout=10))
    time.sleep(1.2)
    assert pg_log_count(pg15, MISSING_NEEDLE) == before + 1, \
        "a server login was retried within server_login_retry"
    t.join(10)
    assert not t.is_alive()
    assert res.get("value") is not None, res  # refused, with the error now or after a retry
    time.sleep(max(0.0, failed_at + 4.5 - time.monotonic()))
    third = login_error(p.port, "trust_user", "missing", timeout=8)
    assert third is not None
    util.wait_until(lambda: pg_log_count(pg15, MISSING_NEEDLE) >= before + 2, 5,
                    what="a new server login after server_login_retry")
    with p.connect() as conn:  # other databases are unaffected
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.pgcrew_only  # PgBouncer 1.18 queues the client until the retry instead
def test_server_login_retry_cached_error(pg15, make_pooler, pooler_kind):
    p = missing_db_pooler(pg15, make_pooler, retry=10)
    before = first_failed_login(p, pg15, pooler_kind)
    started = time.monotonic()
    second = login_error(p.port, "trust_user", "missing")
    elapsed = time.monotonic() - started
    assert second is not None
    assert second.get("M") == (f"server login has been failing, cached error: {MISSING_NEEDLE} "
                               "(server_login_retry)"), second
    assert second.get("C") == "08P01", second
    assert elapsed < 1.0, f"cached error took {elapsed:.2f}s"
    time.sleep(0.5)
    assert pg_log_count(pg15, MISSING_NEEDLE) == before + 1, "the cached error cost a server login"


# -- 6. reserve pool ------------------------------------------------------------


def test_reserve_pool_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "reserve_pool_size": 1, "reserve_pool_timeout": 0.5})
    busy = p.connect()
    waiter = p.connect()
    busy.execute("SELECT 1")
    assert pg15.server_connections("testdb", "trust_user") == 1
    t, res = run_in_thread(lambda: busy.execute("SELECT pg_sleep(2.5)").fetchone())

    def sleeping():
        with pg15.connect() as c:
            return c.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                             " AND query LIKE 'SELECT pg_sleep(2.5)%'").fetchone()[0]
    util.wait_until(sleeping, 5, what="the long query to run on the only server")
    started = time.monotonic()
    pid = waiter.execute("SELECT pg_backend_pid()").fetchone()[0]
    waited = time.monotonic() - started
    assert 0.4 <= waited < 2.0, f"second transaction ran after {waited:.2f}s"
    assert pg15.server_connections("testdb", "trust_user") == 2
    assert pid in pg15.backend_pids("testdb", "trust_user")
    p.wait_for_log(r"taking connection from reserve_pool")
    t.join(10)
    assert not t.is_alive()
    assert "error" not in res, res


# -- 7. min_pool_size -----------------------------------------------------------


@pytest.mark.pgcrew_only  # PgBouncer 1.18 opens them only once a client came
def test_min_pool_size_without_clients(pg15, make_pooler):
    """A database with a forced user and min_pool_size=2: two servers are
    opened with no client at all, and no more than two."""
    p = make_pooler(pg15, settings={"default_pool_size": 5},
                    databases={"testdb": pg15.dsn("testdb", user="trust_user", min_pool_size=2)})
    util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") >= 2, 5,
                    what="min_pool_size servers without any client")
    peak = 0
    until = time.monotonic() + 1.0
    while time.monotonic() < until:
        peak = max(peak, pg15.server_connections("testdb", "trust_user"))
        time.sleep(0.1)
    assert peak == 2, f"expected exactly min_pool_size=2 servers, saw {peak}"
    with p.connect() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)


def test_min_pool_size_with_client(pg15, make_pooler):
    """A client's pool (no forced user) is filled up to min_pool_size while the
    client is connected, though it uses one server."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 5,
                                    "min_pool_size": 3})
    conn = p.connect()
    assert conn.execute("SELECT 1").fetchone() == (1,)
    util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") >= 3, 5,
                    what="min_pool_size servers for a connected client")
    time.sleep(0.7)
    assert pg15.server_connections("testdb", "trust_user") == 3


# -- 8. connect_query -----------------------------------------------------------


def test_connect_query_once_per_server(pg15, make_pooler):
    table = "pgcrew_connect_query_log"
    fresh_table(pg15, table)
    dsn = pg15.dsn("testdb", connect_query=f"'INSERT INTO {table} VALUES (pg_backend_pid())'")
    # One worker: the last step needs the next client to reuse a server.
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 2,
                                    "workers": 1},
                    databases={"testdb": dsn})
    a = p.connect()
    b = p.connect()
    pids = sorted({a.execute("SELECT pg_backend_pid()").fetchone()[0],
                   b.execute("SELECT pg_backend_pid()").fetchone()[0]})
    assert len(pids) == 2
    for _ in range(3):
        a.execute("SELECT 1")
        b.execute("SELECT 1")
    assert table_pids(pg15, table) == pids
    # A reused server does not run it again.
    a.close()
    with p.connect() as c:
        assert c.execute("SELECT pg_backend_pid()").fetchone()[0] in pids
    assert table_pids(pg15, table) == pids


# -- 9. max_db_client_connections / max_user_client_connections -----------------


@pytest.mark.pgcrew_only  # both limits are new in PgBouncer 1.24
@pytest.mark.parametrize("setting,held,extra", [
    ("max_db_client_connections",
     [("testdb", "trust_user"), ("testdb", "scram_user")], ("testdb", "md5_user")),
    ("max_user_client_connections",
     [("testdb", "trust_user"), ("otherdb", "trust_user")], ("testdb", "trust_user")),
], ids=["db", "user"])
def test_client_connection_limits(pg15, make_pooler, setting, held, extra):
    p = make_pooler(pg15, settings={setting: 2, "workers": 1})
    conns = [p.connect(dbname=db, user=user) for db, user in held]
    for conn in conns:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    err = login_error(p.port, extra[1], extra[0])
    assert err is not None, f"a third client got in despite {setting}=2"
    assert err.get("M") == f"client connections exceeded ({setting})", err
    assert err.get("C") == "08P01", err
    # Not counted against the limit: another database / user.
    other = ("otherdb", "md5_user") if setting == "max_db_client_connections" \
        else ("testdb", "md5_user")
    assert login_error(p.port, other[1], other[0]) is None
    conns[0].close()
    with connect_retrying(p, dbname=extra[0], user=extra[1]) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


# -- 10. server_reset_query / server_reset_query_always -------------------------


@pytest.mark.parametrize("reset_query,kept", [("DISCARD ALL", False), ("", True)],
                         ids=["discard", "none"])
def test_reset_query_session(pg15, make_pooler, reset_query, kept):
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "workers": 1, "server_reset_query": reset_query})
    a = p.connect()
    a.execute("CREATE TEMP TABLE reset_probe (x int)")
    a.execute("SET pgcrew.probe = 'from-a'")
    pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    a.close()
    with p.connect() as b:
        assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid, "server not reused"
        table = b.execute("SELECT to_regclass('pg_temp.reset_probe') IS NOT NULL").fetchone()[0]
        guc = b.execute("SELECT current_setting('pgcrew.probe', true)").fetchone()[0]
    assert table is kept, f"temp table {'lost' if kept else 'survived'} (reset={reset_query!r})"
    assert (guc == "from-a") is kept, f"SET value {guc!r} (reset={reset_query!r})"


@pytest.mark.parametrize("always", [True, False], ids=["always", "not-always"])
def test_reset_query_always_tx(pg15, make_pooler, always):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "workers": 1, "server_reset_query": "DISCARD ALL",
                                    "server_reset_query_always": always})
    a = p.connect()
    b = p.connect()
    a.execute("CREATE TEMP TABLE always_probe (x int)")
    pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid
    present = b.execute("SELECT to_regclass('pg_temp.always_probe') IS NOT NULL").fetchone()[0]
    assert present is (not always), \
        f"temp table {'survived' if present else 'dropped'} with server_reset_query_always={always}"


# -- 11. SIGUSR1 (pause) and SIGUSR2 (resume) -----------------------------------


def test_sigusr1_pauses_and_sigusr2_resumes(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "workers": 2})
    conn = p.connect()
    assert conn.execute("SELECT 1").fetchone() == (1,)
    mark = len(p.log_text())
    os.kill(p.pid, signal.SIGUSR1)
    p.wait_for_log(r"got SIGUSR1, pausing all activity", since=mark)
    # PgBouncer pauses in the step that logs it (and 1.18 has no SHOW
    # STATE); pgcrew's supervisor then tells every worker.
    if p.kind == "pgcrew":
        p.wait_every_worker(lambda a: dict(a.execute("SHOW STATE").fetchall())["paused"] == "yes",
                            2, what="SHOW STATE paused in every worker")
    t, res = run_in_thread(lambda: conn.execute("SELECT 2").fetchone())
    t.join(1.0)
    assert t.is_alive(), f"query ran while paused: {res}"
    mark = len(p.log_text())
    resumed_at = time.monotonic()
    os.kill(p.pid, signal.SIGUSR2)
    p.wait_for_log(r"got SIGUSR2, continuing", since=mark)
    t.join(5)
    assert not t.is_alive(), "query still waiting 5 s after SIGUSR2"
    assert res.get("value") == (2,), res
    assert res["at"] - resumed_at < 5
    with p.connect() as fresh:
        assert fresh.execute("SELECT 3").fetchone() == (3,)


# -- 12. daemon mode ------------------------------------------------------------


def test_daemon_mode_with_pidfile(pg15, make_pooler):
    p = make_pooler(pg15, start=False)
    pidfile = os.path.join(p.workdir, "pooler.pid")
    p.settings["pidfile"] = pidfile
    p.start_daemon()
    assert p.daemon_pid != p.proc.pid, "the -d launcher itself kept running"
    with open(pidfile) as f:
        assert int(f.read().strip()) == p.daemon_pid
    with p.connect() as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("testdb",)
    pid = p.daemon_pid
    os.kill(pid, signal.SIGINT)
    util.wait_until(lambda: not pid_alive(pid), 10, what="the daemon to exit on SIGINT")
    util.wait_until(lambda: not os.path.exists(pidfile), 2, what="the pidfile to be removed")
    assert not util.port_accepts(p.port)


# -- 13. multi-host databases ---------------------------------------------------


@pytest.mark.pgcrew_only   # load_balance_hosts is PgBouncer 1.24+
@pytest.mark.parametrize("workers", [1, 4])
def test_disable_moves_on_after_a_login_failure(pg15, make_pooler, workers):
    """load_balance_hosts = disable: a host that fails the login itself (here
    PostgreSQL refuses the password over TCP) is left for the next host
    (the Unix socket, where the same user is trusted), not retried for
    ever."""
    dsn = (f"host=127.0.0.1,{pg15.sockdir} port={pg15.port} dbname=testdb user=md5_user "
           f"password=wrong-password load_balance_hosts=disable")
    p = make_pooler(pg15, databases={"testdb": dsn},
                    settings={"server_login_retry": 1, "workers": workers})
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        p.connect(connect_timeout=10)

    def served():
        try:
            with p.connect(connect_timeout=10) as conn:
                return conn.execute("SELECT current_user, inet_server_addr()").fetchone()
        except psycopg.OperationalError:
            return None
    assert util.wait_until(served, 10, interval=0.3, what="a login via the second host") == \
        ("md5_user", None)


@pytest.mark.parametrize("balance,workers", [
    (None, 1),
    pytest.param("disable", 1, marks=pytest.mark.pgcrew_only),  # PgBouncer 1.24+
    pytest.param("disable", 2, marks=pytest.mark.pgcrew_only),
], ids=["default", "disable", "disable-2workers"])
def test_multi_host_first_down(pg15, make_pooler, balance, workers):
    """host=<dead>,<live>: 127.0.0.2 refuses (the server listens on 127.0.0.1
    only); the pool reaches the server through the second host."""
    with socket.socket() as probe:
        probe.settimeout(2)
        assert probe.connect_ex(("127.0.0.2", pg15.port)) != 0, "127.0.0.2 unexpectedly answers"
    extra = {"load_balance_hosts": balance} if balance else {}
    dsn = f"host=127.0.0.2,{pg15.host} port={pg15.port} dbname=testdb"
    dsn += "".join(f" {k}={v}" for k, v in extra.items())
    p = make_pooler(pg15, settings={"server_login_retry": 1, "query_wait_timeout": 15,
                                    "workers": workers},
                    databases={"testdb": dsn})
    started = time.monotonic()
    deadline = started + 10
    while True:  # the first attempt may fail on the dead host
        try:
            conn = p.connect(connect_timeout=10)
            row = conn.execute("SELECT host(inet_server_addr())").fetchone()
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, f"no server via the second host\n{p.log_tail()}"
            time.sleep(0.2)
    assert row == ("127.0.0.1",)
    assert time.monotonic() - started < 10
    if balance == "disable":
        # Stays on the working host: further servers open without new
        # failures (several clients, so that every worker process gets some).
        failures = p.log_text().count("closing because: connect failed")
        more = []
        for _ in range(6):
            t0 = time.monotonic()
            c = p.connect()
            assert c.execute("SELECT host(inet_server_addr())").fetchone() == ("127.0.0.1",)
            assert time.monotonic() - t0 < 1.0
            more.append(c)
        assert pg15.server_connections("testdb", "trust_user") == 7
        assert p.log_text().count("closing because: connect failed") == failures


# -- 14. unix socket listener ---------------------------------------------------


def test_unix_socket_listener(pg15, make_pooler):
    p = make_pooler(pg15)
    path = os.path.join(p.workdir, f".s.PGSQL.{p.port}")
    util.wait_until(lambda: os.path.exists(path), 5, what=f"unix socket {path}")
    with psycopg.connect(host=p.workdir, port=p.port, dbname="testdb", user="trust_user",
                         autocommit=True, connect_timeout=5) as conn:
        assert conn.execute("SELECT current_database(), current_user").fetchone() == \
            ("testdb", "trust_user")
    p.stop()
    assert not os.path.exists(path), "unix socket left behind after shutdown"


# -- state that every worker process must share ----------------------------------
# PgBouncer is one process; with workers = 2 a client lands on either worker
# (the kernel picks), so each test uses several clients to reach both. The
# "workers" key is not written for PgBouncer, where these tests pass as-is.


def test_login_completes_while_pool_is_busy(pg15, make_pooler):
    """Session mode, the only server held: new clients still log in at once
    (PgBouncer answers the login from the pool's cached server parameters)
    and only their first query queues, whichever worker takes them."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_wait_timeout": 10, "workers": 2})
    holder = p.connect()
    holder.execute("SELECT 1")
    for _ in range(4):
        started = time.monotonic()
        with wire.RawConn(p.port, timeout=5) as raw:
            raw.login_trust("trust_user", "testdb", timeout=3)
        assert time.monotonic() - started < 2.0
    assert holder.execute("SELECT 2").fetchone() == (2,)


def test_workers_share_failed_login_state(pg15, make_pooler, pooler_kind):
    """After a failed server login, no client of any worker causes another
    server login within server_login_retry."""
    p = missing_db_pooler(pg15, make_pooler, retry=3, workers=2)
    before = first_failed_login(p, pg15, pooler_kind)
    threads = [run_in_thread(lambda: login_error(p.port, "trust_user", "missing", timeout=10))
               for _ in range(4)]
    time.sleep(1.5)
    assert pg_log_count(pg15, MISSING_NEEDLE) == before + 1, \
        "another server login within server_login_retry"
    for t, res in threads:
        t.join(10)
        assert not t.is_alive()
        assert res.get("value") is not None, res


def test_workers_share_console_view(pg15, make_pooler):
    """An auto-database made by a client shows in SHOW DATABASES on every
    admin connection."""
    p = make_pooler(pg15, settings={"workers": 2},
                    databases={"*": f"host={pg15.host} port={pg15.port}"})
    conn = p.connect(dbname="otherdb")
    assert conn.execute("SELECT 1").fetchone() == (1,)
    for _ in range(8):
        with p.admin() as admin:
            assert "otherdb" in admin_database_names(admin)


@pytest.mark.pgcrew_only  # max_db_client_connections is new in PgBouncer 1.24
def test_workers_share_client_limit(pg15, make_pooler):
    """max_db_client_connections counts the clients of every worker."""
    p = make_pooler(pg15, settings={"max_db_client_connections": 2, "workers": 2})
    held = [p.connect(), p.connect(user="scram_user")]
    for conn in held:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    for _ in range(4):
        err = login_error(p.port, "md5_user", "testdb")
        assert err is not None, "a third client got in despite max_db_client_connections=2"
        assert "max_db_client_connections" in err.get("M", ""), err


@pytest.mark.pgcrew_only  # PgBouncer sends cancels through pool connections instead
def test_cancel_wait_timeout(pg15, make_pooler):
    """PostgreSQL accepts the cancel connection (kernel backlog) but never
    answers it: after cancel_wait_timeout the pooler gives up on it, logs
    why, and the server it held back is usable again."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "cancel_wait_timeout": 1, "workers": 1})
    with open(os.path.join(pg15.datadir, "postmaster.pid")) as f:
        postmaster = int(f.readline())
    conn = p.connect()
    result = {}

    def sleeper():
        try:
            conn.execute("SELECT pg_sleep(3)")
            result["done"] = True
        except psycopg.Error as exc:
            result["error"] = exc

    t = threading.Thread(target=sleeper)
    t.start()
    pg15.wait_active("SELECT pg_sleep(3)")
    os.kill(postmaster, signal.SIGSTOP)   # backends keep running; new connections wait
    try:
        conn.cancel()
        p.wait_for_log(r"cancel request timed out \(cancel_wait_timeout\)", timeout=5)
    finally:
        os.kill(postmaster, signal.SIGCONT)
    t.join(timeout=10)
    assert not t.is_alive()
    with p.connect() as other:
        assert other.execute("SELECT 1").fetchone() == (1,)
    conn.close()


def test_disable_pqexec(pg15, make_pooler):
    """disable_pqexec: a simple-protocol Query costs the client its
    connection with PgBouncer's error; the extended protocol works."""
    p = make_pooler(pg15, settings={"disable_pqexec": 1})
    with p.connect() as conn:   # psycopg sends parameterless queries extended too
        assert conn.execute("SELECT %s::int", (7,)).fetchone() == (7,)
    with wire.RawConn(p.port) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message("SELECT 1"))
        kind, payload = raw.read_message()
        assert kind == b"E"
        assert wire.error_fields(payload)["M"] == "PQexec disallowed"
        raw.wait_closed()


@pytest.mark.parametrize("fast", [0, 1], ids=["plain", "fast"])
def test_db_change_retires_servers(pg15, make_pooler, fast):
    """A RELOAD that changes a database's connection settings retires its
    servers: a session's when the session ends ("close_needed"), or with
    server_fast_close at once, taking the client along with PgBouncer's
    "database configuration changed"."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "server_fast_close": fast,
                                    "workers": 1})
    conn = p.connect()
    first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    p.databases["testdb"] = f"host=localhost port={pg15.port} dbname=testdb"
    p.write_config()
    p.reload()
    p.wait_for_log(r"got SIGHUP", timeout=5)
    if fast:
        p.wait_for_log(r"closing because: database configuration changed")
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    else:
        time.sleep(0.5)
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == first
        conn.close()
        p.wait_for_log(r"closing because: close_needed")
    conn.close()
    with p.connect() as again:
        assert again.execute("SELECT pg_backend_pid()").fetchone()[0] != first


# PgBouncer 1.18 keeps the session until it ends; 1.25 closes it with this text.
@pytest.mark.pgcrew_only
def test_reconnect_with_fast_close_tells_the_client(pg15, make_pooler):
    """RECONNECT under server_fast_close in session pooling: the idle
    session's server goes at once and the client is told PgBouncer's
    "database configuration changed"."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "server_fast_close": 1,
                                    "workers": 1})
    conn = p.connect()
    conn.execute("SELECT 1")
    with p.admin() as a:
        a.execute("RECONNECT testdb")
    with pytest.raises(psycopg.OperationalError, match="database configuration changed"):
        conn.execute("SELECT 1")
    conn.close()


def test_ipv6_addresses_in_logs_in_brackets(pg15, make_pooler):
    """Log lines name an IPv6 peer as PgBouncer does: [::1]:port."""
    p = make_pooler(pg15, settings={"listen_addr": "127.0.0.1,::1", "workers": 1,
                                    "log_connections": 1})
    with psycopg.connect(host="::1", port=p.port, dbname="testdb", user="trust_user",
                         password="trust-secret", autocommit=True, connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    p.wait_for_log(r"C-[0-9a-fx]+: testdb/trust_user@\[::1\]:\d+ login attempt")


def test_server_login_failure_logged_as_pgbouncer(pg15, make_pooler):
    """A server login PostgreSQL refuses: PgBouncer's two log lines, with
    PostgreSQL's severity and text, and the client gets that text."""
    dbs = {"testdb": pg15.dsn("testdb", user="scram_user", password="wrong-password")}
    p = make_pooler(pg15, databases=dbs, settings={"workers": 1})
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        p.connect()
    text = 'password authentication failed for user "scram_user"'
    p.wait_for_log(r"WARNING server login failed: FATAL " + text)
    # PgBouncer 1.25 closes with PostgreSQL's text (1.18: "login failed").
    if p.kind == "pgcrew":
        p.wait_for_log(r"S-[0-9a-fx]+: testdb/scram_user@[^ ]+ closing because: " + text)


# PgBouncer 1.18 fails the client at once; 1.25 waits, as here.
@pytest.mark.pgcrew_only
def test_server_starting_or_stopping_is_temporary(pg15, make_pooler):
    """57P03 (the database system is shutting down / starting up) is
    temporary, as in PgBouncer: a client waiting for a server keeps
    waiting and gets one once PostgreSQL accepts again, instead of failing
    with the cached error."""
    p = make_pooler(pg15, settings={"workers": 1, "server_login_retry": 1,
                                    "query_wait_timeout": 60})
    holder = pg15.connect()          # a smart shutdown waits for this session
    stopper = subprocess.Popen([pg15._bin("pg_ctl"), "-D", pg15.datadir, "-m", "smart", "-W",
                                "stop"], cwd=pg15.basedir, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, **util.service_popen_kwargs())
    result = {}
    try:
        stopper.wait(30)

        def refusing():
            try:
                psycopg.connect(host=pg15.host, port=pg15.port, dbname="testdb",
                                user="trust_user", connect_timeout=5).close()
                return False
            except psycopg.OperationalError as exc:
                return "shutting down" in str(exc)
        util.wait_until(refusing, 10, what="PostgreSQL refusing logins while shutting down")

        def client():
            try:
                with p.connect(connect_timeout=60) as conn:
                    result["row"] = conn.execute("SELECT 1").fetchone()
            except psycopg.Error as exc:
                result["error"] = exc
        thread = threading.Thread(target=client)
        thread.start()
        refused = r"server login failed: FATAL the database system is shutting down"
        p.wait_for_log(refused, timeout=10)
        # At least one retry, refused as well.
        util.wait_until(lambda: len(re.findall(refused, p.log_text())) >= 2, 20,
                        what="a second refused server login")
        assert thread.is_alive() and not result, result
    finally:
        holder.close()
        util.wait_until(lambda: not os.path.exists(os.path.join(pg15.datadir, "postmaster.pid")),
                        30, what="PostgreSQL to finish its smart shutdown")
        pg15.start()
    thread.join(30)
    assert result.get("row") == (1,), result


def test_relative_auth_file_falls_back_to_working_directory(pg15, make_pooler):
    """A relative auth_file is read beside the config file (pgcrew's rule)
    or, when it is not there, from the working directory (PgBouncer's);
    the log says which."""
    import shutil
    p = make_pooler(pg15, settings={"auth_type": "md5", "workers": 1}, start=False)
    os.makedirs(os.path.join(p.workdir, "etc"))
    p.ini_path = os.path.join(p.workdir, "etc", "pgbouncer.ini")
    p.settings["auth_file"] = "rel-users.txt"
    p.write_config()
    shutil.copy(p.userlist_path, os.path.join(p.workdir, "rel-users.txt"))
    util.give_to_service_user(p.workdir)
    p.start()
    with p.connect(user="md5_user", password="md5-secret") as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("md5_user",)
    if p.kind != "pgcrew":
        return                  # PgBouncer says nothing of where it found it
    # Logged while the config loads, before the log file is open: stderr.
    with open(p.stderr_path) as f:
        assert re.search(r"rel-users.txt: not found beside .*etc/pgbouncer.ini, using the one "
                         r"in the working directory", f.read())
