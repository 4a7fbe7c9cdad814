"""Socket ids (SHOW CLIENTS, SERVERS, SOCKETS `id`): one counter for clients
and servers, as PgBouncer's, so the numbering has no gaps; a server moved
to another worker keeps its id and takes no new one. Ids are taken at the
events where PgBouncer 1.25 takes them, in its order (issue 43 item 3):
test_ids_in_pgbouncer_order runs against PgBouncer 1.25 too
(PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer). Workers 1 and 4."""

import psycopg
import pytest

import util
from pooler import show_rows
from test_workers import connect_on_worker

WORKERS_MATRIX = (1, 4)

PASSWORD = "trust-secret"      # trust_user's in the userlist
MISSING_DB = "pgcrew_missing_db"


def own_id(adm):
    """The id of console connection adm (the only console client)."""
    cur = adm.execute("SHOW CLIENTS")
    names = [d.name for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    return [r["id"] for r in rows if r["database"] == "pgbouncer"][0]


def socket_ids(p, view):
    return sorted(r["id"] for r in p.show(view) if r["database"] == "testdb")


@pytest.mark.pgcrew_only     # reads pgcrew's log and its worker ids
def test_ids_have_no_gaps(pg15, make_pooler, pooler_workers):
    """Each new socket takes the next id; moving the one server between
    workers' clients (workers = 4) takes none."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "pool_mode": "transaction",
                                    "default_pool_size": 1})
    # The start check's connection (Pooler.start) takes an id too, when its
    # worker gets to it: on a busy machine that can be inside the window
    # counted below. Wait until it has been handled.
    p.wait_for_log(r"\(nodb\)/\(nouser\)@\S+ closing because: client unexpected eof")
    a = connect_on_worker(p, 0, user="trust_user", dbname="testdb")
    b = (connect_on_worker(p, None, other_than=0, user="trust_user", dbname="testdb")
         if pooler_workers > 1 else p.connect("testdb", "trust_user"))
    a.execute("SELECT 1")
    with p.admin() as adm:
        first = own_id(adm)
    for i in range(5):                       # with 4 workers the server moves each time
        for conn in (a, b):
            conn.execute(f"SELECT {i}")
    (server,) = socket_ids(p, "SERVERS")     # took an id of the console's show
    with p.connect("testdb", "trust_user") as c:
        c.execute("SELECT 1")
        with p.admin() as adm:
            last = own_id(adm)
        clients = socket_ids(p, "CLIENTS")
    # ids after `first`: p.show's console, client c, then this console
    assert last == first + 3, (first, last, clients, server)
    assert server < first and len(set(clients + [server])) == len(clients) + 1
    a.close()
    b.close()


def by_name(rows, kind):
    """{application_name or "console": id} of the rows of one type."""
    return {(r["application_name"] or "console"): r["id"] for r in rows if r["type"] == kind}


def test_ids_in_pgbouncer_order(pg15, make_pooler):
    """A fixed sequence, one step at a time (with 4 workers too): with the
    console open, clients log in and take servers, a query is canceled,
    cancels come for clients with nothing running, logins fail (unknown
    database, wrong password, a server login PostgreSQL refuses), and a
    server released by one client goes to the next. PgBouncer numbers
    every socket it accepts and every server it opens, the one it opens to
    forward a cancel included; the views show those ids, in that order.
    The pool sizes make the server one client leaves the only one the next
    can have: with 4 workers, a client of another worker might otherwise
    open a new one rather than wait for it to move (pgcrew waits 20 ms)."""
    databases = {"testdb": pg15.dsn("testdb", pool_size=2), "missing": pg15.dsn(MISSING_DB),
                 "txdb": pg15.dsn("testdb", pool_mode="transaction", pool_size=1)}
    p = make_pooler(pg15, settings={"pool_mode": "session", "auth_type": "md5"},
                    databases=databases)
    if p.kind == "pgcrew":
        # The start check's connection (Pooler.start) takes an id when
        # its worker gets to it; PgBouncer's one accept queue has taken it
        # before the console's.
        p.wait_for_log(r"\(nodb\)/\(nouser\)@\S+ closing because: client unexpected eof")

    def connect(name, db="testdb", password=PASSWORD):
        return p.connect(db, password=password, application_name=name)

    adm = p.admin(password=PASSWORD)             # n
    c1 = connect("c1")                           # n+1, a new pool: its server at login n+2
    c1.execute("SELECT 1")
    c2 = connect("c2")                           # n+3
    c2.execute("SELECT 1")                       # a second server, n+4
    canceller = util.cancel_when_active(pg15, c2, "SELECT pg_sleep(30)")
    with pytest.raises(psycopg.errors.QueryCanceled):
        c2.execute("SELECT pg_sleep(30)")        # the cancel n+5, forwarded on n+6
    canceller.join(20)                           # its connection has closed
    assert not canceller.is_alive()
    c1.cancel()                                  # n+7: its session's server is
                                                 # linked, so it is forwarded (n+8)
    tx = connect("tx", db="txdb")                # n+9, a new pool: n+10
    tx.execute("SELECT 1")
    tx.cancel()                                  # n+11: no server linked, none opened
    with pytest.raises(psycopg.OperationalError):
        connect("bad", db="nosuchdb")            # n+12
    with pytest.raises(psycopg.OperationalError):
        connect("bad", password="wrong")         # n+13
    with pytest.raises(psycopg.OperationalError):
        connect("bad", db="missing")             # n+14, and n+15 that PostgreSQL refuses
    c1.close()                                   # its server is reset and goes idle
    util.wait_until(lambda: [r["state"] for r in show_rows(adm, "SERVERS")
                             if r["database"] == "testdb"].count("idle") == 1, 10,
                    what="c1's server idle")
    c3 = connect("c3")                           # n+16
    c3.execute("SELECT 1")                       # takes c1's server
    tx2 = connect("tx2", db="txdb")              # n+17
    tx2.execute("SELECT 1")                      # tx's server, idle

    clients = by_name(show_rows(adm, "CLIENTS"), "C")
    n = clients["console"]
    expect_clients = {"console": n, "c2": n + 3, "tx": n + 9, "c3": n + 16, "tx2": n + 17}
    expect_servers = {"c2": n + 4, "tx2": n + 10, "c3": n + 2}
    assert clients == expect_clients
    assert by_name(show_rows(adm, "SERVERS"), "S") == expect_servers
    sockets = show_rows(adm, "SOCKETS")
    assert by_name(sockets, "C") == expect_clients
    assert by_name(sockets, "S") == expect_servers
    for conn in (adm, c2, c3, tx, tx2):
        conn.close()
