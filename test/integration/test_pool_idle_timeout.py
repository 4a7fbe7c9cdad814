"""pool_idle_timeout as PgBouncer's development branch has it (after
1.25.2; its doc/config.md, "pool_idle_timeout"): a pool that has had no
client and no server connection for that long is freed, logged once for the
instance as `cleaning up idle pool for user U on db D because: pool idle
timeout (age=Ns)`; its servers go by server_idle_timeout, never by this
setting, and a pool with min_pool_size is kept. With several workers a pool
counts as used while any worker has a client or a server connection of it;
once none has had one for the time, each worker frees its own copy.

Every test is pgcrew_only: this is the development branch's behaviour, and
PgBouncer 1.25.2, the differential reference, has no such setting (it would
refuse the config file). Waits are for events (log lines, SHOW POOLS,
pg_stat_activity), bounded; "stays" is checked across several janitor
rounds by waiting for the once-a-second `stats:` line."""

import re

import pytest

import util

WORKERS_MATRIX = (1, 4)

# The development branch's line; age: how long the pool had nothing, in
# whole seconds.
CLEANED = r"LOG cleaning up idle pool for user {user} on db {db} because: pool idle timeout \(age=(\d+)s\)"


def cleaned(db, user="trust_user"):
    return CLEANED.format(db=re.escape(db), user=re.escape(user))


def pools(p):
    return {(r["database"], r["user"]) for r in p.show("POOLS")}


def config_value(p, key):
    return next(r["value"] for r in p.show("CONFIG") if r["key"] == key)


def backends(pg, db, n, user="trust_user"):
    util.wait_until(lambda: pg.server_connections(db, user) == n, 20,
                    what=f"{n} backend(s) of {db}/{user}")


def janitor_rounds(p):
    """At least 2 s, ten janitor rounds: three stats lines (stats_period 1)."""
    mark = len(p.log_text())
    util.wait_until(lambda: p.log_text()[mark:].count("LOG stats: ") >= 3, 10,
                    what="three stats lines")


def cleaned_up(p, db, since, user="trust_user"):
    """The pool's line (once for the instance), and it leaves SHOW POOLS."""
    p.wait_for_log(cleaned(db, user), timeout=10, since=since)
    util.wait_until(lambda: (db, user) not in pools(p), 10,
                    what=f"{db}/{user} to leave SHOW POOLS")
    lines = re.findall(cleaned(db, user), p.log_text()[since:])
    assert len(lines) == 1, lines
    return int(lines[0])


@pytest.mark.pgcrew_only   # PgBouncer's development branch, not in 1.25.2
def test_idle_pool_is_cleaned_up(pg15, make_pooler, pooler_workers):
    """A pool whose clients (on every worker, likely) have gone keeps its
    servers until server_idle_timeout closes them, then is freed a
    pool_idle_timeout later; a pool with a client is kept."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "pool_idle_timeout": 1,
                                    "server_idle_timeout": 2, "stats_period": 1})
    keeper = p.connect("testdb")            # its pool has a client throughout
    keeper.execute("SELECT 1")
    leavers = [p.connect("otherdb") for _ in range(2 * (pooler_workers or 1))]
    for c in leavers:
        c.execute("SELECT 1")
    mark = len(p.log_text())
    for c in leavers:
        c.close()
    # Its server connections go by server_idle_timeout (2 s), never by
    # pool_idle_timeout (1 s); the pool stays while they are there.
    age = cleaned_up(p, "otherdb", mark)
    assert age >= 1
    text = p.log_text()[mark:]
    closes = [m.end() for m in re.finditer(
        r"otherdb/trust_user@\S+ closing because: server idle timeout", text)]
    assert closes and re.search(cleaned("otherdb"), text).start() > closes[-1], text
    backends(pg15, "otherdb", 0)
    assert "closing because: pool idle timeout" not in p.log_text()
    # The pool with a client is kept (its server went by server_idle_timeout).
    assert ("testdb", "trust_user") in pools(p)
    assert not re.search(cleaned("testdb"), p.log_text())
    janitor_rounds(p)
    assert ("otherdb", "trust_user") not in pools(p)
    assert pg15.server_connections("otherdb", "trust_user") == 0
    # A new client makes the pool again.
    again = p.connect("otherdb")
    assert again.execute("SELECT current_database()").fetchone() == ("otherdb",)
    assert ("otherdb", "trust_user") in pools(p)
    assert keeper.execute("SELECT 2").fetchone() == (2,)


@pytest.mark.pgcrew_only   # PgBouncer's development branch, not in 1.25.2
def test_servers_keep_the_pool(pg15, make_pooler, pooler_workers):
    """server_idle_timeout = 0: a pool without clients keeps its server
    and so stays, however long; a RELOAD that lets the server go frees the
    pool a pool_idle_timeout after the server's close."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "pool_idle_timeout": 1,
                                    "server_idle_timeout": 0, "stats_period": 1})
    with p.connect("otherdb") as c:
        c.execute("SELECT 1")
    mark = len(p.log_text())
    janitor_rounds(p)
    janitor_rounds(p)
    row = p.pool("otherdb")
    assert row and row["cl_active"] == 0 and row["sv_idle"] == 1, row
    assert not re.search(cleaned("otherdb"), p.log_text())
    p.settings["server_idle_timeout"] = 1
    p.write_config()
    with p.admin() as admin:
        admin.execute("RELOAD")
    p.wait_for_log(r"otherdb/trust_user@\S+ closing because: server idle timeout", timeout=10,
                   since=mark)
    cleaned_up(p, "otherdb", mark)
    backends(pg15, "otherdb", 0)


@pytest.mark.pgcrew_only   # PgBouncer's development branch, not in 1.25.2
def test_min_pool_size_keeps_the_pool(pg15, make_pooler, pooler_workers):
    """min_pool_size keeps a pool: a database with a forced user, whose
    pool the janitor opens before any client, and one whose client left."""
    dbs = {"forced": pg15.dsn("otherdb", user="trust_user", min_pool_size=1),
           "testdb": pg15.dsn("testdb", min_pool_size=1)}
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "pool_idle_timeout": 1,
                                    "server_idle_timeout": 1, "stats_period": 1},
                    databases=dbs)
    p.wait_for_log(r" forced/trust_user@\S+ new connection to server", timeout=10)
    with p.connect("testdb") as c:
        c.execute("SELECT 1")
    janitor_rounds(p)
    janitor_rounds(p)
    assert {("forced", "trust_user"), ("testdb", "trust_user")} <= pools(p)
    assert "cleaning up idle pool" not in p.log_text()
    assert pg15.server_connections("otherdb", "trust_user") >= 1


@pytest.mark.pgcrew_only   # PgBouncer's development branch, not in 1.25.2
def test_zero_never_cleans_up_then_reload_sets_it(pg15, make_pooler, pooler_workers):
    """The default 0 keeps every pool; a RELOAD that sets the timeout
    counts from the pool's last use (its server's close), not from the
    RELOAD; SET takes the units of the other timeouts."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "server_idle_timeout": 1,
                                    "stats_period": 1})
    assert config_value(p, "pool_idle_timeout") == "0"
    mark = len(p.log_text())
    with p.connect("otherdb") as c:
        c.execute("SELECT 1")
    p.wait_for_log(r"otherdb/trust_user@\S+ closing because: server idle timeout", timeout=10,
                   since=mark)
    janitor_rounds(p)
    assert ("otherdb", "trust_user") in pools(p)
    assert "cleaning up idle pool" not in p.log_text()
    p.settings["pool_idle_timeout"] = 1
    p.write_config()
    mark = len(p.log_text())
    with p.admin() as admin:
        admin.execute("RELOAD")           # answered once every worker runs the new file
    assert config_value(p, "pool_idle_timeout") == "1"
    assert cleaned_up(p, "otherdb", mark) >= 2   # unused since well before the RELOAD
    with p.admin() as admin:
        admin.execute("SET pool_idle_timeout = '2min'")
    assert config_value(p, "pool_idle_timeout") == "120"
