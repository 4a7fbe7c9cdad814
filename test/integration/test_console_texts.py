"""The console's grammar, error texts, command tags, notices and log lines,
input by input, exactly as PgBouncer 1.25.2's: each table row is a query
and what PgBouncer answers (checked with PGCREW_BIN=.cache/pgbouncer-1.25.2/
bin/pgbouncer); pgcrew must answer the same with one worker and with four.
An error is always 08P01, severity ERROR, and leaves the connection
usable. The parser's every branch is in test/unit/test_console_parse.c."""

import os
import signal
import time

import psycopg
import pytest

import util
from pg_cluster import password
from test_pgcrew_only import children

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

PAUSED = err("already suspended/paused")


def state(mode):
    """SHOW STATE while running, paused or suspended."""
    return ok("SHOW", ["key", "value"], [(k, "yes" if k == mode else "no")
                                         for k in ("active", "paused", "suspended")])


NOT_PAUSED = err("pooler is not paused/suspended")

# PAUSE, RESUME, SUSPEND and KILL in turn, each answered by the state the
# ones before left (testdb has a pool, otherdb none).
STATE_SEQUENCE = [
    ("RESUME", NOT_PAUSED),
    ("RESUME testdb", err("database testdb is not paused")),
    ("RESUME pgbouncer", err("database pgbouncer is not paused")),
    ("RESUME nosuchdb", err("no such database: nosuchdb")),
    ("PAUSE testdb", ok("PAUSE")),
    ("PAUSE testdb", ok("PAUSE")),
    ("SHOW STATE", state("active")),
    ("SUSPEND", err("cannot suspend with paused databases")),
    ("PAUSE", ok("PAUSE")),
    ("SHOW STATE", state("paused")),
    ("PAUSE", PAUSED),
    ("PAUSE testdb", PAUSED),
    ("PAUSE nosuchdb", PAUSED),
    ("KILL", PAUSED),
    ("KILL testdb", PAUSED),
    ("KILL nosuchdb", PAUSED),
    ("SUSPEND", PAUSED),
    ("RESUME testdb", ok("RESUME")),
    ("RESUME testdb", err("database testdb is not paused")),
    ("RESUME", ok("RESUME")),
    ("RESUME", NOT_PAUSED),
    ("SUSPEND", ok("SUSPEND")),
    ("SHOW STATE", state("suspended")),
    ("SUSPEND", PAUSED),
    ("PAUSE", PAUSED),
    ("PAUSE testdb", PAUSED),
    ("KILL", PAUSED),
    ("RESUME testdb", err("database testdb is not paused")),
    ("RESUME", ok("RESUME")),
    ("KILL testdb", ok("KILL")),
    ("SUSPEND", err("cannot suspend with paused databases")),
    ("RESUME", NOT_PAUSED),
    ("RESUME testdb", ok("RESUME")),
    # KILL testdb emptied (PgBouncer: freed) its pool: KILL pauses nothing
    ("KILL", ok("KILL")),
    ("RESUME testdb", err("database testdb is not paused")),
    ("SUSPEND", ok("SUSPEND")),
    ("RESUME", ok("RESUME")),
    ("RECONNECT pgbouncer", err("cannot reconnect admin db: pgbouncer")),
    ("WAIT_CLOSE pgbouncer", err("cannot wait in admin db: pgbouncer")),
    ("KILL pgbouncer", err("cannot kill admin db: pgbouncer")),
    ("PAUSE pgbouncer", err("cannot pause admin db: pgbouncer")),
    ("SHOW STATE", state("active")),
]

# Then a client logs in to testdb again: KILL pauses the databases that
# have pools, and only those.
KILL_SEQUENCE = [
    ("KILL", ok("KILL")),
    ("RESUME", NOT_PAUSED),
    ("RESUME otherdb", err("database otherdb is not paused")),
    ("SUSPEND", err("cannot suspend with paused databases")),
    ("RESUME testdb", ok("RESUME")),
    ("RESUME testdb", err("database testdb is not paused")),
    ("SUSPEND", ok("SUSPEND")),
    ("RESUME", ok("RESUME")),
]

# KILL_CLIENT reads its argument as sscanf("%llu"): digits after blanks
# and a sign, the rest ignored.
KILL_CLIENT_TABLE = [
    ("KILL_CLIENT 12abc", err("client not found")),
    ("KILL_CLIENT 0x10", err("client not found")),
    ('KILL_CLIENT " 5"', err("client not found")),
    ('KILL_CLIENT "-1"', err("client not found")),
    ('KILL_CLIENT "+"', err("invalid client pointer supplied")),
    ('KILL_CLIENT " "', err("invalid client pointer supplied")),
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


def pooler(pg15, make_pooler, pool_mode="transaction"):
    """Transaction pooling: a client's server goes back at once, so PAUSE
    has nothing to wait for."""
    return make_pooler(pg15, settings={"admin_users": "trust_user", "stats_users": "md5_user",
                                       "auth_type": "md5", "pool_mode": pool_mode})


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
    # "... command issued" before the database is looked up, after "a
    # database is required"; never for KILL_CLIENT
    log = p.log_text()
    for line in ("RECONNECT", "RECONNECT 'testdb'", "WAIT_CLOSE", "WAIT_CLOSE 'testdb'",
                 "DISABLE 'testdb'", "ENABLE 'testdb'", "DISABLE 'nosuchdb'", "ENABLE 'x'",
                 "ENABLE 'TESTDB'", "DISABLE 'pgbouncer'", "ENABLE 'pgbouncer'",
                 "PAUSE 'nosuchdb'", "PAUSE 'pgbouncer'", "KILL 'nosuchdb'", "KILL 'pgbouncer'",
                 "RESUME 'nosuchdb'", "RECONNECT 'nosuch'", "WAIT_CLOSE 'nosuch'"):
        assert f"LOG {line} command issued" in log, line
    assert "DISABLE command issued" not in log and "ENABLE command issued" not in log
    assert "KILL_CLIENT" not in log


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


def test_pause_resume_suspend_kill_states(pg15, make_pooler, pooler_workers):
    """Every state error of PAUSE, RESUME, SUSPEND and KILL, in sequence,
    with PgBouncer's log lines: "... command issued" only once a command
    passed its checks (RESUME's before them, KILL_CLIENT's never)."""
    p = pooler(pg15, make_pooler)
    user = p.connect("testdb", "trust_user", password=password("trust_user"))
    user.execute("SELECT 1")
    conn, _ = console(p)
    run_table(conn, STATE_SEQUENCE)
    with p.connect("testdb", "trust_user", password=password("trust_user")) as again:
        again.execute("SELECT 1")
    run_table(conn, KILL_SEQUENCE)
    paused = {r[0]: r[15] for r in conn.execute("SHOW DATABASES").fetchall()}
    assert paused == {"otherdb": 0, "pgbouncer": 0, "testdb": 0}, paused
    run_table(conn, KILL_CLIENT_TABLE)
    log = p.log_text()
    for line in ("ERROR already suspended/paused", "ERROR database otherdb is not paused",
                 "ERROR cannot suspend with paused databases", "ERROR pooler is not paused/suspended",
                 "LOG RESUME 'testdb' command issued", "LOG RESUME 'nosuchdb' command issued",
                 "LOG PAUSE 'testdb' command issued", "LOG KILL 'testdb' command issued",
                 "LOG KILL 'pgbouncer' command issued", "LOG PAUSE 'pgbouncer' command issued",
                 "LOG RECONNECT 'pgbouncer' command issued", "LOG WAIT_CLOSE 'pgbouncer' command issued"):
        assert line in log, line
    counts = {cmd: log.count(f"LOG {cmd} command issued")
              for cmd in ("PAUSE", "SUSPEND", "KILL", "RESUME")}
    assert counts == {"PAUSE": 1, "SUSPEND": 3, "KILL": 2, "RESUME": 8}, counts
    assert "PAUSE 'nosuchdb'" not in log and "KILL 'nosuchdb'" not in log
    assert "KILL_CLIENT" not in log


def test_kill_pauses_databases_with_pools(pg15, make_pooler, pooler_workers):
    """KILL without a database pauses (and empties) the databases a client
    has used, in every worker though one client of one worker used it:
    each console, whichever worker it is in, finds testdb paused (SUSPEND
    refused, RESUME testdb done once, then "not paused"); a database
    nobody used is left alone; a client logs in again after RESUME."""
    p = pooler(pg15, make_pooler)
    user = p.connect("testdb", "trust_user", password=password("trust_user"))
    user.execute("SELECT 1")
    consoles = [console(p)[0] for _ in range(6)]
    run_table(consoles[0], [("KILL", ok("KILL"))])
    with pytest.raises(psycopg.OperationalError):
        user.execute("SELECT 1")
    for conn in consoles:
        run_table(conn, [("SUSPEND", err("cannot suspend with paused databases")),
                         ("RESUME", NOT_PAUSED),
                         ("RESUME otherdb", err("database otherdb is not paused"))])
    paused = {r[0]: r[15] for r in consoles[-1].execute("SHOW DATABASES").fetchall()}
    assert paused == {"otherdb": 0, "pgbouncer": 0, "testdb": 1}, paused
    run_table(consoles[-1], [("RESUME testdb", ok("RESUME"))])
    for conn in consoles:
        run_table(conn, [("RESUME testdb", err("database testdb is not paused"))])
    run_table(consoles[0], [("SUSPEND", ok("SUSPEND")), ("RESUME", ok("RESUME"))])
    with p.connect("testdb", "trust_user", password=password("trust_user")) as u:
        assert u.execute("SELECT 1").fetchone() == (1,)


def test_auto_database_states(pg15, make_pooler, pooler_workers):
    """Auto-databases: PAUSE, KILL and DISABLE register one (PgBouncer's
    find_or_register_database), RESUME and ENABLE only look. A database
    one worker's client made, or one paused there, is paused for every
    console, whichever worker it is in."""
    dsn = f"host={pg15.host} port={pg15.port}"
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "auth_type": "md5",
                                    "pool_mode": "transaction"},
                    databases={"testdb": dsn, "*": dsn})
    consoles = [console(p)[0] for _ in range(6)]
    run_table(consoles[0], [("RESUME newdb", err("no such database: newdb")),
                            ("ENABLE newdb", err("no such database: newdb")),
                            ("PAUSE newdb", ok("PAUSE")),
                            ("RESUME newdb", ok("RESUME")),
                            ("RESUME newdb", err("database newdb is not paused")),
                            ("DISABLE newdb2", ok("DISABLE")),
                            ("ENABLE newdb2", ok("ENABLE")),
                            ("PAUSE newdb3", ok("PAUSE"))])
    for conn in consoles:
        run_table(conn, [("SUSPEND", err("cannot suspend with paused databases"))])
    run_table(consoles[0], [("RESUME newdb3", ok("RESUME"))])
    user = p.connect("otherdb", "trust_user", password=password("trust_user"))
    user.execute("SELECT 1")
    run_table(consoles[0], [("KILL", ok("KILL"))])
    for conn in consoles:
        run_table(conn, [("SUSPEND", err("cannot suspend with paused databases")),
                         ("RESUME testdb", err("database testdb is not paused"))])
    run_table(consoles[-1], [("RESUME otherdb", ok("RESUME"))])
    for conn in consoles:
        run_table(conn, [("RESUME otherdb", err("database otherdb is not paused"))])
    run_table(consoles[0], [("SUSPEND", ok("SUSPEND")), ("RESUME", ok("RESUME"))])


def test_suspend_resumes_when_console_leaves(pg15, make_pooler, pooler_workers):
    """Suspended with no console connection left (a new one cannot log
    in), the pooler resumes by itself, with PgBouncer's log line; a console
    still connected keeps it suspended."""
    p = pooler(pg15, make_pooler)
    first, _ = console(p)
    second, _ = console(p)
    run_table(first, [("SUSPEND", ok("SUSPEND"))])
    first.close()
    time.sleep(0.6)       # three janitor passes: the other console keeps it suspended
    run_table(second, [("SHOW STATE", state("suspended"))])
    second.close()
    p.wait_for_log(r"LOG admin disappeared when suspended, doing RESUME")
    with p.connect("testdb", "trust_user", password=password("trust_user")) as u:
        assert u.execute("SELECT 1").fetchone() == (1,)
    conn, _ = console(p)
    run_table(conn, [("SHOW STATE", state("active")), ("RESUME", NOT_PAUSED)])
    assert p.log_text().count("admin disappeared") == 1


@pytest.mark.pgcrew_only  # workers: a worker killed and started again
def test_restarted_worker_keeps_pause(pg15, make_pooler, pooler_workers):
    """A worker that dies while the pooler is paused comes back paused (it
    takes the others' mode from shared memory): every console, whichever
    worker it lands in, finds the pooler paused, and RESUME resumes all."""
    if pooler_workers == 1:
        pytest.skip("one worker: its death ends the console too")
    p = pooler(pg15, make_pooler)
    workers = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) >= pooler_workers
                              else None, 10, what="every worker process")
    conn, _ = console(p)
    run_table(conn, [("PAUSE", ok("PAUSE"))])
    conn.close()
    victim = workers[0]
    os.kill(victim, signal.SIGKILL)
    util.wait_until(lambda: len(children(p.pid)) >= pooler_workers and victim not in children(p.pid),
                    10, what="a new worker in the killed one's place")
    p.wait_for_log(r"LOG worker \d+ starts paused, as the other workers are")
    consoles = [console(p)[0] for _ in range(8)]
    for c in consoles:
        run_table(c, [("PAUSE", PAUSED), ("SHOW STATE", state("paused"))])
    run_table(consoles[0], [("RESUME", ok("RESUME"))])
    for c in consoles:
        run_table(c, [("RESUME", NOT_PAUSED), ("SHOW STATE", state("active"))])


def test_shutdown_states(pg15, make_pooler, pooler_workers):
    """While SHUTDOWN WAIT_FOR_SERVERS waits (it pauses, as PgBouncer's),
    PAUSE, SUSPEND and KILL find the pooler paused and RESUME finds it
    shutting down; the pooler exits once the last server is released."""
    p = pooler(pg15, make_pooler, pool_mode="session")
    holder = p.connect("testdb", "trust_user", password=password("trust_user"))
    holder.execute("SELECT 1")        # session pooling: holds its server
    conn, _ = console(p)
    state = [("active", "yes"), ("paused", "no"), ("suspended", "no")]
    assert conn.execute("SHOW STATE").fetchall() == state
    run_table(conn, [("SHUTDOWN WAIT_FOR_SERVERS", ok("SHUTDOWN"))])
    state = [("active", "no"), ("paused", "yes"), ("suspended", "no")]
    assert conn.execute("SHOW STATE").fetchall() == state
    run_table(conn, [("PAUSE", PAUSED),
                     ("SUSPEND", PAUSED), ("KILL testdb", PAUSED),
                     ("RESUME", err("pooler is shutting down")),
                     ("RESUME testdb", err("database testdb is not paused"))])
    p.wait_for_log(r"LOG SHUTDOWN WAIT_FOR_SERVERS command issued")
    holder.close()
    p.proc.wait(timeout=10)


def test_shutdown_not_answered(pg15, make_pooler, pooler_workers):
    """Plain SHUTDOWN sends no CommandComplete: the connection ends with
    the process."""
    p = pooler(pg15, make_pooler)
    conn, _ = console(p)
    with pytest.raises(psycopg.OperationalError):
        conn.execute("SHUTDOWN")
    p.proc.wait(timeout=10)
    assert "SHUTDOWN command issued" in p.log_text()


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
