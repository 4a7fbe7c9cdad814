"""Certificate authentication: auth_type = cert and the HBA cert method.
A certificate verified against client_tls_ca_file names the user by its CN,
or through an ident map (map= with auth_ident_file). Wrong CN, no
certificate and a certificate from another CA are refused with
PostgreSQL's wording. The test makes its own CAs with the openssl CLI."""

import os

import psycopg
import pytest

import tlscerts
import util

# PostgreSQL's wording (PgBouncer says "certificate authentication failed").
pytestmark = pytest.mark.pgcrew_only

NO_CERT = "connection requires a valid client certificate"


def cert_failed(user):
    return f'certificate authentication failed for user "{user}"'


@pytest.fixture(scope="session")
def certs(session_dir):
    """CA, a server certificate for 127.0.0.1, client certificates signed by
    the CA (CN scram_user, md5_user, alice) and one from another CA."""
    d = os.path.join(session_dir, "certauth")
    certs = tlscerts.CertDir(d)
    certs.ca("ca")
    certs.ca("otherca")
    certs.cert("server", "127.0.0.1", ip="127.0.0.1")
    for name, cn, ca in (("scram", "scram_user", "ca"), ("md5", "md5_user", "ca"),
                         ("alice", "alice", "ca"), ("rogue", "scram_user", "otherca")):
        certs.cert(name, cn, ca)
    # The pooler (maybe another OS user) reads the CA and its own key.
    srv = os.path.join(d, "pooler")
    os.makedirs(srv)
    for name in ("ca.crt", "server.crt", "server.key"):
        with open(os.path.join(d, name), "rb") as src, open(os.path.join(srv, name), "wb") as dst:
            dst.write(src.read())
    os.chmod(os.path.join(srv, "server.key"), 0o600)
    util.give_to_service_user(srv)
    return d


def tls_settings(certs, mode="require", **extra):
    srv = os.path.join(certs, "pooler")
    s = {"client_tls_sslmode": mode,
         "client_tls_cert_file": os.path.join(srv, "server.crt"),
         "client_tls_key_file": os.path.join(srv, "server.key"),
         "client_tls_ca_file": os.path.join(srv, "ca.crt")}
    s.update(extra)
    return s


def login(p, certs, user, cert=None, db="testdb"):
    kw = {"sslmode": "verify-full", "sslrootcert": os.path.join(certs, "ca.crt")}
    if cert:
        kw.update(sslcert=os.path.join(certs, f"{cert}.crt"), sslkey=os.path.join(certs, f"{cert}.key"))
    else:
        # A missing file: libpq then sends no certificate.
        kw.update(sslcert=os.path.join(certs, "none.crt"), sslkey=os.path.join(certs, "none.key"))
    with psycopg.connect(**p.conninfo(db, user, **kw), autocommit=True) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


def refused(p, certs, user, cert, pattern, db="testdb"):
    with pytest.raises(psycopg.OperationalError, match=pattern):
        login(p, certs, user, cert, db)


def test_auth_type_cert(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, auth_type="cert"))
    assert login(p, certs, "scram_user", "scram") == "scram_user"
    refused(p, certs, "scram_user", "md5", cert_failed("scram_user"))
    refused(p, certs, "scram_user", None, NO_CERT)
    refused(p, certs, "scram_user", "rogue", NO_CERT)
    # The user must exist, as in PgBouncer.
    refused(p, certs, "alice", "alice", cert_failed("alice"))
    p.wait_for_log(r"TLS certificate name mismatch")
    p.wait_for_log(r"TLS client certificate required")


def test_cert_with_verify_ca(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, "verify-ca", auth_type="cert"))
    assert login(p, certs, "md5_user", "md5") == "md5_user"
    refused(p, certs, "scram_user", "md5", cert_failed("scram_user"))
    # verify-ca: no certificate fails the handshake itself.
    with pytest.raises(psycopg.OperationalError):
        login(p, certs, "scram_user", None)


HBA = """
hostssl testdb  all      127.0.0.1/32 cert map=certmap
hostssl otherdb md5_user 127.0.0.1/32 scram-sha-256
hostssl otherdb all      127.0.0.1/32 cert
"""


def test_hba_cert_with_ident_map(pg15, make_pooler, certs):
    p = make_pooler(pg15, settings=tls_settings(certs, auth_type="hba"), hba=HBA, start=False)
    ident = os.path.join(p.workdir, "ident.conf")
    with open(ident, "w") as f:
        f.write("certmap  alice       scram_user\n")
    p.settings["auth_ident_file"] = ident
    p.start()
    assert login(p, certs, "scram_user", "alice") == "scram_user"
    refused(p, certs, "md5_user", "alice", cert_failed("md5_user"))
    # The map says alice, not scram_user: the CN alone does not do.
    refused(p, certs, "scram_user", "scram", cert_failed("scram_user"))
    p.wait_for_log(r"ident map: certmap does not have a match")
    # No map on the otherdb line: the CN is the user.
    assert login(p, certs, "scram_user", "scram", "otherdb") == "scram_user"
    refused(p, certs, "scram_user", None, NO_CERT, "otherdb")
    # A password line is unaffected by the certificate request.
    with psycopg.connect(**p.conninfo("otherdb", "md5_user", password="md5-secret",
                                      sslmode="require", sslcert=os.path.join(certs, "none.crt")),
                         autocommit=True) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "md5_user"
