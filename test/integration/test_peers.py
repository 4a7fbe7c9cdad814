"""[peers]: two pooler hosts behind one address. A CancelRequest that
reaches the other host is passed on to the host named in its key (peer_id),
as PgBouncer does; SHOW PEERS lists the configured peers."""

import socket
import struct
import threading
import time

import pytest

import util
import wire

# The key layout (peer_id in its top 14 bits) is pgcrew's; Debian's
# PgBouncer 1.18 predates [peers].
pytestmark = pytest.mark.pgcrew_only


def cancel_packet(pid, key):
    return struct.pack("!IIII", 16, 80877102, pid, key)


def test_cancel_reaches_the_peer_that_owns_the_query(pg15, make_pooler):
    a = make_pooler(pg15, settings={"peer_id": 1, "pool_mode": "transaction"}, start=False)
    b = make_pooler(pg15, settings={"peer_id": 2, "pool_mode": "transaction"}, start=False)
    for p in (a, b):
        p.peers = {1: f"host={util.HOST} port={a.port}", 2: f"host={util.HOST} port={b.port}"}
        p.start()

    with wire.RawConn(a.port) as victim:
        msgs = victim.login_trust("trust_user", "testdb")
        key = [p for k, p in msgs if k == b"K"]
        assert key, "no BackendKeyData"
        pid, secret = struct.unpack("!II", key[0])
        assert secret >> 18 == 1, "the key must name peer 1"
        victim.send(wire.query_message("SELECT pg_sleep(30)"))
        pg15.wait_active("SELECT pg_sleep(30)")
        started = time.monotonic()
        # The cancel lands on peer 2, which passes it to peer 1.
        with socket.create_connection((util.HOST, b.port), timeout=5) as s:
            s.sendall(cancel_packet(pid, secret))
            s.recv(1)
        msgs = victim.read_until(b"Z", timeout=10)
        errors = [wire.error_fields(p) for k, p in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs
        assert time.monotonic() - started < 5

    with b.admin() as admin:
        peers = admin.execute("SHOW PEERS").fetchall()
        assert sorted((r[0], r[2]) for r in peers) == [(1, a.port), (2, b.port)]
        pools = admin.execute("SHOW PEER_POOLS").fetchall()
        assert sorted(r[0] for r in pools) == [1, 2]
        lists = dict(admin.execute("SHOW LISTS").fetchall())
        assert lists["peers"] == 2


def test_cancel_for_unknown_peer_is_dropped(pg15, make_pooler):
    a = make_pooler(pg15, settings={"peer_id": 1}, start=False)
    a.peers = {1: f"host={util.HOST} port={a.port}"}
    a.start()
    with socket.create_connection((util.HOST, a.port), timeout=5) as s:
        s.sendall(cancel_packet(1234, (7 << 18) | 99))
        assert s.recv(1) == b""
    with a.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_late_cancel_through_a_peer_never_lands_on_the_next_query(pg15, make_pooler):
    """The cancel connection on the other host stays open until the owning
    host's cancel has reached PostgreSQL and been dealt with: a client that
    sends its next query once it closes never has that one canceled (here
    the cancel is late: the query it was for has ended)."""
    a = make_pooler(pg15, settings={"peer_id": 1, "pool_mode": "session"}, start=False)
    b = make_pooler(pg15, settings={"peer_id": 2, "pool_mode": "session"}, start=False)
    for p in (a, b):
        p.peers = {1: f"host={util.HOST} port={a.port}", 2: f"host={util.HOST} port={b.port}"}
        p.start()
    with wire.RawConn(a.port, timeout=15) as victim:
        msgs = victim.login_trust("trust_user", "testdb")
        pid, secret = struct.unpack("!II", [p for k, p in msgs if k == b"K"][0])
        for _ in range(30):
            victim.send(wire.query_message("SELECT 1"))
            victim.read_until(b"Z")
            with socket.create_connection((util.HOST, b.port), timeout=15) as s:
                s.sendall(cancel_packet(pid, secret))
                assert s.recv(1) == b""
            victim.send(wire.query_message("SELECT pg_sleep(0.05)"))
            msgs = victim.read_until(b"Z", timeout=10)
            errors = [wire.error_fields(p) for k, p in msgs if k == b"E"]
            assert not errors, errors
