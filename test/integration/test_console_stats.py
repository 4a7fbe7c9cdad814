"""SHOW STATS and SHOW TOTALS read as PgBouncer's: a console connection is
one transaction and one query of the admin database, and the averages have
values before the first stats_period has passed. Run with workers 1 and 4
and against PgBouncer 1.18 (PGCREW_BIN=/usr/sbin/pgbouncer)."""

WORKERS_MATRIX = (1, 4)


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
