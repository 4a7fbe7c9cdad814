"""Client authentication through the pooler (trust, plain, md5, scram-sha-256)
against each server-side method (trust, password, md5, scram), and the
errors a client sees for a wrong password, an unknown user or database."""

import psycopg
import pytest

from pg_cluster import USERS, password

CLIENT_AUTH_TYPES = ["trust", "plain", "md5", "scram-sha-256"]
# The server's pg_hba method for each user is in pg_cluster.USERS.
SERVER_USERS = ["trust_user", "plain_user", "md5_user", "scram_user"]
# PgBouncer's refusal texts: the SCRAM exchange fails with its own message.
AUTH_FAILED = {
    "plain": "password authentication failed",
    "md5": "password authentication failed",
    "scram-sha-256": "SASL authentication failed",
}


@pytest.mark.parametrize("auth_type", CLIENT_AUTH_TYPES)
def test_login_matrix(pg, make_pooler, auth_type):
    """Every client auth_type logs in every user, whose server login uses
    trust, password, md5 or scram-sha-256 with the userlist password."""
    p = make_pooler(pg, settings={"auth_type": auth_type})
    for user in SERVER_USERS:
        with p.connect(user=user, password=password(user)) as conn:
            row = conn.execute("SELECT current_user, current_database(), 40 + 2").fetchone()
            assert row == (user, "testdb", 42), (user, row)


@pytest.mark.parametrize("auth_type", ["plain", "md5", "scram-sha-256"])
def test_wrong_password_is_refused(pg15, make_pooler, auth_type):
    p = make_pooler(pg15, settings={"auth_type": auth_type})
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(user="scram_user", password="not-the-password")
    assert AUTH_FAILED[auth_type] in str(err.value)
    # The right password still works afterwards.
    with p.connect(user="scram_user", password=password("scram_user")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("auth_type", ["plain", "md5", "scram-sha-256"])
def test_unknown_user_is_refused(pg15, make_pooler, auth_type):
    p = make_pooler(pg15, settings={"auth_type": auth_type})
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(user="nobody_here", password="whatever")
    assert AUTH_FAILED[auth_type] in str(err.value)


def test_trust_requires_user_in_auth_file(pg15, make_pooler):
    p = make_pooler(pg15, settings={"auth_type": "trust"},
                    userlist={"trust_user": password("trust_user")})
    with p.connect() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(user="scram_user")
    assert '"trust" authentication failed' in str(err.value)


def test_trust_with_forced_user_still_requires_auth_file(pg15, make_pooler):
    """Security: a database entry with a forced user= does not let a user
    that auth_file does not list in under auth_type = trust (only "any"
    ignores the client's name); a listed one logs in as the forced user."""
    dbs = {"testdb": pg15.dsn("testdb", user="trust_user")}
    p = make_pooler(pg15, settings={"auth_type": "trust"}, databases=dbs,
                    userlist={"md5_user": password("md5_user")})
    with p.connect(user="md5_user") as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)
    for user in ("nobody_here", "trust_user"):
        with pytest.raises(psycopg.OperationalError) as err:
            p.connect(user=user)
        assert '"trust" authentication failed' in str(err.value)


def test_any_with_forced_user_admits_any_name(pg15, make_pooler):
    """auth_type = any: the name the client gives is ignored; the forced
    user logs in."""
    dbs = {"testdb": pg15.dsn("testdb", user="trust_user")}
    p = make_pooler(pg15, settings={"auth_type": "any"}, databases=dbs,
                    userlist={"md5_user": password("md5_user")})
    with p.connect(user="nobody_here") as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)


def test_unknown_database(pg15, make_pooler):
    p = make_pooler(pg15)
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(dbname="nosuchdb")
    assert "no such database: nosuchdb" in str(err.value)


@pytest.mark.parametrize("auth_type", ["plain", "md5", "scram-sha-256"])
def test_unknown_database_after_authentication(pg15, make_pooler, auth_type):
    """As PgBouncer: a login for a database the pooler does not have is
    authenticated first, so a wrong password (or an unknown user) learns
    nothing about which databases exist; valid credentials are told."""
    p = make_pooler(pg15, settings={"auth_type": auth_type})
    for user, pw in (("scram_user", "wrong"), ("nobody_here", "whatever")):
        with pytest.raises(psycopg.OperationalError) as err:
            p.connect(dbname="nosuchdb", user=user, password=pw)
        assert AUTH_FAILED[auth_type] in str(err.value)
        assert "nosuchdb" not in str(err.value)
    with pytest.raises(psycopg.OperationalError, match="no such database: nosuchdb"):
        p.connect(dbname="nosuchdb", user="scram_user", password=password("scram_user"))


def test_md5_hash_in_userlist(pg, make_pooler):
    """An md5 hash in userlist.txt: md5 client auth and md5 server login
    both work from the hash alone."""
    import hashlib
    user = "md5_user"
    digest = "md5" + hashlib.md5((password(user) + user).encode()).hexdigest()
    p = make_pooler(pg, settings={"auth_type": "md5"}, userlist={user: digest})
    with p.connect(user=user, password=password(user)) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (user,)
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(user=user, password="wrong")
    assert "password authentication failed" in str(err.value)


def test_scram_passthrough(pg, make_pooler):
    """userlist holds the SCRAM verifier copied from pg_authid and the server
    requires scram: the pooler logs in without ever knowing the plaintext."""
    user = "scram_user"
    verifier = pg.scram_verifier(user)
    assert verifier.startswith("SCRAM-SHA-256$")
    p = make_pooler(pg, settings={"auth_type": "scram-sha-256"}, userlist={user: verifier})
    for _ in range(2):  # second login reuses cached keys / a pooled server
        with p.connect(user=user, password=password(user)) as conn:
            assert conn.execute("SELECT current_user").fetchone() == (user,)
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(user=user, password="wrong")
    assert AUTH_FAILED["scram-sha-256"] in str(err.value)


def test_users_have_expected_server_methods(pg):
    """Guards the matrix: the server really demands each method."""
    assert set(SERVER_USERS) == set(USERS)
    with pg.connect() as conn:
        rows = dict(conn.execute("SELECT rolname, left(rolpassword, 6) FROM pg_authid"
                                 " WHERE rolname = ANY(%s)", (SERVER_USERS,)).fetchall())
    assert rows["md5_user"].startswith("md5")
    assert rows["scram_user"].startswith("SCRAM-")


LONGEST = 65535      # PgBouncer's limit since its development branch (1.26)


def set_role_password(pg, user, pw):
    with pg.connect() as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(f"ALTER ROLE {user} PASSWORD '{pw}'")


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stops at 2048 bytes
@pytest.mark.parametrize("workers", [1, 4], ids=["w1", "w4"])
def test_long_passwords_kept_whole(pg15, make_pooler, workers):
    """Passwords of 65,535 bytes: in auth_file (a plain client login whose
    PasswordMessage is larger than the read buffer, then the SCRAM server
    login with the same password) and in a database entry's password= (the
    server login of a forced user). Nothing is cut short: the password less
    its last byte does not log in. (PostgreSQL itself takes at most 1000
    bytes in a cleartext PasswordMessage, so the server side is SCRAM.)"""
    pw = "p" * 255 + "q" * (LONGEST - 256) + "z"
    set_role_password(pg15, "scram_user", pw)
    try:
        dbs = {"testdb": pg15.dsn("testdb"),
               "forced": pg15.dsn("testdb", user="scram_user", password=pw)}
        p = make_pooler(pg15, settings={"auth_type": "plain", "workers": workers}, databases=dbs,
                        userlist={"scram_user": pw, "trust_user": "trust-secret"})
        with p.connect(user="scram_user", password=pw) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("scram_user",)
        with pytest.raises(psycopg.OperationalError) as err:
            p.connect(user="scram_user", password=pw[:-1])
        assert "password authentication failed" in str(err.value)
        with p.connect("forced", user="trust_user", password="trust-secret") as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("scram_user",)
    finally:
        set_role_password(pg15, "scram_user", password("scram_user"))


@pytest.mark.pgcrew_only
def test_overlong_password_is_a_config_error(pg15, make_pooler):
    """A secret over 65,535 bytes in auth_file is refused with file and line,
    never silently cut (PgBouncer cuts it)."""
    p = make_pooler(pg15, userlist={"scram_user": "x" * (LONGEST + 1)}, start=False)
    with pytest.raises(AssertionError) as err:
        p.start()
    p.proc = None       # its failure to start was the point
    assert f"userlist.txt:1: secret for user 'scram_user' is longer than {LONGEST} bytes" in \
        str(err.value)


def scram_verifier(pw, salt=b"pgcrew-test-salt", iterations=4096):
    """A SCRAM-SHA-256 secret for pw, as PostgreSQL stores it."""
    import base64
    import hashlib
    import hmac
    salted = hashlib.pbkdf2_hmac("sha256", pw.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
    server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
    b64 = lambda b: base64.b64encode(b).decode()      # noqa: E731
    return (f"SCRAM-SHA-256${iterations}:{b64(salt)}$"
            f"{b64(hashlib.sha256(client_key).digest())}:{b64(server_key)}")


@pytest.mark.parametrize("workers", [1, 4], ids=["w1", "w4"])
def test_wrong_password_type(pg15, make_pooler, workers):
    """auth_file's secret cannot answer the server: an md5 hash when the
    server asks for SCRAM, a SCRAM secret when it asks for md5. PgBouncer's
    texts: an ERROR line `cannot do SCRAM|MD5 authentication: wrong password
    type` and `server login failed: wrong password type` for the client."""
    import hashlib
    md5_of_scram_user = "md5" + hashlib.md5(b"scram-secretscram_user").hexdigest()
    cases = [("md5", "scram_user", md5_of_scram_user, "SCRAM"),
             ("scram-sha-256", "md5_user", scram_verifier(password("md5_user")), "MD5")]
    for auth_type, user, secret, method in cases:
        p = make_pooler(pg15, settings={"auth_type": auth_type, "workers": workers},
                        userlist={user: secret})
        with pytest.raises(psycopg.OperationalError) as err:
            p.connect(user=user, password=password(user))
        assert "server login failed: wrong password type" in str(err.value), (user, err.value)
        p.wait_for_log(rf"ERROR .*{user}.* cannot do {method} authentication: wrong password type")
        p.stop()
