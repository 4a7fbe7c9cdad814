"""Monitoring clients as they really connect: a small Go program (test/
integration/go/consolecheck) built here with github.com/lib/pq (database/sql
and the simple protocol, as the community pgbouncer_exporter) and with
github.com/jackc/pgx/v5 (extended protocol, binary integers) runs every SHOW
command against the console of a four-worker pgcrew and reads each column by
name into a value of its type. Its columns must be psycopg's, with the same
types, and its values what the test set up."""

import json
import os
import shutil
import subprocess

import pytest

import util
from pg_cluster import password

pytestmark = pytest.mark.pgcrew_only

WORKERS = 4
GO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "go", "consolecheck")
TYPE_NAMES = {17: "BYTEA", 20: "INT8", 21: "INT2", 23: "INT4", 25: "TEXT"}
SHOWS = ["HELP", "VERSION", "CONFIG", "DATABASES", "POOLS", "CLIENTS", "SERVERS", "USERS",
         "LISTS", "STATS", "STATS_TOTALS", "STATS_AVERAGES", "TOTALS", "STATE", "DNS_HOSTS",
         "DNS_ZONES", "PEERS", "PEER_POOLS", "WORKERS", "FDS", "SOCKETS", "ACTIVE_SOCKETS", "MEM",
         "PROTOCOLS"]


def go_binary():
    """The toolchain scripts/deps.sh settled on: the one it fetched into
    .cache/go (only when none on the machine was new enough), else
    /usr/local/go, else PATH."""
    for go in (os.path.join(util.REPO_ROOT, ".cache", "go", "bin", "go"),
               "/usr/local/go/bin/go", shutil.which("go") or ""):
        if go and os.access(go, os.X_OK):
            return go
    pytest.fail("no Go toolchain (scripts/deps.sh installs one): cannot build the driver test")


@pytest.fixture(scope="module")
def consolecheck(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("go") / "consolecheck")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    r = subprocess.run([go_binary(), "build", "-o", out, "."], cwd=GO_DIR, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def run(binary, driver, p):
    conninfo = (f"host={p.host} port={p.port} dbname=pgbouncer user=trust_user "
                f"password={password('trust_user')} sslmode=disable")
    r = subprocess.run([binary, driver, conninfo] + [f"SHOW {s}" for s in SHOWS],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return {res["command"][5:]: res for res in map(json.loads, r.stdout.splitlines())}


@pytest.mark.parametrize("driver", ["pq", "pgx"])
def test_go_drivers_read_every_show(pg15, make_pooler, consolecheck, driver):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "session",
                                    "admin_users": "trust_user", "auth_type": "md5"})
    conns = [p.connect("testdb", "trust_user", password=password("trust_user")) for _ in range(6)]
    for c in conns:
        c.execute("SELECT 1")
    try:
        got = run(consolecheck, driver, p)
        with p.connect("pgbouncer", "trust_user", password=password("trust_user")) as a:
            for show in SHOWS:
                res = got[show]
                assert "error" not in res, (driver, show, res.get("error"))
                cur = a.execute(f"SHOW {show}")
                want = [{"name": d.name, "type": TYPE_NAMES[d.type_code]}
                        for d in (cur.description or [])]
                assert res["columns"] == want, (driver, show)
        # Values arrive typed and right.
        assert sorted(r["worker"] for r in got["WORKERS"]["rows"]) == list(range(WORKERS))
        assert all(isinstance(r["pid"], int) for r in got["WORKERS"]["rows"])
        assert got["VERSION"]["rows"][0]["version"].startswith("pgcrew ")
        assert {r["key"]: r["value"] for r in got["STATE"]["rows"]}["paused"] == "no"
        pool = [r for r in got["POOLS"]["rows"] if r["database"] == "testdb"]
        assert len(pool) == 1 and pool[0]["cl_active"] == 6 and pool[0]["sv_active"] == 6
        assert sum(r["type"] == "C" and r["database"] == "testdb" for r in got["CLIENTS"]["rows"]) == 6
        assert sum(r["task"] == "server" for r in got["FDS"]["rows"]) == 6
        assert all(r["scram_client_key"] is None for r in got["FDS"]["rows"])
        assert all(r["cancel_key"] is not None for r in got["FDS"]["rows"] if r["task"] != "pooler")
        protos = [r for r in got["PROTOCOLS"]["rows"] if r["database"] == "testdb"]
        assert sorted((r["type"], r["protocol"], r["key_bytes"]) for r in protos) == \
            [("C", "3.0", 4)] * 6 + [("S", "3.0", 4)] * 6        # libpq's default; PostgreSQL 15
        mem = {r["name"]: r for r in got["MEM"]["rows"]}
        assert mem["server_cache"]["used"] == 6
        stats = {r["database"]: r for r in got["STATS"]["rows"]}
        assert isinstance(stats["testdb"]["total_query_count"], int)
        assert got["HELP"]["rows"] == []
    finally:
        for c in conns:
            c.close()
    util.wait_until(lambda: p.alive(), 1, what="pgcrew alive")
