"""A server login that fails: what the clients waiting for that pool see,
what PostgreSQL sees and what the pooler logs (issue 29, item 4)."""

import os
import re
import threading
import time

import psycopg
import pytest

import util
from pg_cluster import password

USER = "plain_user"
WORKERS_MATRIX = (1, 4)


def _pg_log_size(pg):
    return os.path.getsize(pg.logfile)


def _pg_log_since(pg, offset):
    with open(pg.logfile, errors="replace") as f:
        f.seek(offset)
        return f.read()


def _connect_and_wait(p, results, i):
    start = time.monotonic()
    try:
        with psycopg.connect(autocommit=True, **p.conninfo(user=USER, password=password(USER),
                                                            connect_timeout=30)) as conn:
            conn.execute("SELECT 1")
            results[i] = ("ok", time.monotonic())
    except psycopg.Error as exc:
        results[i] = (str(exc), time.monotonic())


# PgBouncer 1.18 leaves a pool's waiters queued (query_wait_timeout) when a
# login fails after the pool's first one; later PgBouncers fail them at once.
@pytest.mark.pgcrew_only
def test_failed_login_fails_every_waiter_at_once(pg15, make_pooler, pooler_workers):
    """The password changes in PostgreSQL while server_lifetime recycles the
    pool's server: the one new login fails, and every client waiting for the
    pool gets PostgreSQL's error at once, each close logged."""
    p = make_pooler(pg15, settings={"default_pool_size": 1, "server_lifetime": 1,
                                    "server_login_retry": 15, "query_wait_timeout": 60})
    holder = p.connect(user=USER, password=password(USER))
    holder.execute("SELECT 1")
    born = time.monotonic()
    n = 4
    results = [None] * n
    threads = [threading.Thread(target=_connect_and_wait, args=(p, results, i)) for i in range(n)]
    for t in threads:
        t.start()
    p.wait_pool(lambda r: r["cl_waiting"] == n, user=USER, what=f"{n} clients waiting")
    pg_offset = _pg_log_size(pg15)
    log_offset = len(p.log_text())
    with pg15.connect() as conn:
        conn.execute(f"ALTER ROLE {USER} PASSWORD 'changed-under-the-pooler'")
    try:
        # server_lifetime must be over when the holder lets the server go.
        util.wait_until(lambda: time.monotonic() - born > 1.5, 5, what="server_lifetime")
        released = time.monotonic()
        holder.close()
        for t in threads:
            t.join(30)
        want = f'password authentication failed for user "{USER}"'
        for res in results:
            assert res is not None and want in res[0], results
            assert res[1] - released < 5, (res, released)
        util.wait_until(lambda: len(re.findall(
            r"C-\w+: \S+ closing because: " + re.escape(want), p.log_text()[log_offset:])) == n, 5,
            what=f"{n} closes logged")
        failed = _pg_log_since(pg15, pg_offset).count(want)
        assert failed == 1, _pg_log_since(pg15, pg_offset)
    finally:
        with pg15.connect() as conn:
            conn.execute(f"ALTER ROLE {USER} PASSWORD '{password(USER)}'")


# load_balance_hosts is PgBouncer 1.24+.
@pytest.mark.pgcrew_only
def test_dns_failure_of_the_first_host_moves_on_at_once(pg15, make_pooler, pooler_workers):
    """host=<a name that does not resolve>,<working host> with
    load_balance_hosts = disable: the first client's server goes on to the
    second host at once (not after server_login_retry), one close is logged
    as `server DNS lookup failed`, and later servers stay on the working host
    (issue 29, item 6)."""
    dsn = f"host=no-such-host.invalid,{pg15.host} port={pg15.port} dbname=testdb load_balance_hosts=disable"
    p = make_pooler(pg15, databases={"testdb": dsn},
                    settings={"server_login_retry": 30, "query_wait_timeout": 30})
    started = time.monotonic()
    with p.connect(connect_timeout=20) as conn:
        assert conn.execute("SELECT host(inet_server_addr())").fetchone() == ("127.0.0.1",)
    assert time.monotonic() - started < 10, p.log_tail()
    # More servers at once, so that every worker opens some: none tries the
    # failed name again.
    conns = [p.connect(connect_timeout=20) for _ in range(8)]
    for c in conns:
        c.execute("SELECT 1")
    for c in conns:
        c.close()
    log = p.log_text()
    assert len(re.findall(r"S-\w+: \S+ closing because: server DNS lookup failed", log)) == 1, log
