"""target_session_attrs over a [databases] host list, against a real primary
and its streaming standby (pg_basebackup -R): each pool is served by the
hosts whose role matches (read-write, read-only, primary, standby,
prefer-standby; libpq's meanings), whatever the order of the list, with
load_balance_hosts disable and round-robin, one worker and four. After a
promotion of the standby and a fast stop of the old primary, writes go on
through pgcrew without a reload; the time from the promotion to the first
successful write and the failed transactions are printed.

The standby listens on 127.0.0.2 with the primary's port, so one host list
with one port names both. PgBouncer has no target_session_attrs."""

import os
import threading
import time

import psycopg
import pytest

import util

pytestmark = pytest.mark.pgcrew_only
WORKERS_MATRIX = (1, 4)
STANDBY_HOST = "127.0.0.2"


@pytest.fixture
def pair(request, session_dir):
    """A fresh primary and its standby (the test may promote or stop them)."""
    import pg_cluster
    base = os.path.join(session_dir, f"fo-{request.node.name[-40:]}")
    os.makedirs(base)
    primary = pg_cluster.PgCluster("primary", pg_cluster.PG15_BINDIR, os.path.join(base, "p"))
    os.makedirs(primary.basedir)
    standby = None
    try:
        primary.init()
        standby = primary.make_standby("standby", os.path.join(base, "s"), STANDBY_HOST)
        with primary.connect("testdb") as conn:
            conn.execute("CREATE TABLE fo (id serial primary key, at timestamptz default now())")
            conn.execute("GRANT ALL ON fo, fo_id_seq TO PUBLIC")
        util.wait_until(lambda: in_recovery(standby) and has_table(standby), 30,
                        what="the standby to replay the table")
        yield primary, standby
    finally:
        if standby:
            standby.stop("immediate")
        primary.stop("immediate")


def in_recovery(pg):
    with pg.connect() as conn:
        return conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]


def has_table(pg):
    with pg.connect("testdb") as conn:
        return conn.execute("SELECT to_regclass('fo') IS NOT NULL").fetchone()[0]


def databases(primary, tsa_lb):
    """One entry per target_session_attrs, each listing the standby first."""
    hosts = f"host={STANDBY_HOST},{primary.host} port={primary.port} dbname=testdb"
    return {name: f"{hosts} target_session_attrs={tsa} load_balance_hosts={tsa_lb}"
            for name, tsa in (("rw", "read-write"), ("ro", "read-only"), ("prim", "primary"),
                              ("stby", "standby"), ("pref", "prefer-standby"),
                              ("anyhost", "any"))}


def where(p, db):
    """(in recovery, server address) of the server a client of db gets."""
    with p.connect(db) as conn:
        return conn.execute("SELECT pg_is_in_recovery(), host(inet_server_addr())").fetchone()


@pytest.mark.parametrize("lb", ["disable", "round-robin"])
def test_tsa_routes(pair, make_pooler, lb):
    primary, standby = pair
    p = make_pooler(primary, settings={"pool_mode": "transaction"},
                    databases=databases(primary, lb))
    for _ in range(4):              # several servers, several workers
        assert where(p, "rw") == (False, primary.host)
        assert where(p, "prim") == (False, primary.host)
        assert where(p, "ro") == (True, STANDBY_HOST)
        assert where(p, "stby") == (True, STANDBY_HOST)
        assert where(p, "pref") == (True, STANDBY_HOST)
    # Clients never met a mismatching server: it was closed at login.
    with p.connect("rw") as conn:
        conn.execute("INSERT INTO fo DEFAULT VALUES")
    with p.admin() as a:
        cur = a.execute("SHOW HOSTS")
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    roles = {(r["database"], r["host"]): r["role"] for r in rows}
    assert roles[("rw", STANDBY_HOST)] == "standby" and roles[("rw", primary.host)] == "primary", rows
    assert {r["target_session_attrs"] for r in rows if r["database"] == "pref"} == {"prefer-standby"}
    p.wait_for_log(r"host role: database=rw host=127\.0\.0\.2 port=\d+ role=standby previous=unknown")
    p.wait_for_log(r"server does not match target_session_attrs=read-write \(role=standby\)")


def test_prefer_standby_falls_back(pair, make_pooler):
    """prefer-standby takes the primary while no standby is there."""
    primary, standby = pair
    p = make_pooler(primary, settings={"pool_mode": "transaction"},
                    databases=databases(primary, "disable"))
    standby.stop("fast")
    assert where(p, "pref") == (False, primary.host)


def writer(p, stop, log):
    """Inserts through rw until stopped, reconnecting after errors; log gets
    (time, ok) per attempt."""
    conn = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = psycopg.connect(autocommit=True, **p.conninfo("rw", connect_timeout=5))
            conn.execute("INSERT INTO fo DEFAULT VALUES")
            log.append((time.monotonic(), True))
        except psycopg.Error:
            log.append((time.monotonic(), False))
            if conn is not None:
                conn.close()
                conn = None
            time.sleep(0.02)
    if conn is not None:
        conn.close()


class Writers:
    """20 writers through the entry rw (test_patroni.py uses them too):
    `with Writers(p) as w:` runs them; w.wait_write_after(t) waits for a
    successful write after t; w.after(t) is (first write after t, failed
    attempts, writes after t) once they stopped."""

    def __init__(self, p, n=20):
        self.stop = threading.Event()
        self.logs = [[] for _ in range(n)]
        self.threads = [threading.Thread(target=writer, args=(p, self.stop, log))
                        for log in self.logs]

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def wait_write_after(self, t, timeout):
        util.wait_until(lambda: any(ok and at > t for log in self.logs for at, ok in log),
                        timeout, what="a write through pgcrew on the new primary")

    def after(self, t):
        events = [e for log in self.logs for e in log]
        first = min(at for at, ok in events if ok and at > t)
        failed = sum(1 for _, ok in events if not ok)
        return first, failed, sum(1 for at, ok in events if ok and at > t)


@pytest.mark.parametrize("lb", ["disable", "round-robin"])
def test_failover_without_reload(pair, make_pooler, lb):
    """20 writers in transaction pooling; the standby is promoted and the old
    primary stopped (fast): writes go on through pgcrew, no RELOAD."""
    primary, standby = pair
    p = make_pooler(primary, settings={"pool_mode": "transaction", "default_pool_size": 10,
                                       "query_wait_timeout": 30},
                    databases=databases(primary, lb))
    with Writers(p) as w:
        time.sleep(2)
        primary.stop("fast")
        standby.promote()
        promoted = time.monotonic()
        w.wait_write_after(promoted, 30)
        time.sleep(2)
    first, failed, done_after = w.after(promoted)
    print(f"load_balance_hosts={lb} workers={p.settings.get('workers')}: first write "
          f"{(first - promoted) * 1000:.0f} ms after the promotion; {failed} failed, "
          f"{done_after} written after it")
    assert done_after > 20
    assert where(p, "rw") == (False, STANDBY_HOST)
    with standby.connect("testdb") as conn:
        assert conn.execute("SELECT count(*) FROM fo").fetchone()[0] >= done_after
