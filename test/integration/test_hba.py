"""auth_type = hba: PgBouncer's pg_hba-format file decides, first matching
line wins, per connection type, database, user and address; no match and
reject lines are refused with PostgreSQL's wording; RELOAD re-reads it."""

import psycopg
import pytest

import util
from pg_cluster import password

HBA = """
# type  database  user        address        method
local   all       all                        trust
host    otherdb   all         127.0.0.1/32   reject
host    testdb    scram_user  127.0.0.1/32   scram-sha-256
host    all       md5_user    127.0.0.1/32   md5
host    "testdb"  trust_user  127.0.0.0/8    trust
host    all       all         ::1/128        scram-sha-256
"""


def login(p, user, db="testdb", **kw):
    with p.connect(dbname=db, user=user, password=password(user), connect_timeout=5, **kw) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


def refused(pooler_kind, pattern):
    """pgcrew answers with PostgreSQL's wording (issue 3); PgBouncer 1.25
    says "login rejected" for a reject line and "no authentication method
    is found" where no line matches (doc/config.md, Differences)."""
    if pooler_kind == "pgcrew":
        return pattern
    return "no authentication method is found" if pattern.startswith("no ") else "login rejected"


def test_hba_rules(pg15, make_pooler, pooler_kind):
    p = make_pooler(pg15, settings={"auth_type": "hba"}, hba=HBA)
    assert login(p, "scram_user") == "scram_user"
    assert login(p, "md5_user") == "md5_user"
    # First match wins: the otherdb reject line comes before md5_user's line.
    with pytest.raises(psycopg.OperationalError,
                       match=refused(pooler_kind, "pg_hba.conf rejects connection")):
        login(p, "md5_user", "otherdb")
    with p.connect(dbname="testdb", user="trust_user", connect_timeout=5) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match=refused(
            pooler_kind, 'pg_hba.conf rejects connection for host "127.0.0.1", user "scram_user", '
            'database "otherdb", no encryption')):
        login(p, "scram_user", "otherdb")
    with pytest.raises(psycopg.OperationalError, match=refused(
            pooler_kind, 'no pg_hba.conf entry for host "127.0.0.1", user "plain_user", '
            'database "testdb", no encryption')):
        login(p, "plain_user")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed|SASL"):
        p.connect(dbname="testdb", user="scram_user", password="wrong", connect_timeout=5)
    # Unix socket: the local line (trust).
    with psycopg.connect(host=p.workdir, port=p.port, dbname="testdb", user="plain_user",
                         connect_timeout=5) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "plain_user"


def test_hba_reload(pg15, make_pooler, pooler_kind):
    p = make_pooler(pg15, settings={"auth_type": "hba"}, hba=HBA)
    with pytest.raises(psycopg.OperationalError, match=refused(pooler_kind, "no pg_hba.conf entry")):
        login(p, "plain_user")
    p.hba = HBA + "host testdb plain_user 127.0.0.1/32 password\n"
    p.write_config()
    p.reload()
    p.wait_for_log(r"got SIGHUP", timeout=5)

    def admitted():
        try:
            return login(p, "plain_user") == "plain_user"
        except psycopg.OperationalError:
            return False        # the reload has not reached that worker yet
    util.wait_until(admitted, 20, what="the new hba rule to admit plain_user")


def test_hba_bad_lines_are_skipped_and_named(pg15, make_pooler):
    p = make_pooler(pg15, settings={"auth_type": "hba"},
                    hba=HBA + "host testdb plain_user 127.0.0.1/32 frobnicate\n")
    p.wait_for_log(r"line 9", timeout=5)
    assert login(p, "scram_user") == "scram_user"
