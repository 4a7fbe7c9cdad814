"""Protocol 3.2 (PostgreSQL 18) end to end. libpq 18 (psycopg's wheel) with
max_protocol_version 3.0 and 3.2, against PostgreSQL 15 (which answers
pgcrew's 3.2 with NegotiateProtocolVersion 3.0) and 18 (which speaks 3.2 and
gives 32-byte keys): login, queries in every pool mode, and a cancel that
lands within a second, in all four pairings. A 3.2 client gets pgcrew's own
32-byte key (proto/cancelkey.h: tag, worker, peer_id, 224 random bits),
whatever the server speaks; it cancels through a [peers] instance, after its
server moved between workers, and after an online restart; 100,000 guesses
of its secret cancel nothing. SHOW PROTOCOLS and the metrics endpoint show
who speaks what; pgx's own protocol 3.2 test passes through pgcrew.
PgBouncer 1.18 does not speak 3.2 (it refuses the startup packet): pgcrew
only."""

import asyncio
import http.client
import os
import random
import signal
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

import pg_cluster
import pooler as pooler_mod
import util
import wire
from pg_cluster import password
from test_console_go import go_binary
from test_upgrade import start_takeover, stop
from test_workers import connect_on_worker, worker_of

pytestmark = pytest.mark.pgcrew_only

WORKERS_MATRIX = (1, 4)

FULL = {"3.0": 30000, "3.2": 30002}
KEY_TAG = 0xC1
CANCEL_CODE = 80877102


# -- helpers -----------------------------------------------------------------

def startup_packet(minor, user, database, **params):
    body = struct.pack("!I", 3 << 16 | minor)
    for key, value in dict(user=user, database=database, **params).items():
        body += key.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def cancel_packet(pid, secret):
    return struct.pack("!III", 12 + len(secret), CANCEL_CODE, pid) + secret


def send_cancel(port, pid, secret, host=util.HOST):
    """One CancelRequest on its own connection; returns once pgcrew closed it."""
    with socket.create_connection((host, port), timeout=5) as s:
        s.sendall(cancel_packet(pid, secret))
        assert s.recv(1) == b""


def raw_login(port, minor, **params):
    """A trust login over a raw socket asking for protocol 3.<minor>; returns
    the connection and the messages up to ReadyForQuery."""
    c = wire.RawConn(port)
    c.send(startup_packet(minor, "trust_user", "testdb", **params))
    msgs = c.read_until(b"Z", 5)
    assert not [p for k, p in msgs if k == b"E"], msgs
    return c, msgs


def backend_key(msgs):
    keys = [p for k, p in msgs if k == b"K"]
    assert len(keys) == 1, msgs
    return struct.unpack("!I", keys[0][:4])[0], keys[0][4:]


def wait_running(pg, marker, timeout=10):
    """Until PostgreSQL runs the query carrying marker (no fixed sleep)."""
    def running():
        with pg.connect() as c:
            return c.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                             "AND query LIKE %s", (f"%{marker}%",)).fetchone()[0] > 0
    util.wait_until(running, timeout, what=f"query {marker} running")


def cancel_lands(pg, conn, marker, how=None):
    """conn runs pg_sleep; once PostgreSQL runs it, a cancel (libpq's, or
    how()) must end it with 57014 within a second of being sent. Returns the
    seconds from the cancel to the error."""
    result = {}

    def run():
        try:
            conn.execute(f"SELECT pg_sleep(30) /* {marker} */")
            result["r"] = "completed"
        except psycopg.errors.QueryCanceled:
            result["r"] = "canceled"
        result["t"] = time.monotonic()

    t = threading.Thread(target=run)
    t.start()
    wait_running(pg, marker)
    sent = time.monotonic()
    (how or conn.cancel_safe)()
    t.join(10)
    assert result.get("r") == "canceled", result
    latency = result["t"] - sent
    assert latency < 1.0, f"the cancel took {latency:.3f} s"
    return latency


def protocols(p, database="testdb"):
    with p.admin() as a:
        cur = a.execute("SHOW PROTOCOLS")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall() if r[3] == database]


def server_version_of(pg):
    return "3.2" if pg.name == "pg18" else "3.0"


# -- libpq 18, both versions, both servers, every pool mode -----------------

@pytest.mark.parametrize("version", ["3.0", "3.2"])
@pytest.mark.parametrize("pool_mode", ["session", "transaction", "statement"])
def test_libpq(pg, make_pooler, version, pool_mode):
    """The client speaks what it asked for, whatever the server speaks;
    queries work in every pool mode; its cancel lands within a second; SHOW
    PROTOCOLS says 3.0/4 or 3.2/32 for the client, and what PostgreSQL
    speaks (3.2 with its 32-byte key from 18, 3.0 and 4 bytes from 15) for
    the server."""
    p = make_pooler(pg, settings={"pool_mode": pool_mode})
    conn = p.connect(max_protocol_version=version)
    bystander = p.connect(max_protocol_version=version)
    assert conn.info.full_protocol_version == FULL[version]
    assert conn.execute("SELECT 1").fetchone() == (1,)
    assert conn.execute("SELECT %s::int + 1", (41,)).fetchone() == (42,)     # extended protocol
    if pool_mode != "statement":
        with conn.transaction():
            conn.execute("CREATE TEMP TABLE t (x int) ON COMMIT DROP")
            conn.execute("INSERT INTO t VALUES (1), (2)")
            assert conn.execute("SELECT sum(x) FROM t").fetchone() == (3,)
    cancel_lands(pg, conn, f"libpq-{version}-{pool_mode}")
    # Both stay usable; the cancel hit only its target.
    assert conn.execute("SELECT 2").fetchone() == (2,)
    assert bystander.execute("SELECT 3").fetchone() == (3,)

    rows = protocols(p)
    clients = [r for r in rows if r["type"] == "C"]
    servers = [r for r in rows if r["type"] == "S"]
    assert sorted((r["protocol"], r["key_bytes"]) for r in clients) == \
        [(version, 32 if version == "3.2" else 4)] * 2
    assert servers and all(r["protocol"] == server_version_of(pg) for r in servers), \
        [(r["protocol"], r["key_bytes"]) for r in servers]
    assert all(r["key_bytes"] == (32 if pg.name == "pg18" else 4) for r in servers), servers
    assert {r["worker"] for r in clients} == {worker_of(conn), worker_of(bystander)}


# -- the key a 3.2 client gets, and negotiation ------------------------------

def test_wire_key_layout_and_negotiation(pg18, make_pooler):
    """Raw startup packets: 3.2 gets no NegotiateProtocolVersion and a
    32-byte secret in pgcrew's layout (tag, worker as in the pid, peer_id);
    3.1 behaves as 3.0 (4 bytes, nothing negotiated, as PostgreSQL 18);
    3.3 is told 3.2; _pq_ options are listed as before, with 3.2."""
    p = make_pooler(pg18, settings={"peer_id": 7}, start=False)
    p.peers = {7: f"host={util.HOST} port=1"}
    p.start()
    for minor, params, want_v, key_len in [
            (2, {}, None, 32),
            (1, {}, None, 4),
            (0, {}, None, 4),
            (3, {}, (3 << 16 | 2, []), 32),
            (2, {"_pq_.bogus": "on"}, (3 << 16 | 2, ["_pq_.bogus"]), 32),
            (0, {"_pq_.bogus": "on"}, (3 << 16, ["_pq_.bogus"]), 4)]:
        c, msgs = raw_login(p.port, minor, **params)
        with c:
            negotiations = [m for k, m in msgs if k == b"v"]
            if want_v is None:
                assert not negotiations, (minor, msgs)
            else:
                assert len(negotiations) == 1, (minor, msgs)
                version, n = struct.unpack("!II", negotiations[0][:8])
                names = [x.decode() for x in negotiations[0][8:].split(b"\0")[:n]]
                assert (version, names) == want_v
            pid, secret = backend_key(msgs)
            assert len(secret) == key_len, (minor, secret)
            assert pid >> 31 == 0
            if key_len == 32:
                assert secret[0] == KEY_TAG
                assert secret[1] == pid >> 24               # the worker, as in the pid
                assert struct.unpack("!H", secret[2:4])[0] == 7   # peer_id
            else:
                assert struct.unpack("!I", secret)[0] >> 18 == 7
            c.send(wire.query_message("SELECT 1"))
            assert [k for k, _ in c.read_until(b"Z")] == [b"T", b"D", b"C", b"Z"]


def test_cancel_packets_of_any_valid_length(pg18, make_pooler):
    """CancelRequests of 4 to 256 secret bytes that are not the client's
    cancel nothing; lengths outside that, and a cut packet, close that
    connection only; then the right key cancels."""
    p = make_pooler(pg18, settings={"pool_mode": "transaction"})
    c, msgs = raw_login(p.port, 2)
    with c:
        pid, secret = backend_key(msgs)
        c.send(wire.query_message("SELECT pg_sleep(30) /* lengths */"))
        wait_running(pg18, "lengths")
        for n in (4, 5, 31, 33, 64, 255, 256):
            send_cancel(p.port, pid, (secret * 9)[:n])
        for n in (0, 1, 3, 257, 400):
            with socket.create_connection((util.HOST, p.port), timeout=5) as s:
                s.sendall(cancel_packet(pid, (secret * 13)[:n]))
                assert s.recv(1024, socket.MSG_WAITALL)[:1] in (b"", b"E")
        with socket.create_connection((util.HOST, p.port), timeout=5) as s:
            s.sendall(cancel_packet(pid, secret)[:20])          # cut, then gone
        with pytest.raises(socket.timeout):
            c.read_message(0.3)                                  # still running
        sent = time.monotonic()
        send_cancel(p.port, pid, secret)
        msgs = c.read_until(b"Z", 5)
        assert time.monotonic() - sent < 1.0
        errors = [wire.error_fields(m) for k, m in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs


# -- across instances, workers and restarts ----------------------------------

def test_cancel_through_a_peer_with_a_long_key(pg18, make_pooler):
    """[peers]: the 3.2 client's key names peer 1; a CancelRequest sent to
    peer 2 is passed on with the key unchanged and cancels the query."""
    a = make_pooler(pg18, settings={"peer_id": 1, "pool_mode": "transaction"}, start=False)
    b = make_pooler(pg18, settings={"peer_id": 2, "pool_mode": "transaction"}, start=False)
    for p in (a, b):
        p.peers = {1: f"host={util.HOST} port={a.port}", 2: f"host={util.HOST} port={b.port}"}
        p.start()
    conn = a.connect(max_protocol_version="3.2")
    c, msgs = raw_login(a.port, 2)
    with c:
        pid, secret = backend_key(msgs)
        assert len(secret) == 32 and struct.unpack("!H", secret[2:4])[0] == 1
        c.send(wire.query_message("SELECT pg_sleep(30) /* via-peer */"))
        wait_running(pg18, "via-peer")
        # A wrong secret through the peer cancels nothing.
        send_cancel(b.port, pid, secret[:4] + bytes(28))
        with pytest.raises(socket.timeout):
            c.read_message(0.3)
        sent = time.monotonic()
        send_cancel(b.port, pid, secret)
        msgs = c.read_until(b"Z", 5)
        latency = time.monotonic() - sent
        errors = [wire.error_fields(m) for k, m in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs
        assert latency < 1.0, latency
    # libpq's own cancel, sent to the peer that does not own it.
    cancel_lands(pg18, conn, "libpq-via-peer",
                 how=lambda: send_cancel(b.port, *libpq_key(a, conn)))


def libpq_key(p, conn):
    """The key libpq holds for conn, read back from SHOW FDS by its pid."""
    with p.admin() as adm:
        for r in adm.execute("SHOW FDS").fetchall():
            if r[1] == "client" and r[6] >> 32 == conn.info.backend_pid:
                return conn.info.backend_pid, bytes(r[15])
    raise AssertionError("client not in SHOW FDS")


@pytest.mark.fixed_workers
@pytest.mark.parametrize("version", ["3.0", "3.2"])
def test_cancel_after_the_server_moved(pg18, make_pooler, version):
    """Four workers, one server: it moves to the worker of each client in
    turn, with PostgreSQL's 32-byte key, and each client's cancel lands."""
    p = make_pooler(pg18, settings={"workers": 4, "pool_mode": "transaction",
                                    "default_pool_size": 1, "query_wait_timeout": 10})
    a = connect_on_worker(p, 0, max_protocol_version=version)
    pid_a = a.execute("SELECT pg_backend_pid()").fetchone()[0]
    b = connect_on_worker(p, None, other_than=worker_of(a), max_protocol_version=version)
    assert b.execute("SELECT pg_backend_pid()").fetchone()[0] == pid_a      # moved
    cancel_lands(pg18, b, f"moved-b-{version}")
    cancel_lands(pg18, a, f"moved-a-{version}")
    assert a.execute("SELECT pg_backend_pid()").fetchone()[0] == pid_a
    with p.admin() as adm:
        moves = adm.execute("SHOW WORKERS").fetchall()
    assert sum(r[8] for r in moves) >= 2, moves
    servers = protocols(p)
    assert [(r["protocol"], r["key_bytes"]) for r in servers if r["type"] == "S"] == [("3.2", 32)]


def test_cancel_after_online_restart(pg18, make_pooler, pooler_workers):
    """pgcrew -R: session clients of both versions move to the new process
    with their keys (32 and 4 bytes) and their servers (PostgreSQL's 32-byte
    keys); each cancel then lands, and SHOW FDS of the new process lists
    the same keys."""
    p = make_pooler(pg18, settings={"pool_mode": "session"})
    conns = {v: p.connect(max_protocol_version=v) for v in ("3.0", "3.2")}
    keys = {v: libpq_key(p, c) for v, c in conns.items()}
    assert {v: len(k[1]) for v, k in keys.items()} == {"3.0": 4, "3.2": 32}
    backends = {v: c.execute("SELECT pg_backend_pid()").fetchone()[0] for v, c in conns.items()}
    new = start_takeover(p)
    try:
        p.wait_for_log(r"online restart: pid %d took over" % new.pid, timeout=10)
        p.proc.wait(timeout=15)
        assert p.proc.returncode == 0
        for v, c in conns.items():
            assert c.execute("SELECT pg_backend_pid()").fetchone()[0] == backends[v]
            assert libpq_key(p, c) == keys[v]
            cancel_lands(pg18, c, f"restart-{v}")
        rows = protocols(p)
        assert sorted((r["type"], r["protocol"], r["key_bytes"]) for r in rows) == \
            [("C", "3.0", 4), ("C", "3.2", 32), ("S", "3.2", 32), ("S", "3.2", 32)]
    finally:
        for c in conns.values():
            c.close()
        stop(new)
    assert not p.sanitizer_problems(), p.sanitizer_problems()


# -- servers that do not negotiate ------------------------------------------

PGBOUNCER = "/usr/sbin/pgbouncer"      # Debian's 1.18 (scripts/deps.sh installs it)


@pytest.fixture
def old_middleware(pg15, session_dir):
    """Debian's PgBouncer 1.18 in front of PostgreSQL 15: it answers a 3.2
    StartupMessage with "bad packet header" instead of negotiating. (Ask for
    it after make_pooler: it then stops first, and its backends with it.)"""
    workdir = os.path.join(session_dir, f"pgbouncer-{util.free_port()}")
    os.makedirs(workdir)
    os.chmod(workdir, 0o755)
    mw = pooler_mod.Pooler(PGBOUNCER, pooler_mod.binary_kind(PGBOUNCER), workdir, {},
                           {db: pg15.dsn(db) for db in pg_cluster.DATABASES}, None,
                           {u: pg_cluster.password(u) for u in pg_cluster.USERS}, None, None)
    mw.start()
    yield mw
    # SIGTERM: at once (SIGINT would wait for pgcrew's server connections).
    util.end_process(mw.proc, signal.SIGTERM)
    assert not mw.sanitizer_problems()


def test_server_max_protocol_version(pg15, make_pooler, old_middleware):
    """pgcrew in front of middleware that refuses 3.2: with the default the
    login fails with its error; with server_max_protocol_version = 3.0 both
    a 3.0 and a 3.2 client work through it, and a 3.2 client's long key
    cancels with the middleware's 4-byte key."""
    dbs = {"testdb": f"host={util.HOST} port={old_middleware.port} dbname=testdb"}
    p = make_pooler(pg15, databases=dbs)
    with pytest.raises(psycopg.OperationalError, match="bad packet header"):
        p.connect()
    p = make_pooler(pg15, databases=dbs, settings={"server_max_protocol_version": "3.0"})
    for version in ("3.0", "3.2"):
        conn = p.connect(max_protocol_version=version)
        assert conn.info.full_protocol_version == FULL[version]
        assert conn.execute("SELECT 1").fetchone() == (1,)
        cancel_lands(pg15, conn, f"old-middleware-{version}")
    rows = protocols(p)
    assert {(r["type"], r["protocol"], r["key_bytes"]) for r in rows} == \
        {("C", "3.0", 4), ("C", "3.2", 32), ("S", "3.0", 4)}


# -- guessing ----------------------------------------------------------------

GUESSES = 100_000


async def guess_all(port, pid, head, n, concurrency=48):
    """n CancelRequests for pid with random secrets: most of the client's
    own length with its routing bytes (so each reaches the owner worker
    and is compared there), some of other lengths (4 to 256)."""
    rng = random.SystemRandom()
    left = [n]

    async def one():
        while left[0] > 0:
            left[0] -= 1
            r = rng.random()
            if r < 0.8:
                secret = head + os.urandom(28)
            elif r < 0.9:
                secret = os.urandom(4)
            else:
                secret = os.urandom(rng.randint(4, 256))
            reader, writer = await asyncio.open_connection(util.HOST, port)
            writer.write(cancel_packet(pid, secret))
            await writer.drain()
            assert await reader.read(1) == b""
            writer.close()

    await asyncio.gather(*(one() for _ in range(concurrency)))


@pytest.mark.timeout(400)       # 15-25 s here; more on a loaded machine
def test_guessing_cancels_nothing(pg18, make_pooler):
    """100,000 CancelRequests with the pid of a live 3.2 client and random
    secrets cancel nothing: its query runs throughout; then its own key
    cancels it (so the requests did reach the worker that owns it)."""
    p = make_pooler(pg18, settings={"pool_mode": "transaction", "max_client_conn": 200})
    c, msgs = raw_login(p.port, 2)
    with c:
        pid, secret = backend_key(msgs)
        c.send(wire.query_message("SELECT pg_sleep(600) /* guessed */"))
        wait_running(pg18, "guessed")
        started = time.monotonic()
        asyncio.run(guess_all(p.port, pid, secret[:4], GUESSES))
        took = time.monotonic() - started
        print(f"{GUESSES} guesses in {took:.1f} s")
        wait_running(pg18, "guessed", timeout=1)         # still running
        with pytest.raises(socket.timeout):
            c.read_message(0.1)
        send_cancel(p.port, pid, secret)
        msgs = c.read_until(b"Z", 5)
        errors = [wire.error_fields(m) for k, m in msgs if k == b"E"]
        assert errors and errors[0]["C"] == "57014", msgs


# -- metrics -----------------------------------------------------------------

def test_metrics_count_logins_by_version(pg, make_pooler):
    """pgcrew_client_logins_total and pgcrew_server_logins_total by
    protocol: two 3.2 clients and one 3.0, in session mode each with its
    server (3.2 on PostgreSQL 18, 3.0 on 15)."""
    p = make_pooler(pg, settings={"pool_mode": "session"}, start=False)
    port = util.free_port()
    while port == p.port:
        port = util.free_port()
    p.settings["metrics_listen"] = f"{util.HOST}:{port}"
    p.start()
    util.wait_until(lambda: util.port_accepts(port), 5, what="metrics port")
    conns = [p.connect(max_protocol_version=v) for v in ("3.2", "3.2", "3.0")]
    for c in conns:
        c.execute("SELECT 1")
    conn = http.client.HTTPConnection(util.HOST, port, timeout=10)
    conn.request("GET", "/metrics")
    body = conn.getresponse().read().decode()
    conn.close()
    got = {}
    for line in body.splitlines():
        if line.startswith(("pgcrew_client_logins_total", "pgcrew_server_logins_total")):
            name, value = line.rsplit(" ", 1)
            got[name] = float(value)
    srv = server_version_of(pg)
    assert got['pgcrew_client_logins_total{protocol="3.2"}'] == 2, got
    assert got['pgcrew_client_logins_total{protocol="3.0"}'] == 1, got
    assert got[f'pgcrew_server_logins_total{{protocol="{srv}"}}'] == 3, got
    assert sum(v for k, v in got.items() if k.startswith("pgcrew_server")) == 3, got


# -- pgx's own protocol 3.2 test ---------------------------------------------

PGX_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "go", "pgx32")


@pytest.fixture(scope="module")
def pgx_tests(tmp_path_factory):
    """pgx's pgconn test binary, of the release (go/pgx32/go.mod: v5.9.0)
    whose suite has TestConnectProtocolVersion32."""
    out = str(tmp_path_factory.mktemp("pgx") / "pgconn.test")
    env = dict(os.environ, CGO_ENABLED="0", GOFLAGS="-mod=readonly -buildvcs=false")
    r = subprocess.run([go_binary(), "test", "-c", "-o", out, "github.com/jackc/pgx/v5/pgconn"],
                       cwd=PGX_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out


def run_pgx(binary, test, dsn):
    r = subprocess.run([binary, "-test.run", f"^{test}$", "-test.v", "-test.count=1"],
                       env=dict(os.environ, PGX_TEST_DATABASE=dsn), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and f"--- PASS: {test}" in r.stdout, r.stdout + r.stderr


def test_pgx_protocol32(pg18, make_pooler, pgx_tests):
    """pgx's TestConnectProtocolVersion32 through pgcrew to PostgreSQL 18:
    3.2 negotiated, a 32-byte key (pgcrew's). (Against PostgreSQL 15 the
    test expects PostgreSQL's 4-byte key, where pgcrew gives its own 32:
    the test is written for a direct connection.) Then pgx's cancel test
    with max_protocol_version=3.2: its CancelRequest carries the long key."""
    p = make_pooler(pg18, settings={"pool_mode": "session"})
    dsn = (f"host={util.HOST} port={p.port} dbname=testdb user=trust_user "
           f"password={password('trust_user')} sslmode=disable")
    run_pgx(pgx_tests, "TestConnectProtocolVersion32", dsn)
    run_pgx(pgx_tests, "TestConnCancelRequest", dsn + " max_protocol_version=3.2")
    with p.admin() as a:
        assert a.execute("SHOW PROTOCOLS").fetchall()   # still serving
