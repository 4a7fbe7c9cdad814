"""SHOW STATS and SHOW TOTALS read as PgBouncer's: a console connection is
one transaction and one query of the admin database, and the averages have
values before the first stats_period has passed; client logins are counted
as PgBouncer's development branch counts them. Run with workers 1 and 4
and against PgBouncer 1.25 (PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer)."""

import pytest

WORKERS_MATRIX = (1, 4)
INT4, TEXT = 23, 25


def stats(conn):
    cur = conn.execute("SHOW STATS")
    names = [d.name for d in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def counts(conn, db="pgbouncer"):
    row = stats(conn).get(db, {})
    return row.get("total_xact_count", 0), row.get("total_query_count", 0)


def test_console_connection_counts_once(pg15, make_pooler):
    """PgBouncer starts a console client's transaction and query at its
    first command and never ends them: each console connection counts one
    transaction and one query of "pgbouncer", whatever it runs."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "stats_period": 60})
    with p.admin() as a:
        assert counts(a) == (1, 1)
        for _ in range(3):
            a.execute("SHOW VERSION")
        assert counts(a) == (1, 1)
        with p.admin() as b:
            b.execute("SHOW VERSION")
            assert counts(b) == (2, 2)
        totals = dict(a.execute("SHOW TOTALS").fetchall())
        assert totals["total_xact_count"] == 2 and totals["total_query_count"] == 2


def test_averages_before_first_stats_period(pg15, make_pooler):
    """With stats_period far off, SHOW STATS' averages already describe the
    traffic so far, as PgBouncer's do."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "stats_period": 600})
    with p.connect("testdb", "trust_user") as c:
        c.execute("SELECT 1")
    with p.admin() as a:
        row = stats(a)["testdb"]
        totals = dict(a.execute("SHOW TOTALS").fetchall())
    assert row["total_xact_count"] == 1
    assert row["avg_recv"] > 0 and row["avg_sent"] > 0, row
    assert row["avg_xact_time"] == row["total_xact_time"] > 0, row
    assert row["avg_query_time"] == row["total_query_time"] > 0, row
    assert totals["avg_xact_time"] > 0 and totals["avg_query_time"] > 0, totals


@pytest.mark.pgcrew_only   # PgBouncer 1.18 has neither column nor SHOW USERS' sizes
def test_client_logins_counted(pg15, make_pooler):
    """PgBouncer's development branch: total_client_login_count in SHOW
    STATS (client_login_count in STATS_TOTALS and STATS_AVERAGES, and its
    avg_ column) counts the clients that logged in to a database."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "stats_period": 600})

    def logins(view="STATS", col="total_client_login_count"):
        with p.admin() as a:
            cur = a.execute(f"SHOW {view}")
            names = [d.name for d in cur.description]
            return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}.get("testdb", {}).get(col, 0)

    before = logins()
    for _ in range(5):
        with p.connect("testdb", "trust_user") as c:
            c.execute("SELECT 1")
    assert logins() - before == 5
    assert logins("STATS_TOTALS", "client_login_count") - before == 5
    with p.admin() as a:
        row = stats(a)["testdb"]
        assert row["avg_client_login_count"] > 0, row
        cur = a.execute("SHOW STATS_AVERAGES")
        assert "client_login_count" in [d.name for d in cur.description]


@pytest.mark.pgcrew_only   # PgBouncer's development branch: 1.25.2 has no login count
def test_client_logins_mixed_with_console(pg15, make_pooler):
    """As PgBouncer's development branch counts them (its test_show_stats):
    each login to a database counts in that database, each console login in
    "pgbouncer" from the login on (so the console connection that asks is
    counted), and SHOW TOTALS' total_client_login_count is their sum, with
    every worker's logins in it."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "stats_period": 600})

    def run(db, n):
        for _ in range(n):
            with p.connect(db) as c:
                c.execute("SELECT 1")

    run("testdb", 3)
    with p.admin() as a:                                  # console login 1
        a.execute("SHOW VERSION")
    run("otherdb", 2)
    with p.admin() as a:                                  # console login 2
        assert stats(a)["pgbouncer"]["total_client_login_count"] == 2
    run("testdb", 2)
    with p.admin() as a:                                  # console login 3
        rows = stats(a)
        cur = a.execute("SHOW STATS_TOTALS")
        names = [d.name for d in cur.description]
        totals_rows = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    logins = {db: rows[db]["total_client_login_count"] for db in ("testdb", "otherdb", "pgbouncer")}
    assert logins == {"testdb": 5, "otherdb": 2, "pgbouncer": 3}, logins
    assert {db: totals_rows[db]["client_login_count"] for db in logins} == logins
    with p.admin() as a:                                  # console login 4
        totals = dict(a.execute("SHOW TOTALS").fetchall())
    assert totals["total_client_login_count"] == 5 + 2 + 4, totals
    assert "avg_client_login_count" in totals, totals


@pytest.mark.pgcrew_only
def test_show_users_types(pg15, make_pooler):
    """SHOW USERS as PgBouncer returns it: pool_size and reserve_pool_size
    are text, the user's own setting right aligned in nine characters and
    empty when it has none; the connection counts are int4."""
    p = make_pooler(pg15, settings={"admin_users": "trust_user"},
                    users={"md5_user": "pool_size=5 reserve_pool_size=2"})
    with p.admin() as a:
        cur = a.execute("SHOW USERS")
        types = {d.name: d.type_code for d in cur.description}
        names = [d.name for d in cur.description]
        users = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
    assert [types[n] for n in names] == [TEXT, TEXT, TEXT, TEXT, INT4, INT4, INT4, INT4], types
    assert (users["md5_user"]["pool_size"], users["md5_user"]["reserve_pool_size"]) == \
        ("        5", "        2")
    assert (users["trust_user"]["pool_size"], users["trust_user"]["reserve_pool_size"]) == ("", "")
