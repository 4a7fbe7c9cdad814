"""SQL-level PREPARE / EXECUTE / DEALLOCATE in transaction pooling
(sql_prepared_statements, a pgcrew extension): names mapped to statements
shared with protocol-level ones, prepared again on whichever server a client
gets, evicted by LRU, PostgreSQL's errors and transaction states; raw wire,
psql and psycopg; four workers, PostgreSQL 15 and 18."""

import os
import struct
import subprocess
import threading

import psycopg
import pytest

import pg_cluster
import util
import wire
from test_prepared import bind, execute, parse, settled_stats, show, SYNC

WORKERS = 4

pytestmark = pytest.mark.pgcrew_only


def settings(**extra):
    s = {"pool_mode": "transaction", "workers": WORKERS, "default_pool_size": 2,
         "max_client_conn": 100, "sql_prepared_statements": 1}
    s.update(extra)
    return s


def q(conn, sql):
    """One simple Query; its replies up to ReadyForQuery."""
    conn.send(wire.query_message(sql))
    return conn.read_until(b"Z", timeout=10)


def pipelined(conn, *sqls):
    """Several Query messages in one write; the replies to each."""
    conn.send(b"".join(wire.query_message(s) for s in sqls))
    return [conn.read_until(b"Z", timeout=10) for _ in sqls]


def tags(msgs):
    return [p.rstrip(b"\0").decode() for k, p in msgs if k == b"C"]


def values(msgs):
    """DataRow columns as text (None for NULL)."""
    out = []
    for k, p in msgs:
        if k != b"D":
            continue
        n, = struct.unpack("!h", p[:2])
        pos, row = 2, []
        for _ in range(n):
            ln, = struct.unpack("!i", p[pos:pos + 4])
            pos += 4
            row.append(None if ln < 0 else p[pos:pos + ln].decode())
            pos += max(ln, 0)
        out.append(tuple(row))
    return out


def error(msgs):
    errs = [wire.error_fields(p) for k, p in msgs if k == b"E"]
    return errs[0] if errs else None


def status(msgs):
    assert msgs[-1][0] == b"Z"
    return msgs[-1][1].decode()


def ok(msgs):
    assert error(msgs) is None, error(msgs)
    return msgs


@pytest.fixture
def raw(pg, make_pooler):
    made = []

    def connect(p):
        c = wire.RawConn(p.port, timeout=10)
        c.login_trust("trust_user", "testdb")
        made.append(c)
        return c
    yield connect
    for c in made:
        c.close()


def backend_pid(conn):
    return values(ok(q(conn, "SELECT pg_backend_pid()")))[0][0]


def test_execute_across_server_switches(pg, make_pooler, raw):
    """PREPARE once, EXECUTE after each RECONNECT (every server replaced):
    prepared again on each new backend, transparently."""
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    msgs = ok(q(c, "  /* hi */ PREPARE P1 (int, text) AS SELECT $1 * 2, $2 || ';!' -- c\n;"))
    assert tags(msgs) == ["PREPARE"] and status(msgs) == "I"
    pids = set()
    with p.admin() as adm:
        for i in range(24):
            if i % 4 == 0:
                adm.execute("RECONNECT testdb")
                pids.add(backend_pid(c))
            sql = f"execute p1({i}, 'a''b')" if i % 2 else f'EXECUTE "p1" ( {i} , $$x$$ );'
            msgs = ok(q(c, sql))
            assert values(msgs) == [(str(i * 2), ("a'b" if i % 2 else "x") + ";!")], msgs
            assert tags(msgs) == ["SELECT 1"] and status(msgs) == "I"
    assert len(pids) > 1, pids
    client = next(r for r in show(p, "CLIENTS") if r["database"] == "testdb")
    assert client["prepared_statements"] == 1
    stats = settled_stats(p, 24)
    assert stats["total_server_parse_count"] >= len(pids), stats


def test_errors_leave_names_as_postgresql(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    err = error(q(c, "PREPARE bad AS SELEC 1"))
    assert err["C"] == "42601", err
    err = error(q(c, "EXECUTE bad"))        # a failed PREPARE leaves no name
    assert err["C"] == "26000" and err["M"] == 'prepared statement "bad" does not exist', err
    ok(q(c, "PREPARE good AS SELECT 7"))
    err = error(q(c, "PREPARE Good AS SELECT 8"))
    assert err["C"] == "42P05" and err["M"] == 'prepared statement "good" already exists', err
    assert values(ok(q(c, "EXECUTE good"))) == [("7",)]
    err = error(q(c, "EXECUTE nothere(1)"))
    assert err["C"] == "26000" and err["M"] == 'prepared statement "nothere" does not exist', err
    err = error(q(c, 'DEALLOCATE "GOOD"'))
    assert err["C"] == "26000" and err["M"] == 'prepared statement "GOOD" does not exist', err
    msgs = ok(q(c, "deallocate prepare good;"))
    assert tags(msgs) == ["DEALLOCATE"] and status(msgs) == "I"
    assert error(q(c, "EXECUTE good"))["C"] == "26000"
    # An EXECUTE that fails at run time keeps the statement.
    ok(q(c, "PREPARE div(int) AS SELECT 10 / $1"))
    assert error(q(c, "EXECUTE div(0)"))["C"] == "22012"
    assert values(ok(q(c, "EXECUTE div(5)"))) == [("2",)]
    # Not ours (two statements): passed through as it is, so the server
    # does not know the name.
    assert error(q(c, "SELECT 1; EXECUTE div(2)"))["C"] == "26000"
    ok(q(c, "PREPARE a AS SELECT 1"))
    ok(q(c, "PREPARE b AS SELECT 2"))
    msgs = ok(q(c, "DEALLOCATE ALL"))
    assert tags(msgs) == ["DEALLOCATE ALL"] and status(msgs) == "I"
    for name in ("a", "b", "div"):
        assert error(q(c, f"EXECUTE {name}"))["C"] == "26000"
    ok(q(c, "PREPARE a AS SELECT 3"))           # the names are free again
    assert values(ok(q(c, "EXECUTE a"))) == [("3",)]


def test_inside_transaction(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    assert status(ok(q(c, "BEGIN"))) == "T"
    assert status(ok(q(c, "PREPARE t1 AS SELECT 'one'"))) == "T"
    assert status(ok(q(c, "PREPARE t2 AS SELECT 'two'"))) == "T"
    msgs = ok(q(c, "EXECUTE t1"))
    assert values(msgs) == [("one",)] and status(msgs) == "T"
    msgs = ok(q(c, "DEALLOCATE t1"))
    assert tags(msgs) == ["DEALLOCATE"] and status(msgs) == "T"
    msgs = q(c, "EXECUTE t1")
    assert error(msgs)["C"] == "26000" and status(msgs) == "E"
    # In an aborted transaction PostgreSQL refuses them all, and so they
    # change nothing: t2 stays, t3 is not made.
    for sql in ("DEALLOCATE t2", "DEALLOCATE ALL", "PREPARE t3 AS SELECT 3", "EXECUTE t2"):
        msgs = q(c, sql)
        assert error(msgs)["C"] == "25P02" and status(msgs) == "E", (sql, msgs)
    assert status(ok(q(c, "ROLLBACK"))) == "I"
    # Prepared statements are not transactional: t2 survives the rollback,
    # and follows the client to another server.
    with p.admin() as adm:
        adm.execute("RECONNECT testdb")
    assert values(ok(q(c, "EXECUTE t2"))) == [("two",)]
    assert error(q(c, "EXECUTE t3"))["C"] == "26000"


def test_pipelined_queries(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    replies = pipelined(c, "PREPARE pp(int) AS SELECT $1 + 1", "EXECUTE pp(1)", "BEGIN",
                        "DEALLOCATE pp", "EXECUTE pp(2)", "ROLLBACK", "EXECUTE pp(3)",
                        "PREPARE pp(int) AS SELECT $1 + 100", "EXECUTE pp(4)")
    assert tags(replies[0]) == ["PREPARE"]
    assert values(replies[1]) == [("2",)]
    assert tags(replies[3]) == ["DEALLOCATE"] and status(replies[3]) == "T"
    assert error(replies[4])["C"] == "26000" and status(replies[4]) == "E"
    # DEALLOCATE is not undone by ROLLBACK in PostgreSQL either.
    assert error(replies[6])["C"] == "26000"
    assert tags(replies[7]) == ["PREPARE"]
    assert values(replies[8]) == [("104",)]
    with p.admin() as adm:
        adm.execute("RECONNECT testdb")
    assert values(ok(q(c, "EXECUTE pp(5)"))) == [("105",)]


def test_shared_once_per_server(pg, make_pooler, raw):
    """Two clients, the same name for different texts and different names
    for the same text: one PGCREW_ statement per text on the server. One
    worker and one server, so both clients share it."""
    p = make_pooler(pg, settings=settings(workers=1, default_pool_size=1))
    a, b = raw(p), raw(p)
    ok(q(a, "PREPARE x AS SELECT 10"))
    ok(q(a, "PREPARE y AS SELECT 10"))
    ok(q(b, "PREPARE x AS SELECT 20"))
    ok(q(b, "PREPARE z  AS  SELECT 10 ;"))     # other spacing: another text
    for conn, name, want in ((a, "x", "10"), (a, "y", "10"), (b, "x", "20"), (b, "z", "10")):
        assert values(ok(q(conn, f"EXECUTE {name}"))) == [(want,)]
    msgs = ok(q(a, "SELECT name, statement FROM pg_prepared_statements ORDER BY statement"))
    names = [r[0] for r in values(msgs)]
    assert len(names) == 3 and all(n.startswith("PGCREW_") for n in names), values(msgs)
    assert sorted(r["prepared_statements"] for r in show(p, "CLIENTS")
                  if r["database"] == "testdb") == [2, 2]
    assert sum(r["prepared_statements"] for r in show(p, "SERVERS")
               if r["database"] == "testdb") == 3


def test_eviction(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings(workers=1, default_pool_size=1, max_prepared_statements=2))
    c = raw(p)
    for k in range(1, 5):
        ok(q(c, f"PREPARE e{k}(int) AS SELECT $1 * {k}"))
    for i in range(40):
        k = i % 4 + 1
        assert values(ok(q(c, f"EXECUTE e{k}({i})"))) == [(str(i * k),)]
    msgs = ok(q(c, "SELECT count(*) FROM pg_prepared_statements"))
    assert int(values(msgs)[0][0]) <= 2
    servers = [r for r in show(p, "SERVERS") if r["database"] == "testdb"]
    assert servers and all(r["prepared_statements"] <= 2 for r in servers), servers
    client = next(r for r in show(p, "CLIENTS") if r["database"] == "testdb")
    assert client["prepared_statements"] == 4
    stats = settled_stats(p, 45)
    assert stats["total_query_count"] >= 45, stats
    assert stats["total_bind_count"] == 40, stats
    assert stats["total_server_parse_count"] > 30, stats


def test_prepare_again_fails_then_recovers(pg, make_pooler, raw):
    """The transparent PREPARE on a new server fails (its table is gone):
    the client gets that error; once the table is back, EXECUTE works."""
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    ok(q(c, "DROP TABLE IF EXISTS sqlprep_t"))
    ok(q(c, "CREATE TABLE sqlprep_t (v int); INSERT INTO sqlprep_t VALUES (5)"))
    ok(q(c, "PREPARE r AS SELECT v FROM sqlprep_t"))
    assert values(ok(q(c, "EXECUTE r"))) == [("5",)]
    ok(q(c, "DROP TABLE sqlprep_t"))
    with p.admin() as adm:
        adm.execute("RECONNECT testdb")
    err = error(q(c, "EXECUTE r"))
    assert err["C"] == "42P01", err
    ok(q(c, "CREATE TABLE sqlprep_t (v int); INSERT INTO sqlprep_t VALUES (6)"))
    with p.admin() as adm:
        adm.execute("RECONNECT testdb")
    assert values(ok(q(c, "EXECUTE r"))) == [("6",)]
    ok(q(c, "DROP TABLE sqlprep_t"))


def test_protocol_and_sql_names_share_a_namespace(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings())
    c = raw(p)
    c.send(parse("proto", "SELECT 1") + SYNC)
    assert c.read_until(b"Z", timeout=10)[0][0] == b"1"
    err = error(q(c, "PREPARE proto AS SELECT 2"))
    assert err["C"] == "42P05", err
    assert error(q(c, "EXECUTE proto"))["C"] == "0A000"
    ok(q(c, "PREPARE sqlname AS SELECT 3"))
    c.send(bind("sqlname") + execute() + SYNC)
    msgs = c.read_until(b"Z", timeout=10)
    assert error(msgs)["C"] == "0A000" and status(msgs) == "I"
    ok(q(c, "DEALLOCATE proto"))      # DEALLOCATE drops a protocol-level name too
    c.send(bind("proto") + execute() + SYNC)
    assert error(c.read_until(b"Z", timeout=10))["C"] == "26000"


def test_setting_off_is_pgbouncer_behaviour(pg, make_pooler, raw):
    """Without sql_prepared_statements, PREPARE stays on the backend that
    ran it: EXECUTE on another one fails, as with PgBouncer."""
    p = make_pooler(pg, settings=settings(sql_prepared_statements=0))
    c = raw(p)
    ok(q(c, "PREPARE off AS SELECT 1"))
    with p.admin() as adm:
        adm.execute("RECONNECT testdb")
    err = error(q(c, "EXECUTE off"))
    assert err["C"] == "26000" and err["M"] == 'prepared statement "off" does not exist', err


def test_session_mode_untouched(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings(pool_mode="session"))
    c = raw(p)
    ok(q(c, "PREPARE mine AS SELECT 1"))
    msgs = ok(q(c, "SELECT name FROM pg_prepared_statements"))
    assert values(msgs) == [("mine",)]


def test_psycopg_simple_protocol(pg, make_pooler):
    p = make_pooler(pg, settings=settings(default_pool_size=1))
    conns = [p.connect(cursor_factory=psycopg.ClientCursor) for _ in range(3)]
    for k, conn in enumerate(conns):
        conn.execute(f"PREPARE add_{k}(int, int) AS SELECT $1 + $2 + {k}")
    with p.admin() as adm:
        for i in range(30):
            if i % 10 == 0:
                adm.execute("RECONNECT testdb")
            k = i % 3
            assert conns[k].execute(f"EXECUTE add_{k}(%s, %s)", (i, 1)).fetchone()[0] == i + 1 + k
            res = conns[k].pgconn.exec_(f"EXECUTE add_{k}({i}, 2)".encode())
            assert res.status == psycopg.pq.ExecStatus.TUPLES_OK
            assert int(res.get_value(0, 0)) == i + 2 + k
    for conn in conns:
        conn.execute("DEALLOCATE ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("EXECUTE add_0(1, 1)")
        conn.close()


def test_psql_script(pg, make_pooler, tmp_path):
    """psql sends each statement of a script as a simple Query; another
    client keeps the one server busy, so psql's transactions move around."""
    p = make_pooler(pg, settings=settings(default_pool_size=2))
    script = tmp_path / "s.sql"
    lines = ["PREPARE sq(int) AS SELECT $1 * 3;"]
    lines += [f"EXECUTE sq({i});" for i in range(50)]
    lines += ["DEALLOCATE sq;", "EXECUTE sq(1);"]
    script.write_text("\n".join(lines) + "\n")
    other = [p.connect() for _ in range(2)]
    procs = [subprocess.Popen(["timeout", "60", os.path.join(pg_cluster.PG15_BINDIR, "psql"),
                               "-h", p.host, "-p", str(p.port), "-U", "trust_user", "-d", "testdb",
                               "-At", "-f", str(script)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    for _ in range(20):
        for o in other:
            o.execute("SELECT pg_sleep(0.005)")
    for proc in procs:
        out, err = proc.communicate(timeout=90)
        assert out.split() == ["PREPARE"] + [str(i * 3) for i in range(50)] + ["DEALLOCATE"], err
        assert 'prepared statement "sq" does not exist' in err
    util.wait_until(lambda: p.alive(), 1, what="pooler alive")


def test_reload_turns_it_on(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings(sql_prepared_statements=0))
    row = show(p, "CONFIG", "sql_prepared_statements", column="key")
    assert row["value"] == "0" and row["changeable"] == "yes", row
    p.settings["sql_prepared_statements"] = 1
    p.write_config()
    p.reload()
    attempt = [0]

    def works():
        # A new client each time: it may land on any worker.
        attempt[0] += 1
        c = raw(p)
        name = f"on_{attempt[0]}"
        ok(q(c, f"PREPARE {name} AS SELECT 'yes'"))
        with p.admin() as adm:
            adm.execute("RECONNECT testdb")
        return error(q(c, f"EXECUTE {name}")) is None
    util.wait_until(works, 10, interval=0.2, what="sql_prepared_statements = 1 applied by reload")
    assert show(p, "CONFIG", "sql_prepared_statements", column="key")["value"] == "1"


def test_statement_mode(pg, make_pooler, raw):
    p = make_pooler(pg, settings=settings(pool_mode="statement"))
    c = raw(p)
    ok(q(c, "PREPARE st(int) AS SELECT $1 - 1"))
    with p.admin() as adm:
        for i in range(6):
            if i % 2 == 0:
                adm.execute("RECONNECT testdb")
            assert values(ok(q(c, f"EXECUTE st({i})"))) == [(str(i - 1),)]
    assert tags(ok(q(c, "DEALLOCATE st"))) == ["DEALLOCATE"]


def test_many_clients_mixed_with_protocol_statements(pg, make_pooler):
    """Clients preparing overlapping texts with SQL PREPARE, and others
    with protocol-level statements, on few servers with a small LRU (so
    statements of both kinds evict each other) while servers are replaced:
    every result right, the statements shared."""
    p = make_pooler(pg, settings=settings(default_pool_size=3, max_prepared_statements=3))
    errors = []

    def sql_client(k):
        try:
            conn = p.connect(cursor_factory=psycopg.ClientCursor)
            for j in range(4):
                conn.execute(f"PREPARE m{j}(int) AS SELECT $1 * {j + 1}")
            for i in range(120):
                j = (i + k) % 4
                got = conn.execute(f"EXECUTE m{j}(%s)", (i,)).fetchone()[0]
                if got != i * (j + 1):
                    errors.append((k, i, j, got))
            conn.execute("DEALLOCATE ALL")
        except Exception as exc:     # reported below, with the others
            errors.append((k, repr(exc)))

    def protocol_client(k):
        try:
            conn = p.connect(prepare_threshold=0)
            for i in range(120):
                j = (i + k) % 4
                got = conn.execute(f"SELECT %s::int * {j + 1}", (i,)).fetchone()[0]
                if got != i * (j + 1):
                    errors.append(("proto", k, i, got))
        except Exception as exc:
            errors.append(("proto", k, repr(exc)))

    threads = [threading.Thread(target=sql_client, args=(k,)) for k in range(6)]
    threads += [threading.Thread(target=protocol_client, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    with p.admin() as adm:
        for _ in range(5):       # replace the servers while the clients run
            adm.execute("RECONNECT testdb")
            threads[0].join(timeout=0.2)
    for t in threads:
        t.join(timeout=120)
        assert not t.is_alive()
    assert not errors, errors[:5]
    servers = [r for r in show(p, "SERVERS") if r["database"] == "testdb"]
    assert all(r["prepared_statements"] <= 3 for r in servers), servers
    stats = settled_stats(p, 6 * 125 + 3 * 120)
    # 24 SQL PREPAREs from clients; far fewer texts than statements used.
    assert stats["total_client_parse_count"] >= 24, stats
    assert stats["total_bind_count"] >= 6 * 120 + 3 * 120, stats


def test_reset_query_and_discard_all(pg, make_pooler, raw):
    """server_reset_query (DISCARD ALL at every release here) empties the
    server: pgcrew prepares again instead of executing a name the server
    lost. A client's own DISCARD ALL drops its names, as in PostgreSQL."""
    p = make_pooler(pg, settings=settings(server_reset_query_always=1))
    c = raw(p)
    ok(q(c, "PREPARE rq(int) AS SELECT $1 + 10"))
    for i in range(5):
        assert values(ok(q(c, f"EXECUTE rq({i})"))) == [(str(i + 10),)]
    stats = settled_stats(p, 6)
    assert stats["total_server_parse_count"] >= 6, stats      # every time anew
    ok(q(c, "DISCARD ALL"))
    assert error(q(c, "EXECUTE rq(1)"))["C"] == "26000"
    ok(q(c, "PREPARE rq(int) AS SELECT $1 + 20"))
    assert values(ok(q(c, "EXECUTE rq(1)"))) == [("21",)]
