"""Query cancellation through the pooler: the CancelRequest reaches the
server running the client's query."""

import threading
import time

import psycopg
import pytest

import util

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


@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_cancel_while_waiting_for_a_server(pg15, make_pooler, pool_mode):
    """A cancel that arrives while the query still waits for a server (no
    backend runs it yet) is not lost: it follows the query to its server
    once it gets one, and the query is canceled there."""
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
    conn.cancel()
    # A moment for the cancel to reach the client's worker (no console view
    # shows it held); a later one cancels the query on its server all the same.
    time.sleep(0.3)
    holder.rollback()                            # the server goes to the waiter
    holder.close()
    t.join(15)
    assert outcome.get("r") == "canceled", outcome
    assert outcome["t"] < 5, outcome
    assert conn.execute("SELECT 1").fetchone() == (1,)
