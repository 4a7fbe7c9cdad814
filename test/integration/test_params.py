"""Parameter tracking in transaction mode: clients sharing one server each
keep their own application_name, TimeZone and DateStyle across server
switches, whether set at startup or with SET."""

import psycopg
import pytest


def settings_of(conn):
    return conn.execute("SELECT current_setting('application_name'),"
                        " current_setting('TimeZone'), current_setting('DateStyle')").fetchone()


def test_clients_keep_their_own_parameters(pg, make_pooler):
    p = make_pooler(pg, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                  "workers": 1})
    a = p.connect(application_name="client_a")
    b = p.connect(application_name="client_b")
    a.execute("SET TimeZone = 'Asia/Tokyo'")
    a.execute("SET DateStyle = 'SQL, DMY'")
    b.execute("SET TimeZone = 'America/New_York'")
    b.execute("SET DateStyle = 'German, DMY'")
    expect_a = ("client_a", "Asia/Tokyo", "SQL, DMY")
    expect_b = ("client_b", "America/New_York", "German, DMY")
    pids = set()
    for _ in range(4):
        assert settings_of(a) == expect_a
        assert settings_of(b) == expect_b
        assert a.execute("SHOW timezone").fetchone() == ("Asia/Tokyo",)
        assert b.execute("SHOW timezone").fetchone() == ("America/New_York",)
        for conn in (a, b):
            pids.add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert len(pids) == 1, "the clients did not share the single server"
    # The client-side view (ParameterStatus relayed by the pooler) agrees.
    assert a.info.parameter_status("TimeZone") == "Asia/Tokyo"
    assert b.info.parameter_status("TimeZone") == "America/New_York"
    assert b.info.parameter_status("application_name") == "client_b"


def test_new_server_gets_client_parameters(pg15, make_pooler):
    """After the server is replaced (server_lifetime), the client's settings
    are applied to the new server."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "server_lifetime": 1, "workers": 1})
    a = p.connect(application_name="survivor")
    a.execute("SET TimeZone = 'Europe/Paris'")
    first = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    p.wait_for_log(r"closing because: server lifetime over", timeout=5)
    second = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert first != second
    assert a.execute("SHOW timezone").fetchone() == ("Europe/Paris",)
    assert a.execute("SHOW application_name").fetchone() == ("survivor",)


def test_startup_parameters_are_tracked(pg15, make_pooler):
    """Parameters sent in the startup packet (libpq options via env) follow
    the client too."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "workers": 1})
    a = psycopg.connect(autocommit=True, **p.conninfo(application_name="start_a",
                                                      client_encoding="LATIN1"))
    b = psycopg.connect(autocommit=True, **p.conninfo(application_name="start_b"))
    try:
        for _ in range(3):
            assert a.execute("SHOW client_encoding").fetchone() == ("LATIN1",)
            assert b.execute("SHOW client_encoding").fetchone() == ("UTF8",)
            assert a.execute("SHOW application_name").fetchone() == ("start_a",)
            assert b.execute("SHOW application_name").fetchone() == ("start_b",)
    finally:
        a.close()
        b.close()


def test_search_path_follows_the_client_on_pg18(pg18, make_pooler):
    """PostgreSQL 18 reports search_path (GUC_REPORT): with it in
    track_extra_parameters, a client's SET search_path follows it to every
    server it gets in transaction mode, on four workers, and never reaches
    another client; a client that set nothing keeps the server default."""
    with pg18.connect("testdb") as conn:
        for schema in ("sp_a", "sp_b"):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute(f"CREATE TABLE {schema}.whoami AS SELECT '{schema}'::text AS s")
            conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO trust_user")
            conn.execute(f"GRANT SELECT ON {schema}.whoami TO trust_user")
    p = make_pooler(pg18, settings={"pool_mode": "transaction", "default_pool_size": 2,
                                    "workers": 4, "track_extra_parameters": "search_path"})
    a, b, plain = p.connect(), p.connect(), p.connect()
    a.execute("SET search_path = sp_a")
    b.execute("SET search_path = sp_b, public")
    pids = {id(conn): set() for conn in (a, b, plain)}
    for _ in range(30):
        assert a.execute("SELECT s FROM whoami").fetchone() == ("sp_a",)
        assert b.execute("SELECT s FROM whoami").fetchone() == ("sp_b",)
        assert plain.execute("SHOW search_path").fetchone() == ('"$user", public',)
        for conn in (a, b, plain):
            pids[id(conn)].add(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
    # Three clients, two servers: some backend served two of them (or a
    # client moved), so the values really were set per transaction.
    sets = list(pids.values())
    shared = any(x & y for i, x in enumerate(sets) for y in sets[i + 1:])
    assert shared or any(len(x) > 1 for x in sets), pids
    # The driver sees the value it set (ParameterStatus), and RESET returns
    # the client to the default everywhere.
    assert a.info.parameter_status("search_path") == "sp_a"
    a.execute("RESET search_path")
    for _ in range(5):
        assert a.execute("SHOW search_path").fetchone() == ('"$user", public',)


# PgBouncer 1.18 refuses `options` altogether; the texts are 1.25's.
@pytest.mark.pgcrew_only
def test_options_texts_as_pgbouncer(pg15, make_pooler):
    """libpq's `options`: tracked -c settings apply, others are refused with
    PgBouncer's texts (operators grep them), and `options` in
    ignore_startup_parameters lets the unknown ones pass unapplied."""
    p = make_pooler(pg15, settings={"workers": 1})
    with p.connect(options="-c timezone=Asia/Tokyo --datestyle=German") as conn:
        assert conn.execute("SHOW timezone").fetchone() == ("Asia/Tokyo",)
    for bad in ("-d 5", "-c timezone", "-c =x"):
        with pytest.raises(psycopg.OperationalError,
                           match="unsupported options startup parameter: only '-c config=val' "
                                 "and '--config=val' are allowed"):
            p.connect(options=bad)
    with pytest.raises(psycopg.OperationalError,
                       match="unsupported startup parameter in options: enable_seqscan"):
        p.connect(options="-c enable_seqscan=off")
    q = make_pooler(pg15, settings={"workers": 1, "ignore_startup_parameters": "options"})
    with q.connect(options="-c enable_seqscan=off") as conn:
        assert conn.execute("SHOW enable_seqscan").fetchone() == ("on",)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 has no `options`; 1.25 logs these lines
@pytest.mark.parametrize("workers", [1, 4], ids=["w1", "w4"])
def test_varcache_lines_at_verbose_2(pg15, make_pooler, workers):
    """At verbose = 2, PgBouncer's lines for parameters the server is told
    (varcache_apply) and for a canonical spelling taken back when the
    server reports no change (varcache_set_canonical: utc -> UTC); the
    second query needs no SET."""
    import re
    p = make_pooler(pg15, settings={"workers": workers, "verbose": 2, "pool_mode": "transaction"},
                    databases={"testdb": pg15.dsn("testdb", timezone="UTC")})
    with p.connect(options="-c DateStyle=sql -c TimeZone=utc") as conn:
        conn.execute("SELECT 1")
        conn.execute("SELECT 2")
        assert conn.execute("SHOW DateStyle").fetchone() == ("SQL, MDY",)
        assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
    log = p.log_text()
    assert len(re.findall(r"varcache_apply: .*SET DateStyle='sql';.*SET TimeZone='utc'", log)) == 1, log
    assert len(re.findall(r"varcache_set_canonical: setting TimeZone to its canonical "
                          r"version utc -> UTC", log)) == 1, log


# PgBouncer 1.25.2 sends the SET and logs both lines (doc/config.md,
# Differences from PgBouncer: startup values the server already has).
@pytest.mark.pgcrew_only
@pytest.mark.parametrize("workers", [1, 4])
def test_equal_spellings_need_no_set(pg15, make_pooler, workers):
    """asyncpg sends client_encoding='utf-8' and DateStyle=ISO, which the
    server reports as UTF8 and "ISO, MDY": the same values, so no SET
    reaches any server over 100 transactions (it used to be one per
    transaction, and could land between asyncpg's Parse and its Bind)."""
    import asyncio
    import asyncpg
    p = make_pooler(pg15, settings={"workers": workers, "pool_mode": "transaction",
                                    "verbose": 1})

    async def run():
        conn = await asyncpg.connect(host=p.host, port=p.port, user="trust_user",
                                     database="testdb")
        try:
            for i in range(100):
                assert await conn.fetchval("SELECT $1::int + 1", i) == i + 1
            return await conn.fetchval("SHOW client_encoding")
        finally:
            await conn.close()
    assert asyncio.run(run()) == "UTF8"
    log = p.log_text()       # verbose = 1 logs every internal query
    assert "SET client_encoding" not in log and "SET DateStyle" not in log, log


# PgBouncer 1.25.2 takes a 300-byte application_name and then loses it (the
# server gets none: SHOW application_name is empty); PostgreSQL itself keeps
# its first 63 bytes, and so does a client through pgcrew.
@pytest.mark.pgcrew_only
@pytest.mark.parametrize("workers", [1, 4], ids=["w1", "w4"])
def test_long_values_as_postgresql_takes_them(pg15, make_pooler, workers):
    """A startup value of any length is kept and sent to each server the
    client gets (it was refused as an "unsupported startup parameter" past
    127 bytes): PostgreSQL then applies its own limit, as without a pooler."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1,
                                    "workers": workers})
    with pg15.connect(application_name="d" * 300) as direct:
        want = direct.execute("SHOW application_name").fetchone()
    assert len(want[0]) == 63
    long_name = "d" * 300
    a = p.connect(application_name=long_name)
    b = p.connect(application_name="b" * 5000)
    for _ in range(3):
        assert a.execute("SHOW application_name").fetchone() == want
        assert b.execute("SHOW application_name").fetchone() == ("b" * 63,)
