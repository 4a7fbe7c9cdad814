"""sv_used: a server idle longer than server_check_delay is "used" in SHOW
POOLS (and SHOW SERVERS) until server_check_query has checked it, as in
PgBouncer. Workers 1 and 4, and PgBouncer 1.25.2
(PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer)."""

import util

WORKERS_MATRIX = (1, 4)


def test_idle_server_past_check_delay_is_used(pg15, make_pooler):
    p = make_pooler(pg15, settings={"admin_users": "trust_user", "pool_mode": "transaction",
                                    "server_check_delay": 1})
    with p.connect("testdb", "trust_user") as c:
        c.execute("SELECT 1")
        row = p.pool()
        assert (row["sv_idle"], row["sv_used"]) == (1, 0), row
        row = p.wait_pool(lambda r: r["sv_used"] == 1, timeout=10, what="server counted as used")
        assert row["sv_idle"] == 0, row
        servers = [s for s in p.show("SERVERS") if s["database"] == "testdb"]
        assert [s["state"] for s in servers] == ["used"], servers
        c.execute("SELECT 2")                # checked, then given to the client
        row = p.pool()
        # pgcrew may have opened a second server while the check ran
        assert row["sv_used"] == 0 and row["sv_idle"] >= 1, row
