"""The small-pool scenario (bench/smallpool; see bench/README.md): a pool of
5 servers shared by many more clients, pgcrew with 1, 2, 4 and 8 workers
against PgBouncer. Per run, besides pgbench's TPS and latency (bench/run's
Matrix does the runs): the backends PostgreSQL started (pg_stat_database
sessions), the servers that moved between pgcrew's workers (SHOW WORKERS
servers_moved_in/out) and how long each move took (the server_move phase of
/metrics' pgcrew_connection_setup_seconds histogram).

usage: smallpool.py --scratch DIR --out DIR --pgcrew BIN --repo DIR [options]
       smallpool.py --report DIR      (redraw report.md from summary.csv)"""

import argparse
import csv
import json
import math
import os
import re
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, PGBIN, USER, log  # noqa: E402
import matrix  # noqa: E402

CLIENTS = (20, 60)
TARGETS = ("pgcrew-w1", "pgcrew-w2", "pgcrew-w4", "pgcrew-w8", "pgbouncer")
POOL_SIZE = 5
MOVE_PHASE = "server_move"

OWN_FIELDS = ["workers", "new_backends", "backends_per_1k_tx", "server_logins", "moves",
              "moves_out", "moves_per_1k_tx", "move_samples", "move_p50_us", "move_p99_us",
              "move_mean_us"]
RAW_FIELDS = (["clients", "target", "round", "status", "duration_s", "tps", "transactions",
               "lat_p50_ms", "lat_p99_ms", "spread"] + OWN_FIELDS
              + ["sessions_before", "sessions_after", "move_buckets", "conn_s", "window_s",
                 "wall_s", "failed_tx", "aborted_clients", "error_lines", "pgbench_rc",
                 "cpu_us_per_tx", "cpu_share", "machine_us_per_tx", "rss_peak_kb",
                 "worker_restarts", "loadavg_1m", "errors"])
SUMMARY_FIELDS = (["clients", "target", "status", "rounds", "duration_s", "tps", "tps_min",
                   "tps_max", "transactions", "lat_p50_ms", "lat_p99_ms", "spread"] + OWN_FIELDS
                  + ["move_buckets", "failed_tx", "aborted_clients", "error_lines",
                     "cpu_us_per_tx", "cpu_share", "machine_us_per_tx", "rss_peak_kb",
                     "worker_restarts", "errors"])


# -- Prometheus text format and histogram_quantile ---------------------------

LINE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """[(name, {label: value}, float)] of a /metrics answer."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = LINE_RE.match(line)
        if not m:
            continue
        labels = dict(LABEL_RE.findall(m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            continue
    return out


def phase_histogram(samples, phase, name="pgcrew_connection_setup_seconds"):
    """(buckets [(le, cumulative count)] sorted by le with +Inf last, sum,
    count) of one phase of the setup histogram."""
    buckets, total, count = [], 0.0, 0.0
    for metric, labels, value in samples:
        if labels.get("phase") != phase:
            continue
        if metric == name + "_bucket":
            le = labels.get("le", "")
            buckets.append((math.inf if le == "+Inf" else float(le), value))
        elif metric == name + "_sum":
            total = value
        elif metric == name + "_count":
            count = value
    buckets.sort()
    return buckets, total, count


def histogram_quantile(q, buckets):
    """As Prometheus' histogram_quantile: the bucket holding rank q * count,
    linear interpolation between its lower and upper bound (0 below the
    first bucket); a rank in the +Inf bucket gives the highest finite bound.
    None without samples."""
    if len(buckets) < 2 or buckets[-1][0] != math.inf or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    b = next(i for i, (_, c) in enumerate(buckets) if c >= rank)
    if b == len(buckets) - 1:
        return buckets[-2][0]
    if b == 0 and buckets[0][0] <= 0:
        return buckets[0][0]
    lo, below = (0.0, 0.0) if b == 0 else buckets[b - 1]
    hi, upto = buckets[b]
    if upto == below:
        return hi
    return lo + (hi - lo) * (rank - below) / (upto - below)


def buckets_text(buckets):
    """Compact 'le:count' list of the buckets that changed (for the CSVs)."""
    out, prev = [], 0
    for le, c in buckets:
        if c != prev:
            out.append(f"{'+Inf' if le == math.inf else f'{le:g}'}:{c:g}")
        prev = c
    return " ".join(out)


def add_buckets(a, b):
    if not a:
        return list(b)
    if not b:
        return list(a)
    bd = dict(b)
    return [(le, c + bd.get(le, 0)) for le, c in a]


def us(seconds):
    return round(seconds * 1e6, 1) if seconds is not None else ""


def per_1k(n, tx):
    return round(n / tx * 1000, 3) if tx else ""


# -- the runs -------------------------------------------------------------------

class SmallPool(matrix.Matrix):
    raw_fields = RAW_FIELDS
    summary_fields = SUMMARY_FIELDS

    def warm_up(self, target):
        """None: every counter of a run (sessions, moves, the histogram)
        then covers the measured pgbench alone; the pool fills during its
        first transactions (5 logins)."""

    # PostgreSQL's count of sessions of the bench database. It is published
    # lazily (a backend flushes its statistics at most once a second, and
    # at exit): read once no backend of the bench user is left, then again
    # every 300 ms until two readings agree.
    def wait_backends_gone(self, timeout=20):
        deadline = time.monotonic() + timeout
        while self.env.backends() and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.env.backends()

    def sessions(self):
        read = lambda: int(self.env.psql(  # noqa: E731
            f"SELECT sessions FROM pg_stat_database WHERE datname = '{DB}'"))
        prev = read()
        for _ in range(20):
            time.sleep(0.3)
            now = read()
            if now == prev:
                return now
            prev = now
        return prev

    def before_run(self, target, row):
        left = self.wait_backends_gone()
        row["sessions_before"] = self.sessions()
        if left:
            row["_note"] = f"{left} bench backends still open at the start"

    def before_stop(self, target, pooler, row):
        if not target.startswith("pgcrew-"):
            return
        moved_in = moved_out = 0
        workers = self.show_workers()
        for w in workers:
            moved_in += int(w["servers_moved_in"])
            moved_out += int(w["servers_moved_out"])
        row["workers"] = len(workers)
        row["moves"] = moved_in
        row["moves_out"] = moved_out
        samples = parse_metrics(self.scrape())
        buckets, total, count = phase_histogram(samples, MOVE_PHASE)
        row["_move_buckets"] = buckets
        row["_move_sum"] = total
        row["move_samples"] = int(count)
        row["move_buckets"] = buckets_text(buckets)
        row["server_logins"] = int(phase_histogram(samples, "server_login")[2])

    def after_stop(self, target, row):
        left = self.wait_backends_gone()
        row["sessions_after"] = self.sessions()
        row["new_backends"] = row["sessions_after"] - row["sessions_before"]
        if left:
            row["_note"] = (row.get("_note", "") + f"; {left} bench backends still open "
                            "20 s after the pooler stopped").lstrip("; ")

    def show_workers(self):
        cmd = [f"{PGBIN}/psql", "-h", HOST, "-p", str(self.env.port), "-U", USER,
               "-d", "pgbouncer", "-X", "--csv", "-c", "SHOW WORKERS"]
        env = dict(os.environ, PGPASSWORD=self.env.password, PGSSLMODE="disable",
                   PGCONNECT_TIMEOUT="10")
        out = benchenv.run(cmd, env=env, timeout=30).stdout
        return list(csv.DictReader(out.splitlines()))

    def scrape(self):
        url = f"http://{HOST}:{self.args.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.read().decode()

    def attempt(self, cell, target, rnd, allowance):
        row = super().attempt(cell, target, rnd, allowance)
        tx = row.get("transactions") or 0
        fixed = re.fullmatch(r"pgcrew-w(\d+)", target)
        row.setdefault("workers", int(fixed.group(1)) if fixed else 1)
        row["backends_per_1k_tx"] = per_1k(row.get("new_backends", 0), tx)
        if target.startswith("pgcrew-"):
            row["moves_per_1k_tx"] = per_1k(row.get("moves", 0), tx)
            self._fill_moves(row, row.get("_move_buckets", []), row.get("_move_sum", 0))
        else:
            for k in ("server_logins", "moves", "moves_out", "moves_per_1k_tx", "move_samples",
                      "move_p50_us", "move_p99_us", "move_mean_us", "move_buckets"):
                row[k] = "n/a"
        if row.get("_note"):
            row["errors"] = (row.get("errors", "") + "; " + row["_note"]).lstrip("; ")
        return row

    @staticmethod
    def _fill_moves(row, buckets, total):
        count = buckets[-1][1] if buckets else 0
        row["move_p50_us"] = us(histogram_quantile(0.5, buckets)) if count else "n/a"
        row["move_p99_us"] = us(histogram_quantile(0.99, buckets)) if count else "n/a"
        row["move_mean_us"] = us(total / count) if count else "n/a"

    def log_extra(self, row):
        return (f" backends={row.get('new_backends', '')} moves={row.get('moves', '')}"
                f" move_p50={row.get('move_p50_us', '')}us")

    def combine(self, cell, target, rows):
        s = super().combine(cell, target, rows)
        s.pop("protocol", None)
        rows = [r for r in rows if r.get("transactions")]
        if not rows:
            return s
        tx = sum(r["transactions"] for r in rows)
        s["workers"] = rows[0].get("workers", "")
        s["new_backends"] = sum(r.get("new_backends", 0) for r in rows)
        s["backends_per_1k_tx"] = per_1k(s["new_backends"], tx)
        if not target.startswith("pgcrew-"):
            for k in ("server_logins", "moves", "moves_out", "moves_per_1k_tx", "move_samples",
                      "move_p50_us", "move_p99_us", "move_mean_us", "move_buckets"):
                s[k] = "n/a"
            return s
        for k in ("server_logins", "moves", "moves_out", "move_samples"):
            s[k] = sum(int(r.get(k) or 0) for r in rows)
        s["moves_per_1k_tx"] = per_1k(s["moves"], tx)
        buckets = []
        for r in rows:
            buckets = add_buckets(buckets, r.get("_move_buckets", []))
        s["move_buckets"] = buckets_text(buckets)
        self._fill_moves(s, buckets, sum(r.get("_move_sum", 0) for r in rows))
        return s


# -- the report -----------------------------------------------------------------

def fmt(v, digits=1):
    if v in (None, ""):
        return "n/a"
    try:
        x = float(v)
    except ValueError:
        return str(v)
    return f"{x:,.{digits}f}"


def markdown(outdir):
    with open(os.path.join(outdir, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    meta = {}
    if os.path.exists(os.path.join(outdir, "meta.json")):
        with open(os.path.join(outdir, "meta.json")) as f:
            meta = json.load(f)
    v = meta.get("versions", {})
    wall = int(meta.get("wall_clock_s", 0))
    out = ["# pgcrew bench: small pool\n",
           f"* started {meta.get('started', '?')}, wall clock {wall // 60} min {wall % 60} s "
           f"(the command, build excluded); pgcrew `{meta.get('commit', '?')}`",
           f"* machine: {v.get('cpus', '?')} CPUs ({v.get('cpu', '?')}), kernel "
           f"{v.get('kernel', '?')} (sched_autogroup {v.get('sched_autogroup', '?')}); pgbench, "
           "the pooler and PostgreSQL share these CPUs",
           f"* {v.get('pgcrew', '?')}; {v.get('pgbouncer', '?')}; {v.get('postgres', '?')}; "
           f"{v.get('pgbench', '?')}",
           f"* `default_pool_size = {meta.get('pool_size', POOL_SIZE)}`, `pool_mode = "
           "transaction`, plain TCP (no TLS, client or server), SCRAM logins; pgbench "
           f"`{meta.get('workload', '-S')}` (simple protocol, `-j 2`), "
           f"{meta.get('duration_s', '?')} s per run, rounds: {meta.get('rounds', '?')} "
           "(the targets' order rotated each round); each run starts the pooler afresh, with no "
           "warm-up, so its counters cover that run alone. Scale "
           f"{meta.get('scale', '?')}.",
           "* TPS: mean over the rounds (min-max); p50 / p99: pgbench's per-transaction "
           "latencies (`--log`), all rounds pooled.",
           "* new backends: `pg_stat_database.sessions` of the bench database after the run "
           "(pooler stopped, its backends gone) minus before; it includes the pool's first "
           f"fill (up to {meta.get('pool_size', POOL_SIZE)} per run). Per 1,000 "
           "transactions: over pgbench's completed transactions.",
           "* moves: the sum over the workers of `SHOW WORKERS` `servers_moved_in`, read at "
           "the end of each run before the pooler stops (pgcrew only; PgBouncer has one "
           "process and no moves: n/a). move p50 / p99: estimated from the buckets of "
           "`pgcrew_connection_setup_seconds{phase=\"server_move\"}` (all rounds summed) as "
           "Prometheus' `histogram_quantile` does, by linear interpolation inside the "
           "bucket that holds the rank, so they are only as fine as the buckets (50, 100, "
           "250, 500 us, 1, 2.5, 5 ms, ...); mean = `_sum` / `_count`.",
           "* CPU/tx: the pooler's CPU per transaction (all its processes) over the steady "
           "window, as in bench/run.\n"]
    by_clients = {}
    for r in rows:
        by_clients.setdefault(int(r["clients"]), []).append(r)
    out.append("| clients | target | TPS (min-max) | p50 ms | p99 ms | new backends | "
               "per 1k tx | moves | per 1k tx | move p50 us | move p99 us | move mean us | "
               "CPU/tx us | status |")
    out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for c in sorted(by_clients):
        for r in by_clients[c]:
            out.append(
                f"| {c} | {r['target']} | {fmt(r['tps'], 0)} ({fmt(r['tps_min'], 0)}-"
                f"{fmt(r['tps_max'], 0)}) | {fmt(r['lat_p50_ms'], 2)} | "
                f"{fmt(r['lat_p99_ms'], 2)} | {fmt(r['new_backends'], 0)} | "
                f"{fmt(r['backends_per_1k_tx'], 3)} | {fmt(r['moves'], 0)} | "
                f"{fmt(r['moves_per_1k_tx'], 1)} | {fmt(r['move_p50_us'], 0)} | "
                f"{fmt(r['move_p99_us'], 0)} | {fmt(r['move_mean_us'], 0)} | "
                f"{fmt(r['cpu_us_per_tx'], 1)} | {r['status']} |")
    out.append("")
    notes = [r for r in rows if r.get("errors")]
    checks = []
    for r in rows:
        if r["target"].startswith("pgcrew-") and r.get("moves") not in ("", "n/a"):
            if r["moves"] != r.get("moves_out") or r["moves"] != r.get("move_samples"):
                checks.append(f"* c={r['clients']} {r['target']}: servers_moved_in "
                              f"{r['moves']}, servers_moved_out {r.get('moves_out')}, "
                              f"server_move samples {r.get('move_samples')}")
    if checks:
        out.append("Moves counted in and out and timed differ (a move in flight when read):\n")
        out += checks
        out.append("")
    if notes:
        out.append("Errors and notes:\n")
        out += [f"* c={r['clients']} {r['target']}: {r['errors'][:400]}" for r in notes]
        out.append("")
    out.append("Per-run numbers in `raw.csv`; per cell and target in `summary.csv` "
               "(`move_buckets`: the histogram's cumulative counts at each bound where they "
               "change; `server_logins`: the pooler's server logins, from the `server_login` "
               "phase).")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", metavar="DIR", help="only redraw DIR/report.md")
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", default=",".join(map(str, CLIENTS)))
    ap.add_argument("--targets", default=",".join(TARGETS),
                    help="pgcrew-wN (workers = N) and/or pgbouncer")
    ap.add_argument("--pool-size", type=int, default=POOL_SIZE)
    ap.add_argument("--workload", default="-S",
                    help="pgbench workload options (default -S: select-only)")
    ap.add_argument("--threads", type=int, default=2, help="pgbench -j (at most)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--scratch")
    ap.add_argument("--out")
    ap.add_argument("--pgcrew")
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo")
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    if args.report:
        with open(os.path.join(args.report, "report.md"), "w") as f:
            f.write(markdown(args.report))
        return
    for need in ("scratch", "out", "pgcrew", "repo"):
        if not getattr(args, need):
            ap.error(f"--{need} is required")
    args.targets = matrix.parse_list(args.targets)
    workers = {}
    for t in args.targets:
        m = re.fullmatch(r"pgcrew-w(\d+)", t)
        if m:
            workers[t] = int(m.group(1))
        elif t != "pgbouncer":
            ap.error(f"unknown target {t}: pgcrew-wN or pgbouncer")
    args.workload = args.workload.split()
    args.warmup = 0
    clients = matrix.parse_list(args.clients, int)
    cells = [("simple", c, "plain") for c in clients]
    os.makedirs(args.out, exist_ok=True)

    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer, scale=args.scale)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "commit": benchenv.binary_source(args.repo), "scenario": "smallpool",
            "duration_s": args.duration, "rounds": args.rounds,
            "workload": " ".join(args.workload), "scale": args.scale,
            "pool_size": args.pool_size, "clients": clients, "targets": args.targets}
    t0 = time.monotonic()
    try:
        log(f"scratch {env.scratch}: PostgreSQL 15, pgbench tables")
        env.setup()
        args.metrics_port = benchenv.free_port(27432)
        env.write_inis(extra={"default_pool_size": args.pool_size}, workers=workers,
                       pgcrew_extra={"metrics_listen": f"{HOST}:{args.metrics_port}"})
        meta["versions"] = benchenv.versions(env)
        for name in ["pgbouncer"] + sorted(workers)[:1]:   # what the pgcrew inis add: alike
            with open(os.path.join(args.out, f"{name}.ini"), "w") as f:
                f.write(open(env.path(f"{name}.ini")).read())
        # PostgreSQL's caches, once (the pooler runs have no warm-up of their own)
        benchenv.run([f"{PGBIN}/pgbench", "-h", env.sock, "-p", str(env.pgport), "-U", USER,
                      "-n", "-S", "-c", "4", "-j", "2", "-T", "2", DB], timeout=60)
        log(f"{len(cells)} client counts x {len(args.targets)} targets x {args.rounds} rounds, "
            f"{args.duration}s each, pool {args.pool_size}; results in {args.out}")
        SmallPool(env, args, args.out).run(cells)
    finally:
        env.close()
        meta["wall_clock_s"] = round(time.monotonic() - t0)
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        with open(os.path.join(args.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2)
    with open(os.path.join(args.out, "report.md"), "w") as f:
        f.write(markdown(args.out))
    log(f"done in {meta['wall_clock_s'] / 60:.1f} min: {args.out}/report.md")


if __name__ == "__main__":
    main()
