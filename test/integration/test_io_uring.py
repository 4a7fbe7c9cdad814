"""io_uring = 1 (pgcrew's own, the default): each worker reads the sockets
a loop turn found readable, and sends what it relays, in one io_uring call
per batch.
Every worker says so in SHOW WORKERS and counts its batches; traffic of
every shape (pgbench, a 4 MB result through a slow reader, COPY in, TLS
clients, which stay on recv/send) comes through byte for byte; RELOAD and
SET turn it off and on in every worker, and a kernel without io_uring
leaves pgcrew on recv/send with one LOG line. The rest of the suite runs
with it on as the default, and once more with it off when PGCREW_IO_URING=0
(scripts/test.sh's second pass)."""

import hashlib
import os
import socket
import subprocess

import psycopg
import pytest

import util
import wire
from bench import pgbench_command, pgbench_env
from test_pgcrew_only import children

pytestmark = pytest.mark.pgcrew_only
WORKERS_MATRIX = (1, 4)


def kernel_refuses(p):
    return "io_uring: the kernel refused" in p.log_text()


def workers(p):
    """SHOW WORKERS as dicts, once every worker answers."""
    with p.admin() as a:
        cur = a.execute("SHOW WORKERS")
        cols = [d.name for d in cur.description]
        return [dict(zip(cols, row)) for row in cur.fetchall()]


def start(pg15, make_pooler, n, **settings):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "io_uring": 1, **settings})
    util.wait_until(lambda: len(children(p.pid)) == n, 10, what="every worker up")
    if kernel_refuses(p):
        pytest.skip("this kernel gives no io_uring ring (io_uring_disabled or seccomp)")
    return p


def test_on_by_default(pg15, make_pooler, pooler_workers):
    """An ini that does not mention io_uring gets it: SHOW CONFIG's default
    is 1, and (unless this run forces a value) every worker batches."""
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    util.wait_until(lambda: len(children(p.pid)) == pooler_workers, 10, what="every worker up")
    with p.admin() as a:
        cur = a.execute("SHOW CONFIG")
        cols = [d.name for d in cur.description]
        row = next(dict(zip(cols, r)) for r in cur.fetchall() if r[0] == "io_uring")
    assert row["default"] == "1", row
    forced = os.environ.get("PGCREW_IO_URING")
    expected = "off" if forced == "0" or kernel_refuses(p) else "on"
    assert [w["io_uring"] for w in workers(p)] == [expected] * pooler_workers


def test_batches_in_every_worker(pgbench_pg15, make_pooler, pooler_workers):
    p = start(pgbench_pg15, make_pooler, pooler_workers)
    assert [w["io_uring"] for w in workers(p)] == ["on"] * pooler_workers
    proc = subprocess.run(pgbench_command(p, 8, 3, extra=("-S",)), env=pgbench_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = workers(p)
    # Each pgbench client's transactions went through batches on its worker.
    for w in rows:
        if w["clients"] or w["io_batches"]:
            assert w["io_batched_ops"] >= w["io_batches"] > 0, rows
    assert sum(w["io_batched_ops"] for w in rows) > 1000, rows


def test_large_result_to_a_slow_reader(pg15, make_pooler, pooler_workers):
    """4 MB through a client socket with a 32 kB receive buffer, read in
    small pieces: the batch's sends come back short or with EAGAIN, and the
    usual wait for writability takes over."""
    p = start(pg15, make_pooler, pooler_workers)
    sql = "SELECT string_agg(md5(i::text), '') FROM generate_series(1, 131072) i"
    with pg15.connect() as direct:
        want = direct.execute(sql).fetchone()[0].encode()
    with wire.RawConn(p.port, timeout=30) as raw:
        raw.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        raw.login_trust("trust_user", "testdb")
        raw.send(wire.query_message(sql))
        data = bytearray(raw.buf)
        while not data.endswith(b"Z\0\0\0\x05I"):
            chunk = raw.sock.recv(2048)      # small reads: the sender outruns us
            assert chunk, "connection closed"
            data += chunk
        at, got = 0, b""
        while at < len(data):                # T, D, C, Z: walk the messages
            n = int.from_bytes(data[at + 1:at + 5], "big")
            if data[at] == ord("D"):
                got = bytes(data[at + 11:at + 11 + int.from_bytes(data[at + 7:at + 11], "big")])
            at += 1 + n
        raw.buf = b""
        raw.send(wire.query_message("SELECT 1"))
        assert raw.read_until(b"Z")[-1] == (b"Z", b"I")
    assert len(got) == 32 * 131072
    assert hashlib.sha256(got).digest() == hashlib.sha256(want).digest()


def test_copy_in_and_out(pg15, make_pooler, pooler_workers):
    p = start(pg15, make_pooler, pooler_workers)
    rows = [(i, "x" * (i % 300)) for i in range(20000)]
    with p.connect(autocommit=False) as conn:
        conn.execute("CREATE TEMP TABLE t (i int, s text) ON COMMIT DROP")
        with conn.cursor().copy("COPY t FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)
        assert conn.execute("SELECT count(*), sum(length(s)) FROM t").fetchone() == \
            (len(rows), sum(len(r[1]) for r in rows))
        out = []
        with conn.cursor().copy("COPY t TO STDOUT") as cp:
            for r in cp.rows():
                out.append((int(r[0]), r[1]))
        assert sorted(out) == rows
        conn.rollback()


def test_tls_clients_alongside(pg15, make_pooler, pooler_workers, tls_files):
    p = start(pg15, make_pooler, pooler_workers, client_tls_sslmode="allow",
              client_tls_key_file=tls_files["server.key"],
              client_tls_cert_file=tls_files["server.crt"])
    for _ in range(2 * pooler_workers):
        with p.connect(sslmode="require") as tls, p.connect(sslmode="disable") as plain:
            assert tls.execute("SELECT repeat('t', 100000)").fetchone()[0] == "t" * 100000
            assert plain.execute("SELECT repeat('p', 100000)").fetchone()[0] == "p" * 100000


def test_reload_and_set(pg15, make_pooler, pooler_workers):
    p = start(pg15, make_pooler, pooler_workers)
    conn = p.connect()
    p.settings["io_uring"] = 0
    p.write_config()
    p.reload()
    util.wait_until(lambda: {w["io_uring"] for w in workers(p)} == {"off"}, 10,
                    what="io_uring off in every worker")
    assert conn.execute("SELECT 1").fetchone() == (1,)
    with p.admin() as a:
        a.execute("SET io_uring = 1")
    util.wait_until(lambda: {w["io_uring"] for w in workers(p)} == {"on"}, 10,
                    what="io_uring on again in every worker")
    before = sum(w["io_batches"] for w in workers(p))
    for _ in range(20):
        assert conn.execute("SELECT 2").fetchone() == (2,)
    assert sum(w["io_batches"] for w in workers(p)) > before


@pytest.mark.fixed_workers
def test_kernel_without_io_uring(pg15, make_pooler):
    """io_uring_disabled = 2 (no ring for anyone): one LOG line per worker,
    not a warning (the setting is on by default), recv/send, and the
    pooler works as without the setting."""
    path = "/proc/sys/kernel/io_uring_disabled"
    if not os.path.exists(path) or not util.running_as_root():
        pytest.skip("needs root and a kernel with kernel.io_uring_disabled (6.6+)")
    with open(path) as f:
        old = f.read().strip()
    try:
        with open(path, "w") as f:
            f.write("2")
        p = make_pooler(pg15, settings={"workers": 2, "io_uring": 1})
        util.wait_until(lambda: len(children(p.pid)) == 2, 10, what="both workers up")
        p.wait_for_log(r"LOG io_uring: the kernel refused a ring", timeout=10)
        assert "WARNING io_uring" not in p.log_text()
        with p.connect() as conn:
            assert conn.execute("SELECT 42").fetchone() == (42,)
        assert {w["io_uring"] for w in workers(p)} == {"off"}
    finally:
        with open(path, "w") as f:
            f.write(old)
