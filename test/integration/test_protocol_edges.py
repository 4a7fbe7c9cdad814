"""Protocol edge cases through transaction pooling (workers = 4, PostgreSQL
15 and 18): COPY FROM STDIN/TO STDOUT in simple and extended flows with
errors before and after CopyDone and a client CopyFail, results far over the
I/O buffer, NoticeResponse and NotificationResponse forwarding, ParameterStatus
changes mid-session, empty queries, Flush, unnamed statements and portals,
Describe of a portal, and FunctionCall. Each case ends with the connection
(and its server) usable."""

import struct

import psycopg
import pytest

import wire
from test_prepared import SYNC, bind, describe, error_of, exchange, execute, kinds, parse, rows

pytestmark = pytest.mark.pgcrew_only


def settings(**extra):
    s = {"pool_mode": "transaction", "workers": 4, "default_pool_size": 4}
    s.update(extra)
    return s


@pytest.fixture
def p(pg, make_pooler):
    p = make_pooler(pg, settings=settings())
    with p.connect() as conn:
        conn.execute("DROP TABLE IF EXISTS edge_copy")
        conn.execute("CREATE TABLE edge_copy (a int, b text)")
        conn.execute("GRANT ALL ON edge_copy TO PUBLIC")
    return p


def test_copy_simple_flow(p):
    with p.connect() as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY edge_copy FROM STDIN") as copy:
                for i in range(5000):
                    copy.write_row((i, "x" * 50))
            assert conn.execute("SELECT count(*) FROM edge_copy").fetchone()[0] == 5000
            # Error after CopyDone: the data does not fit the column type.
            with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                with cur.copy("COPY edge_copy FROM STDIN") as copy:
                    copy.write(b"notanint\tx\n")
            # The client gives up mid-copy: CopyFail.
            with pytest.raises(psycopg.errors.QueryCanceled):
                with cur.copy("COPY edge_copy FROM STDIN") as copy:
                    copy.write_row((1, "y"))
                    raise psycopg.errors.QueryCanceled("client gave up")
            # Error before any data: no such table.
            with pytest.raises(psycopg.errors.UndefinedTable):
                with cur.copy("COPY no_such_table FROM STDIN"):
                    pass
            # COPY TO STDOUT, far more than a buffer.
            with cur.copy("COPY (SELECT g, repeat('z', 200) FROM generate_series(1, 20000) g)"
                          " TO STDOUT") as copy:
                n = sum(1 for _ in copy.rows())
            assert n == 20000
            assert conn.execute("SELECT count(*) FROM edge_copy").fetchone()[0] == 5000


def copy_data(b):
    return wire.message(b"d", b)


def copy_in(c, sql, data):
    """Extended-protocol COPY FROM STDIN: Parse/Bind/Execute and Flush, then
    (after CopyInResponse) data, CopyDone and Sync; the replies to the end."""
    c.send(parse("", sql) + bind("") + execute() + wire.message(b"H"))
    c.read_until(b"G", timeout=10)
    c.send(copy_data(data) + wire.message(b"c") + SYNC)
    return c.read_until(b"Z", timeout=10)


def test_copy_extended_flow(p):
    c = wire.RawConn(p.port, timeout=10)
    c.login_trust("trust_user", "testdb")
    try:
        msgs = copy_in(c, "COPY edge_copy FROM STDIN", b"1\ta\n2\tb\n")
        assert error_of(msgs) is None and b"C" in kinds(msgs), msgs
        # Fails after CopyDone (bad data); the connection carries on.
        msgs = copy_in(c, "COPY edge_copy FROM STDIN", b"bad\trow\n")
        assert error_of(msgs)["C"] == "22P02"
        # Fails before any data (no such table): no CopyInResponse, skip to Sync.
        msgs = exchange(c, parse("", "COPY no_such_table FROM STDIN") + bind("") + execute() + SYNC)
        assert error_of(msgs)["C"] == "42P01"
        msgs = exchange(c, parse("", "SELECT count(*) FROM edge_copy") + bind("") + execute() + SYNC)
        assert rows(msgs) == ["2"]
    finally:
        c.close()


def test_notices_notifications_and_parameter_status(p):
    with p.connect() as conn:
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("DO $$ BEGIN RAISE NOTICE 'hello from the server'; END $$")
        assert notices == ["hello from the server"]
        # ParameterStatus mid-session reaches the client.
        conn.execute("SET application_name = 'edge-app'")
        assert conn.info.parameter_status("application_name") == "edge-app"


def test_notify_in_session_mode(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "session", "workers": 4})
    with p.connect() as listener, p.connect() as sender:
        listener.execute("LISTEN edge_chan")
        sender.execute("NOTIFY edge_chan, 'payload-1'")
        gen = listener.notifies(timeout=5, stop_after=1)
        got = [(n.channel, n.payload) for n in gen]
    assert got == [("edge_chan", "payload-1")]


def test_empty_query_flush_unnamed_portal_describe(p):
    c = wire.RawConn(p.port, timeout=10)
    c.login_trust("trust_user", "testdb")
    try:
        # Empty simple query: EmptyQueryResponse then ReadyForQuery.
        c.send(wire.query_message(""))
        msgs = c.read_until(b"Z", timeout=10)
        assert b"I" in kinds(msgs)
        # Empty extended query.
        msgs = exchange(c, parse("", "") + bind("") + execute() + SYNC)
        assert b"I" in kinds(msgs) and error_of(msgs) is None
        # Flush: replies before any Sync.
        c.send(parse("", "SELECT $1::int + 1") + bind("", [b"41"]) + describe(b"P", "")
               + execute() + wire.message(b"H"))
        msgs = c.read_until(b"C", timeout=10)
        assert kinds(msgs).startswith(b"12T") and rows(msgs) == ["42"]
        c.send(SYNC)
        c.read_until(b"Z", timeout=10)
        # A named portal, described, executed in two fetches.
        msgs = exchange(c, parse("", "SELECT generate_series(1, 3)") + bind("", (), portal="p1")
                        + describe(b"P", "p1")
                        + wire.message(b"E", b"p1\0" + struct.pack("!i", 2))
                        + wire.message(b"E", b"p1\0" + struct.pack("!i", 0)) + SYNC)
        assert rows(msgs) == ["1", "2", "3"]
        assert b"s" in kinds(msgs)     # PortalSuspended after the first 2 rows
    finally:
        c.close()


def test_function_call(p):
    """FunctionCall ('F'): int4pl(20, 22) by OID through the pooler."""
    with p.connect() as conn:
        oid = conn.execute("SELECT 'int4pl'::regproc::oid").fetchone()[0]
    c = wire.RawConn(p.port, timeout=10)
    c.login_trust("trust_user", "testdb")
    try:
        body = struct.pack("!I", oid) + struct.pack("!h", 1) + struct.pack("!h", 1)
        body += struct.pack("!h", 2)
        for v in (20, 22):
            body += struct.pack("!i", 4) + struct.pack("!i", v)
        body += struct.pack("!h", 1)
        c.send(wire.message(b"F", body))
        msgs = c.read_until(b"Z", timeout=10)
        result = [pl for k, pl in msgs if k == b"V"]
        assert result and struct.unpack("!i", result[0][4:8])[0] == 42
        msgs = exchange(c, wire.query_message("SELECT 1"))
        assert error_of(msgs) is None
    finally:
        c.close()
