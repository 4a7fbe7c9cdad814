"""Timeouts: each one fires with PgBouncer's log text and, where a client is
involved, an error for that client. Values are 1-2 s to keep the suite fast."""

import socket
import time

import psycopg
import pytest

from pg_cluster import password
import util
import wire

# Pools, limits, timeouts and cancels hold for the instance: every test runs
# with one worker and with four (conftest.pytest_generate_tests).
WORKERS_MATRIX = (1, 4)


def test_query_wait_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_wait_timeout": 1})
    holder = p.connect()
    holder.execute("SELECT 1")
    waiter = p.connect()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError) as err:
        waiter.execute("SELECT 1")
    assert time.monotonic() - started < 5
    assert "query_wait_timeout" in str(err.value)
    p.wait_for_log(r"closing because: query_wait_timeout")
    assert holder.execute("SELECT 2").fetchone() == (2,)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 has it only in [pgbouncer]
def test_query_wait_timeout_per_database_and_user(pg15, make_pooler):
    """query_wait_timeout of a database entry overrides the global one, and
    a user's in [users] overrides both (the most specific wins, as
    PgBouncer's development branch)."""
    dbs = {"testdb": pg15.dsn("testdb"),
           "shortdb": pg15.dsn("testdb") + " query_wait_timeout=1",
           "longdb": pg15.dsn("testdb") + " query_wait_timeout=30"}
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_wait_timeout": 30, "auth_type": "trust"},
                    databases=dbs, users={"scram_user": "query_wait_timeout=1"})

    def waits_out(db, user):
        holder = p.connect(db, user)
        holder.execute("SELECT 1")
        waiter = p.connect(db, user)
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="query_wait_timeout"):
            waiter.execute("SELECT 1")
        assert time.monotonic() - started < 5, (db, user)
        assert holder.execute("SELECT 2").fetchone() == (2,)
        holder.close()

    waits_out("shortdb", "trust_user")       # the database's 1 s over the global 30 s
    waits_out("longdb", "scram_user")        # the user's 1 s over the database's 30 s
    waits_out("testdb", "scram_user")        # the user's 1 s over the global 30 s
    assert len(p.log_text().split("closing because: query_wait_timeout")) == 4


def test_query_timeout_while_waiting(pg15, make_pooler):
    """query_timeout also ends a wait for a server (PgBouncer's janitor
    checks it before query_wait_timeout), with PgBouncer's text."""
    p = make_pooler(pg15, settings={"pool_mode": "session", "default_pool_size": 1,
                                    "query_timeout": 1, "query_wait_timeout": 30})
    holder = p.connect()
    holder.execute("SELECT 1")
    waiter = p.connect()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="query_timeout"):
        waiter.execute("SELECT 1")
    assert time.monotonic() - started < 5
    p.wait_for_log(r"closing because: query_timeout")
    assert holder.execute("SELECT 2").fetchone() == (2,)


def test_client_idle_timeout(pg15, make_pooler):
    # Session-mode clients hold a server and are never "idle" to PgBouncer;
    # in transaction mode an idle client has no server.
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "client_idle_timeout": 1})
    conn = p.connect()
    conn.execute("SELECT 1")
    p.wait_for_log(r"closing because: client_idle_timeout", timeout=5)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    with p.connect() as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_idle_transaction_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"idle_transaction_timeout": 1})
    conn = p.connect(autocommit=False)
    conn.execute("SELECT 1")  # opens a transaction and leaves it idle
    p.wait_for_log(r"closing because: idle transaction timeout", timeout=5)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SELECT 1")
    with p.connect() as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_query_timeout(pg, make_pooler):
    p = make_pooler(pg, settings={"query_timeout": 1})
    conn = p.connect()
    started = time.monotonic()
    with pytest.raises(psycopg.OperationalError) as err:
        conn.execute("SELECT pg_sleep(5)")
    assert time.monotonic() - started < 4
    assert "query timeout" in str(err.value)
    p.wait_for_log(r"closing because: query timeout")
    with p.connect() as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_server_idle_timeout(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "server_idle_timeout": 1})
    conn = p.connect()
    conn.execute("SELECT 1")
    assert pg15.server_connections("testdb", "trust_user") == 1
    p.wait_for_log(r"closing because: server idle timeout", timeout=5)
    util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") == 0, 5,
                    what="idle server to be closed")
    assert conn.execute("SELECT 1").fetchone() == (1,)  # the client is unaffected


def test_server_lifetime(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "server_lifetime": 1})
    conn = p.connect()
    first = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    p.wait_for_log(r"closing because: server lifetime over", timeout=5)
    second = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert second != first


@pytest.mark.parametrize("stall", ["silent", "mid-auth"])
def test_client_login_timeout(pg15, make_pooler, stall):
    """A client that connects and sends nothing, or starts SCRAM and never
    answers the challenge, is dropped after client_login_timeout."""
    # tcp_defer_accept would keep a silent client in the kernel (not yet
    # accepted, so not yet timed) for several SYN-ACK retransmits.
    p = make_pooler(pg15, settings={"client_login_timeout": 1,
                                    "tcp_defer_accept": 0,
                                    "auth_type": "scram-sha-256"})
    with wire.RawConn(p.port) as raw:
        if stall == "mid-auth":
            raw.send(wire.startup_packet("scram_user", "testdb"))
            kind, _ = raw.read_message()
            assert kind == b"R"  # the SASL authentication request
        started = time.monotonic()
        raw.wait_closed(timeout=6)
        assert time.monotonic() - started >= 0.5
    p.wait_for_log(r"client_login_timeout")
    with p.connect(user="scram_user", password=password("scram_user")) as fresh:
        assert fresh.execute("SELECT 1").fetchone() == (1,)


def test_server_connect_timeout(pg15, make_pooler):
    """The server address accepts TCP (kernel backlog) but never answers the
    startup packet: the pooler gives up after server_connect_timeout."""
    with socket.socket() as silent:
        silent.bind((util.HOST, 0))
        silent.listen(64)
        port = silent.getsockname()[1]
        p = make_pooler(pg15, settings={"server_connect_timeout": 1,
                                        "query_wait_timeout": 4},
                        databases={"testdb": pg15.dsn("testdb"),
                                   "blackhole": f"host={util.HOST} port={port} dbname=x"})
        started = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            p.connect(dbname="blackhole", connect_timeout=15).execute("SELECT 1")
        elapsed = time.monotonic() - started
        p.wait_for_log(r"closing because: connect timeout")
        # PgBouncer 1.18 keeps the client queued until query_wait_timeout.
        assert elapsed < 8, f"client waited {elapsed:.1f}s"
        with p.connect() as fresh:
            assert fresh.execute("SELECT 1").fetchone() == (1,)
