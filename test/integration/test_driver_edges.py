"""Drivers' edge cases (issue 22, item 5), each in the driver's own API
through the pooler, with one and four workers, against PostgreSQL 15:

* pgx Conn.Prepare("ps") then SQL `deallocate ps`, and asyncpg
  prepare(name="foobar") then SQL `EXECUTE foobar(41)`: in session pooling a
  protocol-level name must be the server's own (in transaction pooling
  pgcrew renames them, as PgBouncer 1.21+ does, so these are session-only);
* psycopg 3 on Debian's libpq 15 (ctypes, not the wheel's bundled libpq),
  which below libpq 17 evicts statements from its cache with SQL
  `DEALLOCATE _pg3_N`: 660 statements of 110 texts, in session and in
  transaction pooling;
* a column changing type between two executions of a prepared statement
  (`cached plan must not change result type`, 0A000): each driver must
  recover as it does on PostgreSQL itself, by preparing the same text
  again (asyncpg by itself, pgx on the next use, psycopg on a new
  connection), and see the new type, in session and transaction pooling;
* node-postgres ending a client right after connect(), which sends Terminate
  before the startup packet: no 'error' event.

asyncpg's client_encoding='utf-8' in transaction pooling (no SET per
transaction) is test_params.py::test_equal_spellings_need_no_set."""

import asyncio
import json
import os
import subprocess

import asyncpg
import psycopg
import pytest

import util
from pg_cluster import SUPERUSER
from test_console_go import go_binary
from test_drivers import CACHE, DRIVERS_DIR, build, node_modules

WORKERS_MATRIX = (1, 4)
USER = "trust_user"
PY = os.path.join(util.REPO_ROOT, ".venv", "bin", "python")
# With four workers a new connection lands on its predecessor's worker about
# one time in four; the case that matters is another worker getting the
# pool's one server, statements and all, which so many rounds all miss only
# about one time in 256.
PSYCOPG_ROUNDS = 4

# Protocol-level prepared statements in transaction pooling came with
# PgBouncer 1.21: on 1.18 such a case could pass only by the luck of one
# client keeping one server, so it is pgcrew's alone here.
POOL_MODES = ["session", pytest.param("transaction", marks=pytest.mark.pgcrew_only)]


@pytest.fixture(scope="session")
def pgx_edges():
    out = os.path.join(CACHE, "pgx_edges", "pgxedges")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    build([go_binary(), "build", "-o", out, "."], os.path.join(DRIVERS_DIR, "pgx_edges"),
          "go build", env)
    return out


def conninfo(p):
    return f"host={p.host} port={p.port} dbname=testdb user={USER} sslmode=disable"


def direct_conninfo(pg):
    return f"host={pg.host} port={pg.port} dbname=testdb user={SUPERUSER} sslmode=disable"


def run_program(argv, env=None, timeout=60):
    """A driver program's JSON report (its last line); it must exit 0."""
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, (f"{argv[0]} exited {r.returncode}:\n"
                               f"{r.stderr[-4000:]}\n{r.stdout[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_pgx_deallocate(pg15, make_pooler, pgx_edges):
    p = make_pooler(pg15, settings={"pool_mode": "session"})
    got = run_program([pgx_edges, "deallocate", conninfo(p)])
    # The program also saw "ps" in pg_prepared_statements before DEALLOCATE
    # and not after it: the name reached the server as the client gave it.
    assert got == {"test": "deallocate", "value": 42, "before": 1, "after": 0}


def test_asyncpg_execute(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "session"})

    async def run():
        conn = await asyncpg.connect(host=p.host, port=p.port, user=USER, database="testdb")
        try:
            stmt = await conn.prepare("select $1::int + 1", name="foobar")
            assert await stmt.fetchval(1) == 2
            # A simple Query (no arguments): the server runs its own foobar.
            status = await conn.execute("EXECUTE foobar(41)")
            value = await conn.fetchval("EXECUTE foobar(41)")
            return status, value
        finally:
            await conn.close()
    assert asyncio.run(run()) == ("SELECT 1", 42)


# Runs with PSYCOPG_IMPL=python: psycopg's ctypes binding to the system's
# libpq.so.5, Debian's libpq 15, as an application without psycopg[binary]
# has it. Below libpq 17 psycopg has no protocol-level Close and evicts a
# statement from its cache (prepared_max 100) with SQL DEALLOCATE _pg3_N.
LIBPQ15_PROGRAM = r"""
import json, sys
import psycopg
from psycopg import capabilities, pq
assert pq.__impl__ == "python", pq.__impl__
assert pq.version() < 170000, pq.version()
assert not capabilities.has_send_close_prepared()
conn = psycopg.connect(sys.argv[1], autocommit=True)
assert (conn.prepare_threshold, conn.prepared_max) == (5, 100)
done = 0
for k in range(110):
    # The sixth execution prepares the text; once psycopg holds more than
    # prepared_max names, each new one evicts the oldest: DEALLOCATE _pg3_N.
    for i in range(6):
        assert conn.execute(f"select %s::int + {k}", (i,)).fetchone()[0] == i + k
        done += 1
names = [r[0] for r in conn.execute("select name from pg_prepared_statements")]
conn.close()
print(json.dumps({"done": done, "libpq": pq.version(), "server_statements": names}))
"""


@pytest.mark.parametrize("pool_mode", POOL_MODES)
def test_psycopg_libpq15(pg15, make_pooler, pool_mode):
    p = make_pooler(pg15, settings={"pool_mode": pool_mode})
    env = dict(os.environ, PSYCOPG_IMPL="python")
    got = run_program([PY, "-c", LIBPQ15_PROGRAM, conninfo(p)], env=env)
    assert got["done"] == 660, got
    if pool_mode == "session":
        # The names are the server's own: the first ones psycopg evicted
        # were deallocated, the last one is there. psycopg holds 101 names
        # (prepared_max and the newest) until its next execution evicts one.
        names = set(got["server_statements"])
        assert "_pg3_0" not in names and "_pg3_109" in names, got
        assert 100 <= len(names) <= 101, got


def make_table(pg, name):
    with pg.connect("testdb") as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')
        conn.execute(f'CREATE TABLE "{name}" (id int, v int)')
        conn.execute(f"INSERT INTO \"{name}\" VALUES (1, 7)")
        conn.execute(f'GRANT ALL ON "{name}" TO {USER}')


def alter_to_text(pg, name):
    with pg.connect("testdb") as conn:
        conn.execute(f'ALTER TABLE "{name}" ALTER COLUMN v TYPE text')


def alter_asyncpg(p, pg, table):
    query = f'select v from "{table}" where id = $1'

    async def run():
        conn = await asyncpg.connect(host=p.host, port=p.port, user=USER, database="testdb")
        try:
            for _ in range(2):      # the second from its statement cache
                assert await conn.fetchval(query, 1) == 7
            alter_to_text(pg, table)
            # Outside a transaction asyncpg prepares the query again itself
            # on InvalidCachedStatementError: no error reaches the caller.
            return [await conn.fetchval(query, 1) for _ in range(2)]
        finally:
            await conn.close()
    return asyncio.run(run())


def alter_psycopg(p, pg, table):
    """The values each round's new connection got."""
    values = []
    for r in range(PSYCOPG_ROUNDS):
        name = f"{table}_{r}"
        make_table(pg, name)
        query = f'select v from "{name}" where id = %s'
        conn = p.connect()
        for _ in range(2):          # prepared by the first, reused by the second
            assert conn.execute(query, (1,), prepare=True).fetchone() == (7,)
        alter_to_text(pg, name)
        # psycopg neither prepares the text again nor forgets the statement:
        # on PostgreSQL itself every later execution on this connection
        # fails the same way (its maintainers advise prepare=False,
        # psycopg/psycopg issue 511). The application replaces the
        # connection, as a pool does with a broken one, and the new one
        # prepares the same text.
        with pytest.raises(psycopg.errors.FeatureNotSupported,
                           match="cached plan must not change result type"):
            conn.execute(query, (1,), prepare=True)
        conn.close()
        conn = p.connect()
        values.append([conn.execute(query, (1,), prepare=True).fetchone()[0] for _ in range(2)])
        conn.close()
    return values


@pytest.mark.parametrize("pool_mode", POOL_MODES)
@pytest.mark.parametrize("driver", ["pgx", "asyncpg", "psycopg"])
def test_alter_type(request, pg15, make_pooler, driver, pool_mode):
    """ALTER COLUMN TYPE between two executions of a prepared statement: the
    driver's recovery (preparing the text again, as it does on PostgreSQL)
    must give the new value with its new type through the pooler too,
    whichever server the next transaction gets."""
    table = f"edge_alter_{driver}"
    # One server: in transaction pooling every client, on every worker, gets
    # the one whose statement has the old plan.
    p = make_pooler(pg15, settings={"pool_mode": pool_mode, "default_pool_size": 1})
    if driver != "psycopg":
        make_table(pg15, table)
    if driver == "pgx":
        got = run_program([request.getfixturevalue("pgx_edges"), "alter", conninfo(p),
                           direct_conninfo(pg15), table])
        assert got["value"] == "7" and got["type"] == "string", got
        # pgx does not retry itself: the 0A000 makes it drop the statement
        # and the program's retry prepares it again. The error must come:
        # pgx binds with the result formats of the int it described, so a
        # pooler that silently ran a new plan would hand it text as binary.
        assert "SQLSTATE 0A000" in got["first_error"], got
    elif driver == "asyncpg":
        assert alter_asyncpg(p, pg15, table) == ["7", "7"]
    else:
        assert alter_psycopg(p, pg15, table) == [["7", "7"]] * PSYCOPG_ROUNDS


def test_node_end_at_once(pg15, make_pooler):
    """node-postgres's end() right after connect(), not awaited: it writes
    Terminate before the startup packet, then the startup packet after it;
    the pooler must just close, as PostgreSQL does."""
    p = make_pooler(pg15)
    env = dict(os.environ, NODE_PATH=node_modules())
    got = run_program(["node", os.path.join(DRIVERS_DIR, "node", "edges.js"), conninfo(p), "10"],
                      env=env)
    assert got == {"ended": 10, "problems": []}, got
    # A first packet that is no packet closes that client only.
    with p.connect() as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
