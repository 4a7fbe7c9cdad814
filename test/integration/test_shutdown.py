"""Shutdown as PgBouncer does it, instance-wide with several workers:
SIGTERM / SIGINT close the TCP listeners at once (new clients are refused,
or reach the other instances sharing the port) while the Unix socket stays
for the console; under WAIT_FOR_SERVERS every client that needs a server is
told "server shutting down" and the process exits once no server is in use
anywhere; RESUME and SIGUSR2 do not undo a shutdown."""

import os
import signal
import socket
import threading
import time

import psycopg
import pytest

import util
import wire

WORKERS_MATRIX = (1, 4)
# pgcrew_only below: PgBouncer 1.25's behaviour (its docs and source) that
# 1.18, the reference those tests were written against, lacks (it closes
# the Unix socket too and lets queued clients wait), or pgcrew's own.


def refused(port):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((util.HOST, port)) != 0


def console_on_unix(p):
    return psycopg.connect(host=p.workdir, port=p.port, dbname="pgbouncer", user="trust_user",
                           autocommit=True, connect_timeout=5)


@pytest.mark.pgcrew_only
def test_sigterm_closes_tcp_keeps_console(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    client = p.connect()
    assert client.execute("SELECT 1").fetchone() == (1,)
    os.kill(p.pid, signal.SIGTERM)
    util.wait_until(lambda: refused(p.port), 5, interval=0.1,
                    what="the TCP listeners to close on SIGTERM")
    with console_on_unix(p) as admin:
        assert admin.execute("SHOW VERSION").fetchone()
        with pytest.raises(psycopg.Error, match="pooler is shutting down"):
            admin.execute("RESUME")
    os.kill(p.pid, signal.SIGUSR2)
    p.wait_for_log(r"got SIGUSR2 while shutting down, ignoring")
    # WAIT_FOR_CLIENTS: the connected client is still served, then the
    # process exits when it leaves.
    assert client.execute("SELECT 2").fetchone() == (2,)
    assert p.proc.poll() is None
    client.close()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0


@pytest.mark.pgcrew_only
def test_sigint_waits_for_servers_instance_wide(pg15, make_pooler, pooler_workers):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "default_pool_size": 1})
    holder = p.connect(autocommit=False)
    holder.execute("SELECT 1")                   # a transaction holds the only server
    others = [p.connect() for _ in range(2 * pooler_workers)]   # on every worker, likely
    outcome = {}

    def queued():
        try:
            others[0].execute("SELECT 1")
            outcome["q"] = "served"
        except psycopg.Error as exc:
            outcome["q"] = str(exc)

    waiter = threading.Thread(target=queued)
    waiter.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, what="the query queued behind the holder")
    os.kill(p.pid, signal.SIGINT)
    waiter.join(10)
    assert "server shutting down" in outcome.get("q", ""), outcome
    for c in others[1:]:                         # idle clients needing a server
        with pytest.raises(psycopg.OperationalError, match="server shutting down"):
            c.execute("SELECT 1")
    time.sleep(1)
    assert p.proc.poll() is None, "exited while a server was still in use"
    holder.execute("SELECT 2")                   # its transaction goes on
    holder.commit()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0


@pytest.mark.pgcrew_only
@pytest.mark.parametrize("mode", ["transaction", "session"])
def test_console_wait_for_servers_queued(pg15, make_pooler, pooler_workers, mode):
    """Issue 29 item 5: the console's SHUTDOWN WAIT_FOR_SERVERS fails a
    client queued for a server (its transaction not begun) with "server
    shutting down" at once, on every worker, while a client inside a
    transaction finishes it (in session mode: its session); then the
    process exits."""
    p = make_pooler(pg15, settings={"pool_mode": mode, "default_pool_size": 1,
                                    "admin_users": "trust_user"})
    holder = p.connect(autocommit=False)
    holder.execute("SELECT 1")                   # a transaction holds the only server
    queued = [p.connect(autocommit=False) for _ in range(2 * pooler_workers)]
    outcome = {}

    def run(i, c):
        try:
            c.execute("SELECT 1")                # would begin its transaction
            outcome[i] = "served"
        except psycopg.Error as exc:
            outcome[i] = str(exc)

    threads = [threading.Thread(target=run, args=(i, c)) for i, c in enumerate(queued)]
    for t in threads:
        t.start()
    p.wait_pool(lambda r: r["cl_waiting"] == len(queued), what="the queries queued behind the holder")
    with console_on_unix(p) as admin:
        admin.execute("SHUTDOWN WAIT_FOR_SERVERS")
    for t in threads:
        t.join(10)
    assert all("server shutting down" in outcome.get(i, "") for i in range(len(queued))), outcome
    assert p.proc.poll() is None, "exited while a server was still in use"
    holder.execute("SELECT 2")                   # its transaction goes on
    holder.commit()
    if mode == "session":
        assert p.proc.poll() is None, "exited while a session still held its server"
        holder.close()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0


@pytest.mark.pgcrew_only
def test_sigusr2_during_shutdown_keeps_pause(pg15, make_pooler, pooler_workers):
    """Issue 29 item 19: SIGUSR2 while a shutdown is under way is ignored
    with PgBouncer's log line, on every worker: a PAUSE from before the
    shutdown stays (no RESUME by signal), and the process exits when the
    last client leaves (WAIT_FOR_CLIENTS)."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    client = p.connect()
    assert client.execute("SELECT 1").fetchone() == (1,)
    with console_on_unix(p) as admin:
        admin.execute("PAUSE")
        admin.execute("SHUTDOWN WAIT_FOR_CLIENTS")
    # The console passes the SHUTDOWN to the main process as a signal: a
    # SIGUSR2 sent before that one is handled could be handled first.
    p.wait_for_log(r"got SIGTERM, shutting down")
    os.kill(p.pid, signal.SIGUSR2)
    p.wait_for_log(r"got SIGUSR2 while shutting down, ignoring")
    for _ in range(2 * pooler_workers):          # consoles on every worker, likely
        with console_on_unix(p) as admin:
            state = dict(admin.execute("SHOW STATE").fetchall())
            assert state["paused"] == "yes", state
    assert "got SIGUSR2, continuing" not in p.log_text()
    assert p.proc.poll() is None
    client.close()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][:1] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.pgcrew_only
@pytest.mark.fixed_workers
def test_leaving_worker_leaves_unix_connections_to_the_staying_one(pg15, make_pooler):
    """A CI failure's cause, made certain: under WAIT_FOR_CLIENTS a worker
    without clients ends, and the Unix socket is one queue for every
    worker. A worker that got the shutdown and a console connection in
    the same turn accepted the connection and then exited, closing it
    unanswered; now it stops accepting first, and the worker that stays
    (it has a client) serves the console."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "workers": 4})
    pids = [int(r["pid"]) for r in p.show("WORKERS")]
    mark = len(p.log_text())
    client = p.connect()
    assert client.execute("SELECT 1").fetchone() == (1,)
    login = p.wait_for_log(r"\[(\d+)\] LOG C-\S+ testdb/trust_user@\S+ login attempt", since=mark)
    stays = int(login.group(1))
    assert stays in pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    conn = None
    try:
        os.kill(p.pid, signal.SIGTERM)
        p.wait_for_log(r"got SIGTERM, shutting down")
        # Queued behind the shutdown message of every (stopped) worker.
        conn = socket.socket(socket.AF_UNIX)
        conn.settimeout(10)
        conn.connect(os.path.join(p.workdir, f".s.PGSQL.{p.port}"))
        conn.sendall(wire.startup_packet("trust_user", "pgbouncer"))
        leaving = [pid for pid in pids if pid != stays]
        for pid in leaving:
            os.kill(pid, signal.SIGCONT)
        util.wait_until(lambda: not any(pid_alive(pid) for pid in leaving), 20,
                        what="the workers without clients to end")
    finally:
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGCONT)
    first = conn.recv(1)
    conn.close()
    assert first == b"R", f"the console connection got {first!r}, not an authentication request"
    assert p.proc.poll() is None
    client.close()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0


@pytest.mark.parametrize("how", ["query", "login"])
def test_wait_for_servers_closes_paused_client(pg15, make_pooler, pooler_workers, how):
    """Issue 43 item 5: a client already held by PAUSE (its query queued,
    or its login waiting for a pool's first server) when SHUTDOWN
    WAIT_FOR_SERVERS comes is closed with PgBouncer's log line `closing
    because: server shutting down` and told so, and the process exits (no
    server is in use: PAUSE closed them). PgBouncer 1.25.2 does the same."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "admin_users": "trust_user"})
    client = p.connect()
    client.execute("SELECT 1")
    with console_on_unix(p) as admin:
        admin.execute("PAUSE")
    db = "testdb" if how == "query" else "otherdb"
    outcome = {}

    def run():
        try:
            if how == "query":
                client.execute("SELECT 2")
            else:
                p.connect("otherdb").execute("SELECT 2")
            outcome["r"] = "served"
        except psycopg.Error as exc:
            outcome["r"] = str(exc)

    waiter = threading.Thread(target=run)
    waiter.start()
    p.wait_pool(lambda r: r["cl_waiting"] == 1, db=db, what="the client held by PAUSE")
    mark = len(p.log_text())
    with console_on_unix(p) as admin:
        admin.execute("SHUTDOWN WAIT_FOR_SERVERS")
    waiter.join(10)
    assert "server shutting down" in outcome.get("r", ""), outcome
    p.wait_for_log(rf"LOG C-\S+ {db}/trust_user@\S+ closing because: server shutting down "
                   r"\(age=\d+s\)", since=mark)
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0
