"""Query cancellation through the pooler: the CancelRequest reaches the
server running the client's query."""

import threading
import time

import psycopg
import pytest

# Pools, limits, timeouts and cancels hold for the instance: every test runs
# with one worker and with four (conftest.pytest_generate_tests).
WORKERS_MATRIX = (1, 4)


@pytest.mark.parametrize("pool_mode", ["session", "transaction"])
def test_cancel_long_query(pg, make_pooler, pool_mode):
    p = make_pooler(pg, settings={"pool_mode": pool_mode})
    conn = p.connect()
    bystander = p.connect()
    timer = threading.Timer(0.5, conn.cancel)
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute("SELECT pg_sleep(10)")
    finally:
        timer.cancel()
    assert time.monotonic() - started < 4
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
