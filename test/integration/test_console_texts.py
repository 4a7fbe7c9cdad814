"""The console's grammar, error texts, command tags, notices and log lines,
input by input, exactly as PgBouncer 1.25.2's: each table row is a query
and what PgBouncer answers (checked with PGCREW_BIN=.cache/pgbouncer-1.25.2/
bin/pgbouncer); pgcrew must answer the same with one worker and with four.
An error is always 08P01, severity ERROR, and leaves the connection
usable. The parser's every branch is in test/unit/test_console_parse.c."""

import psycopg
import pytest

from pg_cluster import password

WORKERS_MATRIX = (1, 4)


def syntax(query):
    return ("E", f"invalid command '{query}', use SHOW HELP;")


def err(msg):
    return ("E", msg)


def ok(tag, cols=None, rows=None):
    """CommandComplete tag; cols/rows when given must match too."""
    return ("C", tag, cols, rows)


BAD = err("bad arguments")
ADMIN = err("admin access needed")
SET_FAILED = err("SET failed")
POOLS_COLS = ["database", "user", "cl_active", "cl_waiting", "cl_active_cancel_req",
              "cl_waiting_cancel_req", "sv_active", "sv_active_cancel", "sv_being_canceled",
              "sv_idle", "sv_used", "sv_tested", "sv_login", "maxwait", "maxwait_us",
              "pool_mode", "load_balance_hosts"]
VERSION = ok("SHOW", ["version"])
HELP_DETAIL = ("\n\tSHOW HELP|CONFIG|DATABASES|POOLS|CLIENTS|SERVERS|USERS|VERSION\n"
               "\tSHOW PEERS|PEER_POOLS\n"
               "\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE\n"
               "\tSHOW DNS_HOSTS|DNS_ZONES\n"
               "\tSHOW STATS|STATS_TOTALS|STATS_AVERAGES|TOTALS\n"
               "\tSET key = arg\n"
               "\tRELOAD\n"
               "\tPAUSE [<db>]\n"
               "\tRESUME [<db>]\n"
               "\tDISABLE <db>\n"
               "\tENABLE <db>\n"
               "\tRECONNECT [<db>]\n"
               "\tKILL [<db>]\n"
               "\tKILL_CLIENT <client_id>\n"
               "\tSUSPEND\n"
               "\tSHUTDOWN\n"
               "\tSHUTDOWN WAIT_FOR_SERVERS|WAIT_FOR_CLIENTS\n"
               "\tWAIT_CLOSE [<db>]")

# What does not parse, or names nothing: the query quoted as received.
SYNTAX_ERRORS = [
    "SELECT 1", "select 1;", "", ";", " ; ", "FOO", "FOO BAR", "SHOW FOO", "SHOW", "show;",
    "SHOW STATS x", "SHOW HELP x", "RELOAD x", "SUSPEND x", "SHUTDOWN x", "SHUTDOWN now",
    "SHOW POOLS;;", "PAUSE x y", "SHOW 'pools'", "SHOW pools\x0b", "SHOW-POOLS", "SHOW pööls",
    'show "ver""sion"', '"" version', 'show ""', "show application_name", "SET x",
    "SET verbose", "SET x = ", "SET = 1", "SET default_pool_size = -5",
    "SET default_pool_size = 1.5", "SET log_stats = 1;;", "SET log_stats = 1 2",
    "SET log_stats == 1", "SET log_stats = 'a' 'b'", "SETlog_stats = 1", "SET 'log_stats' = 1",
    "SET log_stats = '1", "KILL_CLIENT -1", "abcdefghijklmno", "SHOW abcdefghijklmnopq",
    "select * from pg_stat_activity", "DISABLE testdb; DROP TABLE x", "KILL_CLIENT 1 OR 1=1",
    "SHOW POOLS; SHOW CLIENTS", "\"SET\" log_stats = 1",
]

# PgBouncer's buffers: command 16 bytes, argument and SET key 64, value
# 256, each counted as typed.
BAD_ARGUMENTS = [
    "abcdefghijklmnop", '"abcdefghijklmn"', "PAUSE " + "x" * 64, 'PAUSE "' + "x" * 62 + '"',
    "SET " + "k" * 64 + " = 1", "SET log_stats = " + "1" * 256,
    "SET log_stats = '" + "1" * 254 + "'", 'SET "" = 1', "SELECT " + "x" * 600,
    "PAUSE " + "x" * 4000,
]

ADMIN_TABLE = [
    # SHOW, SELECT, quoting, blanks, the trailing ';'
    ("SHOW POOLS ;", ok("SHOW", POOLS_COLS)),
    ("SHOW POOLS ; ", ok("SHOW", POOLS_COLS)),
    ("show pools;\n", ok("SHOW", POOLS_COLS)),
    ("SELECT pools", ok("SHOW", POOLS_COLS)),
    ("\nSHOW\r\nVERSION\n;\n", VERSION),
    ("\tshow\tversion", VERSION),
    ('"show" "version"', VERSION),
    ('"SHOW" version', VERSION),
    ('show "VERSION"', VERSION),
    ("select version", VERSION),
    ("SHOW client_encoding", ok("SHOW", ["client_encoding"], [("UTF-8",)])),
    ("SHOW DateStyle", ok("SHOW", ["datestyle"], [("ISO",)])),
    ("show timezone", ok("SHOW", ["timezone"], [("GMT",)])),
    ("select standard_conforming_strings", ok("SHOW", ["standard_conforming_strings"], [("on",)])),
    ("show default_transaction_isolation",
     ok("SHOW", ["default_transaction_isolation"], [("read committed",)])),
    ("SHOW HELP", ok("SHOW")),
    ("show help;", ok("SHOW")),
    # commands and their errors that do not depend on the pooler's state
    ("RECONNECT", ok("RECONNECT")),
    ("RECONNECT testdb", ok("RECONNECT")),
    ("WAIT_CLOSE", ok("WAIT_CLOSE")),
    ("WAIT_CLOSE testdb", ok("WAIT_CLOSE")),
    ("DISABLE testdb", ok("DISABLE")),
    ("ENABLE testdb", ok("ENABLE")),
    ('ENABLE "testdb"', ok("ENABLE")),
    ("RELOAD;", ok("RELOAD")),
    ("RELOAD ;", ok("RELOAD")),
    ("DISABLE", err("a database is required")),
    ("ENABLE", err("a database is required")),
    ("DISABLE nosuchdb", err("no such database: nosuchdb")),
    ("ENABLE x", err("no such database: x")),
    ("ENABLE TESTDB", err("no such database: TESTDB")),
    ("DISABLE pgbouncer", err("cannot disable admin db: pgbouncer")),
    ("ENABLE pgbouncer", err("cannot disable admin db: pgbouncer")),
    ("PAUSE nosuchdb", err("no such database: nosuchdb")),
    ("PAUSE " + "x" * 63, err("no such database: " + "x" * 63)),
    ("PAUSE pgbouncer", err("cannot pause admin db: pgbouncer")),
    ("KILL nosuchdb", err("no such database: nosuchdb")),
    ("KILL pgbouncer", err("cannot kill admin db: pgbouncer")),
    ("RESUME nosuchdb", err("no such database: nosuchdb")),
    ("RECONNECT nosuch", err("no such database: nosuch")),
    ("WAIT_CLOSE nosuch", err("no such database: nosuch")),
    ("KILL_CLIENT 987654321", err("client not found")),
    ("KILL_CLIENT 99999999999999999999999", err("client not found")),
    ("KILL_CLIENT abc", err("invalid client pointer supplied")),
    ("KILL_CLIENT", err("invalid client pointer supplied")),
]

SET_TABLE = [
    # the tag: "SET key=value", key and value as typed, unquoted
    ("SET default_pool_size = '20'", ok("SET default_pool_size=20")),
    ("SET default_pool_size TO 22", ok("SET default_pool_size=22")),
    ("SET default_pool_size to '23';", ok("SET default_pool_size=23")),
    ("SET default_pool_size=24", ok("SET default_pool_size=24")),
    ("SET default_pool_sizeto 25", ok("SET default_pool_size=25")),
    ('set default_pool_size = "26"', ok("SET default_pool_size=26")),
    ('SET "default_pool_size" = 27', ok("SET default_pool_size=27")),
    ("set default_pool_size to'28'", ok("SET default_pool_size=28")),
    ("SET query_timeout = '1.5'", ok("SET query_timeout=1.5")),
    ("SET server_reset_query = 'SELECT ''x'''", ok("SET server_reset_query=SELECT 'x'")),
    ('SET server_reset_query = "DISCARD ALL"', ok("SET server_reset_query=DISCARD ALL")),
    ("SET server_reset_query = 'it''s'", ok("SET server_reset_query=it's")),
    ("SET server_reset_query = ''''", ok("SET server_reset_query='")),
    ("SET server_reset_query = 'a\nb'", ok("SET server_reset_query=a\nb")),
    ("SET server_reset_query = 'DISCARD ALL'", ok("SET server_reset_query=DISCARD ALL")),
    ("SET admin_users = 'trust_user'", ok("SET admin_users=trust_user")),
    ("SET pool_mode = Transaction", ok("SET pool_mode=Transaction")),
    ("SET pool_mode = session", ok("SET pool_mode=session")),
    ("SET log_stats = 0", ok("SET log_stats=0")),
    ("SET log_statsto 1", ok("SET log_stats=1")),
    ("SET log_stats to1", ok("SET log_stats=1")),
    ("SET log_stats=1;", ok("SET log_stats=1")),
    ("SET log_stats=1 ; ", ok("SET log_stats=1")),
    ("SET  log_stats\t=\n1\r", ok("SET log_stats=1")),
    ("  SET log_stats = 1", ok("SET log_stats=1")),
    ("SET log_stats tO 1", ok("SET log_stats=1")),
    ("SET tcp_keepalive = 1", ok("SET tcp_keepalive=1")),
    # restart-only keys: accepted whatever the value, nothing changes
    ("SET listen_port = '1'", ok("SET listen_port=1")),
    ("SET listen_port = 'abc'", ok("SET listen_port=abc")),
    ("SET unix_socket_dir = '/nonexistent'", ok("SET unix_socket_dir=/nonexistent")),
    ("SET pidfile = '/nonexistent/pid'", ok("SET pidfile=/nonexistent/pid")),
    # unknown keys (case counts) and refused values
    ("SET x = 1", SET_FAILED),
    ("SET unknown_key = '1'", SET_FAILED),
    ("SET x = ''", SET_FAILED),
    ("SET Default_Pool_Size = 21", SET_FAILED),
    ("SET application_name = 'psql'", SET_FAILED),
    ("SET extra_float_digits = 3", SET_FAILED),
    ('SET "a""b" = 1', SET_FAILED),
    ('SET a = "b""c"', SET_FAILED),
    ("SET log_stats = 'abc'", SET_FAILED),
    ("SET log_stats = '1 '", SET_FAILED),
    ("SET max_client_conn = 'x'", SET_FAILED),
    ("SET max_client_conn = x", SET_FAILED),
    ("SET server_tls_sslmode = 'bogus'", SET_FAILED),
    ("SET pool_mode = 'bogus'", SET_FAILED),
    ("SET auth_type = 'bogus'", SET_FAILED),
    ("SET query_timeout = '-1'", SET_FAILED),
    ("SET query_timeout = 'abc'", SET_FAILED),
    ("SET max_packet_size = 'abc'", SET_FAILED),
    ("SET tcp_defer_accept = 'abc'", SET_FAILED),
    ("SET max_prepared_statements = 'x'", SET_FAILED),
    # PgBouncer's fake parameters: ignored, with a notice
    ("SET client_encoding = 'UTF8'", ok("SET")),
    ("SET client_encoding TO 'latin1'", ok("SET")),
    ("SET datestyle = 'ISO, MDY'", ok("SET")),
    ("SET DateStyle = x", ok("SET")),
    ("SET timezone = 'UTC'", ok("SET")),
    ("SET standard_conforming_strings = on", ok("SET")),
    ("SET default_transaction_isolation = 'read committed'", ok("SET")),
]

# A stats user: PgBouncer checks the grammar first, then admin rights,
# except for SHOW (but FDS) and the fake parameters.
STATS_TABLE = [
    ("SHOW POOLS", ok("SHOW", POOLS_COLS)),
    ("SELECT version", VERSION),
    ("SHOW client_encoding", ok("SHOW", ["client_encoding"], [("UTF-8",)])),
    ("SHOW HELP", ok("SHOW")),
    ("SHOW FDS", ADMIN),
    ("PAUSE", ADMIN),
    ("PAUSE nosuchdb", ADMIN),
    ("RESUME", ADMIN),
    ("DISABLE", ADMIN),
    ("KILL testdb", ADMIN),
    ("KILL_CLIENT abc", ADMIN),
    ("RECONNECT", ADMIN),
    ("WAIT_CLOSE", ADMIN),
    ("RELOAD", ADMIN),
    ("SUSPEND", ADMIN),
    ("SHUTDOWN", ADMIN),
    ("SHUTDOWN WAIT_FOR_CLIENTS", ADMIN),
    ("SET log_stats = 1", ADMIN),
    ("SET unknown = 1", ADMIN),
    ("SET client_encoding = 'UTF8'", ok("SET")),
    ("PAUSE x y", syntax("PAUSE x y")),
    ("RELOAD x", syntax("RELOAD x")),
    ("SUSPEND x", syntax("SUSPEND x")),
    ("SHUTDOWN x", syntax("SHUTDOWN x")),
    ("SELECT 1", syntax("SELECT 1")),
    ("SET x", syntax("SET x")),
    ("abcdefghijklmnop", BAD),
]


def pooler(pg15, make_pooler):
    return make_pooler(pg15, settings={"admin_users": "trust_user", "stats_users": "md5_user",
                                       "auth_type": "md5"})


def console(p, user="trust_user"):
    conn = p.connect("pgbouncer", user, password=password(user))
    conn.prepare_threshold = None      # the simple protocol, as psql: never prepared
    notices = []      # (severity, sqlstate, message, detail): valid only in the handler
    conn.add_notice_handler(lambda n: notices.append(
        (n.severity, n.sqlstate, n.message_primary, n.message_detail)))
    return conn, notices


def outcome(conn, query, expect):
    """What the console answered, in the shape of expect."""
    try:
        cur = conn.execute(query)
    except psycopg.Error as e:
        assert (e.diag.sqlstate, e.diag.severity) == ("08P01", "ERROR"), (query, e.diag.sqlstate)
        return ("E", e.diag.message_primary)
    cols = [d.name for d in cur.description] if cur.description else None
    rows = cur.fetchall() if cur.description else None
    if expect[0] == "C":
        return ("C", cur.statusmessage,
                cols if expect[2] is not None else None, rows if expect[3] is not None else None)
    return ("C", cur.statusmessage)


def run_table(conn, table):
    wrong = []
    for query, expect in table:
        got = outcome(conn, query, expect)
        if got != expect:
            wrong.append(f"{query[:80]!r}: {got!r}, expected {expect!r}")
    assert not wrong, "\n".join(wrong)


def test_syntax_and_bad_arguments(pg15, make_pooler, pooler_workers):
    """Every query that does not parse gets PgBouncer's syntax error,
    quoting it as received; a word too long for PgBouncer's buffers gets
    "bad arguments", never a shorter word; each error is logged as
    PgBouncer logs it."""
    p = pooler(pg15, make_pooler)
    conn, _ = console(p)
    run_table(conn, [(q, syntax(q)) for q in SYNTAX_ERRORS])
    run_table(conn, [(q, BAD) for q in BAD_ARGUMENTS])
    # still usable
    assert conn.execute("SHOW VERSION").fetchone()[0]
    p.wait_for_log(r"ERROR invalid command 'SHOW FOO', use SHOW HELP;")
    p.wait_for_log(r"WARNING C-\S+: pgbouncer/trust_user@\S+ pooler error: "
                   r"invalid command 'SHOW FOO', use SHOW HELP;")
    p.wait_for_log(r"ERROR bad arguments")


def test_commands_and_errors(pg15, make_pooler, pooler_workers):
    """SHOW in its spellings (SELECT, quoted words, blanks, ';'), the fake
    parameters, and the tags and errors of commands whatever the state."""
    p = pooler(pg15, make_pooler)
    conn, _ = console(p)
    run_table(conn, ADMIN_TABLE)
    p.wait_for_log(r"ERROR cannot disable admin db: pgbouncer")


def test_set(pg15, make_pooler, pooler_workers):
    """SET's tags, "SET failed" (unknown keys and bad values, the reason
    logged), restart-only keys accepted without effect, and the fake
    parameters ignored with PgBouncer's notice."""
    p = pooler(pg15, make_pooler)
    conn, notices = console(p)
    run_table(conn, SET_TABLE)
    config = dict((r[0], r[1]) for r in conn.execute("SHOW CONFIG").fetchall())
    assert config["listen_port"] == str(p.port)
    assert config["unix_socket_dir"] == p.workdir
    assert config["default_pool_size"] == "28"
    assert config["server_reset_query"] == "DISCARD ALL"
    assert config["pool_mode"] == "session"
    assert notices == [("NOTICE", "00000", "SET ignored", None)] * 7, notices
    p.wait_for_log(r"ERROR unknown parameter: pgbouncer/unknown_key")
    p.wait_for_log(r"ERROR unknown parameter: pgbouncer/Default_Pool_Size")
    p.wait_for_log(r"ERROR SET failed")


def test_stats_user(pg15, make_pooler, pooler_workers):
    p = pooler(pg15, make_pooler)
    conn, _ = console(p, "md5_user")
    run_table(conn, STATS_TABLE)


def test_show_help_notice(pg15, make_pooler, pooler_workers):
    """One NOTICE: PgBouncer's message and its detail, word for word."""
    p = pooler(pg15, make_pooler)
    conn, notices = console(p)
    assert conn.execute("SHOW HELP").statusmessage == "SHOW"
    assert notices == [("NOTICE", "00000", "Console usage", HELP_DETAIL)]


def test_query_longer_than_pkt_buf(pg15, make_pooler, pooler_workers):
    """A console query is read whole into pkt_buf (4096): one that does
    not fit, message header and terminator included, ends the connection
    with PgBouncer's "incomplete pkt"."""
    p = pooler(pg15, make_pooler)
    conn, _ = console(p)
    fits = "PAUSE" + " " * 4083 + "x;"           # 4090 bytes: 4096 with the message's 6
    run_table(conn, [(fits, err("no such database: x"))])
    with pytest.raises(psycopg.OperationalError, match="incomplete pkt"):
        conn.execute(fits + " ")
    p.wait_for_log(r"closing because: incomplete pkt")


def test_long_syntax_error(pg15, make_pooler, pooler_workers, pooler_kind):
    """An error of 484 bytes is sent; PgBouncer writes errors into a
    512-byte buffer and ends the connection ("failure") when a longer one
    does not fit. pgcrew sends it whole and the session goes on (doc/
    config.md, Differences from PgBouncer)."""
    p = pooler(pg15, make_pooler)
    conn, _ = console(p)
    fits = "SHOW" + " " * 443 + "foo"
    run_table(conn, [(fits, syntax(fits))])
    longer = "SHOW" + " " * 444 + "foo"
    if pooler_kind == "pgbouncer":
        with pytest.raises(psycopg.OperationalError, match="failure"):
            conn.execute(longer)
        assert conn.closed or conn.broken
    else:
        run_table(conn, [(longer, syntax(longer))])
        assert conn.execute("SHOW VERSION").fetchone()[0]
