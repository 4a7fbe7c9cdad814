"""pool_idle_timeout (PgBouncer's development branch after 1.25.2, PR #1491):
a pool that has had no client for that long is dropped, its servers closed
whatever min_pool_size says, and it leaves SHOW POOLS until a client comes
again. With several workers a pool counts as used while a client of it is
connected to any worker; once none has been for the time, each worker drops
its own copy.

Every test is pgcrew_only: PgBouncer 1.18, the differential reference, has
no such setting (it would refuse the config file). Waits are for events (log
lines, SHOW POOLS, pg_stat_activity), bounded; "stays gone" is checked across
several janitor rounds by waiting for the once-a-second `stats:` line."""

import re

import pytest

import util

WORKERS_MATRIX = (1, 4)


def drop_line(db, user="trust_user"):
    return rf"dropping pool {db}/{user} as it has had no client for"


def pools(p):
    return {(r["database"], r["user"]) for r in p.show("POOLS")}


def config_value(p, key):
    return next(r["value"] for r in p.show("CONFIG") if r["key"] == key)


def backends(pg, db, n):
    util.wait_until(lambda: pg.server_connections(db, "trust_user") == n, 20,
                    what=f"{n} backend(s) of {db}/trust_user")


def pool_gone(p, pg, db, since):
    """The pool's drop is logged, it leaves SHOW POOLS, its backends end."""
    p.wait_for_log(drop_line(db), timeout=10, since=since)
    util.wait_until(lambda: (db, "trust_user") not in pools(p), 10,
                    what=f"{db}/trust_user to leave SHOW POOLS")
    backends(pg, db, 0)


def stays_gone(p, pg, db, since):
    """Over a few janitor rounds (three stats lines: at least 2 s, the
    janitor runs every 0.2 s) nothing opens the dropped pool again."""
    util.wait_until(lambda: p.log_text()[since:].count("LOG stats: ") >= 3, 10,
                    what="three stats lines")
    assert (db, "trust_user") not in pools(p)
    assert pg.server_connections(db, "trust_user") == 0
    assert not re.search(rf" {db}/trust_user@\S+ new connection to server", p.log_text()[since:])


@pytest.mark.pgcrew_only
def test_unused_pool_is_dropped(pg15, make_pooler, pooler_workers):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "min_pool_size": 2,
                                    "pool_idle_timeout": 1, "stats_period": 1})
    keeper = p.connect("testdb")            # its pool has a client throughout
    keeper.execute("SELECT 1")
    leaver = p.connect("otherdb")
    leaver.execute("SELECT 1")
    backends(pg15, "testdb", 2)
    backends(pg15, "otherdb", 2)
    mark = len(p.log_text())
    leaver.close()
    pool_gone(p, pg15, "otherdb", mark)
    p.wait_for_log(r"otherdb/trust_user@\S+ closing because: pool idle timeout \(age=", since=mark)
    # Its timeout has passed too, but the pool with a client is kept.
    assert ("testdb", "trust_user") in pools(p)
    assert "dropping pool testdb/" not in p.log_text()
    assert pg15.server_connections("testdb", "trust_user") == 2
    stays_gone(p, pg15, "otherdb", len(p.log_text()))
    # A new client makes the pool again, min_pool_size with it.
    again = p.connect("otherdb")
    assert again.execute("SELECT current_database()").fetchone() == ("otherdb",)
    assert ("otherdb", "trust_user") in pools(p)
    backends(pg15, "otherdb", 2)
    assert keeper.execute("SELECT 2").fetchone() == (2,)


@pytest.mark.pgcrew_only
def test_zero_never_drops_then_reload_sets_it(pg15, make_pooler, pooler_workers):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "min_pool_size": 1,
                                    "stats_period": 1})
    assert config_value(p, "pool_idle_timeout") == "0"         # the default: off
    with p.connect("otherdb") as c:
        c.execute("SELECT 1")
        backends(pg15, "otherdb", 1)
    mark = len(p.log_text())
    util.wait_until(lambda: p.log_text()[mark:].count("LOG stats: ") >= 3, 10,
                    what="three stats lines")
    assert ("otherdb", "trust_user") in pools(p)
    assert pg15.server_connections("otherdb", "trust_user") == 1
    assert "dropping pool" not in p.log_text()
    # RELOAD answers once every worker runs the new file.
    p.settings["pool_idle_timeout"] = 1
    p.write_config()
    mark = len(p.log_text())
    with p.admin() as admin:
        admin.execute("RELOAD")
    assert config_value(p, "pool_idle_timeout") == "1"
    pool_gone(p, pg15, "otherdb", mark)
    # SET takes the units of the other timeouts.
    with p.admin() as admin:
        admin.execute("SET pool_idle_timeout = '2min'")
    assert config_value(p, "pool_idle_timeout") == "120"


@pytest.mark.pgcrew_only
def test_forced_user_pool_is_not_reopened(pg15, make_pooler, pooler_workers):
    """A database with a forced user and min_pool_size has its pool opened
    by the janitor before any client; once dropped, only a client opens it
    again (or the janitor would reopen and drop it for ever)."""
    dbs = {"forced": pg15.dsn("otherdb", user="trust_user", min_pool_size=1)}
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "pool_idle_timeout": 1,
                                    "stats_period": 1}, databases=dbs)
    p.wait_for_log(r" forced/trust_user@\S+ new connection to server", timeout=10)
    pool_gone(p, pg15, "forced", 0)
    util.wait_until(lambda: pg15.server_connections("otherdb", "trust_user") == 0, 10,
                    what="the forced pool's backend to end")
    mark = len(p.log_text())
    util.wait_until(lambda: p.log_text()[mark:].count("LOG stats: ") >= 3, 10,
                    what="three stats lines")
    assert ("forced", "trust_user") not in pools(p)
    assert pg15.server_connections("otherdb", "trust_user") == 0
    assert not re.search(r" forced/trust_user@\S+ new connection to server", p.log_text()[mark:])
    with p.connect("forced") as c:
        assert c.execute("SELECT current_database()").fetchone() == ("otherdb",)
        assert ("forced", "trust_user") in pools(p)
        util.wait_until(lambda: pg15.server_connections("otherdb", "trust_user") == 1, 20,
                        what="min_pool_size server of the forced pool again")
