"""Client-side TLS: client_tls_sslmode = require with a self-signed
certificate (the tls_files fixture, conftest.py); TLS clients get in,
plaintext clients are refused."""

import re

import psycopg
import pytest

from pg_cluster import password


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
        # PgBouncer's description of the TLS connection, in the log and
        # in SHOW CLIENTS: version/cipher/ECDH=group (1.25; 1.18 leaves
        # the group out for TLS 1.3).
        info = r"TLSv1\.3/TLS_[A-Z0-9_]+" + ("/ECDH=\\w+" if p.kind == "pgcrew" else "")
        p.wait_for_log(r"login attempt: db=testdb user=scram_user tls=" + info)
        with p.admin(password=password("trust_user")) as admin:
            cur = admin.execute("SHOW CLIENTS")
            names = [d.name for d in cur.description]
            tls = [dict(zip(names, r))["tls"] for r in cur.fetchall()
                   if r[1] == user]
        assert tls and re.fullmatch(info, tls[0]), tls
    with pytest.raises(psycopg.OperationalError):
        p.connect(user=user, password=pw, sslmode="disable")
