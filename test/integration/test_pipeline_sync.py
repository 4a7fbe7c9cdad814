"""Issue 29 item 19: a pipeline whose error arrives before its Sync (the
client sends Flush, reads the ErrorResponse, and sends Sync only later)
keeps its server until that Sync in transaction pooling, as PgBouncer does:
another client waits meanwhile, and afterwards both connections are usable.
Workers 1 and 4; the same test passes against PgBouncer 1.18."""

import threading
import time

import pytest

import wire
from test_prepared import SYNC, bind, error_of, exchange, execute, kinds, parse, rows

WORKERS_MATRIX = (1, 4)
SYNC_DELAY = 0.5        # the client's own pause before Sync, not a wait for an event


def test_error_before_delayed_sync(pg15, make_pooler, pooler_workers):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1})
    a = wire.RawConn(p.port, timeout=10)
    a.login_trust("trust_user", "testdb")
    try:
        a.send(parse("", "SELECT 1/0") + bind("") + execute() + wire.message(b"H"))
        msgs = a.read_until(b"E", timeout=10)
        assert (error_of(msgs) or {}).get("C") == "22012", msgs
        # The server stays with A until its Sync: B queues behind it.
        outcome = {}

        def other():
            with p.connect() as b:
                outcome["b"] = b.execute("SELECT 2").fetchone()

        t = threading.Thread(target=other)
        t.start()
        p.wait_pool(lambda r: r["cl_waiting"] == 1, what="the other client queued")
        time.sleep(SYNC_DELAY)
        a.send(SYNC)
        msgs = a.read_until(b"Z", timeout=10)
        assert kinds(msgs)[-1:] == b"Z" and msgs[-1][1] == b"I", msgs
        t.join(10)
        assert outcome.get("b") == (2,), outcome
        # A goes on: extended and simple protocol.
        msgs = exchange(a, parse("", "SELECT $1::int + 1") + bind("", [b"41"]) + execute() + SYNC)
        assert error_of(msgs) is None and rows(msgs) == ["42"], msgs
        a.send(wire.query_message("SELECT 'after'"))
        msgs = a.read_until(b"Z", timeout=10)
        assert error_of(msgs) is None and rows(msgs) == ["after"], msgs
    finally:
        a.close()
