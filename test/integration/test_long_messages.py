"""Messages from PostgreSQL far larger than the I/O buffer (1 MB errors,
notices, DataRows and ParameterStatus) on every path where the pooler looks
inside them: relayed to a linked client (session and transaction pooling,
prepared statements tracked or not), inside the pooler's own queries
(connect_query, server_reset_query), at server login, and in auth_query
answers. Each reaches the client as PostgreSQL sent it, and the server
connection stays (issue 29: a long error closed the server with "message
too large for the I/O buffer" and the client with "server conn crashed?").

libpq refuses a ParameterStatus above 30,000 bytes ("lost synchronization
with server"), directly as through a pooler, so those tests speak the
protocol by hand."""

import re

import psycopg
import pytest

import util
import wire
from test_auth_query import AUTH_PW, AUTH_USER, login, refused, setup_roles
from test_prepared import SYNC, bind, exchange, execute, parse, rows

WORKERS_MATRIX = (1, 4)

BIG = 1_000_000
BAD_INT = "SELECT %s::text::int"
# PostgreSQL's spelling of a search_path (", " between names): about 1.2 MB.
LONG_PATH = ", ".join(f"s{i}" for i in range(150_000))

# (pool_mode, max_prepared_statements): PgBouncer 1.18 tracks no prepared
# statements, so the cases with tracking are pgcrew's alone.
MODES = [
    pytest.param(("session", 0), id="sess-ps0"),
    pytest.param(("session", 20), id="sess-ps20", marks=pytest.mark.pgcrew_only),
    pytest.param(("transaction", 0), id="txn-ps0"),
    pytest.param(("transaction", 20), id="txn-ps20", marks=pytest.mark.pgcrew_only),
]

NOTICE_FN = """
CREATE OR REPLACE FUNCTION public.longmsg_notice(n int) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE '%', repeat('n', n);
    RETURN n;
END $$"""

# connect_query: a 1 MB notice, a 1 MB row and (PostgreSQL 18 reports
# search_path) a 1.2 MB ParameterStatus, all inside the pooler's query.
CONNECT_FN = """
CREATE OR REPLACE FUNCTION public.longmsg_connect() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RAISE NOTICE '%', repeat('n', 1000000);
    RETURN set_config('search_path',
                      (SELECT string_agg('s' || i, ', ') FROM generate_series(0, 149999) i), false);
END $$"""

# An auth_query lookup that says 1 MB before answering.
LOOKUP_FN = """
CREATE OR REPLACE FUNCTION public.longmsg_lookup(u text, OUT usename text, OUT passwd text)
RETURNS record LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog AS $$
BEGIN
    RAISE NOTICE '%', repeat('n', 1000000);
    IF u = 'aq_md5' THEN
        RAISE EXCEPTION '%', repeat('e', 1000000);
    END IF;
    SELECT rolname::text, rolpassword::text INTO usename, passwd
      FROM pg_catalog.pg_authid WHERE rolname = u AND rolcanlogin;
END $$"""

# Login event trigger (PostgreSQL 17+): a 1 MB notice at every login, and a
# 1 MB error for md5_user.
LOGIN_DB = "longmsg_login"
LOGIN_TRIGGER = """
CREATE FUNCTION public.longmsg_on_login() RETURNS event_trigger LANGUAGE plpgsql AS $$
BEGIN
    IF session_user = 'md5_user' THEN
        RAISE EXCEPTION '%', repeat('e', 1000000);
    END IF;
    RAISE NOTICE '%', repeat('n', 1000000);
END $$;
CREATE EVENT TRIGGER longmsg_login ON login EXECUTE FUNCTION public.longmsg_on_login();
ALTER EVENT TRIGGER longmsg_login ENABLE ALWAYS"""


def start(pg, make_pooler, mode, databases=None, **extra):
    """One server for everything (default_pool_size = 1), so "the same
    backend" is meaningful in transaction pooling too. PgBouncer 1.18 does
    not know max_prepared_statements (and refuses the file): without it,
    it tracks nothing, as with 0."""
    pool_mode, ps = mode
    s = {"pool_mode": pool_mode, "default_pool_size": 1}
    p = make_pooler(pg, settings=s, databases=databases, start=False)
    if p.kind != "pgbouncer":
        p.settings["max_prepared_statements"] = ps
    p.settings.update(extra)
    return p.start()


def create(pg, *sql, db="testdb"):
    with pg.connect(db) as conn:
        for text in sql:
            conn.execute(text)


def backend_pid(conn):
    return conn.execute("SELECT pg_backend_pid()").fetchone()[0]


def assert_server_kept(p, pid_now, pid_before, servers=1):
    """The same backend still serves; the pooler closed no server and never
    found a message too large."""
    assert pid_now == pid_before
    with p.admin() as adm:
        assert len(adm.execute("SHOW SERVERS").fetchall()) == servers
    log = p.log_text()
    assert "too large" not in log, p.log_tail()
    assert not re.search(r"S-\S+ .*closing because", log), p.log_tail()


def direct_error(pg, sql, args):
    """What PostgreSQL itself answers (its diag), without a pooler."""
    with pg.connect("testdb") as conn:
        with pytest.raises(psycopg.Error) as exc:
            conn.execute(sql, args)
    return exc.value.diag


def statuses(msgs, name):
    """Payloads of the ParameterStatus messages for `name`."""
    prefix = name.encode() + b"\0"
    return [p for k, p in msgs if k == b"S" and p.startswith(prefix)]


def raw_pid(c):
    return int(rows(exchange(c, wire.query_message("SELECT pg_backend_pid()")))[0])


# -- relayed to a linked client ------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
def test_long_error(pg, make_pooler, mode):
    """Issue 29: PostgreSQL quotes the bad input, so the error is 1,000,041
    characters; prepared (and bound on the server before), unprepared, and
    inside a transaction block, it reaches the client whole."""
    payload = "x" * BIG
    want = direct_error(pg, BAD_INT, (payload,))
    assert want.sqlstate == "22P02" and len(want.message_primary) == BIG + 41
    p = start(pg, make_pooler, mode)
    conn = p.connect()
    pid = backend_pid(conn)
    assert conn.execute("SELECT %s::text::int", ("7",), prepare=True).fetchone()[0] == 7
    for prepare in (True, True, False):
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as exc:
            conn.execute(BAD_INT, (payload,), prepare=prepare)
        assert exc.value.diag.message_primary == want.message_primary
    conn.execute("BEGIN")
    with pytest.raises(psycopg.errors.InvalidTextRepresentation) as exc:
        conn.execute(BAD_INT, (payload,), prepare=True)
    assert exc.value.diag.message_primary == want.message_primary
    conn.execute("ROLLBACK")
    assert conn.execute(BAD_INT, ("42",), prepare=True).fetchone()[0] == 42
    assert_server_kept(p, backend_pid(conn), pid)


@pytest.mark.parametrize("mode", MODES)
def test_long_notice(pg15, make_pooler, mode):
    """RAISE NOTICE of 1 MB in a DO block and in a function run through a
    prepared statement."""
    create(pg15, NOTICE_FN)
    p = start(pg15, make_pooler, mode)
    conn = p.connect()
    notices = []
    conn.add_notice_handler(lambda d: notices.append(d.message_primary))
    pid = backend_pid(conn)
    conn.execute(f"DO $$BEGIN RAISE NOTICE '%', repeat('n', {BIG}); END$$")
    for prepare in (True, True, False):
        assert conn.execute("SELECT public.longmsg_notice(%s)", (BIG,),
                            prepare=prepare).fetchone()[0] == BIG
    assert len(notices) == 4 and all(n == "n" * BIG for n in notices), [len(n) for n in notices]
    assert_server_kept(p, backend_pid(conn), pid)


@pytest.mark.parametrize("mode", MODES)
def test_long_datarow(pg15, make_pooler, mode):
    """Three 1 MB rows per result, prepared and not."""
    p = start(pg15, make_pooler, mode)
    conn = p.connect()
    pid = backend_pid(conn)
    sql = "SELECT repeat(chr(97 + i), %s) FROM generate_series(0, 2) i"
    for prepare in (True, True, False):
        got = [r[0] for r in conn.execute(sql, (BIG,), prepare=prepare).fetchall()]
        assert got == ["a" * BIG, "b" * BIG, "c" * BIG]
    assert_server_kept(p, backend_pid(conn), pid)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stalls: it waits for it whole in a pkt_buf too small
@pytest.mark.parametrize("mode", MODES)
def test_long_parameter_status(pg18, make_pooler, mode):
    """PostgreSQL 18 reports search_path: SET of a 1.2 MB list sends a
    ParameterStatus of that size, which the pooler reads to track
    parameters. By simple query and by a named prepared statement."""
    with wire.RawConn(pg18.port, timeout=20) as direct:
        direct.login_trust("trust_user", "testdb")
        want = statuses(exchange(direct, wire.query_message(f"SET search_path = {LONG_PATH}")),
                        "search_path")
    assert len(want) == 1 and len(want[0]) > BIG
    p = start(pg18, make_pooler, mode)
    with wire.RawConn(p.port, timeout=20) as c:
        c.login_trust("trust_user", "testdb")
        pid = raw_pid(c)
        assert statuses(exchange(c, wire.query_message(f"SET search_path = {LONG_PATH}")),
                        "search_path") == want
        assert rows(exchange(c, wire.query_message("SHOW search_path"))) == [LONG_PATH]
        assert len(statuses(exchange(c, wire.query_message("RESET search_path")),
                            "search_path")) == 1
        msgs = exchange(c, parse("setpath", f"SET search_path = {LONG_PATH}") + bind("setpath")
                        + execute() + SYNC)
        assert statuses(msgs, "search_path") == want, [k for k, _ in msgs]
        exchange(c, wire.query_message("RESET search_path"))
        assert_server_kept(p, raw_pid(c), pid)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 has no target_session_attrs
@pytest.mark.parametrize("mode", MODES[2:])
def test_read_write_db_error(pg15, make_pooler, mode):
    """target_session_attrs=read-write reads the SQLSTATE of every error
    (25006 retires the server): from the first bytes of a 1 MB one, which
    then passes whole; a 1 MB 25006 still retires its server."""
    dbs = {"testdb": pg15.dsn("testdb", target_session_attrs="read-write")}
    p = start(pg15, make_pooler, mode, databases=dbs)
    conn = p.connect()
    pid = backend_pid(conn)
    payload = "x" * BIG
    want = direct_error(pg15, BAD_INT, (payload,))
    with pytest.raises(psycopg.errors.InvalidTextRepresentation) as exc:
        conn.execute(BAD_INT, (payload,), prepare=True)
    assert exc.value.diag.message_primary == want.message_primary
    assert_server_kept(p, backend_pid(conn), pid)
    with pytest.raises(psycopg.errors.ReadOnlySqlTransaction) as exc:
        conn.execute(f"DO $$BEGIN RAISE EXCEPTION USING ERRCODE = '25006', "
                     f"MESSAGE = repeat('r', {BIG}); END$$")
    assert exc.value.diag.message_primary == "r" * BIG
    p.wait_for_log(r"closing because: server is read-only")
    assert backend_pid(conn) != pid


# -- the pooler's own queries ----------------------------------------------------

@pytest.mark.pgcrew_only   # PgBouncer 1.18 stalls: it waits for it whole in a pkt_buf too small
@pytest.mark.parametrize("mode", MODES)
def test_connect_query(pg, make_pooler, mode):
    """connect_query answered with a 1 MB notice and a 1 MB row, and on
    PostgreSQL 18 a 1.2 MB ParameterStatus: swallowed by the pooler, and
    the server serves."""
    create(pg, CONNECT_FN)
    dbs = {"testdb": pg.dsn("testdb", connect_query="'SELECT public.longmsg_connect()'")}
    p = start(pg, make_pooler, mode, databases=dbs)
    conn = p.connect()
    pid = backend_pid(conn)
    assert conn.execute("SELECT current_setting('search_path')").fetchone()[0] == LONG_PATH
    assert_server_kept(p, backend_pid(conn), pid)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stalls: it waits for it whole in a pkt_buf too small
@pytest.mark.parametrize("mode", MODES[:2])
def test_reset_query_long_error(pg15, make_pooler, mode):
    """server_reset_query failing with a 1 MB error after a session client
    leaves: logged, and the server serves the next client."""
    p = start(pg15, make_pooler, mode,
              server_reset_query=f"SELECT repeat('x', {BIG})::int")
    with p.connect() as conn:
        pid = backend_pid(conn)
    util.wait_until(lambda: "invalid input syntax" in p.log_text(), 10,
                    what=f"the reset query's error in the log\n{p.log_tail()}")
    with p.connect() as conn:
        assert_server_kept(p, backend_pid(conn), pid)


# -- server login ------------------------------------------------------------------

@pytest.fixture(scope="module")
def login_db(pg18):
    """A database where trust_user's sessions start with a 1.2 MB
    search_path, whose login trigger says 1 MB to everyone and fails
    md5_user's login with 1 MB."""
    with pg18.connect() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {LOGIN_DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {LOGIN_DB}")
        conn.execute(f"ALTER ROLE trust_user IN DATABASE {LOGIN_DB} SET search_path = {LONG_PATH}")
    create(pg18, LOGIN_TRIGGER, db=LOGIN_DB)
    yield LOGIN_DB
    with pg18.connect() as conn:
        conn.execute(f"DROP DATABASE {LOGIN_DB} WITH (FORCE)")    # and its settings


def raw_login(port, db):
    """trust_user's login messages and backend pid, by hand (libpq cannot
    take the ParameterStatus)."""
    with wire.RawConn(port, timeout=20) as c:
        msgs = c.login_trust("trust_user", db, timeout=20)
        return msgs, raw_pid(c)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stalls: it waits for it whole in a pkt_buf too small
@pytest.mark.parametrize("mode", MODES)
def test_login_long_messages(pg18, login_db, make_pooler, pooler_workers, mode):
    """A server login that brings a 1.2 MB ParameterStatus and a 1 MB
    notice: each client's welcome carries the ParameterStatus as PostgreSQL
    sent it, and the server is kept. With several workers a server whose
    parameters exceed an IPC message (64 KiB) cannot move to another worker:
    that worker logs in a server of its own (the old one closes), as for a
    TLS server."""
    msgs, _ = raw_login(pg18.port, login_db)
    want = statuses(msgs, "search_path")
    assert len(want) == 1 and len(want[0]) > BIG
    p = start(pg18, make_pooler, mode, databases={login_db: pg18.dsn(login_db)})
    pids = set()
    for _ in range(3):
        msgs, pid = raw_login(p.port, login_db)
        assert statuses(msgs, "search_path") == want
        pids.add(pid)
    assert "too large" not in p.log_text(), p.log_tail()
    if p.kind == "pgbouncer" or pooler_workers == 1:
        assert len(pids) == 1
        assert_server_kept(p, pid, pid)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 stalls: it waits for it whole in a pkt_buf too small
def test_login_long_error(pg18, login_db, make_pooler):
    """A server login failing with a 1 MB error: the client is told (the
    start of) the server's message; other users' logins to the database go
    on."""
    with pytest.raises(psycopg.OperationalError, match="FATAL:  eeeeeeeeee"):
        psycopg.connect(host=pg18.host, port=pg18.port, dbname=login_db, user="md5_user",
                        password="md5-secret", connect_timeout=10).close()
    p = make_pooler(pg18, databases={login_db: pg18.dsn(login_db)})
    with pytest.raises(psycopg.OperationalError, match="eeeeeeeeee"):
        p.connect(login_db, user="md5_user", password="md5-secret")
    assert "too large" not in p.log_text(), p.log_tail()
    raw_login(p.port, login_db)


# -- auth_query ---------------------------------------------------------------------

@pytest.fixture
def aq_pg15(pg15):
    setup_roles(pg15)
    create(pg15, LOOKUP_FN,
           "REVOKE ALL ON FUNCTION public.longmsg_lookup(text) FROM PUBLIC",
           f"GRANT EXECUTE ON FUNCTION public.longmsg_lookup(text) TO {AUTH_USER}")
    return pg15


def test_auth_query_long_notice_and_error(aq_pg15, make_pooler):
    """A lookup function that raises a 1 MB notice before answering: the
    login goes through. One that fails with a 1 MB error: refused as for
    any failing auth_query."""
    p = make_pooler(aq_pg15, settings={
        "auth_type": "md5", "auth_user": AUTH_USER,
        "auth_query": "SELECT usename, passwd FROM public.longmsg_lookup($1)"},
        userlist={AUTH_USER: AUTH_PW})
    for _ in range(2):
        assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
    refused(p, "aq_md5", "aq-md5-pw", "bouncer config error")
    assert "too large" not in p.log_text(), p.log_tail()
    assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
