"""SCRAM-SHA-256-PLUS toward TLS clients (tls-server-end-point channel
binding, RFC 5929): libpq's channel_binding=require succeeds through pgcrew
(psql and psycopg) with a SHA-256 and a SHA-384 signed certificate; a raw
client proves the server checks the binding: the right hash logs in, a
wrong one is refused, and 'y' (downgrade) is refused while -PLUS is
offered. Plain connections are offered SCRAM-SHA-256 only."""

import base64
import hashlib
import hmac
import os
import ssl
import struct
import subprocess

import psycopg
import pytest

import tlscerts
import util
import wire
from pg_cluster import PG15_BINDIR

pytestmark = pytest.mark.pgcrew_only

USER, PASSWORD = "scram_user", "scram-secret"


@pytest.fixture(scope="session")
def plus_certs(session_dir):
    """A CA and two server certificates for 127.0.0.1: ECDSA signed with
    SHA-256 and with SHA-384 (the end-point hash follows the signature)."""
    d = os.path.join(session_dir, "scramplus")
    certs = tlscerts.CertDir(d)
    certs.ca("ca")
    certs.cert("s256", "127.0.0.1", ip="127.0.0.1", digest="sha256", curve="secp384r1")
    certs.cert("s384", "127.0.0.1", ip="127.0.0.1", digest="sha384", curve="secp384r1")
    util.give_to_service_user(d)
    return d


def tls_pooler(make_pooler, pg, certs, name="s256", mode="require"):
    return make_pooler(pg, settings={
        "client_tls_sslmode": mode, "auth_type": "scram-sha-256",
        "client_tls_cert_file": os.path.join(certs, f"{name}.crt"),
        "client_tls_key_file": os.path.join(certs, f"{name}.key")})


def test_libpq_channel_binding_require(pg, make_pooler, plus_certs):
    for name in ("s256", "s384"):
        p = tls_pooler(make_pooler, pg, plus_certs, name)
        with psycopg.connect(**p.conninfo("testdb", USER, password=PASSWORD, sslmode="verify-full",
                                          sslrootcert=os.path.join(plus_certs, "ca.crt"),
                                          channel_binding="require"), autocommit=True) as conn:
            assert conn.execute("SELECT current_user").fetchone()[0] == USER
    psql = os.path.join(PG15_BINDIR, "psql")
    env = dict(os.environ, PGPASSWORD=PASSWORD)
    out = subprocess.run(
        ["timeout", "20", psql, "-X", "-A", "-t", "-c", "SELECT current_user",
         f"host={p.host} port={p.port} dbname=testdb user={USER} sslmode=require channel_binding=require"],
        capture_output=True, text=True, env=env, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == USER
    # Without TLS there is nothing to bind to: libpq refuses by itself.
    q = make_pooler(pg, settings={"auth_type": "scram-sha-256"})
    with pytest.raises(psycopg.OperationalError, match="channel binding"):
        psycopg.connect(**q.conninfo("testdb", USER, password=PASSWORD, sslmode="disable",
                                     channel_binding="require"))


# ---- a raw SCRAM client, to send what libpq never would ----

def tls_conn(p, cafile):
    rc = wire.RawConn(p.port)
    rc.send(struct.pack("!II", 8, 80877103))
    assert rc.sock.recv(1) == b"S"
    ctx = ssl.create_default_context(cafile=cafile)
    rc.sock = ctx.wrap_socket(rc.sock, server_hostname="127.0.0.1")
    return rc


def end_point_hash(der):
    """RFC 5929: the certificate's signature hash (SHA-256 for MD5/SHA-1)."""
    text = subprocess.run(["openssl", "x509", "-inform", "DER", "-noout", "-text"], input=der,
                          capture_output=True, check=True, timeout=30).stdout.decode()
    algo = "sha384" if "ecdsa-with-SHA384" in text else "sha256"
    return hashlib.new(algo, der).digest()


def mechanisms(rc):
    rc.send(wire.startup_packet(USER, "testdb"))
    kind, payload = rc.read_message()
    assert kind == b"R" and struct.unpack("!I", payload[:4])[0] == 10, (kind, payload)
    return [m.decode() for m in payload[4:].split(b"\0") if m]


def scram_login(rc, mech, gs2, cbind):
    """Run SCRAM with the given mechanism, gs2 header and binding data;
    return the backend's answer to client-final: ('ok', None) or ('error', fields)."""
    nonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n=,r={nonce}"
    first = (gs2 + bare).encode()
    rc.send(wire.message(b"p", mech.encode() + b"\0" + struct.pack("!i", len(first)) + first))
    kind, payload = rc.read_message()
    if kind == b"E":
        return "error", wire.error_fields(payload)
    server_first = payload[4:].decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac("sha256", PASSWORD.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    without_proof = "c=" + base64.b64encode(gs2.encode() + cbind).decode() + ",r=" + attrs["r"]
    auth_message = ",".join((bare, server_first, without_proof)).encode()
    sig = hmac.new(stored_key, auth_message, "sha256").digest()
    proof = bytes(a ^ b for a, b in zip(client_key, sig))
    final = (without_proof + ",p=" + base64.b64encode(proof).decode()).encode()
    rc.send(wire.message(b"p", final))
    while True:   # the pooler closes right after an ErrorResponse
        kind, payload = rc.read_message()
        if kind == b"E":
            return "error", wire.error_fields(payload)
        if kind == b"Z":
            return "ok", None


@pytest.fixture
def plus_pooler(pg15, make_pooler, plus_certs):
    return tls_pooler(make_pooler, pg15, plus_certs, mode="prefer")


def test_raw_client_binding_checked(plus_pooler, plus_certs):
    ca = os.path.join(plus_certs, "ca.crt")
    gs2 = "p=tls-server-end-point,,"
    with tls_conn(plus_pooler, ca) as rc:
        assert mechanisms(rc) == ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]
        good = end_point_hash(rc.sock.getpeercert(binary_form=True))
        assert len(good) == 32
        assert scram_login(rc, "SCRAM-SHA-256-PLUS", gs2, good) == ("ok", None)
    with tls_conn(plus_pooler, ca) as rc:
        mechanisms(rc)
        bad = hashlib.sha256(b"some other certificate").digest()
        status, err = scram_login(rc, "SCRAM-SHA-256-PLUS", gs2, bad)
        assert status == "error" and err["M"] == "SCRAM channel binding check failed", err
    with tls_conn(plus_pooler, ca) as rc:
        mechanisms(rc)
        status, err = scram_login(rc, "SCRAM-SHA-256", "y,,", b"")
        assert status == "error" and err["M"] == "SCRAM channel binding negotiation error", err
    with tls_conn(plus_pooler, ca) as rc:
        mechanisms(rc)
        status, err = scram_login(rc, "SCRAM-SHA-256-PLUS", "n,,", b"")
        assert status == "error" and "does not include channel binding data" in err["M"], err
    with tls_conn(plus_pooler, ca) as rc:
        mechanisms(rc)
        # Plain SCRAM over TLS without binding still works ('n': the client cannot bind).
        assert scram_login(rc, "SCRAM-SHA-256", "n,,", b"") == ("ok", None)
    # A plain connection is not offered -PLUS, and cannot claim a binding.
    with wire.RawConn(plus_pooler.port) as rc:
        assert mechanisms(rc) == ["SCRAM-SHA-256"]
        status, err = scram_login(rc, "SCRAM-SHA-256", "p=tls-server-end-point,,", b"x")
        assert status == "error" and "channel binding" in err["M"], err
