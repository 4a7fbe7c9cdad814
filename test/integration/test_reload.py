"""Configuration reload on SIGHUP: added databases appear, removed ones
disappear, and a broken file leaves the running configuration in place."""

import os
import signal
import threading
import time

import psycopg
import pytest

from pg_cluster import password
import util


def connect_eventually(p, dbname, timeout=5.0):
    """Connect once the reload has been applied (bounded retry)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return p.connect(dbname=dbname)
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def refused_eventually(p, dbname, timeout=5.0):
    """Return the error once connecting to dbname fails (bounded retry)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = p.connect(dbname=dbname)
        except psycopg.OperationalError as exc:
            return exc
        conn.close()
        p.connections.remove(conn)
        assert time.monotonic() < deadline, f"{dbname} still reachable after reload"
        time.sleep(0.1)


@pytest.mark.parametrize("workers", [1, 4])
def test_sighup_as_soon_as_the_port_opens_is_a_reload(pg15, make_pooler, workers):
    """The port open means up (for this harness, systemd, a load balancer):
    a SIGHUP from then on is a reload, never the end of the pooler. The
    supervisor's signals wait, blocked, from before it opens the port until
    its handlers are in place; before that a SIGHUP that came just after the
    port opened ended it (CI: test_ldap_bad_options, "pooler ended by signal
    1"). The window is short, so each of ten starts signals the moment a
    connection is first accepted."""
    for _ in range(10):
        p = make_pooler(pg15, settings={"workers": workers}, start=False)
        sent = threading.Event()

        def hup():
            deadline = time.monotonic() + 30
            while (p.proc is None or not util.port_accepts(p.port)) and time.monotonic() < deadline:
                pass
            if p.proc is not None:
                os.kill(p.proc.pid, signal.SIGHUP)
                sent.set()

        sender = threading.Thread(target=hup)
        sender.start()
        p.start()
        sender.join(60)
        assert sent.is_set()
        p.wait_for_log(r"got SIGHUP, re-reading config")
        assert p.alive()
        assert p.connect().execute("SELECT 1").fetchone() == (1,)
        p.stop()


def test_reload_adds_and_removes_database(pg, make_pooler):
    p = make_pooler(pg, databases={"testdb": pg.dsn("testdb")})
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(dbname="added")
    assert "no such database: added" in str(err.value)

    p.databases["added"] = pg.dsn("otherdb")
    p.write_config()
    mark = p.reload()
    p.wait_for_log(r"(?i)sighup", since=mark)
    with connect_eventually(p, "added") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("otherdb",)

    del p.databases["added"]
    p.write_config()
    p.reload()
    err = refused_eventually(p, "added")
    assert "no such database: added" in str(err)
    with p.connect() as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("testdb",)


def test_reload_changes_a_setting(pg15, make_pooler):
    p = make_pooler(pg15, settings={"max_client_conn": 100})
    p.settings["max_client_conn"] = 1
    p.write_config()
    p.reload()
    held = connect_eventually(p, "testdb")
    deadline = time.monotonic() + 5
    while True:  # the new limit applies once the reload is processed
        try:
            extra = p.connect()
        except psycopg.OperationalError as exc:
            assert "no more connections allowed (max_client_conn)" in str(exc)
            break
        extra.close()
        p.connections.remove(extra)
        assert time.monotonic() < deadline, "max_client_conn = 1 not applied by reload"
        time.sleep(0.1)
    held.close()


def broken_reload(p):
    """Rewrite the ini with an invalid pool_mode as its first setting and
    SIGHUP; returns the valid text to restore afterwards."""
    good_ini = open(p.ini_path).read()
    broken = good_ini.replace("[pgbouncer]", "[pgbouncer]\npool_mode = not_a_mode\n", 1)
    p.write_config(raw_ini=broken)
    mark = p.reload()
    # The log says why the new file was not taken (PgBouncer's wording).
    p.wait_for_log(r'invalid value "not_a_mode" for parameter pool_mode', since=mark)
    return good_ini


def test_broken_config_on_reload_is_logged(pg15, make_pooler):
    p = make_pooler(pg15)
    good_ini = broken_reload(p)
    p.assert_alive()
    # A password is passed because PgBouncer 1.18 falls back to auth_type md5.
    with p.connect(password=password("trust_user")) as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("testdb",)
    p.write_config(raw_ini=good_ini)


@pytest.mark.pgcrew_only
def test_broken_config_on_reload_keeps_old_config(pg15, make_pooler):
    """PgBouncer 1.18 half-applies a broken file (settings before the error
    are reset to defaults, e.g. auth_type falls back to md5); pgcrew keeps
    the whole running configuration."""
    p = make_pooler(pg15, settings={"auth_type": "trust", "pool_mode": "transaction",
                                    "default_pool_size": 1, "workers": 1})
    good_ini = broken_reload(p)
    p.assert_alive()
    a = p.connect()  # trust: no password needed, so auth_type is unchanged
    b = p.connect()
    # Still transaction pooling with one server: both clients share it.
    pids = {c.execute("SELECT pg_backend_pid()").fetchone()[0] for c in (a, b)}
    assert len(pids) == 1
    with pytest.raises(psycopg.OperationalError) as err:
        p.connect(dbname="nosuchdb")
    assert "no such database: nosuchdb" in str(err.value)
    p.write_config(raw_ini=good_ini)


@pytest.mark.parametrize("workers", [1, 4])
def test_reload_of_server_tls_settings_retires_servers(pg15, make_pooler, workers):
    """Changed server TLS settings: no server keeps the old TLS state; the
    idle ones close at once ("database configuration changed") and the
    next query runs on a new backend."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "workers": workers,
                                    "server_tls_sslmode": "prefer"})
    conn = p.connect()
    before = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert pg15.server_connections("testdb") >= 1
    p.settings["server_tls_sslmode"] = "disable"
    p.write_config()
    mark = p.reload()
    p.wait_for_log(r"closing because: database configuration changed", since=mark, timeout=5)
    util.wait_until(lambda: before not in pg15.backend_pids("testdb", "trust_user"), 5,
                    what="the old backend to go")
    assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] != before
    conn.close()


@pytest.mark.parametrize("workers", [1, 4])
def test_console_reload_answers_once_applied(pg15, make_pooler, workers):
    """The console's RELOAD returns after every worker runs the new file
    (as PgBouncer's synchronous reload): a database added by it is there
    for the very next connections, on whichever worker they land."""
    p = make_pooler(pg15, settings={"workers": workers})
    p.databases["added"] = pg15.dsn("otherdb")
    p.write_config()
    with p.admin() as admin:
        admin.execute("RELOAD")
    conns = [p.connect(dbname="added") for _ in range(3 * workers)]
    for c in conns:
        assert c.execute("SELECT current_database()").fetchone() == ("otherdb",)
        c.close()


@pytest.mark.pgcrew_only   # PgBouncer 1.18 answers a failed RELOAD without an error
def test_console_reload_of_a_bad_file_fails(pg15, make_pooler):
    """A file that is refused: PgBouncer's error (SQLSTATE F0000) for the
    console, the reason in the log, the running configuration untouched;
    auth_dbname = pgbouncer is such a file."""
    p = make_pooler(pg15, settings={"workers": 2})
    good_ini = open(p.ini_path).read()
    for bad, why in (("pool_mode = not_a_mode", 'invalid value "not_a_mode"'),
                     ("auth_dbname = pgbouncer",
                      'cannot use the reserved "pgbouncer" database as an auth_dbname')):
        p.write_config(raw_ini=good_ini.replace("[pgbouncer]", "[pgbouncer]\n" + bad + "\n", 1))
        mark = len(p.log_text())
        with p.admin() as admin:
            with pytest.raises(psycopg.Error) as err:
                admin.execute("RELOAD")
            assert err.value.sqlstate == "F0000"
            assert "RELOAD failed, see logs for additional details" in str(err.value)
        p.wait_for_log(why, since=mark)
        with p.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    p.write_config(raw_ini=good_ini)


@pytest.mark.pgcrew_only   # PgBouncer 1.18 logs nothing naming the kept keys
def test_reload_keeps_restart_keys_applies_the_rest(pg15, make_pooler):
    """A file whose restart-only keys differ (here it leaves unix_socket_dir
    out, so its default /tmp differs) is still applied for everything else,
    with one WARNING naming the keys kept at their running values."""
    p = make_pooler(pg15, settings={"workers": 2})
    del p.settings["unix_socket_dir"]
    p.databases["added"] = pg15.dsn("otherdb")
    p.write_config()
    mark = len(p.log_text())
    with p.admin() as admin:
        admin.execute("RELOAD")
    p.wait_for_log(r"WARNING config reload: these settings need a restart and keep their "
                   r"running values: unix_socket_dir", since=mark)
    with p.connect(dbname="added") as conn:
        assert conn.execute("SELECT current_database()").fetchone() == ("otherdb",)
    # The Unix socket is where it was.
    with psycopg.connect(host=p.workdir, port=p.port, dbname="pgbouncer", user="trust_user",
                         autocommit=True, connect_timeout=5) as admin:
        assert admin.execute("SHOW VERSION").fetchone()


@pytest.mark.pgcrew_only   # login_notify_message is from PgBouncer's development branch
@pytest.mark.parametrize("workers", [1, 4])
def test_login_notify_message(pg15, make_pooler, workers):
    """Every login, the console's too, gets a NOTICE with
    login_notify_message before its first ReadyForQuery; RELOAD changes
    the text for the next logins, and an empty value sends none."""
    import wire

    def notices(db):
        with wire.RawConn(p.port, timeout=10) as raw:
            msgs = raw.login_trust("trust_user", db)
        assert msgs[-1][0] == b"Z", msgs
        return [wire.error_fields(payload) for kind, payload in msgs if kind == b"N"]

    p = make_pooler(pg15, settings={"workers": workers, "auth_type": "trust",
                                    "login_notify_message": "hello from the pooler"})
    for db in ["testdb"] * (2 * workers) + ["pgbouncer"]:
        fields = notices(db)
        assert [(f.get("S"), f.get("C"), f.get("M")) for f in fields] == \
            [("NOTICE", "00000", "hello from the pooler")], (db, fields)
    for text in ("second text", ""):
        p.settings["login_notify_message"] = text
        p.write_config()
        with p.admin() as admin:
            admin.execute("RELOAD")
        for _ in range(2 * workers):
            assert [f.get("M") for f in notices("testdb")] == ([text] if text else [])
