"""Protocol-level prepared statements (max_prepared_statements) in transaction
pooling with several workers: client names mapped to shared server-side
statements, prepared again on whichever server a client gets next, evicted
by LRU, errors where PostgreSQL gives them; against PostgreSQL 15 and 18."""

import os
import struct
import subprocess
import time

import psycopg
import pytest

import pg_cluster
import util
import wire
from bench import run_pgbench
from conftest import _pgbench_init

SECONDS = int(os.environ.get("PGBENCH_SECONDS", "5"))
WORKERS = 4


def settings(**extra):
    s = {"pool_mode": "transaction", "workers": WORKERS, "default_pool_size": 4,
         "max_client_conn": 200}
    s.update(extra)
    return s


@pytest.fixture(params=["pg15", "pg18"])
def bench_pg(request):
    cluster = request.getfixturevalue(request.param)
    _pgbench_init(cluster)
    return cluster


def history_rows(pg):
    with pg.connect("testdb") as conn:
        return conn.execute("SELECT count(*) FROM pgbench_history").fetchone()[0]


@pytest.mark.parametrize("mode", ["prepared", "extended", "simple"])
def test_pgbench_modes(bench_pg, make_pooler, mode):
    p = make_pooler(bench_pg, settings=settings(default_pool_size=10))
    before = history_rows(bench_pg)
    # One thread per client: pgbench prepares synchronously (PQprepare), so
    # a thread of several clients would wait for one of them to get a server
    # while another holds one mid-transaction (with PgBouncer as well).
    rc, output, summary = run_pgbench(p, clients=40, seconds=SECONDS, threads=40,
                                      extra=("-M", mode))
    assert rc == 0, output
    assert summary["failed"] in (0, None), output
    assert summary["processed"] and summary["processed"] > 40, output
    # tpcb-like inserts one history row per transaction: every committed
    # transaction pgbench counted really ran, exactly once.
    assert history_rows(bench_pg) - before == summary["processed"], output
    assert bench_pg.server_connections("testdb", "trust_user") <= 10
    stats = settled_stats(p, summary["processed"])
    if mode == "prepared":
        assert stats["total_client_parse_count"] >= 40 * 5, stats
        assert stats["total_bind_count"] >= summary["processed"] * 7, stats
        # Statements shared by 40 clients are prepared once per server.
        assert stats["total_server_parse_count"] < stats["total_client_parse_count"], stats
    else:
        assert stats["total_bind_count"] == 0, stats


def show(p, what, key=None, column="database"):
    """SHOW <what> as dicts; with key, the row whose column equals it."""
    with p.admin() as adm:
        cur = adm.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    if key is None:
        return rows
    return next(r for r in rows if r[column] == key)


def settled_stats(p, xacts):
    """SHOW STATS for testdb once every worker has flushed its counts (each
    does every 200 ms): at least `xacts` transactions, and the totals of two
    reads 300 ms apart agree (the avg_* columns move with the clock until
    the first stats_period, as PgBouncer's do)."""
    last = [None]

    def totals(row):
        return {k: v for k, v in row.items() if not k.startswith("avg_")}

    def ready():
        now = show(p, "STATS", "testdb")
        done = now["total_xact_count"] >= xacts and last[0] is not None and \
            totals(now) == totals(last[0])
        last[0] = now
        if not done:
            time.sleep(0.3)
        return done
    util.wait_until(ready, 10, what=f"SHOW STATS to settle at {xacts}+ transactions")
    return last[0]


def test_reuse_across_server_switches(pg, make_pooler):
    """psycopg with prepare_threshold=0: every statement is named; with six
    connections on two servers each is served by several backends."""
    p = make_pooler(pg, settings=settings(default_pool_size=2))
    conns = [p.connect(prepare_threshold=0) for _ in range(6)]
    backends = [set() for _ in conns]
    admin = p.admin()
    for i in range(3000):
        if i and i % 500 == 0:
            # Idle servers are reused most-recent-first, so a sequential
            # client may keep one backend: RECONNECT replaces them all.
            admin.execute("RECONNECT testdb")
        k, turn = i % len(conns), i // len(conns)
        c = conns[k]
        assert c.execute("SELECT %s::int + 1", (i,)).fetchone()[0] == i + 1
        if turn % 3 == 0:
            assert c.execute("SELECT %s::text || 'x'", (str(i),)).fetchone()[0] == f"{i}x"
        if turn % 25 == 0:
            backends[k].add(c.execute("SELECT pg_backend_pid()").fetchone()[0])
    assert any(len(b) > 1 for b in backends), backends
    assert pg.server_connections("testdb", "trust_user") <= 2
    stats = settled_stats(p, 4000)
    assert stats["total_bind_count"] >= 4000, stats
    # Three distinct statements per client, 6 clients: 18 client parses.
    assert stats["total_client_parse_count"] == 18, stats
    assert stats["total_server_parse_count"] >= 3, stats


def test_eviction_with_two_statements(pg, make_pooler):
    p = make_pooler(pg, settings=settings(default_pool_size=1, max_prepared_statements=2))
    c = p.connect(prepare_threshold=0)
    queries = [f"SELECT %s::int * {k}" for k in range(1, 5)]
    for i in range(200):
        k = i % 4
        assert c.execute(queries[k], (i,)).fetchone()[0] == i * (k + 1)
    servers = [r for r in show(p, "SERVERS") if r["database"] == "testdb"]
    assert servers and all(r["prepared_statements"] <= 2 for r in servers), servers
    clients = [r for r in show(p, "CLIENTS") if r["database"] == "testdb"]
    # The client keeps its names: psycopg prepared 4 statements.
    assert any(r["prepared_statements"] == 4 for r in clients), clients
    plain = p.connect(prepare_threshold=None)
    n = plain.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]
    assert n <= 2
    stats = settled_stats(p, 200)
    assert stats["total_server_parse_count"] > 100, stats   # evicted, prepared again


# -- raw protocol ------------------------------------------------------------

def parse(name, sql, types=()):
    body = name.encode() + b"\0" + sql.encode() + b"\0" + struct.pack("!h", len(types))
    body += b"".join(struct.pack("!I", t) for t in types)
    return wire.message(b"P", body)


def bind(stmt, params=(), portal=""):
    body = portal.encode() + b"\0" + stmt.encode() + b"\0" + struct.pack("!h", 0)
    body += struct.pack("!h", len(params))
    for v in params:
        body += struct.pack("!i", len(v)) + v
    body += struct.pack("!h", 0)
    return wire.message(b"B", body)


def execute(portal=""):
    return wire.message(b"E", portal.encode() + b"\0" + struct.pack("!i", 0))


def describe(kind, name):
    return wire.message(b"D", kind + name.encode() + b"\0")


def close(kind, name):
    return wire.message(b"C", kind + name.encode() + b"\0")


SYNC = wire.message(b"S")


def exchange(conn, data):
    """Send data (ending with Sync) and return the replies up to ReadyForQuery."""
    conn.send(data)
    return conn.read_until(b"Z", timeout=10)


def kinds(msgs):
    return b"".join(k for k, _ in msgs)


def rows(msgs):
    return [p[6:].decode() for k, p in msgs if k == b"D"]


def error_of(msgs):
    errs = [wire.error_fields(p) for k, p in msgs if k == b"E"]
    return errs[0] if errs else None


@pytest.fixture
def raw(pg, make_pooler):
    # One worker: with several, the one server slot would move between
    # workers (and its statements with it), making counts vary.
    p = make_pooler(pg, settings=settings(default_pool_size=1, workers=1))
    conns = []

    def connect():
        c = wire.RawConn(p.port, timeout=10)
        c.login_trust("trust_user", "testdb")
        conns.append(c)
        return c
    connect.pooler = p
    yield connect
    for c in conns:
        c.close()


# PgBouncer disconnects at a Bind of an unknown name (doc/config.md,
# Differences from PgBouncer: prepared statements).
@pytest.mark.pgcrew_only
def test_close_then_parse_again(raw):
    c = raw()
    msgs = exchange(c, parse("s1", "SELECT 1") + bind("s1") + execute() + SYNC)
    assert kinds(msgs) == b"12DCZ" and rows(msgs) == ["1"]
    msgs = exchange(c, close(b"S", "s1") + SYNC)
    assert kinds(msgs) == b"3Z"
    msgs = exchange(c, bind("s1") + execute() + SYNC)
    assert error_of(msgs)["C"] == "26000"
    assert error_of(msgs)["M"] == 'prepared statement "s1" does not exist'
    msgs = exchange(c, parse("s1", "SELECT 2") + bind("s1") + execute() + SYNC)
    assert kinds(msgs) == b"12DCZ" and rows(msgs) == ["2"]
    # Close of a name never prepared is not an error, as in PostgreSQL.
    assert kinds(exchange(c, close(b"S", "nobody") + SYNC)) == b"3Z"
    # A Close skipped after an error leaves the statement, as in PostgreSQL.
    msgs = exchange(c, bind("missing") + close(b"S", "s1") + SYNC)
    assert kinds(msgs) == b"EZ" and error_of(msgs)["C"] == "26000"
    assert rows(exchange(c, bind("s1") + execute() + SYNC)) == ["2"]
    # PgBouncer would disconnect here; its line is logged all the same.
    raw.pooler.wait_for_log(r"WARNING prepared statement 's1' not found")


# The last Bind: PgBouncer disconnects at a Bind of an unknown name.
@pytest.mark.pgcrew_only
def test_names_of_any_length(raw):
    """PostgreSQL takes statement and portal names of any length, and so
    does the pooler (pgcrew closed the connection past about 600 bytes:
    "statement or portal name too long")."""
    c = raw()
    stmt, portal = "s" * 3000, "p" * 2000
    msgs = exchange(c, parse(stmt, "SELECT $1::int + 1", (23,)) + bind(stmt, (b"41",), portal)
                    + execute(portal) + SYNC)
    assert kinds(msgs) == b"12DCZ" and rows(msgs) == ["42"], msgs
    msgs = exchange(c, describe(b"S", stmt) + close(b"S", stmt) + SYNC)
    assert kinds(msgs) == b"tT3Z", msgs
    msgs = exchange(c, bind(stmt, (b"1",)) + execute() + SYNC)
    assert error_of(msgs)["C"] == "26000"


def result_type(msgs):
    """The type oid of the only column of the RowDescription in msgs."""
    body = [p for k, p in msgs if k == b"T"][0]
    assert struct.unpack("!h", body[:2])[0] == 1
    end = body.index(b"\0", 2)            # the column name; then table oid, attnum
    return struct.unpack("!I", body[end + 7:end + 11])[0]


# PgBouncer 1.25.2 maps the new Parse back onto the stale statement, as
# pgcrew did (doc/config.md, Differences from PgBouncer).
@pytest.mark.pgcrew_only
def test_statement_broken_by_ddl(raw, pg):
    """ALTER COLUMN TYPE under a prepared statement: PostgreSQL answers its
    Bind with 0A000 "cached plan must not change result type", and a driver
    recovers by closing it and preparing the same text again (pgx, asyncpg).
    The retry gets a fresh statement with the new result type (pgcrew shared
    one server statement per text and mapped the new Parse back onto the
    stale one, so every retry failed), and a second client that prepared the
    same text before the DDL is told the same and recovers the same way."""
    with pg.connect("testdb") as direct:
        direct.execute("DROP TABLE IF EXISTS ddl_t")
        direct.execute("CREATE TABLE ddl_t (id int, v int)")
        direct.execute("INSERT INTO ddl_t VALUES (1, 10)")
        direct.execute("GRANT SELECT ON ddl_t TO PUBLIC")
        direct.commit()
    sql = "SELECT v FROM ddl_t WHERE id = $1"
    c, d = raw(), raw()
    try:
        for conn, name in ((c, "s1"), (d, "other")):
            msgs = exchange(conn, parse(name, sql) + bind(name, (b"1",)) + execute() + SYNC)
            assert rows(msgs) == ["10"], msgs
        with pg.connect("testdb") as direct:
            direct.execute("ALTER TABLE ddl_t ALTER COLUMN v TYPE text USING 'ten'")
            direct.commit()
        for conn, name in ((c, "s1"), (d, "other")):
            msgs = exchange(conn, bind(name, (b"1",)) + execute() + SYNC)
            err = error_of(msgs)
            assert err and err["C"] == "0A000", msgs
            assert err["M"] == "cached plan must not change result type"
            msgs = exchange(conn, close(b"S", name) + parse(name, sql) + describe(b"S", name)
                            + bind(name, (b"1",)) + execute() + SYNC)
            assert error_of(msgs) is None, msgs
            assert rows(msgs) == ["ten"] and result_type(msgs) == 25, msgs
    finally:
        with pg.connect("testdb") as direct:
            direct.execute("DROP TABLE IF EXISTS ddl_t")
            direct.commit()


# PgBouncer disconnects at a Parse of a name in use (Differences).
@pytest.mark.pgcrew_only
def test_parse_existing_name(raw):
    c = raw()
    assert kinds(exchange(c, parse("s1", "SELECT 1") + SYNC)) == b"1Z"
    msgs = exchange(c, parse("s1", "SELECT 2") + bind("s1") + execute() + SYNC)
    err = error_of(msgs)
    assert err["C"] == "42P05" and err["M"] == 'prepared statement "s1" already exists', msgs
    assert kinds(msgs) == b"EZ"            # the rest skipped up to Sync
    msgs = exchange(c, bind("s1") + execute() + SYNC)
    assert rows(msgs) == ["1"]               # the first statement is intact
    raw.pooler.wait_for_log(r"WARNING prepared statement 's1' was already prepared")


# PgBouncer disconnects at a Bind of an unknown name (Differences).
@pytest.mark.pgcrew_only
def test_error_in_transaction_aborts_it(raw):
    c = raw()
    msgs = exchange(c, wire.query_message("BEGIN"))
    assert msgs[-1] == (b"Z", b"T")
    msgs = exchange(c, bind("nope") + execute() + SYNC)
    assert error_of(msgs)["C"] == "26000" and msgs[-1] == (b"Z", b"E")
    msgs = exchange(c, wire.query_message("ROLLBACK"))
    assert msgs[-1] == (b"Z", b"I")


def test_same_text_two_names_and_same_name_two_clients(raw):
    a, b = raw(), raw()
    assert kinds(exchange(a, parse("x", "SELECT 10") + parse("y", "SELECT 10") + SYNC)) == b"11Z"
    assert kinds(exchange(b, parse("x", "SELECT 20") + SYNC)) == b"1Z"
    for conn, name, want in ((a, "x", "10"), (a, "y", "10"), (b, "x", "20")):
        assert rows(exchange(conn, bind(name) + execute() + SYNC)) == [want]
    servers = [r for r in show(raw.pooler, "SERVERS") if r["database"] == "testdb"]
    assert sum(r["prepared_statements"] for r in servers) == 2, servers
    clients = sorted(r["prepared_statements"] for r in show(raw.pooler, "CLIENTS")
                     if r["database"] == "testdb")
    assert clients == [1, 2]


# PgBouncer 1.25.2 keeps the name of a Parse PostgreSQL refused and
# disconnects at its next Parse (doc/config.md, Differences from PgBouncer).
@pytest.mark.pgcrew_only
def test_describe_and_failed_parse(raw):
    c = raw()
    msgs = exchange(c, parse("d", "SELECT $1::int AS n", [23]) + describe(b"S", "d") + SYNC)
    assert kinds(msgs) == b"1tTZ"
    msgs = exchange(c, parse("bad", "SELEC nonsense") + SYNC)
    assert error_of(msgs)["C"] == "42601"
    # A Parse that failed leaves no statement behind: the name is free.
    msgs = exchange(c, parse("bad", "SELECT 3") + bind("bad") + execute() + SYNC)
    assert rows(msgs) == ["3"]


def test_pipeline_error_midway(pg, make_pooler):
    p = make_pooler(pg, settings=settings(default_pool_size=1))
    conn = p.connect(prepare_threshold=0)
    with pytest.raises(psycopg.errors.DivisionByZero):
        with conn.pipeline():
            c1 = conn.execute("SELECT %s::int + 0", (1,))
            # psycopg may raise already inside one of these executes (it
            # reads results as they arrive), so they bind no names.
            conn.execute("SELECT 1 / %s::int", (0,))
            conn.execute("SELECT %s::int + 2", (3,))
    assert c1.fetchone()[0] == 1
    with conn.pipeline():
        cur = [conn.execute("SELECT %s::int + 2", (i,)) for i in range(50)]
    assert [c.fetchone()[0] for c in cur] == [i + 2 for i in range(50)]
    assert conn.execute("SELECT 1 / %s::int", (1,)).fetchone()[0] == 1


# PgBouncer 1.25.2 stalls here: a client waiting for a server ends in
# query_wait_timeout (doc/config.md, Differences from PgBouncer).
@pytest.mark.pgcrew_only
def test_pipeline_many_statements(pg, make_pooler):
    p = make_pooler(pg, settings=settings(default_pool_size=2))
    conns = [p.connect(prepare_threshold=0) for _ in range(4)]
    for rnd in range(20):
        for k, conn in enumerate(conns):
            with conn.pipeline():
                cur = [conn.execute(f"SELECT %s::int * {j}", (rnd + k,)) for j in range(5)]
            assert [c.fetchone()[0] for c in cur] == [(rnd + k) * j for j in range(5)]


# PgBouncer disconnects at a Bind of an unknown name (Differences).
@pytest.mark.pgcrew_only
def test_deallocate_all(raw):
    c = raw()
    assert kinds(exchange(c, parse("s", "SELECT 5") + SYNC)) == b"1Z"
    msgs = exchange(c, wire.query_message("DEALLOCATE ALL"))
    assert error_of(msgs) is None
    msgs = exchange(c, bind("s") + execute() + SYNC)
    assert error_of(msgs)["C"] == "26000"
    msgs = exchange(c, parse("s", "SELECT 6") + bind("s") + execute() + SYNC)
    assert rows(msgs) == ["6"]


def test_malformed_parse_closes_only_that_client(raw):
    c, other = raw(), raw()
    c.send(wire.message(b"P", b"name\0SELECT 1\0\x00\x05"))   # 5 types announced, none sent
    c.send(SYNC)
    data = c.wait_closed()
    assert b"broken Parse packet" in data
    assert rows(exchange(other, parse("ok", "SELECT 7") + bind("ok") + execute() + SYNC)) == ["7"]


def test_session_mode(pg, make_pooler):
    p = make_pooler(pg, settings=settings(pool_mode="session", default_pool_size=2))
    conn = p.connect(prepare_threshold=0)
    for i in range(100):
        assert conn.execute("SELECT %s::int", (i,)).fetchone()[0] == i
    conn.close()
    conn = p.connect(prepare_threshold=0)
    for i in range(10):
        assert conn.execute("SELECT %s::int", (i,)).fetchone()[0] == i


def session_conn(p):
    """A raw protocol connection, logged in (trust)."""
    c = wire.RawConn(p.port, timeout=10)
    c.login_trust("trust_user", "testdb")
    return c


@pytest.mark.parametrize("workers", [1, 4])
def test_session_mode_passes_names_through(pg, make_pooler, workers):
    """Session pooling, default max_prepared_statements: the client's own
    statement names reach PostgreSQL, so SQL DEALLOCATE / EXECUTE of a
    protocol-prepared name work (pgx Prepare + DEALLOCATE, asyncpg
    prepare(name=) + EXECUTE, psycopg's eviction), as with PgBouncer."""
    c = session_conn(make_pooler(pg, settings=settings(pool_mode="session", workers=workers)))
    try:
        assert kinds(exchange(c, parse("ps", "SELECT 41 + 1") + SYNC)) == b"1Z"
        msgs = exchange(c, wire.query_message(
            "SELECT name FROM pg_prepared_statements ORDER BY name"))
        assert rows(msgs) == ["ps"]
        assert rows(exchange(c, wire.query_message("EXECUTE ps"))) == ["42"]
        assert error_of(exchange(c, wire.query_message("DEALLOCATE ps"))) is None
        assert error_of(exchange(c, bind("ps") + execute() + SYNC))["C"] == "26000"
    finally:
        c.close()


def test_disabled_passes_names_through(pg, make_pooler):
    c = session_conn(make_pooler(pg, settings=settings(pool_mode="session",
                                                       max_prepared_statements=0)))
    try:
        assert kinds(exchange(c, parse("mine", "SELECT 1") + SYNC)) == b"1Z"
        msgs = exchange(c, wire.query_message(
            "SELECT name FROM pg_prepared_statements WHERE name = 'mine'"))
        assert rows(msgs) == ["mine"]
    finally:
        c.close()


def test_pgbench_prepared_session_mode(bench_pg, make_pooler):
    p = make_pooler(bench_pg, settings=settings(pool_mode="session", default_pool_size=20))
    rc, output, summary = run_pgbench(p, clients=10, seconds=2, threads=10, extra=("-M", "prepared"))
    assert rc == 0 and summary["failed"] in (0, None), output


def test_psql_still_works(pg, make_pooler):
    p = make_pooler(pg, settings=settings())
    out = subprocess.run(["timeout", "20", os.path.join(pg_cluster.PG15_BINDIR, "psql"),
                          "-h", p.host, "-p", str(p.port), "-U", "trust_user", "-d", "testdb",
                          "-Atc", "SELECT 41 + 1"], capture_output=True, text=True, timeout=30)
    assert out.stdout.strip() == "42", out.stderr
    util.wait_until(lambda: p.alive(), 1, what="pooler alive")


def test_large_bind_and_results(pg, make_pooler):
    """A Bind far larger than the I/O buffer is renamed by its head only;
    the rest streams through."""
    p = make_pooler(pg, settings=settings(default_pool_size=1))
    conn = p.connect(prepare_threshold=0)
    big = "x" * 300_000
    for i in range(5):
        got = conn.execute("SELECT length(%s::text) + %s::int, %s::text", (big, i, big)).fetchone()
        assert got[0] == len(big) + i and got[1] == big


@pytest.mark.pgcrew_only
def test_unnamed_statement_cache(bench_pg, make_pooler):
    """PgDoorman's extension: pgbench -M extended sends an unnamed Parse per
    query; with unnamed_statement_cache each text is prepared once per
    server and later Parses cost no plan."""
    p = make_pooler(bench_pg, settings=settings(default_pool_size=10, unnamed_statement_cache=1))
    before = history_rows(bench_pg)
    rc, output, summary = run_pgbench(p, clients=40, seconds=SECONDS, threads=40,
                                      extra=("-M", "extended"))
    assert rc == 0 and summary["failed"] in (0, None), output
    assert history_rows(bench_pg) - before == summary["processed"], output
    stats = settled_stats(p, summary["processed"])
    assert stats["total_query_count"] >= summary["processed"] * 7, stats
    # 7 texts, at most 10 servers, on 4 workers: a handful of Parses reach PostgreSQL
    assert stats["total_server_parse_count"] <= 7 * 10 * WORKERS, stats
    conn = p.connect(prepare_threshold=None)
    for i in range(200):
        assert conn.execute("SELECT %s::int * 2", (i,)).fetchone()[0] == 2 * i
        assert conn.execute("SELECT %s::text", (str(i),)).fetchone()[0] == str(i)
    with pytest.raises(psycopg.errors.UndefinedTable):
        conn.execute("SELECT * FROM no_such_table WHERE a = %s", (1,))
    assert conn.execute("SELECT %s::int * 2", (21,)).fetchone()[0] == 42


def test_named_parse_larger_than_buffer(pg, make_pooler):
    """A statement text far beyond pkt_buf is prepared, shared and prepared
    again on other servers like any other."""
    p = make_pooler(pg, settings=settings(default_pool_size=2))
    conns = [p.connect(prepare_threshold=0) for _ in range(3)]
    literal = "y" * 200_000
    sql = f"SELECT length('{literal}') + %s::int"
    for i in range(30):
        c = conns[i % 3]
        assert c.execute(sql, (i,)).fetchone()[0] == len(literal) + i
    stats = settled_stats(p, 30)
    assert stats["total_client_parse_count"] == 3, stats


@pytest.mark.parametrize("workers", [1, 4])
def test_ps_off_stops_at_once(pg, make_pooler, workers):
    """SET max_prepared_statements = 0 on the console stops the rewriting on
    every connection at once, as in PgBouncer: a name prepared before is
    the server's business from then on (unknown there: 26000), a new one
    reaches PostgreSQL as the client spelt it."""
    p = make_pooler(pg, settings=settings(workers=workers, default_pool_size=2))
    c = wire.RawConn(p.port, timeout=10)
    try:
        c.login_trust("trust_user", "testdb")
        assert rows(exchange(c, parse("s1", "SELECT 1") + bind("s1") + execute() + SYNC)) == ["1"]
        with p.admin() as admin:
            admin.execute("SET max_prepared_statements = 0")
        assert error_of(exchange(c, bind("s1") + execute() + SYNC))["C"] == "26000"
        msgs = exchange(c, wire.query_message("BEGIN"))
        assert error_of(msgs) is None
        assert kinds(exchange(c, parse("s2", "SELECT 2") + SYNC)) == b"1Z"
        msgs = exchange(c, wire.query_message(
            "SELECT name FROM pg_prepared_statements WHERE name = 's2'"))
        assert rows(msgs) == ["s2"]
        exchange(c, wire.query_message("COMMIT"))
    finally:
        c.close()
