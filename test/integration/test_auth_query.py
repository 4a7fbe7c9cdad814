"""auth_query / auth_user / auth_dbname: users missing from auth_file are
looked up with auth_query on auth_user's pooled server connection, with md5
and SCRAM secrets from pg_authid; answers are cached per worker for
auth_query_cache_ttl (pgcrew extension), dropped on RELOAD; unknown users and
NULL passwords get PgBouncer's behaviour; per-database overrides; and a
search_path in the startup packet never reaches the query (PgBouncer
CVE-2025-12819).

Every lookup function counts its calls in a sequence, so "the cache answered"
is asserted by the count not moving."""

import concurrent.futures
import time

import psycopg
import pytest

import util

AUTH_USER, AUTH_PW = "aq_auth", "aq-auth-pw"
AUTH_USER2, AUTH_PW2 = "aq_auth2", "aq-auth2-pw"
# role -> (password or None, password_encryption, pg_hba method)
ROLES = {
    AUTH_USER: (AUTH_PW, "scram-sha-256", "scram-sha-256"),
    AUTH_USER2: (AUTH_PW2, "scram-sha-256", "scram-sha-256"),
    "aq_scram": ("aq-scram-pw", "scram-sha-256", "scram-sha-256"),
    "aq_md5": ("aq-md5-pw", "md5", "md5"),
    "aq_nopw": (None, "scram-sha-256", "trust"),
    "aq_victim": ("victim-pw", "scram-sha-256", "scram-sha-256"),
}
EVIL_PW = "evil-pw"
QUERY = "SELECT usename, passwd FROM public.aq_lookup($1)"
QUERY2 = "SELECT usename, passwd FROM public.aq_lookup2($1)"
# Unqualified on purpose: what a search_path could redirect.
QUERY_UNQUALIFIED = "SELECT usename, passwd FROM aq_lookup($1)"

LOOKUP_FN = """
CREATE OR REPLACE FUNCTION public.{name}(u text, OUT usename text, OUT passwd text)
RETURNS record LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    PERFORM nextval('public.{seq}');
    PERFORM pg_sleep({sleep});
    SELECT rolname::text, rolpassword::text INTO usename, passwd
      FROM pg_catalog.pg_authid WHERE rolname = u AND rolcanlogin;
END $$"""

# A schema an attacker controls, with a lookup answering an md5 secret of
# EVIL_PW for anyone.
EVIL_FN = """
CREATE OR REPLACE FUNCTION evil.aq_lookup(u text, OUT usename text, OUT passwd text)
RETURNS record LANGUAGE sql AS $$
    SELECT u, 'md5' || md5('{pw}' || u)
$$""".format(pw=EVIL_PW)


def setup_roles(pg):
    """Roles, pg_hba lines and lookup functions, once per cluster."""
    if getattr(pg, "aq_ready", False):
        return
    with pg.connect() as conn:
        for role, (pw, enc, _) in ROLES.items():
            conn.execute(f"SET password_encryption = '{enc}'")
            conn.execute(f"DROP ROLE IF EXISTS {role}")
            if pw is None:
                conn.execute(f"CREATE ROLE {role} LOGIN")
            else:
                conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{pw}'")
    with open(f"{pg.datadir}/pg_hba.conf", "a") as f:
        for role, (_, _, method) in ROLES.items():
            f.write(f"host all {role} 127.0.0.1/32 {method}\n")
    for db in ("testdb", "otherdb"):
        with pg.connect(db) as conn:
            for seq in ("aq_calls", "aq_calls2", "aq_calls_slow"):
                conn.execute(f"CREATE SEQUENCE IF NOT EXISTS public.{seq}")
            conn.execute(LOOKUP_FN.format(name="aq_lookup", seq="aq_calls", sleep=0))
            conn.execute(LOOKUP_FN.format(name="aq_lookup2", seq="aq_calls2", sleep=0))
            conn.execute(LOOKUP_FN.format(name="aq_lookup_slow", seq="aq_calls_slow", sleep=0.5))
            for fn in ("aq_lookup", "aq_lookup2", "aq_lookup_slow"):
                conn.execute(f"REVOKE ALL ON FUNCTION public.{fn}(text) FROM PUBLIC")
                conn.execute(f"GRANT EXECUTE ON FUNCTION public.{fn}(text) TO {AUTH_USER}, {AUTH_USER2}")
            conn.execute("CREATE SCHEMA IF NOT EXISTS evil")
            conn.execute("GRANT USAGE ON SCHEMA evil TO PUBLIC")
            conn.execute(EVIL_FN)
    with pg.connect() as conn:
        conn.execute("SELECT pg_reload_conf()")
    pg.aq_ready = True


def calls(pg, seq="aq_calls", db="testdb"):
    with pg.connect(db) as conn:
        value, called = conn.execute(f"SELECT last_value, is_called FROM public.{seq}").fetchone()
    return value if called else 0


def start(make_pooler, pg, settings=None, databases=None):
    base = {"auth_type": "md5", "auth_user": AUTH_USER, "auth_query": QUERY, "workers": 1}
    base.update(settings or {})
    return make_pooler(pg, settings=base, databases=databases,
                       userlist={AUTH_USER: AUTH_PW, AUTH_USER2: AUTH_PW2, "trust_user": "trust-secret"})


def login(p, user, pw, db="testdb", **kw):
    with psycopg.connect(**p.conninfo(db, user, password=pw, **kw), autocommit=True) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


def refused(p, user, pw, pattern, db="testdb", **kw):
    with pytest.raises(psycopg.OperationalError, match=pattern):
        login(p, user, pw, db, **kw)


BAD_PASSWORD = "password authentication failed|SASL authentication failed"


@pytest.fixture
def aq_pg(pg):
    setup_roles(pg)
    return pg


def test_login_with_md5_and_scram_secrets(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg)
    # md5 asks SCRAM of a SCRAM secret; the server login passes the SCRAM
    # keys through, and uses the md5 hash for an md5 role.
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    assert login(p, "aq_md5", "aq-md5-pw") == "aq_md5"
    refused(p, "aq_scram", "wrong", BAD_PASSWORD)
    refused(p, "aq_md5", "wrong", BAD_PASSWORD)
    q = start(make_pooler, aq_pg, {"auth_type": "scram-sha-256"})
    assert login(q, "aq_scram", "aq-scram-pw") == "aq_scram"
    refused(q, "aq_scram", "wrong", BAD_PASSWORD)
    # A user in auth_file never goes through auth_query.
    before = calls(aq_pg)
    assert login(q, AUTH_USER, AUTH_PW) == AUTH_USER
    assert calls(aq_pg) == before


def test_default_runs_the_query_at_every_login(aq_pg, make_pooler):
    """As PgBouncer: without auth_query_cache_ttl every login asks the
    server, so a password change counts at once."""
    p = start(make_pooler, aq_pg)
    before = calls(aq_pg)
    for _ in range(3):
        assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    assert calls(aq_pg) == before + 3

    def set_password(pw):
        with aq_pg.connect() as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(f"ALTER ROLE aq_scram PASSWORD '{pw}'")
    set_password("aq-scram-new")
    try:
        refused(p, "aq_scram", "aq-scram-pw", BAD_PASSWORD)
        assert login(p, "aq_scram", "aq-scram-new") == "aq_scram"
    finally:
        set_password("aq-scram-pw")
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_cache_hit_and_reload_drop(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg, {"auth_query_cache_ttl": 60})
    before = calls(aq_pg)
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    assert calls(aq_pg) == before + 1
    for _ in range(3):
        assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    refused(p, "aq_scram", "wrong", BAD_PASSWORD)
    assert calls(aq_pg) == before + 1, "cache hits must not run the query"
    mark = p.reload()
    p.wait_for_log(r"auth_query cache cleared on reload: entries=1", since=mark)
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    assert calls(aq_pg) == before + 2


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_cache_ttl_expiry_and_disabled(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg, {"auth_query_cache_ttl": 1})
    before = calls(aq_pg)
    assert login(p, "aq_md5", "aq-md5-pw") == "aq_md5"
    assert login(p, "aq_md5", "aq-md5-pw") == "aq_md5"
    started = time.monotonic()
    assert calls(aq_pg) == before + 1
    # Log in until the answer has expired and the query ran again.
    util.wait_until(lambda: login(p, "aq_md5", "aq-md5-pw") and calls(aq_pg) == before + 2,
                    10, interval=0.1, what="a new auth_query after the TTL")
    assert time.monotonic() - started >= 0.5
    q = start(make_pooler, aq_pg, {"auth_query_cache_ttl": 0})
    before = calls(aq_pg)
    for _ in range(3):
        assert login(q, "aq_md5", "aq-md5-pw") == "aq_md5"
    assert calls(aq_pg) == before + 3


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_burst_of_logins_shares_one_query(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg,
              {"auth_query": "SELECT usename, passwd FROM public.aq_lookup_slow($1)"})
    before = calls(aq_pg, "aq_calls_slow")
    with concurrent.futures.ThreadPoolExecutor(8) as ex:
        users = list(ex.map(lambda _: login(p, "aq_scram", "aq-scram-pw"), range(8)))
    assert users == ["aq_scram"] * 8
    assert calls(aq_pg, "aq_calls_slow") == before + 1


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_unknown_user_and_null_password(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg, {"auth_query_cache_ttl": 60})
    before = calls(aq_pg)
    # aq_lookup answers a row with a NULL user name for a missing role.
    refused(p, "aq_nobody", "x", "no such user")
    refused(p, "aq_nobody", "x", "no such user")
    assert calls(aq_pg) == before + 1, "'no such user' is cached too"
    p.wait_for_log(r"login failed: db=testdb")
    # NULL password: no password the client offers is accepted...
    refused(p, "aq_nopw", "anything", BAD_PASSWORD)
    # ... but trust lets the user in.
    q = start(make_pooler, aq_pg, {"auth_type": "trust"})
    assert login(q, "aq_nopw", None) == "aq_nopw"


def test_per_database_auth_user_query_and_dbname(aq_pg, make_pooler):
    dbs = {
        "testdb": aq_pg.dsn("testdb"),
        "otherdb": aq_pg.dsn("otherdb"),
        "override": aq_pg.dsn("testdb") + f" auth_user={AUTH_USER2} auth_query='{QUERY2}'",
        "viaother": aq_pg.dsn("testdb") + " auth_dbname=otherdb",
    }
    p = start(make_pooler, aq_pg, databases=dbs)
    g, g2, o = calls(aq_pg), calls(aq_pg, "aq_calls2"), calls(aq_pg, db="otherdb")
    assert login(p, "aq_scram", "aq-scram-pw", "override") == "aq_scram"
    assert (calls(aq_pg), calls(aq_pg, "aq_calls2")) == (g, g2 + 1)
    assert login(p, "aq_scram", "aq-scram-pw", "viaother") == "aq_scram"
    assert calls(aq_pg, db="otherdb") == o + 1 and calls(aq_pg) == g
    assert login(p, "aq_scram", "aq-scram-pw", "testdb") == "aq_scram"
    assert calls(aq_pg) == g + 1
    with p.admin(password="trust-secret") as admin:
        admin.execute("DISABLE otherdb")
    refused(p, "aq_md5", "aq-md5-pw", 'authentication database "otherdb" is disabled', "viaother")
    q = start(make_pooler, aq_pg, {"auth_dbname": "nosuchdb"})
    refused(q, "aq_scram", "aq-scram-pw", "bouncer config error")
    q.wait_for_log(r'authentication database "nosuchdb" is not configured')
    # auth_dbname = pgbouncer in [pgbouncer]: PgBouncer 1.25 refuses the
    # file, and pgcrew (no start, a failed RELOAD); 1.18 failed each login.
    r = make_pooler(aq_pg, settings={"auth_type": "md5", "auth_user": AUTH_USER,
                                     "auth_query": QUERY, "workers": 1,
                                     "auth_dbname": "pgbouncer"},
                    userlist={AUTH_USER: AUTH_PW}, start=False)
    with pytest.raises(AssertionError,
                       match='cannot use the reserved "pgbouncer" database as an auth_dbname'):
        r.start()
    r.proc = None


# The console's logins (issue 43, item 4), as PgBouncer 1.25 orders them:
# the user is looked up first (auth_file, else auth_query in the global
# auth_dbname; without one the console would be its own auth database:
# "bouncer config error"); a user found but in neither admin_users nor
# stats_users is told "not allowed" whatever the password; a user not
# found fails authentication as anywhere else.
CONSOLE_LOGINS = [
    # listed, in auth_file, auth_user, auth_dbname, password ok -> outcome
    (True, False, True, False, True, "bouncer config error"),
    (True, False, True, False, False, "bouncer config error"),
    (False, False, True, False, True, "bouncer config error"),
    (True, False, False, False, True, "authentication failed"),
    (False, False, False, False, True, "authentication failed"),
    (False, False, False, False, False, "authentication failed"),
    (False, True, False, False, True, "not allowed"),
    (False, True, False, False, False, "not allowed"),
    (False, False, True, True, True, "not allowed"),
    (False, False, True, True, False, "not allowed"),
    (True, False, True, True, False, "authentication failed"),
    (True, False, True, True, True, None),
    (True, True, False, False, True, None),
]


@pytest.mark.parametrize("pooler_workers", [1, 4], indirect=True)
@pytest.mark.parametrize("listed,in_file,auth_user,auth_db,good_pw,outcome", CONSOLE_LOGINS)
def test_console_login_order(aq_pg, make_pooler, pooler_workers, listed, in_file, auth_user,
                             auth_db, good_pw, outcome):
    user, pw = (AUTH_USER2, AUTH_PW2) if in_file else ("aq_scram", "aq-scram-pw")
    settings = {"auth_type": "scram-sha-256"}
    if listed:
        settings["admin_users"] = user
    if auth_user:
        settings.update(auth_user=AUTH_USER, auth_query=QUERY)
    if auth_db:
        settings["auth_dbname"] = "testdb"
    p = make_pooler(aq_pg, settings=settings, databases={"testdb": aq_pg.dsn("testdb")},
                    userlist={AUTH_USER: AUTH_PW, AUTH_USER2: AUTH_PW2})
    if outcome is None:
        with psycopg.connect(**p.conninfo("pgbouncer", user, password=pw), autocommit=True) as conn:
            assert conn.execute("SHOW VERSION").fetchone()
        return
    refused(p, user, pw if good_pw else "wrong", outcome, "pgbouncer")
    if outcome == "bouncer config error":
        p.wait_for_log(r'cannot use the reserved "pgbouncer" database as an auth_dbname')


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_startup_search_path_never_reaches_auth_query(aq_pg, make_pooler):
    evil_path = "-c search_path=evil"
    # The attack works against the query itself: with that search_path it
    # reads the attacker's function, so the test below can fail.
    with aq_pg.connect("testdb", options=evil_path) as conn:
        row = conn.execute(QUERY_UNQUALIFIED.replace("$1", "'aq_victim'")).fetchone()
    assert row[1].startswith("md5"), row
    p = start(make_pooler, aq_pg, {
        "auth_query": QUERY_UNQUALIFIED, "auth_query_cache_ttl": 0,
        "track_extra_parameters": "search_path", "pool_mode": "transaction",
        "default_pool_size": 1})
    refused(p, "aq_victim", EVIL_PW, BAD_PASSWORD, options=evil_path)
    assert login(p, "aq_victim", "victim-pw", options=evil_path) == "aq_victim"
    # auth_user's own client leaves that search_path on the pool's only
    # server; the next lookup still reads the real secret.
    with psycopg.connect(**p.conninfo("testdb", AUTH_USER, password=AUTH_PW, options=evil_path),
                         autocommit=True) as conn:
        assert conn.execute("SHOW search_path").fetchone()[0] == "evil"
    refused(p, "aq_victim", EVIL_PW, BAD_PASSWORD)
    refused(p, "aq_victim", EVIL_PW, BAD_PASSWORD, options=evil_path)
    assert login(p, "aq_victim", "victim-pw") == "aq_victim"


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_several_workers_each_query_once(aq_pg, make_pooler):
    # Each worker keeps its own cache; the auth pool's server slots come from
    # the supervisor's ledger like any pool's.
    p = start(make_pooler, aq_pg, {"workers": 2, "default_pool_size": 1,
                                   "auth_query_cache_ttl": 60})
    before = calls(aq_pg)
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        users = list(ex.map(lambda i: login(p, "aq_scram", "aq-scram-pw"), range(12)))
    assert users == ["aq_scram"] * 12
    assert 1 <= calls(aq_pg) - before <= 2


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_failing_queries(aq_pg, make_pooler):
    p = start(make_pooler, aq_pg, {"auth_query": "SELECT usename FROM public.aq_lookup($1)"})
    refused(p, "aq_scram", "aq-scram-pw", "bouncer config error")
    p.wait_for_log(r"closing because: expected 2 columns from auth_query, not 1")
    q = start(make_pooler, aq_pg, {"auth_query": "SELECT * FROM public.no_such_fn($1)"})
    refused(q, "aq_scram", "aq-scram-pw", "bouncer config error")
    q.wait_for_log(r"auth_query failed: sqlstate=42883")
    q.wait_for_log(r"closing because: error response from auth_query")
    # Failures are not cached: a fixed query (after RELOAD) answers.
    q.settings["auth_query"] = QUERY
    q.write_config()
    mark = q.reload()
    q.wait_for_log(r"got SIGHUP|RELOAD", since=mark)
    util.wait_until(lambda: _logs_in(q), 5, what="login after the query was fixed")


def _logs_in(p):
    try:
        return login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    except psycopg.OperationalError:
        return False


@pytest.mark.pgcrew_only   # pgcrew's cache, texts or behaviour beyond PgBouncer
def test_client_leaving_mid_lookup(aq_pg, make_pooler):
    import wire
    p = start(make_pooler, aq_pg,
              {"auth_query": "SELECT usename, passwd FROM public.aq_lookup_slow($1)"})
    # A first lookup leaves auth_user's server idle in the pool; the next
    # one starts on it at once.
    assert login(p, "aq_md5", "aq-md5-pw") == "aq_md5"
    with wire.RawConn(p.port) as rc:
        rc.send(wire.startup_packet("aq_scram", "testdb"))
    # The only waiter left: the query is not left running on a server that
    # would go back to the pool.
    p.wait_for_log(r"closing because: client disconnect while server was not ready")
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    p.assert_alive()


@pytest.mark.pgcrew_only
def test_hba_still_decides_for_auth_query_users(aq_pg, make_pooler):
    """auth_type = hba with auth_query: a user known only through auth_query
    is still held to the HBA rules — a database or user the HBA rejects
    stays closed, and no lookup runs for it."""
    hba = ("host otherdb all 127.0.0.1/32 reject\n"
           "host all aq_md5 127.0.0.1/32 reject\n"
           "host all all 127.0.0.1/32 scram-sha-256\n")
    p = make_pooler(aq_pg, settings={"auth_type": "hba", "auth_user": AUTH_USER,
                                     "auth_query": QUERY, "workers": 1},
                    userlist={AUTH_USER: AUTH_PW}, hba=hba)
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    before = calls(aq_pg, db="otherdb"), calls(aq_pg)
    refused(p, "aq_scram", "aq-scram-pw", "rejects connection", db="otherdb")
    refused(p, "aq_md5", "aq-md5-pw", "rejects connection")
    assert (calls(aq_pg, db="otherdb"), calls(aq_pg)) == before


@pytest.mark.pgcrew_only   # auth_dbname is PgBouncer 1.25's (1.18 refuses the key)
def test_console_login_through_auth_query(aq_pg, make_pooler):
    """As PgBouncer: a console user that auth_file does not list is looked
    up by auth_query (the global auth_user, in the global auth_dbname)."""
    p = start(make_pooler, aq_pg, {"auth_dbname": "testdb", "admin_users": "aq_scram",
                                   "stats_users": "aq_md5", "workers": 2})
    before = calls(aq_pg)
    with psycopg.connect(**p.conninfo("pgbouncer", "aq_scram", password="aq-scram-pw"),
                         autocommit=True) as admin:
        assert admin.execute("SHOW VERSION").fetchone()
        admin.execute("RELOAD")                    # an admin
    with psycopg.connect(**p.conninfo("pgbouncer", "aq_md5", password="aq-md5-pw"),
                         autocommit=True) as stats:
        assert stats.execute("SHOW STATS").fetchall() is not None
        with pytest.raises(psycopg.Error, match="admin access needed"):
            stats.execute("RELOAD")                # stats_users only
    assert calls(aq_pg) >= before + 2
    refused(p, "aq_scram", "wrong", BAD_PASSWORD, db="pgbouncer")


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stops at 2048 bytes
@pytest.mark.parametrize("workers", [1, 4], ids=["w1", "w4"])
def test_longest_secret_from_auth_query(aq_pg, make_pooler, workers):
    """A 65,535-byte password returned by auth_query is kept whole: the
    client's PasswordMessage of that size logs in (twice: the second from the
    cache), the same less its last byte does not."""
    pw = "a" * 65534 + "b"
    query = "SELECT usename, repeat('a', 65534) || 'b' FROM public.aq_lookup($1)"
    p = start(make_pooler, aq_pg, settings={"auth_type": "plain", "auth_query": query,
                                            "auth_query_cache_ttl": 60, "workers": workers})
    assert login(p, "aq_nopw", pw) == "aq_nopw"      # trust on the server side
    assert login(p, "aq_nopw", pw) == "aq_nopw"
    refused(p, "aq_nopw", pw[:-1], BAD_PASSWORD)
