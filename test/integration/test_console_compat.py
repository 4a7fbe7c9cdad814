"""Console views a PgBouncer user's scripts read, checked the same way
against pgcrew (workers 1 and 4) and Debian's PgBouncer 1.18
(PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer)."""

import os
import socket

import pytest

from pg_cluster import password

WORKERS_MATRIX = (1, 4)


def admin(p, user="trust_user"):
    return p.connect("pgbouncer", user, password=password(user))


def test_console_pool_is_pgbouncers(pg15, make_pooler):
    """Console clients of any user share PgBouncer's one console pool:
    SHOW POOLS lists it as (pgbouncer, pgbouncer), SHOW DATABASES gives the
    pgbouncer entry force_user pgbouncer and pool_size 2, while SHOW CLIENTS
    keeps each client's own user. The same test passes against PgBouncer 1.18."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "admin_users": "trust_user",
                                    "stats_users": "md5_user", "auth_type": "md5"})
    conns = [admin(p), admin(p), p.connect("pgbouncer", "md5_user", password=password("md5_user"))]
    cur = conns[0].execute("SHOW POOLS")
    names = [d.name for d in cur.description]
    pools = [dict(zip(names, r)) for r in cur.fetchall() if r[0] == "pgbouncer"]
    assert [(r["database"], r["user"]) for r in pools] == [("pgbouncer", "pgbouncer")], pools
    assert pools[0]["cl_active"] == 3, pools
    cur = conns[0].execute("SHOW DATABASES")
    names = [d.name for d in cur.description]
    db = [dict(zip(names, r)) for r in cur.fetchall() if r[0] == "pgbouncer"][0]
    assert (db["force_user"], db["pool_size"], db["pool_mode"]) == ("pgbouncer", 2, "statement"), db
    cur = conns[0].execute("SHOW CLIENTS")
    names = [d.name for d in cur.description]
    users = sorted(dict(zip(names, r))["user"] for r in cur.fetchall())
    assert users == ["md5_user", "trust_user", "trust_user"], users
    for c in conns:
        c.close()


@pytest.mark.parametrize("listen", ["127.0.0.1", "*", "127.0.0.1,::1"])
def test_show_clients_addresses(pg15, make_pooler, listen):
    """SHOW CLIENTS' addr/port and local_addr/local_port are the two ends of
    the client's socket, whether the listener is bound to one address (the
    local end known from the listener), to every address (asked of the
    kernel) or to IPv6, and for sockets another worker accepted. The same
    test passes against PgBouncer 1.18."""
    p = make_pooler(pg15, settings={"listen_addr": listen})
    host = "::1" if "::1" in listen else "127.0.0.1"
    conns = [p.connect("testdb", "trust_user", password=password("trust_user"), host=host,
                       application_name=f"addr-{i}") for i in range(8)]
    try:
        ends = {}
        for i, c in enumerate(conns):
            with socket.socket(fileno=os.dup(c.pgconn.socket)) as s:
                mine, theirs = s.getsockname(), s.getpeername()
            ends[f"addr-{i}"] = (mine[0], mine[1], theirs[0], theirs[1])
        with p.connect("pgbouncer", "trust_user", password=password("trust_user"),
                       host=host) as a:
            cur = a.execute("SHOW CLIENTS")
            names = [d.name for d in cur.description]
            rows = {r["application_name"]: r for r in (dict(zip(names, t)) for t in cur.fetchall())}
        for app, (addr, port, laddr, lport) in ends.items():
            r = rows[app]
            assert (r["addr"], r["port"], r["local_addr"], r["local_port"]) == \
                (addr, port, laddr, lport), app
        assert lport == p.port
    finally:
        for c in conns:
            c.close()


def test_lists_in_pgbouncers_order(pg15, make_pooler, pooler_workers):
    """PgBouncer keeps its databases, users and pools sorted by name (byte
    order; pools by database, then user): SHOW DATABASES, USERS, POOLS and
    STATS list them so whatever order they were defined or used in, and
    with several workers whichever worker made them."""
    dbs = {name: pg15.dsn("testdb") for name in ("zeta", "Alpha", "mid", "alpha_2", "beta")}
    p = make_pooler(pg15, databases=dbs, settings={"auth_type": "trust", "admin_users": "trust_user"},
                    userlist={"trust_user": "", "zz_user": "", "md5_user": "", "a_user": ""})
    for db in ("mid", "zeta", "beta", "Alpha", "alpha_2"):
        with p.connect(db, "trust_user") as conn:
            conn.execute("SELECT 1")
    with p.admin() as adm:
        names = [r[0] for r in adm.execute("SHOW DATABASES").fetchall()]
        assert names == sorted(names, key=lambda s: s.encode()), names
        users = [r[0] for r in adm.execute("SHOW USERS").fetchall()]
        assert users == sorted(users, key=lambda s: s.encode()), users
        pools = [(r[0], r[1]) for r in adm.execute("SHOW POOLS").fetchall()]
        assert pools == sorted(pools, key=lambda t: (t[0].encode(), t[1].encode())), pools
        stats = [r[0] for r in adm.execute("SHOW STATS").fetchall()]
        assert stats == sorted(stats, key=lambda s: s.encode()), stats
        assert {"zeta", "Alpha", "mid", "alpha_2", "beta"} <= set(names)
