"""PROXY protocol v1 and v2 on the TCP listeners (proxy_protocol = 1): a load
balancer listed in proxy_protocol_sources (here 127.0.0.2) sends a header
naming the real client, which becomes the client's address for HBA, SHOW
CLIENTS and the logs. A header from anyone else, none from a listed
balancer, or a malformed one ends the connection without a word; a v2
LOCAL header (a health check) keeps the connection's own address; TLS
works on top of the header. With one and four workers.

PgBouncer has no PROXY protocol (pgbouncer#241)."""

import socket
import ssl
import struct

import pytest

import util
import wire

pytestmark = pytest.mark.pgcrew_only
WORKERS_MATRIX = (1, 4)
BALANCER = "127.0.0.2"
SIG = b"\r\n\r\n\x00\r\nQUIT\n"
SETTINGS = {"proxy_protocol": 1, "proxy_protocol_sources": "127.0.0.2/32, ::1"}


def v1(src, sport, dst="127.0.0.1", dport=6432):
    fam = "TCP6" if ":" in src else "TCP4"
    return f"PROXY {fam} {src} {dst} {sport} {dport}\r\n".encode()


def v2(src, sport, dst="127.0.0.1", dport=6432, tlvs=b""):
    body = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!HH", sport, dport) + tlvs
    return SIG + bytes([0x21, 0x11]) + struct.pack("!H", len(body)) + body


V2_LOCAL = SIG + bytes([0x20, 0x00]) + struct.pack("!H", 0)


def login(p, header, source=BALANCER, user="trust_user"):
    """A raw connection that sent header and a startup packet; logged in."""
    c = wire.RawConn(p.port, source=source, timeout=10)
    c.send(header + wire.startup_packet(user, "testdb"))
    msgs = c.read_until(b"Z", timeout=10)
    assert not [m for m in msgs if m[0] == b"E"], msgs
    return c


def refused(p, data, source=BALANCER):
    """The pooler closes the connection without sending anything."""
    with wire.RawConn(p.port, source=source, timeout=10) as c:
        c.send(data)
        assert c.wait_closed(timeout=10) == b""


def client_addrs(p):
    with p.admin() as a:
        cur = a.execute("SHOW CLIENTS")
        cols = [d.name for d in cur.description]
        return {(r[cols.index("addr")], r[cols.index("port")])
                for r in cur.fetchall() if r[cols.index("user")] == "trust_user"
                and r[cols.index("database")] == "testdb"}


def query_one(c, sql):
    c.send(wire.query_message(sql))
    msgs = c.read_until(b"Z", timeout=10)
    return [p[6:].decode() for k, p in msgs if k == b"D"]


@pytest.mark.parametrize("header", ["v1", "v1-ipv6", "v2", "v2-tlv"])
def test_proxy_address(pg15, make_pooler, header):
    """The header's client is the client: SHOW CLIENTS, the login log line
    (IPv6 in brackets, as PgBouncer writes it), application_name_add_host."""
    p = make_pooler(pg15, settings=dict(SETTINGS, application_name_add_host=1))
    src = "2001:db8::7" if header == "v1-ipv6" else "203.0.113.7"
    data = {"v1": lambda: v1(src, 51234),
            "v1-ipv6": lambda: v1(src, 51234, dst="2001:db8::1"),
            "v2": lambda: v2(src, 51234),
            # a TLV (PP2_TYPE_UNIQUE_ID) after the addresses is skipped
            "v2-tlv": lambda: v2(src, 51234, tlvs=b"\x05\x00\x04abcd")}[header]()
    c = login(p, data)
    try:
        assert query_one(c, "SELECT 1") == ["1"]
        assert (src, 51234) in client_addrs(p)
        shown = f"[{src}]:51234" if ":" in src else f"{src}:51234"
        p.wait_for_log(r"testdb/trust_user@" + shown.replace(".", r"\.").replace("[", r"\[")
                       .replace("]", r"\]") + " login attempt")
        # application_name_add_host writes no brackets (PgBouncer's format)
        assert query_one(c, "SHOW application_name")[0].endswith(f" - {src}:51234")
    finally:
        c.close()


def test_proxy_cancel(pg15, make_pooler):
    """A CancelRequest that comes through the balancer (with its own header)
    cancels the query of a proxied client."""
    p = make_pooler(pg15, settings=SETTINGS)
    c = wire.RawConn(p.port, source=BALANCER, timeout=10)
    c.send(v2("203.0.113.10", 40010) + wire.startup_packet("trust_user", "testdb"))
    msgs = c.read_until(b"Z", timeout=10)
    pid, key = struct.unpack("!II", [m for k, m in msgs if k == b"K"][0])
    c.send(wire.query_message("SELECT pg_sleep(30)"))
    # The query must be running before the cancel reaches it.
    def running():
        with pg15.connect() as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity"
                                " WHERE query = 'SELECT pg_sleep(30)'").fetchone()[0]
    util.wait_until(running, 10, what="the query to run")
    with wire.RawConn(p.port, source=BALANCER, timeout=10) as cancel:
        cancel.send(v1("203.0.113.11", 40011) + struct.pack("!IIII", 16, 80877102, pid, key))
        cancel.wait_closed(timeout=10)
    msgs = c.read_until(b"Z", timeout=10)
    errors = [wire.error_fields(m) for k, m in msgs if k == b"E"]
    assert errors and errors[0]["C"] == "57014", msgs
    c.close()


def test_proxy_hba(pg15, make_pooler):
    """HBA rules match the real client's address."""
    hba = ("host all all 203.0.113.0/24 trust\n"
           "host all all 127.0.0.0/8 reject\n")
    p = make_pooler(pg15, settings=dict(SETTINGS, auth_type="hba"), hba=hba)
    c = login(p, v1("203.0.113.7", 40000))
    assert query_one(c, "SELECT 2") == ["2"]
    c.close()
    for header, source in ((v1("198.51.100.1", 40001), BALANCER), (b"", "127.0.0.1")):
        with wire.RawConn(p.port, source=source, timeout=10) as d:
            d.send(header + wire.startup_packet("trust_user", "testdb"))
            err = d.closed_with_error(timeout=10)
        assert "rejected" in err or "no pg_hba" in err or "hba" in err, err


def test_proxy_refusals(pg15, make_pooler):
    p = make_pooler(pg15, settings=SETTINGS)
    start = wire.startup_packet("trust_user", "testdb")
    refused(p, v1("203.0.113.7", 1) + start, source="127.0.0.1")     # not a balancer
    refused(p, start)                                                 # balancer without one
    refused(p, b"PROXY TCP4 " + b"1" * 120)                           # no CRLF in 107 bytes
    refused(p, b"PROXY TCP4 203.0.113.7 127.0.0.1 70000 6432\r\n" + start)   # bad port
    refused(p, SIG + bytes([0x31, 0x11]) + struct.pack("!H", 12) + bytes(12))   # version 3
    # a TLV running past the end of the header
    refused(p, SIG + bytes([0x21, 0x11]) + struct.pack("!H", 15) + bytes(12) + b"\x05\x00\x09")
    p.wait_for_log(r"PROXY protocol: header from an address not in proxy_protocol_sources")
    p.wait_for_log(r"PROXY protocol: no header from a proxy_protocol_sources address")
    # Others are served all along: a direct client, and a proxied one.
    with p.connect() as conn:
        assert conn.execute("SELECT 3").fetchone() == (3,)
    c = login(p, v2("203.0.113.8", 40002))
    assert query_one(c, "SELECT 4") == ["4"]
    c.close()


def test_proxy_local_and_tls(pg15, make_pooler, tls_files):
    """v2 LOCAL (a health check) keeps the balancer's address; a header
    followed by an SSLRequest, then TLS, as HAProxy's send-proxy-v2 does in
    front of a TLS listener."""
    p = make_pooler(pg15, settings=dict(SETTINGS, client_tls_sslmode="allow",
                                        client_tls_cert_file=tls_files["server.crt"],
                                        client_tls_key_file=tls_files["server.key"]))
    c = login(p, V2_LOCAL)
    assert (BALANCER, c.sock.getsockname()[1]) in client_addrs(p)
    c.close()
    raw = socket.create_connection((p.host, p.port), timeout=10, source_address=(BALANCER, 0))
    raw.sendall(v2("203.0.113.9", 40003) + struct.pack("!II", 8, 80877103))
    assert raw.recv(1) == b"S"
    ctx = ssl.create_default_context(cafile=tls_files["ca.crt"])
    ctx.check_hostname = False
    with ctx.wrap_socket(raw) as t:
        t.sendall(wire.startup_packet("trust_user", "testdb"))
        got = b""
        while not got.endswith(b"Z\x00\x00\x00\x05I"):
            chunk = t.recv(65536)
            assert chunk, got
            got += chunk
        assert ("203.0.113.9", 40003) in client_addrs(p)


def test_proxy_config_errors(pg15, make_pooler):
    for settings, text in (({"proxy_protocol": 1}, "proxy_protocol = 1 needs proxy_protocol_sources"),
                           (dict(SETTINGS, proxy_protocol_sources="10.0.0.1/8"),
                            "proxy_protocol_sources")):
        p = make_pooler(pg15, settings=settings, start=False)
        with pytest.raises(AssertionError) as err:
            p.start()
        p.proc = None       # its failure to start was the point
        assert text in str(err.value), err.value
