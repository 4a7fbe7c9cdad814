"""TLS session resumption across workers: the supervisor draws the ticket
keys once, so a client resumes its TLS 1.3 session whichever of four
workers the kernel hands the reconnect to. The worker that accepted each
connection is read from the BackendKeyData (worker id in bits 24-30)."""

import os
import socket
import ssl
import struct

import pytest

import tlscerts
import util
import wire

pytestmark = pytest.mark.pgcrew_only


@pytest.fixture(scope="session")
def resumption_certs(session_dir):
    d = os.path.join(session_dir, "resumption")
    certs = tlscerts.CertDir(d)
    certs.ca("ca")
    certs.cert("server", "127.0.0.1", ip="127.0.0.1")
    util.give_to_service_user(d)
    return certs


def tls_login(p, ctx, session=None):
    """SSLRequest, TLS (resuming session if given), trust login. Returns
    (worker id, session_reused, the session to resume next time)."""
    sock = socket.create_connection((p.host, p.port), timeout=5)
    try:
        sock.sendall(struct.pack("!II", 8, 80877103))
        assert sock.recv(1) == b"S"
        tls = ctx.wrap_socket(sock, server_hostname="127.0.0.1", session=session)
        rc = wire.RawConn.__new__(wire.RawConn)
        rc.sock, rc.buf = tls, b""
        rc.send(wire.startup_packet("trust_user", "testdb"))
        msgs = rc.read_until(b"Z")
        pid = next(struct.unpack("!I", payload[:4])[0] for kind, payload in msgs if kind == b"K")
        # The TLS 1.3 ticket came with the login's answer.
        reused, new_session = tls.session_reused, tls.session
        rc.send(wire.message(b"X"))
        return (pid >> 24) & 0x7F, reused, new_session
    finally:
        sock.close()


def test_resumption_on_any_worker(pg15, make_pooler, resumption_certs):
    p = make_pooler(pg15, settings={
        "workers": 4, "client_tls_sslmode": "require",
        "client_tls_cert_file": resumption_certs.path("server.crt"),
        "client_tls_key_file": resumption_certs.path("server.key")})
    ctx = ssl.create_default_context(cafile=resumption_certs.path("ca.crt"))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    first_worker, reused, session = tls_login(p, ctx)
    assert not reused
    assert session is not None and session.has_ticket
    seen = {}
    for _ in range(24):
        worker, reused, _ = tls_login(p, ctx, session)
        seen.setdefault(worker, []).append(reused)
    others = {w: r for w, r in seen.items() if w != first_worker}
    assert others, f"every reconnect went to worker {first_worker}: {seen}"
    assert all(all(r) for r in seen.values()), f"not resumed everywhere: {seen}"
