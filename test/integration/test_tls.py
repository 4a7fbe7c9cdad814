"""Client-side TLS: client_tls_sslmode = require with a self-signed
certificate; TLS clients get in, plaintext clients are refused."""

import os
import subprocess

import psycopg
import pytest

import util


@pytest.fixture(scope="session")
def tls_files(session_dir):
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    d = os.path.join(session_dir, "tls")
    os.makedirs(d)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf")
    os.chmod(os.path.join(d, "server.key"), 0o600)
    util.give_to_service_user(d)
    return {name: os.path.join(d, name) for name in ("ca.crt", "server.crt", "server.key")}


def test_tls_required(pg15, make_pooler, tls_files):
    p = make_pooler(pg15, settings={
        "client_tls_sslmode": "require",
        "client_tls_cert_file": tls_files["server.crt"],
        "client_tls_key_file": tls_files["server.key"],
        "client_tls_ca_file": tls_files["ca.crt"],
        "auth_type": "scram-sha-256",
    })
    user, pw = "scram_user", "scram-secret"
    with p.connect(user=user, password=pw, sslmode="verify-full",
                   sslrootcert=tls_files["ca.crt"]) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (user,)
        assert conn.pgconn.ssl_in_use
    with pytest.raises(psycopg.OperationalError):
        p.connect(user=user, password=pw, sslmode="disable")
