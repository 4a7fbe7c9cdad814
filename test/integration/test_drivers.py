"""The driver compatibility suite (test/drivers/, see its README.md): each
driver's program runs its typical usage through pgcrew in transaction
pooling with four workers and a pool of four servers, against PostgreSQL 15
and 18, while other clients keep those servers busy and RECONNECT replaces
them, so that the driver's connection moves between backends. The program checks every result itself;
here the figures it reports and the rows it left are checked again."""

import json
import os
import subprocess
import threading

import psycopg
import pytest

import util
from pg_cluster import password
from test_console_go import go_binary

# serial: six clients and RECONNECT every 0.05 s keep the pool busy (a load
# test); beside other runners the drivers' JVM and node starve past 180 s.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]

DRIVERS_DIR = os.path.join(util.REPO_ROOT, "test", "drivers")
CACHE = os.path.join(util.REPO_ROOT, ".cache", "drivers")
REUSE = 3000
USER = "scram_user"
# A pool of one server per worker: with fewer servers than workers, clients
# of a worker without a server wait for query_wait_timeout while the other
# workers' clients keep theirs busy (the slot ledger hands a server over
# only once it sits idle).
SETTINGS = {"pool_mode": "transaction", "workers": 4, "default_pool_size": 4,
            "max_client_conn": 100, "auth_type": "scram-sha-256",
            # The JDBC driver sends it at startup; PgBouncer's users set this.
            "ignore_startup_parameters": "extra_float_digits"}
# Copy rows, pipelined/batched inserts (node-postgres has no pipelining).
PIPELINED_ROWS = {"psycopg": 500, "asyncpg": 500, "pgx": 500, "jdbc": 500, "node": 0}


def build(argv, cwd, what, env=None):
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{what} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


@pytest.fixture(scope="session")
def pgx_binary():
    out = os.path.join(CACHE, "pgx", "pgxcheck")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    build([go_binary(), "build", "-o", out, "."], os.path.join(DRIVERS_DIR, "pgx"), "go build", env)
    return out


@pytest.fixture(scope="session")
def jdbc_classpath():
    """Compiled by Maven into .cache/drivers/jdbc (the driver's jar in
    .cache/m2): offline once everything was fetched, online the first time."""
    jdbc = os.path.join(CACHE, "jdbc")
    cpfile = os.path.join(jdbc, "classpath.txt")
    base = ["mvn", "-B", "-q", f"-Dmaven.repo.local={os.path.join(util.REPO_ROOT, '.cache', 'm2')}",
            f"-Djdbccheck.build={jdbc}", "compile", "dependency:build-classpath",
            f"-Dmdep.outputFile={cpfile}"]
    src = os.path.join(DRIVERS_DIR, "jdbc")
    r = subprocess.run(base[:3] + ["-o"] + base[3:], cwd=src, capture_output=True, text=True,
                       timeout=600)
    if r.returncode != 0:
        build(base, src, "mvn compile")
    with open(cpfile) as f:
        return os.path.join(jdbc, "classes") + ":" + f.read().strip()


def node_modules():
    path = os.path.join(CACHE, "node", "node_modules")
    if not os.path.isdir(os.path.join(path, "pg")):
        pytest.fail("node-postgres not installed in .cache/drivers/node (scripts/deps.sh installs it)")
    return path


def command(request, driver, p, table):
    conninfo = (f"host={p.host} port={p.port} dbname=testdb user={USER} "
                f"password={password(USER)} sslmode=disable")
    py = os.path.join(util.REPO_ROOT, ".venv", "bin", "python")
    env = dict(os.environ, REUSE=str(REUSE))
    if driver in ("psycopg", "asyncpg"):
        return [py, os.path.join(DRIVERS_DIR, "python", f"{driver}_check.py"), conninfo, table], env
    if driver == "pgx":
        return [request.getfixturevalue("pgx_binary"), conninfo, table], env
    if driver == "jdbc":
        url = f"jdbc:postgresql://{p.host}:{p.port}/testdb?prepareThreshold=1&sslmode=disable"
        return ["java", "-cp", request.getfixturevalue("jdbc_classpath"), "pgcrew.JdbcCheck",
                url, USER, password(USER), table], env
    env["NODE_PATH"] = node_modules()
    return ["node", os.path.join(DRIVERS_DIR, "node", "check.js"), conninfo, table], env


class Churn:
    """Clients keeping the pool's servers busy with short prepared
    transactions, so that a driver's next transaction lands on whichever
    backend is free, and the console's RECONNECT every 0.05 s, so that the
    backends are replaced by new ones where no statement is prepared yet
    (often enough that a fast driver's 3000 executions, well under a
    second, still see more than one backend)."""

    def __init__(self, p, n=6):
        self.conns = [psycopg.connect(autocommit=True, prepare_threshold=0,
                                      **p.conninfo("testdb", USER, password=password(USER)))
                      for _ in range(n)]
        self.admin = p.admin(password=password("trust_user"))
        self.stop = threading.Event()
        self.errors = []
        self.threads = [threading.Thread(target=self.run, args=(c,)) for c in self.conns]
        self.threads.append(threading.Thread(target=self.reconnect))
        for t in self.threads:
            t.start()

    def reconnect(self):
        try:
            while not self.stop.wait(0.05):
                self.admin.execute("RECONNECT testdb")
        except Exception as exc:  # reported by finish()
            self.errors.append(repr(exc))

    def run(self, conn):
        try:
            while not self.stop.is_set():
                with conn.transaction():
                    conn.execute("SELECT %s::int", (1,)).fetchone()
                    conn.execute("SELECT pg_sleep(0.002)")
        except Exception as exc:  # reported by finish()
            self.errors.append(repr(exc))

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)
        for c in self.conns + [self.admin]:
            c.close()
        assert not self.errors, self.errors


# The first run fetches the drivers (Maven Central, Go module proxy).
@pytest.mark.timeout(600)
@pytest.mark.parametrize("driver", ["psycopg", "asyncpg", "pgx", "jdbc", "node"])
def test_driver(request, pg, make_pooler, driver):
    table = f"drv_{driver}"
    with pg.connect("testdb") as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        conn.execute(f'CREATE TABLE "{table}" (id int PRIMARY KEY, t text)')
        conn.execute(f'GRANT ALL ON "{table}" TO {USER}')
    p = make_pooler(pg, settings=SETTINGS)
    argv, env = command(request, driver, p, table)
    churn = Churn(p)
    try:
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    finally:
        churn.finish()
    assert r.returncode == 0, f"{driver} failed:\n{r.stderr[-4000:]}\n{r.stdout[-2000:]}"
    got = json.loads(r.stdout.strip().splitlines()[-1])
    print(driver, pg.name, got)
    assert got["reused"] == REUSE
    # The reused statement followed the client across servers.
    assert got["backends"] >= 2, got
    assert got["large_rows"] == 100000
    assert got["copy_rows"] == 1000
    assert got["cancel_seconds"] < 10
    with pg.connect("testdb") as conn:
        rows = conn.execute(f'SELECT t, count(*) FROM "{table}" GROUP BY t ORDER BY t').fetchall()
    counts = dict(rows)
    assert counts.pop("b") == 1                     # the committed row, not the rolled-back one
    assert counts.pop("p", 0) == PIPELINED_ROWS[driver]
    assert len(counts) == 1000 and all(n == 1 for n in counts.values())   # the COPY rows
    # Nothing was left behind on the pool: a plain client works, no backend
    # stayed in a transaction.
    with p.connect("testdb", USER, password=password(USER)) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
    with pg.connect("testdb") as conn:
        stuck = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'testdb' "
                             "AND state LIKE 'idle in transaction%'").fetchone()[0]
    assert stuck == 0
