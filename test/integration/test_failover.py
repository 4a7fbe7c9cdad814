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
    yield from make_pair(request, session_dir, pg_cluster.PG15_BINDIR)


@pytest.fixture
def pair13(request, session_dir):
    """The same with PostgreSQL 13, which reports no role at login: pgcrew
    asks it with a query, as libpq does."""
    import pg_cluster
    bindir = pg_cluster.unpack_pg13(os.path.join(session_dir, f"pg13-{request.node.name[-30:]}"))
    yield from make_pair(request, session_dir, bindir)


def make_pair(request, session_dir, bindir):
    import pg_cluster
    base = os.path.join(session_dir, f"fo-{request.node.name[-40:]}")
    os.makedirs(base)
    primary = pg_cluster.PgCluster("primary", bindir, os.path.join(base, "p"))
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
    check_routes(pair, make_pooler, lb)


@pytest.mark.parametrize("lb", ["disable", "round-robin"])
def test_tsa_routes_pg13(pair13, make_pooler, lb):
    """PostgreSQL 13: the role comes from pgcrew's query after login."""
    primary, _ = pair13
    assert primary.version // 10000 == 13, primary.version
    p = check_routes(pair13, make_pooler, lb)
    # A primary made read-only by default is no longer read-write.
    with primary.connect() as conn:
        conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
        conn.execute("SELECT pg_reload_conf()")
    with p.admin() as a:
        a.execute("RECONNECT rw")
        a.execute("RECONNECT prim")
    assert where(p, "prim") == (False, primary.host)
    p.wait_for_log(r"host role: database=prim host=127\.0\.0\.1 port=\d+ role=read-only "
                   r"previous=primary")
    with pytest.raises(psycopg.OperationalError, match="query_wait_timeout"):
        with p.connect("rw") as conn:
            conn.execute("SELECT 1")


def check_routes(pair, make_pooler, lb):
    primary, standby = pair
    p = make_pooler(primary, settings={"pool_mode": "transaction", "query_wait_timeout": 2},
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
    return p


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
    check_failover(pair, make_pooler, lb)


def test_failover_without_reload_pg13(pair13, make_pooler):
    """The same on PostgreSQL 13, where only pgcrew's role query after each
    login tells the promoted standby from the old primary."""
    check_failover(pair13, make_pooler, "disable")


def check_failover(pair, make_pooler, lb):
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
    print(f"PostgreSQL {primary.version // 10000} load_balance_hosts={lb} "
          f"workers={p.settings.get('workers')}: first write "
          f"{(first - promoted) * 1000:.0f} ms after the promotion; {failed} failed, "
          f"{done_after} written after it")
    assert done_after > 20
    assert where(p, "rw") == (False, STANDBY_HOST)
    with standby.connect("testdb") as conn:
        assert conn.execute("SELECT count(*) FROM fo").fetchone()[0] >= done_after


def test_tsa_addresses_of_one_name(pair, make_pooler, monkeypatch):
    """One host name with several addresses (a hosts file for c-ares,
    CARES_HOSTS): a server on the address that does not match is closed and
    the name's next address tried at once, as libpq does; an address that
    refuses connections is passed over the same way, with `any` too."""
    primary, standby = pair
    port = primary.port
    p = make_pooler(primary, settings={"pool_mode": "transaction", "query_wait_timeout": 5},
                    databases={"rw": f"host=pgfleet port={port} dbname=testdb "
                                     "target_session_attrs=read-write",
                               "stby": f"host=pgfleet port={port} dbname=testdb "
                                       "target_session_attrs=standby",
                               "anyhost": f"host=pgdead port={port} dbname=testdb",
                               "spread": f"host=pgboth port={port} dbname=testdb "
                                         "pool_mode=session"},
                    start=False)
    hosts = os.path.join(p.workdir, "hosts")
    with open(hosts, "w") as f:
        f.write(f"{STANDBY_HOST} pgfleet\n{primary.host} pgfleet\n"
                f"127.0.0.3 pgdead\n{primary.host} pgdead\n"
                f"{primary.host} pgboth\n{STANDBY_HOST} pgboth\n")
    os.chmod(hosts, 0o644)
    monkeypatch.setenv("CARES_HOSTS", hosts)
    p.start()
    for _ in range(4):
        assert where(p, "rw") == (False, primary.host)
        assert where(p, "stby") == (True, STANDBY_HOST)
        assert where(p, "anyhost") == (False, primary.host)
    log = p.log_text()
    # Whichever order the resolver gives, each pool met the other address once.
    assert "server does not match target_session_attrs=read-write (role=standby)" in log or \
        "server does not match target_session_attrs=standby (role=primary)" in log, log
    # `any` spreads servers over a name's addresses, as PgBouncer does.
    conns = [p.connect("spread") for _ in range(4)]
    addrs = [c.execute("SELECT host(inet_server_addr())").fetchone()[0] for c in conns]
    assert sorted(addrs) == [primary.host] * 2 + [STANDBY_HOST] * 2, addrs
    with p.admin() as a:
        rows = a.execute("SHOW HOSTS").fetchall()
    roles = {(r[0], r[1]): r[4] for r in rows}
    assert roles[("rw", "pgfleet")] == "primary" and roles[("stby", "pgfleet")] == "standby", rows
