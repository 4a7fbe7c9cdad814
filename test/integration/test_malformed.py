"""Malformed and hostile input over raw sockets. Each case must end with the
offending connection closed (or left harmlessly waiting) while the pooler
keeps serving normal clients."""

import struct
import time

import pytest

import util
import wire


@pytest.fixture
def pooler(pg15, make_pooler):
    return make_pooler(pg15, settings={"pool_mode": "transaction"})


def assert_serving(p):
    p.assert_alive()
    with p.connect() as conn:
        assert conn.execute("SELECT 'still here'").fetchone() == ("still here",)


def closed_with_error(raw, timeout=5.0):
    return raw.closed_with_error(timeout)


# PgBouncer 1.25.2 waits for the 1.2 GB the first four bytes announce
# (client_login_timeout); pgcrew refuses at once (doc/config.md, Differences).
@pytest.mark.pgcrew_only
def test_garbage_first_packet(pooler):
    with wire.RawConn(pooler.port) as raw:
        raw.send(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        closed_with_error(raw)
    assert_serving(pooler)


def test_terminate_before_startup_closes_quietly(pooler):
    """A Terminate before any startup packet (node-postgres' connect() then
    end()) is no startup packet: closed without an ErrorResponse, as
    PostgreSQL and PgBouncer do, logged as PgBouncer logs it."""
    for _ in range(3):
        with wire.RawConn(pooler.port) as raw:
            raw.send(b"X\0\0\0\x04")
            assert closed_with_error(raw) == ""
    pooler.wait_for_log(r"closing because: bad packet")
    assert_serving(pooler)


def test_truncated_startup_then_close(pooler):
    packet = wire.startup_packet("trust_user", "testdb")
    with wire.RawConn(pooler.port) as raw:
        raw.send(packet[:len(packet) // 2])
    time.sleep(0.2)
    assert_serving(pooler)


@pytest.mark.parametrize("length", [0, 3, 7, 2**31, 0xFFFFFFFF])
def test_bad_startup_length(pooler, length):
    with wire.RawConn(pooler.port) as raw:
        raw.send(struct.pack("!II", length, wire.PROTOCOL_3_0) + b"user\0x\0\0")
        closed_with_error(raw)
    assert_serving(pooler)


def test_unknown_protocol_version(pooler):
    body = struct.pack("!I", 0x00090000) + b"user\0trust_user\0database\0testdb\0\0"
    with wire.RawConn(pooler.port) as raw:
        raw.send(struct.pack("!I", len(body) + 4) + body)
        closed_with_error(raw)
    assert_serving(pooler)


def test_startup_without_user(pooler):
    with wire.RawConn(pooler.port) as raw:
        body = struct.pack("!I", wire.PROTOCOL_3_0) + b"database\0testdb\0\0"
        raw.send(struct.pack("!I", len(body) + 4) + body)
        closed_with_error(raw)
    assert_serving(pooler)


def test_huge_message_after_login(pooler):
    """A 1 GB message announced after login, a few bytes of it, then close."""
    with wire.RawConn(pooler.port) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(b"Q" + struct.pack("!I", 1 << 30) + b"SELECT " + b"x" * 1000)
        time.sleep(0.2)
    assert_serving(pooler)


@pytest.mark.parametrize("length", [0, 3])
def test_bad_message_length_after_login(pooler, length):
    """A message length below the 4 bytes of the length field itself."""
    with wire.RawConn(pooler.port) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(b"Q" + struct.pack("!I", length) + b"SELECT 1\0")
        closed_with_error(raw)
    assert_serving(pooler)


def test_unknown_message_type_after_login(pooler):
    with wire.RawConn(pooler.port) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.message(b"\x01", b"junk"))
        try:
            closed_with_error(raw)
        except AssertionError:
            pass  # forwarding it to the server (which then errors) is acceptable
    assert_serving(pooler)


def test_half_open_connections_do_not_block_others(pooler):
    """Connections that connect and send nothing must not stall real clients."""
    silent = [wire.RawConn(pooler.port) for _ in range(5)]
    try:
        for _ in range(3):
            assert_serving(pooler)
    finally:
        for raw in silent:
            raw.close()
    assert_serving(pooler)


def test_client_disconnects_mid_query(pg15, make_pooler):
    """A client vanishing during a long query does not leak the only server:
    the next client gets served (the server is released or replaced)."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "query_wait_timeout": 10})
    with wire.RawConn(p.port) as raw:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message("SELECT pg_sleep(1)"))
        time.sleep(0.2)
    started = time.monotonic()
    assert_serving(p)
    assert time.monotonic() - started < 5
    # A server closed mid-query lingers in PostgreSQL until its query ends.
    util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") <= 1, 5,
                    what="at most one server backend")
