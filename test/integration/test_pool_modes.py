"""Pool modes: session keeps session state, transaction releases the server
after each transaction, statement refuses transaction blocks."""

import threading
import time

import psycopg
import pytest

from test_workers import connect_on_worker, worker_of

# Pools, limits, timeouts and cancels hold for the instance: every test runs
# with one worker and with four (conftest.pytest_generate_tests).
WORKERS_MATRIX = (1, 4)


def test_session_mode_keeps_session_state(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "session", "default_pool_size": 1})
    with p.connect() as conn:
        conn.execute("SET application_name = 'kept'")
        conn.execute("CREATE TEMP TABLE t_session (x int)")
        conn.execute("INSERT INTO t_session VALUES (7)")
        pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        for _ in range(3):
            assert conn.execute("SELECT x FROM t_session").fetchone() == (7,)
            assert conn.execute("SHOW application_name").fetchone() == ("kept",)
            assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == pid


def test_session_mode_holds_server_while_connected(pg15, make_pooler):
    """With pool_size=1 a second session client cannot run until the first
    disconnects (it times out in the queue instead)."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_wait_timeout": 2})
    first = p.connect()
    first.execute("SELECT 1")
    second = p.connect()
    with pytest.raises(psycopg.OperationalError):
        second.execute("SELECT 1")
    first.close()
    with p.connect() as third:
        assert third.execute("SELECT 1").fetchone() == (1,)


def test_transaction_mode_shares_one_server(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "transaction", "default_pool_size": 1})
    a = p.connect()
    b = p.connect()
    pids = set()
    for _ in range(3):
        for conn in (a, b):
            with conn.transaction():
                pids.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert len(pids) == 1, pids
    assert pg.server_connections("testdb", "trust_user") == 1


def test_transaction_mode_transaction_pins_server(pg15, make_pooler):
    """Inside an open transaction the client keeps its server: a second
    client's query waits until the commit and then runs on that backend."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1})
    a = p.connect(autocommit=False)
    b = p.connect()
    a.execute("CREATE TEMP TABLE t_tx (x int) ON COMMIT DROP")
    a.execute("INSERT INTO t_tx VALUES (1)")
    pid_a = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    result = {}
    waiter = threading.Thread(target=lambda: result.update(
        pid=b.execute("SELECT pg_backend_pid()").fetchone()[0]))
    waiter.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, what="the second client queued")
    assert waiter.is_alive(), "second client ran while the first held the only server"
    assert a.execute("SELECT count(*) FROM t_tx").fetchone() == (1,)
    a.commit()
    waiter.join(10)
    assert not waiter.is_alive()
    assert result["pid"] == pid_a


def test_transaction_mode_many_clients_bounded_servers(pg15, make_pooler):
    """Interleaved transactions of several clients never use more servers
    than the pool allows, whatever the number of worker processes."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1})
    clients = [p.connect() for _ in range(4)]
    for _ in range(3):
        for conn in clients:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            assert pg15.server_connections("testdb", "trust_user") <= 1


def test_statement_mode_refuses_transaction_block(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "statement"})
    with p.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    conn = p.connect(autocommit=False)
    with pytest.raises(psycopg.Error) as err:
        conn.execute("SELECT 1")
        conn.execute("SELECT 2")
        conn.commit()
    assert "transaction blocks not allowed in statement pooling mode" in str(err.value)
    with p.connect() as again:
        assert again.execute("SELECT 2").fetchone() == (2,)


def test_session_reset_counts_as_tested(pg15, make_pooler):
    """While server_reset_query runs after a session client left, SHOW POOLS
    counts its server in sv_tested, as PgBouncer does, then in sv_idle. The
    reset waits for an advisory lock the test holds, so it runs until the
    test lets it end, however slow the machine."""
    lock = pg15.connect("testdb")
    lock.execute("SELECT pg_advisory_lock(4242)")
    p = make_pooler(pg15, settings={
        "pool_mode": "session", "default_pool_size": 1,
        "server_reset_query": "SELECT pg_advisory_lock(4242); SELECT pg_advisory_unlock(4242)"})
    try:
        with p.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        row = p.wait_pool(lambda r: r["sv_tested"] == 1, what="the reset query running")
        assert row["sv_active"] == 0, row
    finally:
        lock.execute("SELECT pg_advisory_unlock(4242)")
        lock.close()
    row = p.wait_pool(lambda r: r["sv_idle"] == 1, what="the reset query done")
    assert row["sv_tested"] == 0, row


# pgcrew's REUSE_SLACK_USEC (src/session/pool.c): with several workers an
# idle server of another worker is taken instead of one's own only when it
# comes first in the order by more than this.
REUSE_SLACK = 0.1


def placed_clients(p, pooler_kind, pooler_workers, c_with):
    """Clients a, b and c; with several workers a and b on different
    workers and c on a's worker or b's (c_with), read from the cancel key's
    pid (PgBouncer is one process: any connection will do)."""
    if pooler_kind != "pgcrew" or (pooler_workers or 1) == 1:
        return p.connect(), p.connect(), p.connect()
    a = connect_on_worker(p, 0)
    b = connect_on_worker(p, None, other_than=0)
    c = connect_on_worker(p, 0 if c_with == "a" else worker_of(b))
    return a, b, c


@pytest.mark.parametrize("c_with", ["a", "b"], ids=["c_with_a", "c_with_b"])
@pytest.mark.parametrize("rr", [0, 1], ids=["lifo", "round_robin"])
def test_idle_server_reuse_order(pg15, make_pooler, pooler_kind, pooler_workers, rr, c_with):
    """PgBouncer's order of idle servers, over the whole instance: with
    server_round_robin = 0 the server used last is given out first, with 1
    the one used longest ago. A and B each hold a server in a transaction,
    A commits and, past pgcrew's slack, B commits: a new query from C runs
    on B's server (LIFO) or on A's (round robin), whichever worker C is on
    (with 4 workers A and B on different ones, C on A's or on B's)."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 2,
                                    "server_round_robin": rr, "query_wait_timeout": 10})
    a, b, c = placed_clients(p, pooler_kind, pooler_workers, c_with)
    a.execute("BEGIN")
    sa = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    b.execute("BEGIN")
    sb = b.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert sa != sb
    a.execute("COMMIT")
    released = time.monotonic()
    # A time condition, not an event: B's server must be released later
    # than A's by more than the slack.
    time.sleep(max(0.0, released + 2.5 * REUSE_SLACK - time.monotonic()))
    b.execute("COMMIT")
    got = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert got == (sa if rr else sb), f"A's {sa}, B's {sb}, C got {got}"
    assert pg15.server_connections("testdb", "trust_user") == 2
