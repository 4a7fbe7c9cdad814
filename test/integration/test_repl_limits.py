"""Replication servers count in the pool's limits, as in PgBouncer 1.23+: a
replication client's own server (its walsender) takes a place of pool_size
and of max_db_connections. When a limit is full an idle server in the way is
closed ("evicted") for it; without one the client waits (cl_waiting) until a
server closes, first come first served with the pool's other clients. With
one worker and with four: the ledger counts for the instance, and an idle
server another worker holds is closed for the client.

PgBouncer 1.18 has no replication connections (1.23 added them)."""

import time

import psycopg
import pytest

import util
from pg_cluster import SUPERUSER
from test_replication import userlist

pytestmark = pytest.mark.pgcrew_only
WORKERS_MATRIX = (1, 4)


def repl_conn(p):
    conn = psycopg.connect(host=p.host, port=p.port, dbname="testdb", user=SUPERUSER,
                           replication="database", connect_timeout=10, autocommit=True)
    p.connections.append(conn)
    return conn


def send(conn, sql):
    """Starts a simple-protocol query (a walsender takes no other)."""
    conn.pgconn.send_query(sql.encode())


def done(conn):
    conn.pgconn.consume_input()
    return not conn.pgconn.is_busy()


def result_ok(conn):
    """The query's results, once done: true when none failed."""
    ok = True
    while (res := conn.pgconn.get_result()) is not None:
        ok = ok and res.status in (psycopg.pq.ExecStatus.TUPLES_OK, psycopg.pq.ExecStatus.COMMAND_OK)
    return ok


def run(conn, sql, timeout=10):
    send(conn, sql)
    util.wait_until(lambda: done(conn), timeout, what=f"{sql} to finish")
    assert result_ok(conn), conn.pgconn.error_message


def backends(pg):
    """PostgreSQL's connections to testdb by kind, as PostgreSQL sees them."""
    with pg.connect() as c:
        rows = c.execute("SELECT backend_type, count(*) FROM pg_stat_activity"
                         " WHERE datname = 'testdb' GROUP BY 1").fetchall()
    return dict(rows)


def cl_waiting(p, user):
    with p.admin() as a:
        cur = a.execute("SHOW POOLS")
        cols = [d.name for d in cur.description]
        return sum(r[cols.index("cl_waiting")] for r in cur.fetchall()
                   if r[cols.index("database")] == "testdb" and r[cols.index("user")] == user)


def test_repl_pool_size(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 2},
                    userlist=userlist())
    # An ordinary client of the pool leaves an idle server behind.
    with p.connect(user=SUPERUSER) as c:
        c.execute("SELECT 1")
    assert backends(pg15) == {"client backend": 1}
    r1, r2 = repl_conn(p), repl_conn(p)
    run(r1, "IDENTIFY_SYSTEM")
    run(r2, "IDENTIFY_SYSTEM")
    # The second walsender took the idle server's place: pool_size holds.
    util.wait_until(lambda: backends(pg15) == {"walsender": 2}, 10,
                    what="the idle server to be evicted")

    # A third replication client waits for room, and so does an ordinary one.
    r3 = repl_conn(p)
    send(r3, "IDENTIFY_SYSTEM")
    util.wait_until(lambda: cl_waiting(p, SUPERUSER) == 1, 20, what="the replication client queued")
    other = p.connect(user=SUPERUSER)
    send(other, "SELECT 1")
    util.wait_until(lambda: cl_waiting(p, SUPERUSER) == 2, 20, what="the ordinary client queued")
    time.sleep(0.5)                  # and they stay queued while there is no room
    assert not done(r3) and not done(other)
    assert cl_waiting(p, SUPERUSER) == 2
    assert backends(pg15) == {"walsender": 2}

    # Room again: the one that waited longer (r3) has it.
    r1.close()
    util.wait_until(lambda: done(r3), 10, what="the waiting replication client's walsender")
    assert result_ok(r3), r3.pgconn.error_message
    time.sleep(0.5)
    assert not done(other)
    assert backends(pg15) == {"walsender": 2}
    r2.close()
    util.wait_until(lambda: done(other), 10, what="the ordinary client's server")
    assert result_ok(other)
    util.wait_until(lambda: backends(pg15) == {"walsender": 1, "client backend": 1}, 10,
                    what="one walsender and one pooled server")


def test_repl_max_db_connections(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 5,
                                    "max_db_connections": 2}, userlist=userlist())
    # Two idle servers of another pool (trust_user) fill the database's limit.
    a, b = p.connect(), p.connect()
    a.execute("BEGIN")
    a.execute("SELECT 1")
    b.execute("BEGIN")
    b.execute("SELECT 1")
    a.execute("COMMIT")
    b.execute("COMMIT")
    assert backends(pg15) == {"client backend": 2}
    # A replication client's walsender needs one of their places.
    r = repl_conn(p)
    run(r, "IDENTIFY_SYSTEM")
    util.wait_until(lambda: backends(pg15) == {"walsender": 1, "client backend": 1}, 10,
                    what="an idle server evicted for the walsender")
    # The other pool goes on with the place left.
    a.execute("SELECT 1")
    b.execute("SELECT 1")
    assert sum(backends(pg15).values()) == 2
