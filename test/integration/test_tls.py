"""Client-side TLS: client_tls_sslmode = require with a self-signed
certificate (the tls_files fixture, conftest.py); TLS clients get in,
plaintext clients are refused."""

import psycopg
import pytest


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
