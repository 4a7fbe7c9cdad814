"""SHOW FDS, SOCKETS, ACTIVE_SOCKETS and MEM across four workers: PgBouncer
1.25's columns and types, and rows that count exactly the connections the
test opened, wherever the kernel put them."""

import psycopg
import pytest

from pg_cluster import password

pytestmark = pytest.mark.pgcrew_only

WORKERS = 4
BYTEA, INT8, INT4, TEXT = 17, 20, 23, 25

SOCKET_COLS = [
    ("type", TEXT), ("user", TEXT), ("database", TEXT), ("replication", TEXT), ("state", TEXT),
    ("addr", TEXT), ("port", INT4), ("local_addr", TEXT), ("local_port", INT4),
    ("connect_time", TEXT), ("request_time", TEXT), ("wait", INT4), ("wait_us", INT4),
    ("close_needed", INT4), ("ptr", TEXT), ("link", TEXT), ("remote_pid", INT4), ("tls", TEXT),
    ("application_name", TEXT), ("prepared_statements", INT4), ("id", INT8),
    ("recv_pos", INT4), ("pkt_pos", INT4), ("pkt_remain", INT4), ("send_pos", INT4),
    ("send_remain", INT4), ("pkt_avail", INT4), ("send_avail", INT4),
]
EXPECTED = {
    "FDS": [("fd", INT4), ("task", TEXT), ("user", TEXT), ("database", TEXT), ("addr", TEXT),
            ("port", INT4), ("cancel", INT8), ("link", INT4), ("client_encoding", TEXT),
            ("std_strings", TEXT), ("datestyle", TEXT), ("timezone", TEXT), ("password", TEXT),
            ("scram_client_key", BYTEA), ("scram_server_key", BYTEA), ("cancel_key", BYTEA)],
    "SOCKETS": SOCKET_COLS,
    "ACTIVE_SOCKETS": SOCKET_COLS,
    "MEM": [("name", TEXT), ("size", INT4), ("used", INT4), ("free", INT4), ("memtotal", INT4)],
}


def pooler(pg, make_pooler, **settings):
    base = {"workers": WORKERS, "pool_mode": "session", "admin_users": "trust_user",
            "stats_users": "md5_user", "auth_type": "md5"}
    base.update(settings)
    return make_pooler(pg, settings=base)


def admin(p, user="trust_user"):
    return p.connect("pgbouncer", user, password=password(user))


def client(p):
    return p.connect("testdb", "trust_user", password=password("trust_user"))


def show(conn, view):
    cur = conn.execute(f"SHOW {view}")
    return [(d.name, d.type_code) for d in cur.description], cur.fetchall()


def test_columns_and_types(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    with admin(p) as a:
        for view, cols in EXPECTED.items():
            got, _ = show(a, view)
            assert got == cols, view
        notices = []
        a.add_notice_handler(lambda d: notices.append((d.message_primary, d.message_detail)))
        a.execute("SHOW HELP")
        assert notices[0][0] == "Console usage", notices
        assert "\tSHOW FDS|SOCKETS|ACTIVE_SOCKETS|LISTS|MEM|STATE\n" in notices[0][1], notices
    from test_console import psql_shows
    psql_shows(p, EXPECTED)


def test_rows_count_the_connections(pg15, make_pooler):
    p = pooler(pg15, make_pooler)
    n = 12
    conns = [client(p) for _ in range(n)]
    try:
        from test_workers import worker_of
        assert len({worker_of(c) for c in conns}) > 1
        backends = set()
        for c in conns:
            backends.add(c.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert len(backends) == n    # session mode: one server each
        with admin(p) as a:
            _, rows = show(a, "SOCKETS")
            mine = [r for r in rows if r[2] == "testdb"]
            assert sum(r[0] == "C" for r in mine) == n
            servers = [r for r in mine if r[0] == "S"]
            assert {r[16] for r in servers} == backends          # remote_pid
            assert all(r[4] == "cl_active" for r in mine if r[0] == "C")
            assert all(r[4] == "sv_active" for r in servers)
            assert all(r[3] == "none" for r in rows)
            # The console itself is a socket of the pgbouncer pool.
            assert sum(r[0] == "C" and r[2] == "pgbouncer" for r in rows) == 1

            # Idle connections hold no buffered bytes: not active.
            _, active = show(a, "ACTIVE_SOCKETS")
            assert not [r for r in active if r[2] == "testdb"], active

            _, fds = show(a, "FDS")
            cl = [r for r in fds if r[1] == "client"]
            sv = [r for r in fds if r[1] == "server"]
            assert len(cl) == n and len(sv) == n
            assert all(r[2] == "trust_user" and r[3] == "testdb" for r in cl + sv)
            assert {r[6] >> 32 for r in sv} == backends          # cancel key: pid in the top half
            assert {r[6] >> 32 for r in cl} == {c.info.backend_pid for c in conns}
            # cancel_key: the whole secret, whose first 4 bytes end `cancel`
            # (libpq 18 asks 3.0 by default: 4 bytes to a client; the
            # PostgreSQL 15 server answered our 3.2 with 3.0: 4 bytes too).
            assert all(len(r[15]) == 4 for r in cl + sv)
            assert all(int.from_bytes(r[15], "big") == r[6] & 0xFFFFFFFF for r in cl + sv)
            assert all(r[7] > 0 for r in cl + sv)                # linked in session mode
            assert all(r[12] is None and r[13] is None and r[14] is None for r in fds)
            poolers = [r for r in fds if r[1] == "pooler"]
            # One TCP listener per worker slot, the shared unix socket once.
            assert len([r for r in poolers if r[4] != "unix"]) == WORKERS
            assert len([r for r in poolers if r[4] == "unix"]) == 1
            assert all(r[5] == p.port for r in poolers)

            _, mem = show(a, "MEM")
            by = {r[0]: r for r in mem}
            assert by["server_cache"][2] == n
            assert by["client_cache"][2] == n + 1            # and the console
            assert all(r[4] == r[1] * (r[2] + r[3]) for r in mem)
    finally:
        for c in conns:
            c.close()


def test_fds_is_admin_only(pg15, make_pooler):
    p = pooler(pg15, make_pooler, workers=2)
    with admin(p, "md5_user") as a:
        with pytest.raises(psycopg.Error, match="admin access needed"):
            a.execute("SHOW FDS")
        show(a, "SOCKETS")
        show(a, "MEM")
