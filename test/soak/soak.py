#!/usr/bin/env python3
"""Soak: many client connections held open through pgcrew while some of them
run transactions (pgbench -S, transaction pooling) for a while. Passes when
pgbench reports no failed or aborted transaction, every idle connection is
still open at the end, the pooler's RSS is flat after warm-up, and SHOW POOLS
agrees with what the test opened and with PostgreSQL.

    .venv/bin/python test/soak/soak.py [--clients 10000] [--active 1000]
                                       [--seconds 300] [--workers auto]

starts its own PostgreSQL 15 and pgcrew (PGCREW_BIN, default the sanitizer
build in _build/sanitize) and prints the figures. CI runs a short version
(test/integration/test_soak.py: 2,000 clients, 60 s) through run_soak()."""

import argparse
import os
import resource
import selectors
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import bench  # noqa: E402
import util  # noqa: E402
import wire  # noqa: E402

# RSS may grow this much after warm-up (allocator noise, stats ring).
RSS_SLACK_KB = 8 * 1024
RSS_SLACK_RATIO = 0.10


def raise_fd_limit(want):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_idle(port, n, deadline_s=120):
    """n logged-in client connections (trust), opened concurrently in
    batches; returns the sockets. Raises if any login fails."""
    sel = selectors.DefaultSelector()
    done, pending = [], {}
    started = time.monotonic()
    todo = n
    startup = wire.startup_packet("trust_user", "testdb")
    while todo or pending:
        while todo and len(pending) < 256:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((util.HOST, port))
            pending[s] = b""
            sel.register(s, selectors.EVENT_WRITE)
            todo -= 1
        if time.monotonic() - started > deadline_s:
            raise AssertionError(f"{len(done)} of {n} idle clients logged in in {deadline_s}s")
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                s.send(startup)
                sel.modify(s, selectors.EVENT_READ)
                continue
            data = s.recv(65536)
            if not data:
                raise AssertionError("pooler closed an idle client during login")
            pending[s] += data
            if pending[s][:1] == b"E":
                raise AssertionError(f"login refused: {pending[s][:200]!r}")
            if b"Z\x00\x00\x00\x05I" in pending[s]:
                sel.unregister(s)
                del pending[s]
                done.append(s)
    sel.close()
    return done


def still_open(socks):
    """How many of socks have neither data nor EOF waiting (the pooler has
    not closed them)."""
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    ready = {key.fileobj for key, _ in sel.select(timeout=0.5)}
    sel.close()
    closed = 0
    for s in ready:
        try:
            if s.recv(1, socket.MSG_PEEK) == b"":
                closed += 1
        except OSError:
            closed += 1
    return len(socks) - closed


def pooler_rss_kb(pid, children):
    total = 0
    for p in [pid] + children(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (FileNotFoundError, StopIteration):
            pass
    return total


def pools(admin_conn):
    cur = admin_conn.execute("SHOW POOLS")
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def run_soak(pooler, pg, clients, active, seconds, children, log=print):
    """The soak against a running pooler (pool_mode transaction). Returns a
    dict of figures; raises AssertionError on any failure."""
    idle_n = clients - active
    t0 = time.monotonic()
    idle = open_idle(pooler.port, idle_n)
    log(f"soak: {idle_n} idle clients logged in in {time.monotonic() - t0:.1f} s")
    cmd = bench.pgbench_command(pooler, active, seconds, threads=2, extra=("-S",))
    proc = subprocess.Popen(cmd, env=bench.pgbench_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    samples = []
    end = time.monotonic() + seconds
    try:
        with pooler.admin() as adm:
            while time.monotonic() < end and proc.poll() is None:
                time.sleep(min(5, max(0.1, end - time.monotonic())))
                rows = [r for r in pools(adm) if r["database"] == "testdb"]
                samples.append({
                    "t": round(time.monotonic() - t0),
                    "rss_kb": pooler_rss_kb(pooler.pid, children),
                    "cl": sum(r["cl_active"] + r["cl_waiting"] for r in rows),
                    "sv": sum(r["sv_active"] + r["sv_idle"] + r["sv_used"] + r["sv_tested"]
                              + r["sv_login"] for r in rows),
                })
                log(f"soak: {samples[-1]}")
        output, _ = proc.communicate(timeout=seconds + 60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    summary = bench.parse_summary(output)
    aborted = output.count("aborted")
    open_at_end = still_open(idle)
    for s in idle:
        s.close()
    figures = {"clients": clients, "active": active, "seconds": seconds,
               "transactions": summary["processed"], "failed": summary["failed"],
               "aborted": aborted, "idle_open_at_end": open_at_end, "samples": samples}
    assert proc.returncode == 0 and not aborted and not summary["failed"], output[-3000:]
    assert summary["processed"] and summary["processed"] > active, output[-3000:]
    assert open_at_end == idle_n, f"{idle_n - open_at_end} idle clients were closed"
    # Warm-up: the first third. RSS after it must stay flat.
    warm = [s for s in samples if s["t"] >= seconds / 3]
    assert len(warm) >= 2, samples
    base = warm[0]["rss_kb"]
    peak = max(s["rss_kb"] for s in warm)
    figures["rss_kb_after_warmup"] = base
    figures["rss_kb_peak"] = peak
    assert peak <= base * (1 + RSS_SLACK_RATIO) + RSS_SLACK_KB, f"RSS grew {base} -> {peak} kB"
    # SHOW POOLS saw every client (idle + pgbench's) while pgbench ran, and
    # never more servers than the pool allows.
    assert max(s["cl"] for s in samples) >= idle_n + active * 0.9, samples
    pool_size = int(pooler.settings.get("default_pool_size", 20))
    assert max(s["sv"] for s in samples) <= pool_size, samples
    assert pg.server_connections("testdb", "trust_user") <= pool_size
    return figures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--active", type=int, default=1000)
    ap.add_argument("--seconds", type=int, default=300)
    ap.add_argument("--workers", default="auto")
    args = ap.parse_args()

    import pg_cluster
    import pooler as pooler_mod
    from test_pgcrew_only import children

    limit = raise_fd_limit(args.clients * 2 + 1000)
    if limit < args.clients + 500:
        sys.exit(f"soak: descriptor limit {limit} is too low for {args.clients} clients")
    binary = os.environ.get("PGCREW_BIN", os.path.join(REPO, "_build", "sanitize", "pgcrew"))
    base = tempfile.mkdtemp(prefix="pgcrew-soak-")
    os.chmod(base, 0o755)
    pg = pg_cluster.PgCluster("soak", pg_cluster.PG15_BINDIR, os.path.join(base, "pg"))
    os.makedirs(pg.basedir, exist_ok=True)
    pg.init()
    p = None
    try:
        subprocess.run([pg_cluster.pgbench_binary(), "-i", "-q", "-h", pg.host, "-p", str(pg.port),
                        "-U", "postgres", "testdb"], check=True, capture_output=True, timeout=300)
        with pg.connect("testdb") as conn:
            conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO PUBLIC")
        workdir = os.path.join(base, "pgcrew")
        os.makedirs(workdir)
        os.chmod(workdir, 0o755)
        p = pooler_mod.Pooler(binary, "pgcrew", workdir,
                              settings={"pool_mode": "transaction", "workers": args.workers,
                                        "max_client_conn": args.clients + 100,
                                        "default_pool_size": 20, "query_wait_timeout": 120},
                              databases={"testdb": pg.dsn("testdb")},
                              userlist={u: pg_cluster.password(u) for u in pg_cluster.USERS},
                              asan_quarantine_mb=4)
        p.start()
        figures = run_soak(p, pg, args.clients, args.active, args.seconds, children)
        print(f"soak passed: {figures['clients']} clients ({figures['active']} active) for "
              f"{figures['seconds']} s: {figures['transactions']} transactions, 0 errors, "
              f"RSS {figures['rss_kb_after_warmup']} kB after warm-up, peak "
              f"{figures['rss_kb_peak']} kB")
    finally:
        if p is not None:
            p.stop()
        pg.stop("immediate")


if __name__ == "__main__":
    main()
