"""TLS toward clients, the whole matrix: every client_tls_sslmode against
every libpq sslmode (psycopg, and psql for the edges), client certificates
for verify-ca/verify-full, verify-full with the right and a wrong host name,
a wrong CA refused, direct TLS (sslnegotiation=direct, PostgreSQL 17 libpq
from psycopg[binary]) and direct TLS without ALPN refused, client_tls_protocols,
a RELOAD with a broken certificate keeping the old one, and pgbench
--connect with SCRAM over TLS."""

import os
import socket
import ssl
import subprocess

import psycopg
import pytest

import tlscerts
import util
from bench import parse_summary
from pg_cluster import password, pgbench_binary

SERVER_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
CLIENT_MODES = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]


@pytest.fixture(scope="module")
def certs(session_dir):
    # Under session_dir: pgcrew runs as the service user and must read them.
    d = tlscerts.CertDir(os.path.join(session_dir, "tlsmatrix"))
    d.ca("ca")
    d.ca("otherca")
    d.cert("server", "127.0.0.1", ip="127.0.0.1")
    d.cert("client", "trust_user")
    d.cert("stranger", "trust_user", ca="otherca")
    util.give_to_service_user(d.d)
    return d


def tls_settings(certs, mode, **extra):
    s = {"client_tls_sslmode": mode,
         "client_tls_cert_file": certs.path("server.crt"),
         "client_tls_key_file": certs.path("server.key"),
         "client_tls_ca_file": certs.path("ca.crt")}
    s.update(extra)
    return s


def expected(server, client, with_cert):
    """'tls', 'plain' or None (refused), as PgBouncer's client_tls_sslmode
    and libpq's sslmode define them."""
    if server == "disable":
        return "plain" if client in ("disable", "allow", "prefer") else None
    if server in ("allow", "prefer"):
        return "plain" if client in ("disable", "allow") else "tls"
    if server == "require":
        return None if client == "disable" else "tls"
    # verify-ca / verify-full: TLS with a certificate from client_tls_ca_file
    return "tls" if client != "disable" and with_cert else None


def attempt(p, certs, sslmode, with_cert, host=util.HOST, **kw):
    args = dict(host=host, port=p.port, dbname="testdb", user="trust_user",
                sslmode=sslmode, sslrootcert=certs.path("ca.crt"), connect_timeout=10,
                autocommit=True, **kw)
    if with_cert:
        args.update(sslcert=certs.path("client.crt"), sslkey=certs.path("client.key"))
    try:
        with psycopg.connect(**args) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
            return "tls" if conn.pgconn.ssl_in_use else "plain"
    except psycopg.OperationalError:
        return None


@pytest.mark.parametrize("server", SERVER_MODES)
def test_sslmode_matrix(pg15, make_pooler, certs, server):
    p = make_pooler(pg15, settings=tls_settings(certs, server))
    got, want = {}, {}
    for with_cert in (False, True):
        for client in CLIENT_MODES:
            key = (client, with_cert)
            got[key] = attempt(p, certs, client, with_cert)
            want[key] = expected(server, client, with_cert)
    assert got == want
    p.assert_alive()


def psql(p, certs, sslmode):
    env = dict(os.environ, PGSSLMODE=sslmode, PGSSLROOTCERT=certs.path("ca.crt"),
               PGCONNECT_TIMEOUT="10")
    return subprocess.run(["psql", "-X", "-At", "-h", util.HOST, "-p", str(p.port), "-U",
                           "trust_user", "-d", "testdb", "-c",
                           "SELECT 1"], env=env, capture_output=True, text=True, timeout=30)


def test_psql_against_require(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require"))
    assert psql(p, certs, "verify-full").stdout.strip() == "1"
    r = psql(p, certs, "disable")
    assert r.returncode != 0 and "SSL required" in r.stderr, r.stderr


def test_verify_full_host_name_and_wrong_ca(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require"))
    assert attempt(p, certs, "verify-full", False) == "tls"
    # The certificate names 127.0.0.1 only.
    with pytest.raises(psycopg.OperationalError, match="does not match host name"):
        psycopg.connect(host="localhost", hostaddr=util.HOST, port=p.port, dbname="testdb",
                        user="trust_user", sslmode="verify-full",
                        sslrootcert=certs.path("ca.crt"), connect_timeout=10)
    with pytest.raises(psycopg.OperationalError, match="certificate verify failed"):
        psycopg.connect(host=util.HOST, port=p.port, dbname="testdb", user="trust_user",
                        sslmode="verify-ca", sslrootcert=certs.path("otherca.crt"),
                        connect_timeout=10)


def test_client_certificate_from_another_ca(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "verify-ca"))
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host=util.HOST, port=p.port, dbname="testdb", user="trust_user",
                        sslmode="require", sslcert=certs.path("stranger.crt"),
                        sslkey=certs.path("stranger.key"), connect_timeout=10)
    assert attempt(p, certs, "require", True) == "tls"


@pytest.mark.parametrize("server", ["prefer", "require"])
def test_direct_tls(pg15, make_pooler, certs, server):
    p = make_pooler(pg15, settings=tls_settings(certs, server))
    assert attempt(p, certs, "require", False, sslnegotiation="direct") == "tls"
    assert attempt(p, certs, "verify-full", False, sslnegotiation="direct") == "tls"


def test_direct_tls_without_alpn_is_refused(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require"))
    ctx = ssl.create_default_context(cafile=certs.path("ca.crt"))
    with socket.create_connection((util.HOST, p.port), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            with ctx.wrap_socket(raw, server_hostname=util.HOST) as tls:
                tls.settimeout(5)
                # Handshake may complete; the pooler must then close without
                # serving anything.
                if tls.recv(1) == b"":
                    raise ConnectionError("closed")
    # With ALPN "postgresql" the same handshake is accepted.
    ctx.set_alpn_protocols(["postgresql"])
    with socket.create_connection((util.HOST, p.port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=util.HOST) as tls:
            assert tls.selected_alpn_protocol() == "postgresql"
    p.assert_alive()


def test_client_tls_protocols(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require", client_tls_protocols="tlsv1.3"))
    assert attempt(p, certs, "require", False) == "tls"
    assert attempt(p, certs, "require", False, ssl_max_protocol_version="TLSv1.2") is None


def test_reload_with_broken_certificate_keeps_the_old_one(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require"))
    assert attempt(p, certs, "verify-full", False) == "tls"
    broken = os.path.join(p.workdir, "broken.crt")
    with open(broken, "w") as f:
        f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
    util.give_to_service_user(p.workdir)
    mark = len(p.log_text())
    p.settings["client_tls_cert_file"] = broken
    p.write_config()
    p.reload()
    p.wait_for_log(r"TLS|certificate", timeout=10, since=mark)
    assert attempt(p, certs, "verify-full", False) == "tls"
    p.assert_alive()


def test_pgbench_connect_scram_over_tls(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "require", auth_type="scram-sha-256",
                                                workers=2))
    seconds = int(os.environ.get("PGBENCH_SECONDS", "5"))
    env = dict(os.environ, PGPASSWORD=password("scram_user"), PGSSLMODE="verify-full",
               PGSSLROOTCERT=certs.path("ca.crt"), PGCONNECT_TIMEOUT="10")
    script = os.path.join(p.workdir, "select1.sql")
    with open(script, "w") as f:
        f.write("SELECT 1;\n")
    r = subprocess.run([pgbench_binary(), "-h", util.HOST, "-p", str(p.port), "-U", "scram_user",
                        "-C", "-c", "4", "-j", "2", "-T", str(seconds), "-n", "-f", script,
                        "testdb"],
                       env=env, capture_output=True, text=True, timeout=seconds + 60)
    out = r.stdout + r.stderr
    summary = parse_summary(out)
    assert r.returncode == 0, out[-2000:]
    assert summary["processed"] and summary["processed"] > 10, out[-2000:]
    assert not summary["failed"], out[-2000:]


def test_unreadable_certificate_fails_start(pg15, make_pooler, certs):
    """A certificate the service user cannot read stops pgcrew at start with
    the reason, instead of workers failing over and over behind an open port."""
    key = os.path.join(certs.d, "rootonly.key")
    with open(certs.path("server.key")) as src, open(key, "w") as dst:
        dst.write(src.read())
    os.chmod(key, 0o600)   # root's, not the service user's
    p = make_pooler(pg15, settings=tls_settings(certs, "require", client_tls_key_file=key),
                    start=False)
    if os.geteuid() != 0:
        pytest.fail("needs root to make a file the service user cannot read")
    with pytest.raises(AssertionError, match="exited with 1"):
        p.start()
    assert "TLS setup failed" in p.log_text()
    p.proc = None
