#!/usr/bin/env python3
"""Cancel latency with protocol 3.0 and 3.2 keys, side by side: from the
moment a client sends its CancelRequest (libpq 18's cancel_safe, through
pgcrew) to the moment its query's error (57014) arrives, N cancels per
version, pgcrew with 1 and with 4 workers, against PostgreSQL 18 (which
speaks 3.2 and gives pgcrew 32-byte keys) and 15 (3.0, 4 bytes).

Each query is cancelled only once PostgreSQL shows it running
(pg_stat_activity), so the figure is the cancel's path alone: pgcrew's
worker that takes the request, the hop to the owning worker when that is
another, the CancelRequest to PostgreSQL with the server's key, and the
error back. Uses the integration harness (test/integration) for the
clusters and the pooler; run after scripts/deps.sh test.

usage: bench/cancel_latency.py [--n 50] [--pgcrew PATH] [--workers 1,4]
       (default binary: _build/release/pgcrew, else _build/sanitize/pgcrew)
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import psycopg  # noqa: E402

import pg_cluster  # noqa: E402
import pooler as pooler_mod  # noqa: E402
import util  # noqa: E402


def running(pg, marker):
    with pg.connect() as c:
        return c.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                         "AND query LIKE %s", (f"%{marker}%",)).fetchone()[0] > 0


def one_cancel(pg, conn, marker):
    done = {}

    def run():
        try:
            conn.execute(f"SELECT pg_sleep(30) /* {marker} */")
        except psycopg.errors.QueryCanceled:
            done["t"] = time.monotonic()

    t = threading.Thread(target=run)
    t.start()
    util.wait_until(lambda: running(pg, marker), 10, interval=0.005, what=marker)
    sent = time.monotonic()
    conn.cancel_safe()
    t.join(10)
    if "t" not in done:
        raise RuntimeError(f"{marker}: not cancelled")
    return done["t"] - sent


def measure(binary, pg, workers, n, scratch):
    workdir = tempfile.mkdtemp(prefix=f"cancel-{pg.name}-w{workers}-", dir=scratch)
    os.chmod(workdir, 0o755)
    users = {u: pg_cluster.password(u) for u in pg_cluster.USERS}
    p = pooler_mod.Pooler(binary, pooler_mod.binary_kind(binary), workdir,
                          {"workers": workers, "pool_mode": "transaction"},
                          {db: pg.dsn(db) for db in pg_cluster.DATABASES}, None, users, None, None)
    p.start()
    out = {}
    try:
        for version in ("3.0", "3.2"):
            # A fresh connection per cancel: the kernel spreads them (and
            # their CancelRequests) over the workers as it would.
            lat = []
            for i in range(n):
                with p.connect(max_protocol_version=version) as conn:
                    lat.append(one_cancel(pg, conn, f"lat-{version}-{i}") * 1000)
            out[version] = lat
    finally:
        p.stop()
    return out


def summary(lat):
    s = sorted(lat)
    return (f"median {statistics.median(s):6.2f}  p90 {s[int(len(s) * 0.9) - 1]:6.2f}  "
            f"max {s[-1]:6.2f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--workers", default="1,4")
    ap.add_argument("--pgcrew")
    args = ap.parse_args()
    binary = args.pgcrew or next(
        (b for b in (os.path.join(REPO, "_build", "release", "pgcrew"),
                     os.path.join(REPO, "_build", "sanitize", "pgcrew")) if os.access(b, os.X_OK)),
        None)
    if not binary:
        sys.exit("no pgcrew binary: build one (scripts/build.sh _build/release) or pass --pgcrew")
    scratch = tempfile.mkdtemp(prefix="pgcrew-cancel-")
    os.chmod(scratch, 0o755)
    clusters = []
    try:
        for name, bindir in (("pg18", pg_cluster.unpack_pg18(os.path.join(scratch, "pg18-install"))),
                             ("pg15", pg_cluster.PG15_BINDIR)):
            pg = pg_cluster.PgCluster(name, bindir, os.path.join(scratch, name))
            pg.init()
            clusters.append(pg)
        print(f"pgcrew {binary}, {args.n} cancels per line (CancelRequest sent -> 57014 received)")
        for pg in clusters:
            for workers in (int(w) for w in args.workers.split(",")):
                res = measure(binary, pg, workers, args.n, scratch)
                for version, lat in res.items():
                    key = 32 if version == "3.2" else 4
                    print(f"{pg.name} workers={workers} client {version} ({key}-byte key): {summary(lat)}")
    finally:
        for pg in clusters:
            pg.stop("immediate")
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
