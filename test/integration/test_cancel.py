"""Query cancellation through the pooler: the CancelRequest reaches the
server running the client's query."""

import socket
import struct
import threading
import time

import psycopg
import pytest

import util
import wire

# Pools, limits, timeouts and cancels hold for the instance: every test runs
# with one worker and with four (conftest.pytest_generate_tests).
WORKERS_MATRIX = (1, 4)


@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_cancel_long_query(pg, make_pooler, pool_mode):
    p = make_pooler(pg, settings={"pool_mode": pool_mode})
    conn = p.connect()
    bystander = p.connect()
    canceller = util.cancel_when_active(pg, conn, "SELECT pg_sleep(10)")
    try:
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(10)")
    finally:
        canceller.join(25)
    assert time.monotonic() - canceller.sent_at < 4
    # Both connections stay usable; the cancel hit only its target.
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert bystander.execute("SELECT 2").fetchone() == (2,)


def test_cancel_of_idle_client_is_harmless(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    conn = p.connect()
    conn.execute("SELECT 1")
    conn.cancel()
    time.sleep(0.2)
    assert conn.execute("SELECT pg_sleep(0.2), 3").fetchone() == ("", 3)


@pytest.mark.pgcrew_only   # PgBouncer drops it ("cancel request for idle client")
@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_cancel_while_waiting_for_a_server(pg15, make_pooler, pool_mode):
    """A cancel that arrives while the query still waits for a server (no
    backend runs it yet) is not lost: it follows the query to its server
    once it gets one, and the query is canceled there. The cancel
    connection closes at once, as PgBouncer closes it (libpq's cancel, and
    with it psycopg's whole process, waits for that close)."""
    p = make_pooler(pg15, settings={"pool_mode": pool_mode, "default_pool_size": 1})
    holder = p.connect(autocommit=False)
    holder.execute("SELECT 1")                   # holds the only server
    conn = p.connect()
    outcome = {}

    def run():
        started = time.monotonic()
        try:
            conn.execute("SELECT pg_sleep(10)")
            outcome["r"] = "completed"
        except psycopg.errors.QueryCanceled:
            outcome["r"] = "canceled"
        outcome["t"] = time.monotonic() - started

    t = threading.Thread(target=run)
    t.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, what="the query queued behind the holder")
    sent = time.monotonic()
    conn.cancel()
    assert time.monotonic() - sent < 2, "the cancel connection waited for a server"
    # A moment for the cancel to reach the client's worker (no console view
    # shows it held); a later one cancels the query on its server all the same.
    time.sleep(0.3)
    holder.rollback()                            # the server goes to the waiter
    holder.close()
    t.join(15)
    assert outcome.get("r") == "canceled", outcome
    assert outcome["t"] < 5, outcome
    assert conn.execute("SELECT 1").fetchone() == (1,)


def raw_cancel(port, key_payload):
    """Sends a CancelRequest for the BackendKeyData payload key_payload and
    returns once the pooler closes the connection (as libpq's cancel does)."""
    pkt = struct.pack("!II", 8 + len(key_payload), 80877102) + key_payload
    with socket.create_connection((util.HOST, port), timeout=15) as s:
        s.sendall(pkt)
        assert s.recv(1) == b""


def test_late_cancel_never_lands_on_the_next_query(pg15, make_pooler):
    """A driver whose query timed out sends a cancel, and once the cancel
    connection closes, its next query (asyncpg does this). The query may
    have ended on its own meanwhile; the cancel must not then cancel the
    next one: the cancel connection stays open until PostgreSQL has acted
    on the cancel (PgBouncer 1.25 does the same). Session pooling keeps the
    server linked, so every cancel is passed on; with four workers most
    land on another worker than the client's."""
    p = make_pooler(pg15, settings={"pool_mode": "session"})
    conn = p.connect()
    hit = 0
    for _ in range(50):
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.cancel()                            # too late: nothing runs
        try:
            conn.execute("SELECT pg_sleep(0.05)")
        except psycopg.errors.QueryCanceled:
            hit += 1
    assert hit == 0, f"{hit} of 50 next queries canceled"


@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_cancel_of_an_extended_batch_before_its_sync(pg15, make_pooler, pool_mode):
    """A cancel that arrives while a client's extended-protocol messages
    run on the server but their Sync has not come yet (a long executemany
    still being sent) is passed on: the running Execute is canceled."""
    p = make_pooler(pg15, settings={"pool_mode": pool_mode})
    with wire.RawConn(p.port, timeout=15) as c:
        msgs = c.login_trust("trust_user", "testdb")
        key = [m for k, m in msgs if k == b"K"]
        assert key, "no BackendKeyData"
        c.send(wire.message(b"P", b"\0SELECT pg_sleep(30)\0\0\0")
               + wire.message(b"B", b"\0\0" + struct.pack("!HHH", 0, 0, 0))
               + wire.message(b"E", b"\0" + struct.pack("!I", 0))
               + wire.message(b"H"))
        pg15.wait_active("SELECT pg_sleep(30)")
        started = time.monotonic()
        raw_cancel(p.port, key[0])
        c.send(wire.message(b"S"))
        msgs = c.read_until(b"Z", timeout=15)
        errors = [wire.error_fields(m) for k, m in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs
        assert time.monotonic() - started < 5


def test_cancel_of_a_long_executemany(pg15, make_pooler):
    """psycopg's executemany pipelines its rows and sends Sync after the
    last: a cancel while the rows still go out cancels the batch."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    conn = p.connect()
    canceller = util.cancel_when_active(pg15, conn, "SELECT pg_sleep(%")
    started = time.monotonic()
    try:
        with pytest.raises(psycopg.errors.QueryCanceled):
            with conn.cursor() as cur:
                cur.executemany("SELECT pg_sleep(%s)", [(0.002,)] * 20000)
    finally:
        canceller.join(25)
    assert time.monotonic() - started < 20
    assert conn.execute("SELECT 1").fetchone() == (1,)
