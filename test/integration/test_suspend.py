"""SUSPEND and RESUME across four workers, as PgBouncer: after SUSPEND no
socket but the console's is read and no connection is accepted, so a query
on an open connection does not run until RESUME; SHOW STATE says so."""

import os
import signal
import threading
import time

import psycopg
import pytest

import util
import wire
from pg_cluster import password

pytestmark = pytest.mark.pgcrew_only

WORKERS = 4


def admin(p, user="trust_user"):
    return p.connect("pgbouncer", user, password=password(user))


def client(p, **kw):
    return p.connect("testdb", "trust_user", password=password("trust_user"), **kw)


def state(a):
    return dict(a.execute("SHOW STATE").fetchall())


def test_suspend_holds_queries_until_resume(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "admin_users": "trust_user", "stats_users": "md5_user",
                                    "auth_type": "md5"})
    conns = [client(p) for _ in range(8)]
    from test_workers import worker_of
    assert len({worker_of(c) for c in conns}) > 1
    for c in conns:
        c.execute("SELECT 1")
    # A stats user may look but not suspend.
    with admin(p, "md5_user") as s:
        with pytest.raises(psycopg.Error, match="admin access needed"):
            s.execute("SUSPEND")
    a = admin(p)
    try:
        t0 = time.monotonic()
        a.execute("SUSPEND")
        assert time.monotonic() - t0 < 5
        assert state(a) == {"active": "no", "paused": "no", "suspended": "yes"}
        with pytest.raises(psycopg.Error, match="^invalid command 'SUSPEND testdb', use SHOW HELP;$"):
            a.execute("SUSPEND testdb")

        done = {}

        def run(i, c):
            done[i] = c.execute(f"SELECT {i + 100}").fetchone()[0]

        threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(conns)]
        for t in threads:
            t.start()
        # Nothing may complete while suspended (a window, not a sync point).
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert not done, f"queries ran while suspended: {done}"
            time.sleep(0.05)
        # No new connection gets in either.
        t1 = time.monotonic()
        with pytest.raises(psycopg.OperationalError):
            client(p, connect_timeout=2)
        assert time.monotonic() - t1 < 5
        # The console still works, and RESUME lets every query finish.
        assert a.execute("SHOW VERSION").fetchone()[0].startswith("pgcrew")
        a.execute("RESUME")
        for t in threads:
            t.join(timeout=10)
        assert done == {i: i + 100 for i in range(len(conns))}
        assert state(a)["suspended"] == "no"
        with client(p, connect_timeout=5) as c:
            assert c.execute("SELECT 7").fetchone() == (7,)
    finally:
        a.close()
        for c in conns:
            c.close()
    p.assert_alive()


def test_sigusr2_resumes_after_suspend(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": 2, "admin_users": "trust_user", "auth_type": "md5"})
    c = client(p)
    with admin(p) as a:
        a.execute("SUSPEND")
        got = {}
        t = threading.Thread(target=lambda: got.setdefault("r", c.execute("SELECT 5").fetchone()))
        t.start()
        time.sleep(0.5)
        assert not got
        os.kill(p.pid, signal.SIGUSR2)
        t.join(timeout=10)
        assert got.get("r") == (5,)
        # Every worker resumes on the supervisor's word: the console's may
        # read it a moment after the client's worker did (CI, io_uring = 0,
        # six runners: "yes" right after the client's answer).
        util.wait_until(lambda: state(a)["suspended"] == "no", 5,
                        what="the console's worker to resume")
    c.close()


def test_suspend_waits_for_buffers_then_suspend_timeout(pg15, make_pooler):
    """A client that does not read its big result leaves bytes queued in
    pgcrew: SHOW ACTIVE_SOCKETS lists those sockets, SUSPEND does not return
    while they are queued, and suspend_timeout closes them."""
    p = make_pooler(pg15, settings={"workers": 2, "pool_mode": "session", "suspend_timeout": 2})
    raw = wire.RawConn(p.port, timeout=10)
    try:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message("SELECT repeat('x', 1048576) FROM generate_series(1, 256)"))
        with p.connect("pgbouncer", "trust_user") as a:
            def stuck():
                rows = a.execute("SHOW ACTIVE_SOCKETS").fetchall()
                return [r for r in rows if r[2] == "testdb"]
            active = util.wait_until(stuck, 10, what="a socket with queued bytes")
            assert any(r[0] == "S" and r[27] > 0 for r in active), active     # send_avail
            t0 = time.monotonic()
            a.execute("SUSPEND")
            took = time.monotonic() - t0
            assert 1.5 <= took < 6, took
            assert state(a)["suspended"] == "yes"
            a.execute("RESUME")
            # The stalled pair was closed; the kernel still hands the client
            # what it had buffered, then EOF.
            assert not [r for r in a.execute("SHOW SOCKETS").fetchall() if r[2] == "testdb"]
        p.wait_for_log("closing because: suspend_timeout", timeout=5)
        raw.wait_closed(timeout=20)
    finally:
        raw.close()
