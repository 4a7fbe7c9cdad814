"""Pool limits: default_pool_size, max_client_conn, max_db_connections and
max_user_connections, observed as server backends in pg_stat_activity while
more clients than the limit run queries concurrently."""

import threading
import time

import psycopg
import pytest

import wire
from pg_cluster import password

# Pools, limits, timeouts and cancels hold for the instance: every test runs
# with one worker and with four (conftest.pytest_generate_tests).
WORKERS_MATRIX = (1, 4)


def run_concurrently(pooler, jobs, queries=3, sleep=0.3):
    """jobs: list of (dbname, user). Each runs `queries` pg_sleep queries in
    its own thread; returns the list of exceptions (empty = all completed)."""
    errors = []
    barrier = threading.Barrier(len(jobs))

    def work(dbname, user):
        try:
            with psycopg.connect(autocommit=True, **pooler.conninfo(
                    dbname, user, password=password(user), connect_timeout=20)) as conn:
                barrier.wait(timeout=20)
                for _ in range(queries):
                    conn.execute("SELECT pg_sleep(%s)", (sleep,))
        except Exception as exc:  # collected and asserted by the caller
            errors.append(exc)

    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    return threads, errors


def sample_max(threads, count_fn, timeout=30):
    """Sample count_fn() until every thread ends; return the maximum seen."""
    deadline = time.monotonic() + timeout
    peak = 0
    while any(t.is_alive() for t in threads):
        assert time.monotonic() < deadline, "clients did not finish in time"
        peak = max(peak, count_fn())
        time.sleep(0.05)
    for t in threads:
        t.join()
    return peak


def test_default_pool_size_caps_servers(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "transaction", "default_pool_size": 3})
    threads, errors = run_concurrently(p, [("testdb", "trust_user")] * 8)
    peak = sample_max(threads, lambda: pg.open_server_connections("testdb", "trust_user"))
    assert not errors, errors
    assert peak == 3, f"expected exactly 3 servers at peak, saw {peak}"


def test_session_mode_clients_queue_for_servers(pg15, make_pooler):
    """Session mode, pool of 2, 5 clients: the others queue and all finish."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 2})
    threads, errors = run_concurrently(p, [("testdb", "trust_user")] * 5, queries=2, sleep=0.2)
    peak = sample_max(threads, lambda: pg15.open_server_connections("testdb", "trust_user"))
    assert not errors, errors
    assert 1 <= peak <= 2, peak


def test_max_client_conn_refuses_extra_clients(pg15, make_pooler):
    p = make_pooler(pg15, settings={"max_client_conn": 3})
    held = [p.connect() for _ in range(3)]
    for conn in held:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect()
    assert "no more connections allowed (max_client_conn)" in str(err.value)
    held[0].close()
    p.connections.remove(held[0])
    # A slot was freed: a new client gets in (bounded retry: the close is async).
    deadline = time.monotonic() + 5
    while True:
        try:
            with psycopg.connect(autocommit=True, **p.conninfo()) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, "freed client slot was not reused"
            time.sleep(0.1)


def test_max_db_connections(pg15, make_pooler):
    """Two users (two pools) on one database: together at most 2 servers."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 5,
                                    "max_db_connections": 2})
    jobs = [("testdb", "trust_user")] * 3 + [("testdb", "scram_user")] * 3
    threads, errors = run_concurrently(p, jobs, queries=2, sleep=0.2)
    peak = sample_max(threads, lambda: pg15.open_server_connections("testdb"))
    assert not errors, errors
    assert 1 <= peak <= 2, peak


def test_max_user_connections(pg15, make_pooler):
    """One user on two databases (two pools): together at most 2 servers."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 5,
                                    "max_user_connections": 2})
    jobs = [("testdb", "trust_user")] * 3 + [("otherdb", "trust_user")] * 3
    threads, errors = run_concurrently(p, jobs, queries=2, sleep=0.2)
    peak = sample_max(threads, lambda: pg15.open_server_connections(user="trust_user"))
    assert not errors, errors
    assert 1 <= peak <= 2, peak


def worker_of(p, conn):
    """The worker a client landed on (pgcrew puts it in the cancel key's
    pid); 0 for PgBouncer."""
    return (conn.info.backend_pid >> 24) & 0x7F if p.kind == "pgcrew" else 0


def test_login_completes_while_the_only_server_is_busy(pg15, make_pooler, pooler_workers):
    """The pool's one server (default_pool_size = 1) is held in a
    transaction: a new client of the pool still logs in at once, with the
    server parameters the pool learned, and its query waits for the server,
    as in PgBouncer. With four workers the new client is on another worker
    than the holder's: the welcome comes from the holder's worker, which
    sent none at its login (no other worker had the pool then) and is
    asked for it by the supervisor."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "query_wait_timeout": 30})
    holder = p.connect()
    holder.execute("BEGIN")
    holder.execute("SELECT 1")
    home = worker_of(p, holder)
    other = None
    for _ in range(100):
        conn = p.connect(connect_timeout=10)
        assert conn.info.parameter_status("server_version"), "no server parameters at login"
        if p.kind != "pgcrew" or (pooler_workers or 1) == 1 or worker_of(p, conn) != home:
            other = conn
            break
        conn.close()
    assert other is not None, "no client landed on another worker than the holder's"
    outcome = {}

    def query():
        outcome["r"] = other.execute("SELECT 2").fetchone()

    waiter = threading.Thread(target=query)
    waiter.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, what="the new client's query waiting")
    assert "r" not in outcome
    holder.execute("COMMIT")
    waiter.join(20)
    assert outcome.get("r") == (2,)


def test_login_not_held_by_clients_still_authenticating(pg15, make_pooler, pooler_workers):
    """Clients of a pool stopped in the middle of their SCRAM exchange (on
    every worker, with four) hold the pool without its welcome: a client
    of that pool that completes its login is not kept waiting for a
    welcome nobody has. With four workers the supervisor asks the other
    holders for it, each says it has none, and the client's worker logs in
    a server at once (no one-second wait for the welcome, which the debug
    log would name)."""
    p = make_pooler(pg15, settings={"auth_type": "scram-sha-256", "verbose": 1})
    stalled = []
    try:
        for _ in range(12):
            raw = wire.RawConn(p.port)
            raw.send(wire.startup_packet("scram_user", "testdb"))
            assert raw.sock.recv(1) == b"R"          # AuthenticationSASL: and no answer
            stalled.append(raw)
        with p.connect(user="scram_user", password=password("scram_user"), connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        for raw in stalled:
            raw.sock.close()
    assert "none came in time" not in p.log_text(), p.log_tail()
