"""Replication connections through pgcrew (PgBouncer 1.23+ behaviour): a
client whose startup packet says replication=database (logical) or
replication=true (physical) gets a server connection of its own, opened with
the same parameter, never pooled and closed with the client; the HBA
`replication` keyword governs physical ones. pg_recvlogical with
test_decoding streams changes made through pgcrew in transaction pooling on
four workers; IDENTIFY_SYSTEM answers through a physical connection; normal
clients never get a walsender."""

import os
import signal
import subprocess

import pytest

import util
from pg_cluster import PG15_BINDIR, SUPERUSER, password

pytestmark = pytest.mark.pgcrew_only

SETTINGS = {"pool_mode": "transaction", "workers": 4, "default_pool_size": 2}


def userlist():
    from conftest import default_userlist
    users = default_userlist()
    users[SUPERUSER] = "unused"
    return users


def walsenders(pg):
    with pg.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity"
                            " WHERE backend_type = 'walsender'").fetchone()[0]


def no_walsender_in_pool(p):
    """Many transactions of normal clients: none lands on a walsender."""
    conns = [p.connect() for _ in range(4)]
    for _ in range(10):
        for c in conns:
            assert c.execute("SELECT backend_type FROM pg_stat_activity"
                             " WHERE pid = pg_backend_pid()").fetchone() == ("client backend",)
    for c in conns:
        c.close()


def stop(proc):
    """Ends a streaming client as a person would (Ctrl-C), bounded."""
    util.end_process(proc, signal.SIGINT)


def gone_with_client(pg, p):
    util.wait_until(lambda: walsenders(pg) == 0, 10, what="the walsender to exit with its client")
    no_walsender_in_pool(p)


def recvlogical(p, *args):
    return [os.path.join(PG15_BINDIR, "pg_recvlogical"), "-h", p.host, "-p", str(p.port),
            "-U", SUPERUSER, "-d", "testdb", "--no-password", *args]


def test_pg_recvlogical_streams_changes(pg, make_pooler, tmp_path):
    p = make_pooler(pg, settings=SETTINGS, userlist=userlist())
    slot = "pgcrew_slot"
    with pg.connect("testdb") as conn:
        conn.execute("DROP TABLE IF EXISTS repl_t")
        conn.execute("CREATE TABLE repl_t (id int PRIMARY KEY, t text)")
        conn.execute("GRANT ALL ON repl_t TO trust_user")
        if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    r = subprocess.run(recvlogical(p, "-S", slot, "--create-slot", "-P", "test_decoding"),
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # The slot-creating walsender may still be exiting: counted below, it
    # would pass for the streaming one before that one reached pgcrew.
    util.wait_until(lambda: walsenders(pg) == 0, 10, what="the slot-creating walsender to exit")
    out = tmp_path / "changes.txt"
    proc = subprocess.Popen(recvlogical(p, "-S", slot, "--start", "-f", str(out), "-F", "1"),
                            stderr=subprocess.PIPE, text=True)
    try:
        util.wait_until(lambda: walsenders(pg) == 1, 10, what="the walsender of pg_recvlogical")
        with p.admin(password=password("trust_user")) as admin:
            for show in ("SERVERS", "CLIENTS"):
                cur = admin.execute(f"SHOW {show}")
                cols = [d.name for d in cur.description]
                repl = [row[cols.index("replication")] for row in cur.fetchall()]
                assert repl.count("logical") == 1, (show, repl)
        # Changes made through pgcrew by normal clients, in transaction mode.
        with p.connect() as c:
            for i in range(20):
                c.execute("INSERT INTO repl_t VALUES (%s, %s)", (i, f"row {i}"))
            with c.transaction():
                c.execute("UPDATE repl_t SET t = 'changed' WHERE id = 3")
                c.execute("DELETE FROM repl_t WHERE id = 4")
        no_walsender_in_pool(p)

        def streamed():
            return out.exists() and "table public.repl_t: DELETE" in out.read_text()
        util.wait_until(streamed, 20, what="the changes in pg_recvlogical's output")
        text = out.read_text()
        inserts = [line for line in text.splitlines() if "table public.repl_t: INSERT" in line]
        assert len(inserts) == 20, text
        assert "id[integer]:7 t[text]:'row 7'" in text
        assert "table public.repl_t: UPDATE: id[integer]:3 t[text]:'changed'" in text
        assert text.count("BEGIN") == text.count("COMMIT") == 21
    finally:
        stop(proc)
    # The walsender went with its client, and was never pooled.
    gone_with_client(pg, p)
    r = subprocess.run(recvlogical(p, "-S", slot, "--drop-slot"), capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr


def psql_replication(p, mode, sql, user=SUPERUSER):
    conninfo = f"host={p.host} port={p.port} dbname=testdb user={user} replication={mode}"
    return subprocess.run([os.path.join(PG15_BINDIR, "psql"), "-X", "-At", "-d", conninfo,
                           "-c", sql], capture_output=True, text=True, timeout=30,
                          env=dict(os.environ, PGPASSWORD=password(user) if user != SUPERUSER else "",
                                   PGCONNECT_TIMEOUT="10"))


@pytest.mark.parametrize("mode", ["true", "on", "database"])
def test_identify_system(pg15, make_pooler, mode):
    p = make_pooler(pg15, settings=SETTINGS, userlist=userlist())
    with pg15.connect() as conn:
        sysid = conn.execute("SELECT system_identifier FROM pg_control_system()").fetchone()[0]
    r = psql_replication(p, mode, "IDENTIFY_SYSTEM")
    assert r.returncode == 0, r.stderr
    fields = r.stdout.strip().split("|")
    assert fields[0] == str(sysid), r.stdout
    # dbname: only a logical (database) connection is bound to one.
    assert fields[3] == ("testdb" if mode == "database" else ""), r.stdout
    gone_with_client(pg15, p)


def start_receivewal(p, tmp_path, *extra):
    """pg_receivewal through the pooler, and a wait until it streams a
    segment; the caller stops it."""
    proc = subprocess.Popen([os.path.join(PG15_BINDIR, "pg_receivewal"), "-h", p.host,
                             "-p", str(p.port), "-U", SUPERUSER, *extra, "--no-password",
                             "-D", str(tmp_path), "--no-loop"],
                            stderr=subprocess.PIPE, text=True)

    def streaming():
        assert proc.poll() is None, proc.stderr.read()
        return any(f.endswith(".partial") for f in os.listdir(tmp_path))
    try:
        util.wait_until(streaming, 20, what="pg_receivewal to stream a WAL segment")
    except BaseException:
        stop(proc)
        raise
    return proc


def test_pg_receivewal_connects(pg15, make_pooler, tmp_path):
    # pg_receivewal always asks for the database "replication" (a physical
    # walsender ignores it): it needs an entry of that name.
    databases = {db: pg15.dsn(db) for db in ("testdb", "replication")}
    databases["replication"] = pg15.dsn("postgres")
    p = make_pooler(pg15, settings=SETTINGS, userlist=userlist(), databases=databases)
    proc = start_receivewal(p, tmp_path, "-d", "dbname=testdb")
    try:
        def state():
            with pg15.connect() as conn:
                return conn.execute("SELECT state FROM pg_stat_replication").fetchall()
        util.wait_until(lambda: state() == [("streaming",)], 20, what="a streaming walsender")
    finally:
        stop(proc)
    gone_with_client(pg15, p)


def test_hba_replication_keyword(pg15, make_pooler):
    """Only a line whose database is `replication` admits a physical
    replication connection ("all" does not); a logical one matches by its
    database like any login."""
    hba = ("host replication trust_user 127.0.0.1/32 trust\n"
           "host all all 127.0.0.1/32 trust\n")
    p = make_pooler(pg15, settings=dict(SETTINGS, auth_type="hba"), hba=hba, userlist=userlist())
    r = psql_replication(p, "true", "IDENTIFY_SYSTEM")     # postgres: only "all" lines
    assert r.returncode != 0
    assert "replication" in r.stderr or "rejected" in r.stderr or "no pg_hba" in r.stderr, r.stderr
    r = psql_replication(p, "database", "IDENTIFY_SYSTEM")
    assert r.returncode == 0, r.stderr
    util.wait_until(lambda: walsenders(pg15) == 0, 10, what="the walsender to exit")


def test_bad_replication_value(pg15, make_pooler):
    p = make_pooler(pg15, settings=SETTINGS, userlist=userlist())
    r = psql_replication(p, "maybe", "IDENTIFY_SYSTEM")
    assert r.returncode != 0
    assert "replication" in r.stderr, r.stderr
    assert walsenders(pg15) == 0


def test_replication_options_pass_through(pg15, make_pooler):
    """A replication client's `options` reach its walsender unchanged, as
    PgBouncer passes them (an ordinary client's untracked -c is refused)."""
    p = make_pooler(pg15, settings=SETTINGS, userlist=userlist())
    conninfo = (f"host={p.host} port={p.port} dbname=testdb user={SUPERUSER} "
                f"replication=database options='-c enable_seqscan=off -c work_mem=5MB'")
    r = subprocess.run([os.path.join(PG15_BINDIR, "psql"), "-X", "-At", "-d", conninfo,
                        "-c", "SHOW enable_seqscan", "-c", "SHOW work_mem"],
                       capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["off", "5MB"], r.stdout
    gone_with_client(pg15, p)


def test_failed_replication_login_is_not_cached_for_others(pg15, make_pooler):
    """A walsender login PostgreSQL refuses (trust_user may not replicate)
    fails that client with PostgreSQL's words, and nothing more: an
    ordinary client of the same pool logs in at once, with no cached
    "server login has been failing" error."""
    p = make_pooler(pg15, settings=dict(SETTINGS, server_login_retry=30), userlist=userlist())
    r = psql_replication(p, "database", "IDENTIFY_SYSTEM", user="trust_user")
    assert r.returncode != 0
    assert "replication" in r.stderr, r.stderr
    with p.connect() as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("trust_user",)


def test_pg_receivewal_needs_no_ordinary_login(pg15, make_pooler, tmp_path):
    """As PgBouncer: a replication pool is welcomed by its own walsender, so
    an entry whose database is "replication" (no ordinary login can reach
    it) serves pg_receivewal."""
    databases = {"testdb": pg15.dsn("testdb"), "replication": pg15.dsn("replication")}
    p = make_pooler(pg15, settings=SETTINGS, userlist=userlist(), databases=databases)
    stop(start_receivewal(p, tmp_path))
    gone_with_client(pg15, p)
