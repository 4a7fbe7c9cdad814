"""HAProxy (Debian's package) in front of two pgcrew instances with [peers],
sending PROXY protocol v2 headers (send-proxy-v2), as a fleet runs: HBA
rules see the real client's address, SHOW CLIENTS shows it, and a cancel
request that HAProxy balances to the other instance still cancels the
query (the instance passes it to its peer).

Addresses on loopback: clients connect from 127.0.0.4 (admitted by HBA)
or 127.0.0.5 (not), HAProxy listens on 127.0.0.3 and connects from
127.0.0.2, the only address allowed to send a header; consoles connect
directly from 127.0.0.1. The configuration is the one doc/fleet.md shows.
PgBouncer has no PROXY protocol (pgbouncer#241)."""

import shutil
import socket
import struct
import subprocess

import pytest

import util
import wire

pytestmark = pytest.mark.pgcrew_only
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
CLIENT, STRANGER, FRONT, BALANCER = "127.0.0.4", "127.0.0.5", "127.0.0.3", "127.0.0.2"
HBA = (f"host all all {CLIENT}/32 trust\n"
       f"host all all {BALANCER}/32 reject\n"
       "host all all 127.0.0.1/32 trust\n")

HAPROXY_CFG = """global
    maxconn 200

defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend postgres
    bind {front}:{port}
    default_backend pgcrew

backend pgcrew
    balance roundrobin
    source {balancer}
    server a 127.0.0.1:{a} send-proxy-v2
    server b 127.0.0.1:{b} send-proxy-v2

# One instance each, so that a test knows where a connection goes (round
# robin also counts connections nobody logs in on, such as port probes).
frontend only_a
    bind {front}:{port_a}
    default_backend only_a

backend only_a
    source {balancer}
    server a 127.0.0.1:{a} send-proxy-v2

frontend only_b
    bind {front}:{port_b}
    default_backend only_b

backend only_b
    source {balancer}
    server b 127.0.0.1:{b} send-proxy-v2
"""


@pytest.fixture
def fleet(pg15, make_pooler, tmp_path):
    settings = {"pool_mode": "transaction", "auth_type": "hba", "proxy_protocol": 1,
                "proxy_protocol_sources": BALANCER, "verbose": 1}
    a = make_pooler(pg15, settings=dict(settings, peer_id=1), hba=HBA, start=False)
    b = make_pooler(pg15, settings=dict(settings, peer_id=2), hba=HBA, start=False)
    for p in (a, b):
        p.peers = {1: f"host={util.HOST} port={a.port}", 2: f"host={util.HOST} port={b.port}"}
        p.start()
    port, port_a, port_b = util.free_port(), util.free_port(), util.free_port()
    cfg = tmp_path / "haproxy.cfg"
    cfg.write_text(HAPROXY_CFG.format(front=FRONT, port=port, port_a=port_a, port_b=port_b,
                                      balancer=BALANCER, a=a.port, b=b.port))
    check = subprocess.run([HAPROXY, "-c", "-f", str(cfg)], capture_output=True, text=True,
                           timeout=30)
    assert check.returncode == 0, check.stdout + check.stderr
    proc = subprocess.Popen([HAPROXY, "-db", "-f", str(cfg)], stdout=subprocess.DEVNULL,
                            stderr=open(tmp_path / "haproxy.log", "w"))
    try:
        util.wait_until(lambda: util.port_accepts(port, FRONT), 10, what="haproxy to listen")
        yield a, b, port, port_a, port_b
    finally:
        util.end_process(proc)


def through_haproxy(port, source):
    return wire.RawConn(port, host=FRONT, source=source, timeout=10)


def clients_of(p):
    with p.admin() as a:
        cur = a.execute("SHOW CLIENTS")
        cols = [d.name for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall() if r[cols.index("database")] == "testdb"]


def test_fleet_real_addresses(fleet):
    a, b, port, _, _ = fleet
    conns = []
    try:
        for _ in range(2):                  # round robin: one on each instance
            c = through_haproxy(port, CLIENT)
            c.login_trust("trust_user", "testdb")
            conns.append(c)
        seen = clients_of(a) + clients_of(b)
        assert len(seen) == 2 and {r["addr"] for r in seen} == {CLIENT}, seen
        assert {r["port"] for r in seen} == {c.sock.getsockname()[1] for c in conns}
        # HBA judges the real client: HAProxy's own address is rejected,
        # and an address no rule names is refused.
        with through_haproxy(port, STRANGER) as d:
            d.send(wire.startup_packet("trust_user", "testdb"))
            err = d.closed_with_error(timeout=10)
        assert "pg_hba" in err or "rejected" in err, err
    finally:
        for c in conns:
            c.close()


def test_fleet_cancel_through_the_other_instance(fleet, pg15):
    """The client logs in through HAProxy on instance a; its cancel request
    comes through HAProxy to instance b, which passes it to its peer a."""
    a, b, _, port_a, port_b = fleet
    with through_haproxy(port_a, CLIENT) as victim:
        msgs = victim.login_trust("trust_user", "testdb")
        pid, key = struct.unpack("!II", [p for k, p in msgs if k == b"K"][0])
        victim.send(wire.query_message("SELECT pg_sleep(30)"))
        # Running in PostgreSQL, not only linked in the pooler: a cancel that
        # reaches the backend before it reads the query cancels nothing (seen
        # beside other runners, the server's login just done).
        pg15.wait_active("SELECT pg_sleep(30)%")
        with socket.create_connection((FRONT, port_b), timeout=10,
                                      source_address=(CLIENT, 0)) as s:
            s.sendall(struct.pack("!IIII", 16, 80877102, pid, key))
            s.settimeout(10)
            assert s.recv(1) == b""
        msgs = victim.read_until(b"Z", timeout=10)
        errors = [wire.error_fields(p) for k, p in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs
    b.wait_for_log(r"cancel request passed to peer 1 ")
