"""Security regressions, one per class of PgBouncer's 2025-26 advisories
that applies here, plus what a pooler must never let a client do:
- startup packets cannot smuggle settings (options -c search_path=...,
  session_authorization, role) or replication into a pooled connection;
- a client's SCRAM messages with oversized or malformed fields are refused
  before any buffer is sized from them (the SCRAM overflow class);
- admin commands need an admin user (stats users are read-only): see
  test_console.py::test_console_access_and_bad_input;
- hostile servers (ErrorResponse without SQLSTATE, oversized SCRAM nonce):
  test_faults.py; packet length overflows: test_malformed.py."""

import base64
import struct

import pytest

import util
import wire


def refused(raw, timeout=5.0):
    return raw.closed_with_error(timeout)


@pytest.mark.parametrize("options", [
    "-c search_path=evil",
    "-csession_authorization=postgres",
    "--role=postgres",
    "-c replication=true",
    "-c default_transaction_read_only=off -c search_path=evil",
], ids=["search_path", "session_auth", "role", "replication", "two"])
def test_options_cannot_smuggle(pg15, make_pooler, options):
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    with wire.RawConn(p.port) as raw:
        raw.send(wire.startup_packet("trust_user", "testdb", options=options))
        assert "unsupported" in refused(raw)
    # The pooled server connections are untouched.
    with p.connect() as conn:
        assert conn.execute("SELECT current_user, current_setting('search_path')").fetchone() \
            == ("trust_user", '"$user", public')
    p.assert_alive()


@pytest.mark.parametrize("key,value", [("search_path", "evil"), ("role", "postgres"),
                                       ("session_authorization", "postgres")],
                         ids=["search_path", "role", "session_auth"])
def test_params_cannot_smuggle(pg15, make_pooler, key, value):
    p = make_pooler(pg15)
    with wire.RawConn(p.port) as raw:
        raw.send(wire.startup_packet("trust_user", "testdb", **{key: value}))
        assert "unsupported startup parameter" in refused(raw)
    with p.connect() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)


# PgBouncer 1.25.2 caches the refused walsender login as the pool's login
# error and refuses the next normal clients for server_login_retry
# (doc/config.md, Differences from PgBouncer: replication logins).
@pytest.mark.pgcrew_only
@pytest.mark.parametrize("value", ["true", "database", "on"])
def test_replication_is_not_smuggled_into_a_pool(pg15, make_pooler, value):
    """A replication connection gets a server of its own (here the server
    refuses trust_user a walsender: no REPLICATION attribute), and the pool
    of normal clients, one server shared, never sees a walsender; nothing
    is left once the replication client is gone."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "workers": 1})
    with p.connect() as conn:           # the pool's one server exists first
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with wire.RawConn(p.port) as raw:
        raw.send(wire.startup_packet("trust_user", "testdb", replication=value))
        raw.read_until(b"Z")
        raw.send(wire.query_message("IDENTIFY_SYSTEM"))
        msgs = raw.read_until(b"E", timeout=10)
        assert "replication" in wire.error_fields(msgs[-1][1]).get("M", "")
    for _ in range(5):
        with p.connect() as conn:
            assert conn.execute("SELECT backend_type FROM pg_stat_activity"
                                " WHERE pid = pg_backend_pid()").fetchone() == ("client backend",)
    with pg15.connect() as conn:
        walsenders = conn.execute("SELECT count(*) FROM pg_stat_activity"
                                  " WHERE backend_type = 'walsender'").fetchone()[0]
    assert walsenders == 0
    assert pg15.server_connections("testdb", "trust_user") == 1


def sasl_initial(client_first):
    return wire.message(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(client_first))
                        + client_first)


@pytest.mark.parametrize("client_first", [
    b"n,,n=,r=" + b"A" * 100000,                       # nonce far over any bound
    # pgcrew refuses a nonce over 255 bytes or with a NUL after it, where
    # PgBouncer 1.25.2 goes on with the exchange (doc/config.md, Differences).
    pytest.param(b"n,,n=,r=" + b"A" * 300, marks=pytest.mark.pgcrew_only),  # just over 255
    b"n,,m=ext,n=,r=abc",                              # mandatory extension
    b"p=tls-server-end-point,,n=,r=abc",               # binding over plain TCP
    b"x,,n=,r=abc",                                    # unknown cbind flag
    b"n,,",                                            # attributes missing
    pytest.param(b"n,,n=,r=" + base64.b64encode(b"\0\xff") + b"\0",  # NUL inside
                 marks=pytest.mark.pgcrew_only),
], ids=["nonce_100k", "nonce_300", "mandatory_ext", "cbind_plain", "bad_flag",
        "no_attrs", "nul"])
def test_hostile_scram_client_first(pg15, make_pooler, client_first):
    p = make_pooler(pg15, settings={"auth_type": "scram-sha-256"})
    with wire.RawConn(p.port) as raw:
        raw.send(wire.startup_packet("scram_user", "testdb"))
        kind, _ = raw.read_message()
        assert kind == b"R"
        raw.send(sasl_initial(client_first))
        msg = refused(raw)
    assert msg, "no error before the close"
    p.assert_alive()
    with p.connect(user="scram_user", password="scram-secret") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_hostile_scram_client_final(pg15, make_pooler):
    """A proper client-first, then a client-final with bad base64 proof and a
    100 kB channel-binding field: refused, nothing else affected."""
    p = make_pooler(pg15, settings={"auth_type": "scram-sha-256"})
    for final in (b"c=biws,r=WRONG,p=!!!notbase64!!!",
                  b"c=" + b"A" * 100000 + b",r=x,p=x"):
        with wire.RawConn(p.port) as raw:
            raw.send(wire.startup_packet("scram_user", "testdb"))
            raw.read_message()
            raw.send(sasl_initial(b"n,,n=,r=clientnonce"))
            kind, body = raw.read_message()
            assert kind == b"R" and struct.unpack("!I", body[:4])[0] == 11
            raw.send(wire.message(b"p", final))
            assert refused(raw)
    p.assert_alive()
    with p.connect(user="scram_user", password="scram-secret") as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
