"""server_check_query at its default (<empty>: an empty Query) with
server_check_delay = 0 (issue 43 item 2): a server is checked before it is
reused, as in PgBouncer 1.25, counted in PostgreSQL's own log (one
`statement: ` line per empty query; the test database logs every
statement). Workers 1 and 4, and PgBouncer 1.25
(PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer)."""

import re
import threading

import psycopg

import util

WORKERS_MATRIX = (1, 4)

# A database of its own, so that logging every statement touches no other
# test's database on the session's cluster.
CHECK_DB = "pgcrew_check_db"
CHECK = re.compile(r"LOG:  statement: $", re.M)


def check_db(pg):
    """The [databases] entries: CHECK_DB, and CHECK_DB with pool_size 1."""
    with pg.connect() as conn:
        try:
            conn.execute(f"CREATE DATABASE {CHECK_DB}")
        except psycopg.errors.DuplicateDatabase:
            pass
        conn.execute(f"ALTER DATABASE {CHECK_DB} SET log_statement = 'all'")
    return {"checkdb": pg.dsn(CHECK_DB), "checkdb1": pg.dsn(CHECK_DB, pool_size=1)}


class ServerLog:
    """PostgreSQL's log from a mark on. A backend writes its `statement:`
    line before it runs the statement, so the line is there once the
    pooler has the answer."""

    def __init__(self, pg):
        self.path = pg.logfile
        self.mark()

    def _size(self):
        with open(self.path, "rb") as f:
            return len(f.read())

    def mark(self):
        self.offset = self._size()

    def checks(self):
        """Empty queries logged since the mark; moves the mark."""
        with open(self.path, "rb") as f:
            text = f.read()[self.offset:].decode(errors="replace")
        self.offset += len(text.encode())
        return len(CHECK.findall(text))


def servers(p, db="checkdb"):
    return [s for s in p.show("SERVERS") if s["database"] == db]


def make(pg, make_pooler, mode):
    return make_pooler(pg, settings={"pool_mode": mode, "server_check_delay": 0},
                       databases=check_db(pg))


def test_reuse_is_checked(pg15, make_pooler):
    """Transaction pooling: every reuse of the server by the same client is
    checked first, and the client waits for that check rather than for a
    second server (PgBouncer's waiters wait for a server being tested)."""
    p = make(pg15, make_pooler, "transaction")
    log = ServerLog(pg15)
    a = p.connect("checkdb")
    a.execute("SELECT 1")        # a fresh server: whether PgBouncer checks it is chance
    log.mark()
    for n in (2, 3):
        a.execute(f"SELECT {n}")
        assert log.checks() == 1, f"query {n}"
    assert len(servers(p)) == 1, servers(p)


def test_next_client_is_checked(pg15, make_pooler):
    """The server one client used is checked before the next client's
    query. pool_size 1: with 4 workers, a client of another worker might
    otherwise open a server rather than wait for that one to move."""
    p = make(pg15, make_pooler, "transaction")
    a = p.connect("checkdb1")
    a.execute("SELECT 1")
    a.close()
    log = ServerLog(pg15)
    b = p.connect("checkdb1")
    b.execute("SELECT 2")
    assert log.checks() == 1


def test_server_released_to_a_waiter_is_checked(pg15, make_pooler):
    """pool_size 1: the server a transaction releases goes to the client
    waiting for it only after a check."""
    p = make(pg15, make_pooler, "transaction")
    holder = p.connect("checkdb1", autocommit=False)
    holder.execute("SELECT 1")                   # holds the only server
    waiter = p.connect("checkdb1")
    done = {}

    def run():
        done["row"] = waiter.execute("SELECT 2").fetchone()

    t = threading.Thread(target=run)
    t.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, db="checkdb1", what="the query queued")
    log = ServerLog(pg15)
    holder.commit()
    t.join(20)
    assert done.get("row") == (2,)
    assert log.checks() == 1


def test_idle_session_server_is_checked(pg15, make_pooler):
    """Session pooling: the released server gets server_reset_query, not a
    check; once it has been idle (SHOW SERVERS says used) the next client
    has it checked (pool_size 1, as above)."""
    p = make(pg15, make_pooler, "session")
    log = ServerLog(pg15)
    a = p.connect("checkdb1")
    a.execute("SELECT 1")
    a.close()
    util.wait_until(lambda: [s["state"] for s in servers(p, "checkdb1")] == ["used"], 10,
                    what="the idle server counted as used")
    assert log.checks() == 0
    b = p.connect("checkdb1")
    b.execute("SELECT 2")
    assert log.checks() == 1
