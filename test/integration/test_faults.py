"""Fault injection: broken and hostile servers (a fake backend that closes
mid-message, sends oversized or malformed messages, a 20 kB SCRAM nonce, an
ErrorResponse without SQLSTATE), PostgreSQL frozen with SIGSTOP under load,
a client that never reads a large result, file-descriptor exhaustion, and
workers killed in a loop. Each case ends with the affected clients refused
cleanly, the pooler serving everyone else, and nothing leaked (descriptors,
server connections in SHOW POOLS/LISTS, memory)."""

import os
import resource
import signal
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

import fakepg
import util
import wire
from test_pgcrew_only import children

pytestmark = pytest.mark.pgcrew_only


def pooler_pids(p):
    return [p.pid] + children(p.pid)


def open_fds(p):
    """(pid, what) of every descriptor of the pooler's processes."""
    found = []
    for pid in pooler_pids(p):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    found.append((pid, os.readlink(f"/proc/{pid}/fd/{fd}")))
                except FileNotFoundError:
                    pass
        except FileNotFoundError:
            pass
    return found


def describe_sockets(fds):
    """ss lines of the socket inodes among fds, for failure messages."""
    inodes = [what[len("socket:["):-1] for _, what in fds if what.startswith("socket:[")]
    out = subprocess.run(["ss", "-tuxanpe"], capture_output=True, text=True, timeout=10).stdout
    return [line for line in out.splitlines() if any(f"ino:{i} " in line or f" {i} " in line for i in inodes)]


def inodes_to_port(port):
    """Socket inodes of TCP connections to 127.0.0.1:port (pooled servers of
    the real PostgreSQL: legitimately kept, opened on demand)."""
    out = subprocess.run(["ss", "-tanpe", f"dst 127.0.0.1:{port}"], capture_output=True,
                         text=True, timeout=10).stdout
    return {f"socket:[{w[4:]}]" for line in out.splitlines() for w in line.split()
            if w.startswith("ino:")}


def fd_count(p, ignore_port=None):
    skip = inodes_to_port(ignore_port) if ignore_port else set()
    return sum(1 for _, what in open_fds(p) if what not in skip)


def rss_kb(p):
    total = 0
    for pid in pooler_pids(p):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except FileNotFoundError:
            pass
    return total


def pool_servers(p, db):
    """sv_active + sv_idle + sv_used + sv_tested + sv_login of db's pools."""
    with p.admin() as adm:
        cur = adm.execute("SHOW POOLS")
        cols = [c.name for c in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    return sum(r[k] for r in rows if r["database"] == db
               for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))


def show(p, cmd):
    with p.admin() as adm:
        return adm.execute(cmd).fetchall()


def assert_serving(p):
    p.assert_alive()
    with p.connect() as conn:
        assert conn.execute("SELECT 'ok'").fetchone() == ("ok",)


SCRIPTS = {
    "close_mid_message": fakepg.close_mid_message,
    "oversized_length": fakepg.oversized_length,
    "error_without_sqlstate": fakepg.error_without_sqlstate,
    "error_without_fields": fakepg.error_without_fields,
    "long_scram_nonce": fakepg.long_scram_nonce,
    "garbage_after_login": fakepg.garbage_after_login,
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_broken_server(pg15, make_pooler, name):
    with fakepg.FakePg(SCRIPTS[name]) as fake:
        # A server that stalls mid-login is cut off by server_connect_timeout.
        p = make_pooler(pg15, settings={"query_wait_timeout": 3, "server_login_retry": 1,
                                        "server_connect_timeout": 2, "workers": 1},
                        databases={"testdb": pg15.dsn("testdb"),
                                   "fake": f"host={util.HOST} port={fake.port} dbname=fake"})
        assert_serving(p)
        baseline = fd_count(p, pg15.port)
        before = open_fds(p)
        for _ in range(2):
            started = time.monotonic()
            with pytest.raises(psycopg.Error):
                with p.connect(dbname="fake", user="scram_user", password="scram-secret",
                               connect_timeout=15) as conn:
                    conn.execute("SELECT 1")
            assert time.monotonic() - started < 12
        assert fake.connections >= 1
        assert_serving(p)
        # The broken server connections are gone, and with them their fds.
        util.wait_until(lambda: pool_servers(p, "fake") == 0, 10,
                        what=f"fake servers closed: {show(p, 'SHOW SERVERS')}")
        util.wait_until(lambda: fd_count(p, pg15.port) <= baseline, 10,
                        what=f"descriptors back to {baseline}: "
                        f"new {describe_sockets(set(open_fds(p)) - set(before))}")
    p.assert_alive()


def test_huge_error_is_relayed(pg15, make_pooler):
    """An 8 MB ErrorResponse (far over the I/O buffer) reaches the client
    whole; the pooler's memory does not keep it."""
    with fakepg.FakePg(fakepg.huge_error_after_login) as fake:
        p = make_pooler(pg15, settings={"workers": 1},
                        databases={"testdb": pg15.dsn("testdb"),
                                   "fake": f"host={util.HOST} port={fake.port} dbname=fake"})
        with p.connect(dbname="fake", connect_timeout=10) as conn:
            with pytest.raises(psycopg.Error) as exc:
                conn.execute("SELECT 1")
        assert str(exc.value).count("x") >= 8 << 20
        assert_serving(p)


def test_error_without_sqlstate_reaches_client(pg15, make_pooler):
    """A login ErrorResponse without SQLSTATE is passed on, not dereferenced
    as if it had one (PgBouncer CVE-2026-6666's shape)."""
    with fakepg.FakePg(fakepg.error_without_sqlstate) as fake:
        p = make_pooler(pg15, settings={"query_wait_timeout": 3},
                        databases={"fake": f"host={util.HOST} port={fake.port} dbname=fake"})
        with pytest.raises(psycopg.Error) as exc:
            p.connect(dbname="fake", connect_timeout=10).execute("SELECT 1")
        assert "no sqlstate here" in str(exc.value) or "server login" in str(exc.value), exc.value
        p.assert_alive()


def postgres_pids(pg):
    with open(os.path.join(pg.datadir, "postmaster.pid")) as f:
        master = int(f.readline())
    return [master] + children(master)


def test_postgres_frozen_then_thawed(pg15, make_pooler):
    """SIGSTOP on every PostgreSQL process under load: query_timeout fires
    and clients get errors; after SIGCONT service returns."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "query_timeout": 2,
                                    "query_wait_timeout": 3, "server_connect_timeout": 2,
                                    "default_pool_size": 4, "workers": 2})
    errors, done, running = [], [], set()
    stop = threading.Event()

    def client(i):
        try:
            with p.connect() as conn:
                while not stop.is_set():
                    conn.execute("SELECT pg_sleep(0.01)")
                    running.add(i)
        except psycopg.Error as e:
            errors.append(str(e))
        done.append(1)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    util.wait_until(lambda: len(running) == len(threads), 20, what="every client's first query")
    frozen = postgres_pids(pg15)
    try:
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        util.wait_until(lambda: len(done) == len(threads), 15, what="every client to fail")
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        stop.set()
        for t in threads:
            t.join(timeout=15)
    assert len(errors) == len(threads), errors
    assert any("query timeout" in e or "query_wait_timeout" in e for e in errors), errors
    p.wait_for_log(r"closing because: query timeout")
    # Service returns once PostgreSQL runs again.
    util.wait_until(lambda: _query_ok(p), 20, what="service after SIGCONT")
    p.assert_alive()


def _query_ok(p):
    try:
        with p.connect(connect_timeout=5) as conn:
            return conn.execute("SELECT 1").fetchone() == (1,)
    except psycopg.Error:
        return False


def server_blocked_writing(pg):
    """A backend waits to write its result to its client (the pooler)."""
    with pg.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'ClientWrite'"
                            " AND query LIKE 'SELECT repeat%'").fetchone()[0] > 0


def test_client_that_never_reads(pg15, make_pooler):
    """A client asks for ~1 GB and reads nothing: the pooler stops reading
    from the server (back-pressure) instead of buffering, so its memory
    stays flat; others are served meanwhile."""
    p = make_pooler(pg15, settings={"workers": 1})
    assert_serving(p)
    before = rss_kb(p)
    raw = wire.RawConn(p.port, timeout=10)
    raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    try:
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message(
            "SELECT repeat('x', 1000000) FROM generate_series(1, 1000)"))
        # PostgreSQL produces far faster than this: 1 GB would be buffered.
        # It ends blocked on its socket once the pooler stops reading (on a
        # busy machine it may take longer to get there).
        time.sleep(4)
        util.wait_until(lambda: server_blocked_writing(pg15), 30,
                        what="PostgreSQL blocked writing the unread result")
        grown = rss_kb(p) - before
        assert grown < 64 * 1024, f"pooler RSS grew by {grown} kB for an unread result"
        assert_serving(p)
    finally:
        raw.close()
    util.wait_until(lambda: pool_servers(p, "testdb") <= 2, 10, what="server released")
    assert_serving(p)


def test_descriptor_exhaustion(pg15, make_pooler):
    """With a low descriptor limit, clients beyond it are refused or wait;
    once they leave, new clients are served again."""
    p = make_pooler(pg15, settings={"workers": 1, "max_client_conn": 1000}, start=False)
    limit = 64
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, old[1]))
    try:
        p.start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)
    socks = []
    try:
        for _ in range(limit * 2):
            s = socket.create_connection((util.HOST, p.port), timeout=5)
            s.sendall(wire.startup_packet("trust_user", "testdb"))
            socks.append(s)
        p.wait_for_log(r"accept\(\) failed", timeout=10)
        p.assert_alive()
    finally:
        for s in socks:
            s.close()
    util.wait_until(lambda: _query_ok(p), 20, what="service after descriptors freed")


def running(pid):
    """pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


class ClientLoad:
    """Clients running short transactions in threads until stop(); counts
    successes and errors (a killed worker costs its clients a connection,
    which the loop reopens)."""

    def __init__(self, p, n=4):
        self.p, self.ok, self.errors = p, 0, 0
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(n)]
        for t in self.threads:
            t.start()

    def _run(self):
        while not self.stopping.is_set():
            try:
                with self.p.connect(connect_timeout=5) as conn:
                    while not self.stopping.is_set():
                        conn.execute("SELECT 1")
                        self.ok += 1
            except psycopg.Error:
                self.errors += 1
                time.sleep(0.05)

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join(timeout=15)


def test_worker_killed_twenty_times(pg15, make_pooler):
    """kill -9 of a worker, 20 times, under a client load: each time the
    supervisor replaces it and the pooler keeps serving; no server
    connection outlives its worker."""
    p = make_pooler(pg15, settings={"workers": 2, "pool_mode": "transaction",
                                    "default_pool_size": 5})
    load = ClientLoad(p)
    try:
        for i in range(20):
            workers = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == 2
                                      else None, 10, what="two workers")
            os.kill(workers[i % 2], signal.SIGKILL)
            util.wait_until(lambda: len(children(p.pid)) == 2
                            and workers[i % 2] not in children(p.pid), 10,
                            what=f"worker replaced (round {i})")
            util.wait_until(lambda: _query_ok(p), 10, what=f"service (round {i})")
        done = load.ok
        util.wait_until(lambda: load.ok > done, 10, what="the load to go on making progress")
    finally:
        load.stop()
    util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") <= 10, 15,
                    what="server connections within the pool limit")
    p.assert_alive()


def test_supervisor_killed_twenty_times(pg15, make_pooler):
    """kill -9 of the supervisor under a client load, 20 times: the workers
    notice and exit (no orphan keeps the port or a server connection), and a
    new pgcrew starts on the same port each time."""
    p = make_pooler(pg15, settings={"workers": 2})
    for i in range(20):
        workers = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == 2
                                  else None, 10, what="two workers")
        load = ClientLoad(p, n=2)
        try:
            util.wait_until(lambda: load.ok > 0, 10, what="load running")
            os.kill(p.pid, signal.SIGKILL)
            p.proc.wait(timeout=10)
            util.wait_until(lambda: not any(running(w) for w in workers), 20,
                            what=f"workers to exit (round {i})")
        finally:
            load.stop()
        util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") == 0, 15,
                        what=f"server connections of the dead pooler gone (round {i})")
        p.proc = None
        p.start()
        assert _query_ok(p)
