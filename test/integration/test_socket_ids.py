"""Socket ids (SHOW CLIENTS, SERVERS, SOCKETS `id`): one counter for clients
and servers, as PgBouncer's, so the numbering has no gaps; a server moved
to another worker keeps its id and takes no new one. PgBouncer 1.18 has no
id column: pgcrew only, with workers 1 and 4."""

import pytest

from test_workers import connect_on_worker

pytestmark = pytest.mark.pgcrew_only

WORKERS_MATRIX = (1, 4)


def own_id(adm):
    """The id of console connection adm (the only console client)."""
    cur = adm.execute("SHOW CLIENTS")
    names = [d.name for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur.fetchall()]
    return [r["id"] for r in rows if r["database"] == "pgbouncer"][0]


def socket_ids(p, view):
    return sorted(r["id"] for r in p.show(view) if r["database"] == "testdb")


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
