"""Physical replication through the pooler, as PgBouncer's docs show it: a
database entry with no user (the client's user passes through) serves
pg_basebackup --checkpoint=fast (-X stream: a second replication
connection for the WAL, opened while the first one streams the base
backup) and pg_receivewal --slot. Both setups of issue 29 item 2: servers
over a Unix socket with default settings, and servers over TCP with
tcp_socket_buffer = 4096. Each run prints its time next to a direct
connection's. PgBouncer 1.18 has no replication connections (1.23+).

The hang of issue 29 item 2 was the 4 kB buffer set after connect(): TCP
had offered the server a window scaled for the default buffer, and the
kernel dropped what did not fit, one retransmission timeout (0.2 s) per
8 kB. It is set before connect() now, as in PgBouncer."""

import os
import signal
import subprocess
import time

import pytest

import util
from pg_cluster import PG15_BINDIR, SUPERUSER

# serial: base backups of the whole cluster, timed against a direct one.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]

WORKERS_MATRIX = (1, 4)

SETUPS = {
    "unix": {},
    "tcp4k": {"tcp_socket_buffer": 4096},
}


def userlist():
    from conftest import default_userlist
    users = default_userlist()
    users[SUPERUSER] = "unused"
    return users


def pooler(pg15, make_pooler, setup):
    host = pg15.sockdir if setup == "unix" else pg15.host
    # No user= in the entry: the client's user is used for the server login.
    entry = f"host={host} port={pg15.port} dbname=postgres"
    databases = {"postgres": entry, "replication": entry}
    return make_pooler(pg15, settings=dict(SETUPS[setup], pool_mode="session"),
                       userlist=userlist(), databases=databases)


def walsenders(pg):
    with pg.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity"
                            " WHERE backend_type = 'walsender'").fetchone()[0]


def basebackup(host, port, dest):
    """A fast checkpoint, the base backup on one connection and the WAL
    streamed on a second one opened once the backup has begun; bounded
    (the hang took minutes: about 40 kB/s)."""
    start = time.monotonic()
    r = subprocess.run([os.path.join(PG15_BINDIR, "pg_basebackup"), "-h", host, "-p", str(port),
                        "-U", SUPERUSER, "--no-password", "-D", str(dest),
                        "--checkpoint=fast", "-X", "stream"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert os.path.exists(os.path.join(dest, "PG_VERSION"))
    assert os.listdir(os.path.join(dest, "pg_wal")), "no WAL streamed"
    return time.monotonic() - start


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_pg_basebackup(pg15, make_pooler, tmp_path, setup, pooler_workers):
    p = pooler(pg15, make_pooler, setup)
    direct = basebackup(pg15.host, pg15.port, tmp_path / "direct")
    through = basebackup(p.host, p.port, tmp_path / "pooled")
    print(f"\npg_basebackup {setup} workers={pooler_workers}: "
          f"direct {direct:.2f} s, through the pooler {through:.2f} s")
    util.wait_until(lambda: walsenders(pg15) == 0, 10, what="the walsenders to exit")


def receivewal(pg, host, port, dest, slot):
    """pg_receivewal --slot until it has a whole segment, which a
    pg_switch_wal() on the server closes."""
    start = time.monotonic()
    proc = subprocess.Popen([os.path.join(PG15_BINDIR, "pg_receivewal"), "-h", host,
                             "-p", str(port), "-U", SUPERUSER, "--no-password",
                             "-D", str(dest), "--slot", slot, "--no-loop"],
                            stderr=subprocess.PIPE, text=True)
    try:
        def partial():
            assert proc.poll() is None, proc.stderr.read()
            return any(f.endswith(".partial") for f in os.listdir(dest))
        util.wait_until(partial, 60, what="pg_receivewal to stream a WAL segment")

        def whole():
            assert proc.poll() is None, proc.stderr.read()
            if any(len(f) == 24 for f in os.listdir(dest)):
                return True
            # Some WAL, then the switch that ends its segment (a switch
            # with no WAL since the last one does nothing).
            with pg.connect() as conn:
                conn.execute("SELECT pg_logical_emit_message(false, 'pgcrew', 'x')")
                conn.execute("SELECT pg_switch_wal()")
            return False
        util.wait_until(whole, 60, interval=0.5, what="pg_receivewal to write a whole segment")
        return time.monotonic() - start
    finally:
        util.end_process(proc, signal.SIGINT)


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_pg_receivewal_slot(pg15, make_pooler, tmp_path, setup, pooler_workers):
    p = pooler(pg15, make_pooler, setup)
    slot = "pgcrew_phys"
    with pg15.connect() as conn:
        if conn.execute("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s",
                        (slot,)).fetchone():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (slot,))
    try:
        (tmp_path / "direct").mkdir()
        (tmp_path / "pooled").mkdir()
        direct = receivewal(pg15, pg15.host, pg15.port, tmp_path / "direct", slot)
        util.wait_until(lambda: walsenders(pg15) == 0, 10, what="the walsender to exit")
        through = receivewal(pg15, p.host, p.port, tmp_path / "pooled", slot)
        print(f"\npg_receivewal --slot {setup} workers={pooler_workers}: "
              f"direct {direct:.2f} s, through the pooler {through:.2f} s")
        util.wait_until(lambda: walsenders(pg15) == 0, 10, what="the walsender to exit")
    finally:
        with pg15.connect() as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def test_killed_basebackup_frees_its_walsenders(pg15, make_pooler, tmp_path, pooler_workers):
    """pg_basebackup killed in the middle of a (throttled) backup: its
    servers are closed and their walsenders, which read no Terminate until
    the backup is done, go within a few seconds, not when the backup would
    have ended (the pooler gives up waiting for their EOF after 2 s)."""
    p = pooler(pg15, make_pooler, "tcp4k")
    proc = subprocess.Popen([os.path.join(PG15_BINDIR, "pg_basebackup"), "-h", p.host,
                             "-p", str(p.port), "-U", SUPERUSER, "--no-password",
                             "-D", str(tmp_path / "slow"), "--checkpoint=fast", "-X", "stream",
                             "--max-rate=32k"],
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        util.wait_until(lambda: walsenders(pg15) == 2, 20, what="both walsenders")
    finally:
        # With its forked WAL receiver, which shares both sockets.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    util.wait_until(lambda: walsenders(pg15) == 0, 10, what="the walsenders to go")
