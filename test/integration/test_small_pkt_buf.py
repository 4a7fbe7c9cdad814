"""pkt_buf far below the messages of a login (PgBouncer's development
branch runs its tests at 75 bytes): pgcrew starts with any pkt_buf of 1 or
more, as PgBouncer does, and every message passes whatever its size: a
startup packet, a SCRAM exchange with a client and with a server, an
auth_query lookup, rows, parameters and the console's answers (issue 43,
item 6). pgcrew's buffers hold at least 16 kB whatever pkt_buf says."""

import psycopg
import pytest

from pg_cluster import password
from test_auth_query import AUTH_PW, AUTH_USER, QUERY, login, setup_roles

# PgBouncer 1.25.2 starts at pkt_buf 75 but fails these logins ("SASL
# authentication failed", timeouts); its development branch handles them
# (pgbouncer/pgbouncer pull requests 1446 and 1520), which cannot run here.
pytestmark = pytest.mark.pgcrew_only

WORKERS_MATRIX = (1, 4)
PKT_BUF = 75
# PostgreSQL keeps 63 bytes of it; the startup packet carries all 90.
LONG_NAME = "an_application_name_longer_than_the_packet_buffer_" + "x" * 40


@pytest.mark.parametrize("user", ["scram_user", "md5_user", "plain_user", "trust_user"])
def test_logins_and_queries(pg15, make_pooler, pooler_workers, user):
    p = make_pooler(pg15, settings={"pkt_buf": PKT_BUF, "auth_type": "scram-sha-256"})
    with psycopg.connect(**p.conninfo("testdb", user, password=password(user),
                                      application_name=LONG_NAME),
                         autocommit=True) as conn:
        assert conn.execute("SHOW application_name").fetchone() == (LONG_NAME[:63],)
        assert conn.execute("SELECT length(repeat('x', 100000))").fetchone() == (100000,)
        big = "y" * 50000
        assert conn.execute("SELECT length(%s::text)", (big,)).fetchone() == (50000,)
        rows = conn.execute("SELECT g, repeat('z', 200) FROM generate_series(1, 300) g").fetchall()
        assert len(rows) == 300 and rows[-1][1] == "z" * 200


def test_auth_query_login(pg15, make_pooler, pooler_workers):
    setup_roles(pg15)
    p = make_pooler(pg15, settings={"pkt_buf": PKT_BUF, "auth_type": "md5", "auth_user": AUTH_USER,
                                    "auth_query": QUERY},
                    userlist={AUTH_USER: AUTH_PW})
    for _ in range(2):
        assert login(p, "aq_scram", "aq-scram-pw") == "aq_scram"
        assert login(p, "aq_md5", "aq-md5-pw") == "aq_md5"


def test_console(pg15, make_pooler, pooler_workers):
    p = make_pooler(pg15, settings={"pkt_buf": PKT_BUF})
    with p.connect() as conn:
        conn.execute("SELECT 1")
    with p.admin() as adm:
        config = dict((r[0], r[1]) for r in adm.execute("SHOW CONFIG").fetchall())
        assert config["pkt_buf"] == str(PKT_BUF)
        assert any(r[0] == "testdb" for r in adm.execute("SHOW POOLS").fetchall())
        assert adm.execute("SHOW DATABASES").fetchall()
