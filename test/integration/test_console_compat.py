"""Console views a PgBouncer user's scripts read, checked the same way
against pgcrew (workers 1 and 4) and Debian's PgBouncer 1.18
(PGCREW_BIN=/usr/sbin/pgbouncer)."""


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
