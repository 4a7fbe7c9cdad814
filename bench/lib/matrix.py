"""The scenario matrix: pgbench against every target, cell by cell, targets
interleaved within each cell (round r runs the targets in an order rotated
by r), with per-transaction latency samples from pgbench --log and the
pooler's CPU and memory from /proc.

Called by bench/run; see bench/README.md."""

import argparse
import bisect
import csv
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, DEFAULT_TARGETS, HOST, PGBIN, TARGETS, USER, log  # noqa: E402
import report  # noqa: E402

PROTOCOLS = ("simple", "extended", "prepared")
CLIENTS = (1, 40, 120, 500, 2000)
MODES = ("plain", "reconnect", "tls", "tls-reconnect")
DIRECT_MAX_CLIENTS = 500     # PostgreSQL direct: max_connections is sized for this

# --quick: one round of short runs over the cells that carry the targets
QUICK_CELLS = (
    [("simple", c, "plain") for c in CLIENTS]
    + [("extended", c, "plain") for c in (40, 120, 500)]
    + [("prepared", 40, "plain")]
    + [("simple", 40, m) for m in ("reconnect", "tls", "tls-reconnect")]
    + [("simple", 500, "tls")]
)

RAW_FIELDS = ["protocol", "clients", "mode", "target", "round", "status", "duration_s",
              "tps", "transactions", "conn_s", "avg_connect_ms", "window_s", "wall_s", "lat_p50_ms", "lat_p99_ms", "spread", "lat_kind",
              "txn_p50_ms", "txn_p99_ms", "failed_tx", "aborted_clients", "error_lines", "pgbench_rc",
              "cpu_us_per_tx", "cpu_us_per_tx_whole", "cpu_share", "machine_us_per_tx",
              "rss_peak_kb", "hwm_kb", "worker_restarts", "loadavg_1m", "errors"]

SUMMARY_FIELDS = ["protocol", "clients", "mode", "target", "status", "rounds", "duration_s",
                  "tps", "tps_min", "tps_max", "transactions", "conn_s", "avg_connect_ms", "lat_p50_ms", "lat_p99_ms",
                  "spread", "lat_kind", "txn_p50_ms", "txn_p99_ms", "failed_tx",
                  "aborted_clients", "error_lines", "cpu_us_per_tx", "cpu_us_per_tx_whole", "cpu_share",
                  "machine_us_per_tx", "rss_peak_kb",
                  "hwm_kb", "worker_restarts", "errors"]


def percentile(sorted_values, q):
    if not sorted_values:
        return None
    k = (len(sorted_values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


def machine_busy_ticks():
    """CPU ticks of the whole machine not spent idle (all CPUs, /proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4]           # less idle and iowait


class Sampler(threading.Thread):
    """Every `interval` s: (wall time, pooler CPU ticks, RSS sum, machine
    busy ticks)."""

    def __init__(self, pooler, interval=0.2):
        super().__init__(daemon=True)
        self.pooler = pooler
        self.interval = interval
        self.samples = []
        self.halt = threading.Event()

    def sample(self):
        self.samples.append((time.time(), self.pooler.cpu_ticks(), self.pooler.rss_kb(),
                             machine_busy_ticks()))

    def run(self):
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(self.interval)

    def finish(self):
        self.halt.set()
        self.join(timeout=5)
        self.sample()


def parse_logs(prefix):
    """Per-transaction samples from pgbench --log files:
    (latencies_us, end_times per client, failed count)."""
    lat = []
    ends = {}
    failed = 0
    for path in glob.glob(prefix + ".*"):
        if path.endswith(".out"):
            continue
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) < 6:
                    continue
                client = int(parts[0])
                t_end = int(parts[4]) + int(parts[5]) / 1e6
                if parts[2].isdigit():
                    lat.append(int(parts[2]))
                    ends.setdefault(client, []).append(t_end)
                else:          # "failed" / "skipped"
                    failed += 1
    return lat, ends, failed


def cycle_times_us(ends):
    """Per client, time between consecutive transaction ends: with --connect
    this is connect + login + transaction + close, which pgbench's own
    per-transaction latency leaves out."""
    out = []
    for times in ends.values():
        times.sort()
        out += [int((b - a) * 1e6) for a, b in zip(times, times[1:])]
    return out


def steady_cpu(samples, ends):
    """Pooler and machine CPU between the first and the last sample that fall
    inside the benchmark's transaction window (logins of the initial
    connections excluded): (pooler us per tx, machine us per tx), or None.
    Their ratio, the pooler's share of the machine, bounds what any pooler
    could gain here: one that cost nothing would leave at most
    1 / (1 - share) times the CPU to pgbench and PostgreSQL."""
    all_ends = sorted(t for times in ends.values() for t in times)
    if len(all_ends) < 10 or len(samples) < 2:
        return None
    first, last = all_ends[0], all_ends[-1]
    inside = [s for s in samples if first <= s[0] <= last]
    if len(inside) < 2:
        return None
    (t0, c0, _, m0), (t1, c1, _, m1) = inside[0], inside[-1]
    n = bisect.bisect_right(all_ends, t1) - bisect.bisect_left(all_ends, t0)
    if n <= 0:
        return None
    us = 1e6 / benchenv.CLK_TCK / n
    return (c1 - c0) * us, (m1 - m0) * us


MSG_RE = re.compile(r"(ERROR|FATAL|FATAL ERROR):\s+(.*)$|(connection to server .*)$"
                    r"|(could not .*)$|(server closed the connection.*)$")


def error_messages(text):
    """{message: count} of the server or connection errors pgbench printed
    (pgbench's threads interleave their stderr lines, so each line is searched
    for the message rather than parsed)."""
    seen = {}
    for line in text.splitlines():
        m = MSG_RE.search(line)
        if not m:
            continue
        msg = next(g for g in m.groups()[1:] if g)
        if m.group(1):
            msg = f"{m.group(1)}: {msg}"
        msg = re.sub(r"\"P\d*_\d+\"", '"P_n"', msg)
        msg = re.sub(r"port \d+", "port N", msg).strip()
        seen[msg] = seen.get(msg, 0) + 1
    return seen


def format_errors(seen):
    return "; ".join(f"{n} x {msg}" for msg, n in
                     sorted(seen.items(), key=lambda kv: -kv[1])[:4])


class Matrix:
    """Runs the cells. Other scenarios (bench/lib/smallpool.py) subclass it:
    the hooks before_run / before_stop / after_stop add their own
    measurements to a run's row, and raw_fields / summary_fields their
    columns."""

    raw_fields = RAW_FIELDS
    summary_fields = SUMMARY_FIELDS

    def __init__(self, env, args, outdir):
        self.env = env
        self.args = args
        self.outdir = outdir
        self.logdir = os.path.join(env.scratch, "pgbench-logs")
        os.makedirs(self.logdir, exist_ok=True)
        self.raw_path = os.path.join(outdir, "raw.csv")
        self.summary_path = os.path.join(outdir, "summary.csv")
        with open(self.raw_path, "w", newline="") as f:
            csv.DictWriter(f, self.raw_fields).writeheader()
        self.summaries = []

    def pgbench_cmd(self, target, protocol, clients, mode, duration, prefix):
        threads = max(1, min(self.args.threads, clients))
        cmd = [f"{PGBIN}/pgbench", "-h", HOST, "-p", str(self.env.target_port(target)),
               "-U", USER, "-n", "-M", protocol, "-c", str(clients), "-j", str(threads),
               "-T", str(duration), "--log", f"--log-prefix={prefix}"]
        cmd += self.args.workload
        if mode in ("reconnect", "tls-reconnect"):
            cmd.append("-C")
        cmd.append(DB)
        env = dict(os.environ, PGPASSWORD=self.env.password, PGCONNECT_TIMEOUT="60",
                   PGSSLMODE="require" if mode.startswith("tls") else "disable",
                   PGAPPNAME="")
        return cmd, env

    def warm_up(self, target):
        """Fill the pool (and PostgreSQL's caches) before the measured run."""
        port = self.env.target_port(target)
        cmd = [f"{PGBIN}/pgbench", "-h", HOST, "-p", str(port), "-U", USER, "-n", "-S",
               "-c", "20", "-j", "2", "-T", str(self.args.warmup), DB]
        env = dict(os.environ, PGPASSWORD=self.env.password, PGSSLMODE="disable")
        benchenv.run(cmd, env=env, timeout=self.args.warmup + 60, check=False)

    def one_run(self, cell, target, rnd):
        """One measured pgbench run. pgbench's -T clock includes the initial
        connections (2000 SCRAM logins take seconds), so -T is the duration
        plus an allowance for them; a run whose measured window came out
        shorter than half the duration is repeated once with an allowance
        sized from what the first attempt took."""
        protocol, clients, mode = cell
        threads = max(1, min(self.args.threads, clients))
        per_client = 0.03 if mode == "tls" else 0.01      # seconds of login per client
        allowance = 0 if mode.endswith("reconnect") else 1 + int(clients * per_client / threads)
        row = self.attempt(cell, target, rnd, allowance)
        window = row.get("window_s") or 0
        if not mode.endswith("reconnect") and window < self.args.duration / 2:
            spent = row.get("conn_s") or row.get("wall_s") or allowance
            allowance = min(180, int(spent * 1.5) + 2)
            log(f"    {target}: initial connections took {spent:.1f}s, measured window "
                f"{window:.1f}s: again with {allowance}s for connecting")
            retry = self.attempt(cell, target, rnd, allowance)
            retry["errors"] = (retry["errors"] + "; " if retry["errors"] else "") + (
                f"repeated: first attempt's initial connections took {spent:.1f}s")
            row = retry
        return row

    def attempt(self, cell, target, rnd, allowance):
        protocol, clients, mode = cell
        row = {"protocol": protocol, "clients": clients, "mode": mode, "target": target,
               "round": rnd, "duration_s": self.args.duration}
        pooler = None
        self.before_run(target, row)
        if target != "postgres":
            pooler = self.env.start_pooler(target)
        try:
            self.warm_up(target)
            prefix = os.path.join(self.logdir, f"{protocol}-{clients}-{mode}-{target}-{rnd}")
            for old in glob.glob(prefix + ".*"):
                os.unlink(old)
            run_for = self.args.duration + allowance
            cmd, penv = self.pgbench_cmd(target, protocol, clients, mode, run_for, prefix)
            sampler = None
            if pooler:
                pooler.reset_hwm()
                sampler = Sampler(pooler)
                sampler.start()
            cpu0 = pooler.cpu_ticks() if pooler else 0
            timeout = run_for + 120 + clients // 10
            started = time.monotonic()
            try:
                proc = subprocess.run(cmd, env=penv, capture_output=True, text=True,
                                      timeout=timeout, cwd=self.logdir)
                out, rc = proc.stdout + proc.stderr, proc.returncode
            except subprocess.TimeoutExpired as e:
                out = (e.stdout or b"").decode(errors="replace") + (e.stderr or b"").decode(
                    errors="replace")
                rc = "timeout"
            row["wall_s"] = round(time.monotonic() - started, 1)
            with open("/proc/loadavg") as f:      # the machine is shared: keep a trace
                row["loadavg_1m"] = f.read().split()[0]
            if pooler:
                sampler.finish()
                cpu1 = pooler.cpu_ticks()
                row["hwm_kb"] = pooler.hwm_kb()
                row["rss_peak_kb"] = max(s[2] for s in sampler.samples)
                row["worker_restarts"] = pooler.restarts()
            with open(prefix + ".out", "w") as f:
                f.write(" ".join(cmd) + "\n" + out)
            self.before_stop(target, pooler, row)
        finally:
            problems = self.env.stop_pooler() if pooler else []
        self.after_stop(target, row)

        m = re.search(r"initial connection time = ([\d.]+) ms", out)
        row["conn_s"] = round(float(m.group(1)) / 1000, 2) if m else ""
        m = re.search(r"average connection time = ([\d.]+) ms", out)
        row["avg_connect_ms"] = float(m.group(1)) if m else ""
        row["window_s"] = round(run_for - (row["conn_s"] or 0), 1) if row["conn_s"] != "" \
            else (run_for if mode.endswith("reconnect") else 0)
        lat, ends, failed_logged = parse_logs(prefix)
        m = re.search(r"number of failed transactions: (\d+)", out)
        row["failed_tx"] = int(m.group(1)) if m else failed_logged
        row["aborted_clients"] = len(re.findall(r"aborted in command|aborted while establishing",
                                                out))
        row["pgbench_rc"] = rc
        row["transactions"] = len(lat)
        seen = error_messages(out)
        row["error_lines"] = sum(seen.values())
        row["errors"] = format_errors(seen) + ("; " + "; ".join(problems) if problems else "")
        m = re.search(r"tps = ([\d.]+)", out)
        if m and rc == 0 and not row["aborted_clients"]:
            row["tps"] = float(m.group(1))
        else:
            # pgbench's tps of an aborted run divides by the time until the
            # abort: count the completed transactions over the whole run
            row["tps"] = round(row["transactions"] / max(1, row["window_s"]), 1)
        reconnect = mode.endswith("reconnect")
        samples_us = cycle_times_us(ends) if reconnect else list(lat)
        row["lat_kind"] = "cycle" if reconnect else "txn"
        lat.sort()
        samples_us.sort()
        row["_lat"] = samples_us
        row["_txn"] = lat
        self._fill_latency(row, samples_us, lat)
        if pooler and row["transactions"]:
            row["cpu_us_per_tx_whole"] = round(
                (cpu1 - cpu0) / benchenv.CLK_TCK * 1e6 / row["transactions"], 1)
            steady = steady_cpu(sampler.samples, ends)
            if self.args.keep_logs:     # to see where a run's CPU went
                with open(prefix + "-cpu.tsv", "w") as f:
                    f.writelines(f"{t:.3f}\t{c}\t{r}\t{m}\n" for t, c, r, m in sampler.samples)
            pooler_us, machine_us = steady if steady is not None else ("", "")
            row["cpu_us_per_tx"] = round(pooler_us, 1) if steady else ""
            row["machine_us_per_tx"] = round(machine_us, 1) if steady else ""
            row["cpu_share"] = round(pooler_us / machine_us, 3) if steady and machine_us else ""
        if row["transactions"] == 0:
            row["status"] = "failed"
        elif rc != 0 or row["aborted_clients"] or row["failed_tx"]:
            row["status"] = "partial"
        elif row["error_lines"]:
            row["status"] = "errors"     # every client ran to the end, yet errors were printed
        else:
            row["status"] = "ok"
        if not self.args.keep_logs:
            for path in glob.glob(prefix + ".*"):
                if not path.endswith(".out"):
                    os.unlink(path)
        return row

    # Hooks for subclasses: before the pooler starts (or the direct run);
    # after pgbench ended, while the pooler still runs (pooler is None for
    # the direct target); after the pooler has stopped.
    def before_run(self, target, row):
        pass

    def before_stop(self, target, pooler, row):
        pass

    def after_stop(self, target, row):
        pass

    def log_extra(self, row):
        """More of a run's row for its progress line."""
        return ""

    @staticmethod
    def _fill_latency(row, samples_us, txn_us):
        p50 = percentile(samples_us, 0.5)
        p99 = percentile(samples_us, 0.99)
        row["lat_p50_ms"] = round(p50 / 1000, 3) if p50 is not None else ""
        row["lat_p99_ms"] = round(p99 / 1000, 3) if p99 is not None else ""
        row["spread"] = round(p99 / p50, 2) if p50 else ""
        t50 = percentile(txn_us, 0.5)
        t99 = percentile(txn_us, 0.99)
        row["txn_p50_ms"] = round(t50 / 1000, 3) if t50 is not None else ""
        row["txn_p99_ms"] = round(t99 / 1000, 3) if t99 is not None else ""

    def write_raw(self, row):
        with open(self.raw_path, "a", newline="") as f:
            csv.DictWriter(f, self.raw_fields, extrasaction="ignore").writerow(row)

    def combine(self, cell, target, rows):
        protocol, clients, mode = cell
        s = {"protocol": protocol, "clients": clients, "mode": mode, "target": target,
             "rounds": len(rows), "duration_s": self.args.duration}
        if not rows:
            s["status"] = "n/a"
            return s
        tps = [r["tps"] for r in rows]
        s["tps"] = round(sum(tps) / len(tps), 1)
        s["tps_min"] = round(min(tps), 1)
        s["tps_max"] = round(max(tps), 1)
        s["transactions"] = sum(r["transactions"] for r in rows)
        lat = sorted(v for r in rows for v in r["_lat"])
        txn = sorted(v for r in rows for v in r["_txn"])
        self._fill_latency(s, lat, txn)
        s["lat_kind"] = rows[0]["lat_kind"]
        s["failed_tx"] = sum(r["failed_tx"] for r in rows)
        s["aborted_clients"] = sum(r["aborted_clients"] for r in rows)
        s["error_lines"] = sum(r.get("error_lines", 0) for r in rows)
        for key, digits in (("cpu_us_per_tx", 1), ("cpu_us_per_tx_whole", 1), ("conn_s", 1),
                            ("avg_connect_ms", 1), ("cpu_share", 3), ("machine_us_per_tx", 1)):
            vals = [r[key] for r in rows if r.get(key) not in (None, "")]
            s[key] = round(sum(vals) / len(vals), digits) if vals else ""
        for key in ("rss_peak_kb", "hwm_kb", "worker_restarts"):
            vals = [r[key] for r in rows if r.get(key) not in (None, "")]
            s[key] = max(vals) if vals else ""
        statuses = {r["status"] for r in rows}
        if len(statuses) == 1:
            s["status"] = statuses.pop()
        elif "partial" in statuses or "failed" in statuses:
            s["status"] = "partial"
        else:
            s["status"] = "errors"
        errs = [r["errors"] for r in rows if r["errors"]]
        s["errors"] = errs[0] if errs else ""
        return s

    def run(self, cells):
        targets = self.args.targets
        total = sum(1 for c in cells for t in targets if self.applicable(c, t)) * self.args.rounds
        done = 0
        started = time.monotonic()
        for cell in cells:
            per_target = {t: [] for t in targets}
            for rnd in range(self.args.rounds):
                k = rnd % len(targets)
                order = targets[k:] + targets[:k]
                for target in order:
                    if not self.applicable(cell, target):
                        continue
                    try:
                        row = self.one_run(cell, target, rnd)
                    except (RuntimeError, OSError) as e:
                        self.env.stop_pooler()
                        row = {"protocol": cell[0], "clients": cell[1], "mode": cell[2],
                               "target": target, "round": rnd, "status": "failed",
                               "tps": 0.0, "transactions": 0, "failed_tx": 0,
                               "aborted_clients": 0, "error_lines": 0, "lat_kind": "", "_lat": [], "_txn": [],
                               "lat_p50_ms": "", "lat_p99_ms": "", "errors": str(e)[:300]}
                    self.write_raw(row)
                    per_target[target].append(row)
                    done += 1
                    elapsed = time.monotonic() - started
                    eta = elapsed / done * (total - done)
                    log(f"[{done}/{total}] {cell[0]:8} c={cell[1]:<4} {cell[2]:13} "
                        f"{target:11} r{rnd}: {row['status']:7} tps={row['tps']:9.1f} "
                        f"p50={row['lat_p50_ms']} p99={row['lat_p99_ms']} "
                        f"cpu/tx={row.get('cpu_us_per_tx', '')}us{self.log_extra(row)} "
                        f"(eta {eta / 60:.1f} min)"
                        + (f"  !! {row['errors'][:150]}" if row["errors"] else ""))
            for target in targets:
                self.summaries.append(self.combine(cell, target, per_target[target]))
            self.write_summary()

    @staticmethod
    def applicable(cell, target):
        return not (target == "postgres" and cell[1] > DIRECT_MAX_CLIENTS)

    def write_summary(self):
        with open(self.summary_path, "w", newline="") as f:
            w = csv.DictWriter(f, self.summary_fields, extrasaction="ignore")
            w.writeheader()
            for s in self.summaries:
                w.writerow(s)


def parse_list(text, kind=str):
    return [kind(x) for x in text.split(",") if x]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--duration", type=int)
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="pgbench -j (at most)")
    ap.add_argument("--protocols", default=",".join(PROTOCOLS))
    ap.add_argument("--clients", default=",".join(map(str, CLIENTS)))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    ap.add_argument("--workload", default="-S",
                    help="pgbench workload options (default -S: select-only)")
    ap.add_argument("--scale", type=int, default=10)
    ap.add_argument("--scram-iterations", type=int, default=4096,
                    help="the bench user's SCRAM iteration count (PostgreSQL's is 4096)")
    ap.add_argument("--cert-key", default="rsa2048", choices=sorted(benchenv.CERT_KEYS),
                    help="the TLS certificate's key (default rsa2048)")
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--keep-logs", action="store_true")
    args = ap.parse_args()
    args.workload = args.workload.split()
    args.targets = parse_list(args.targets)
    for t in args.targets:
        if t not in TARGETS:
            ap.error(f"unknown target {t}; known: {', '.join(TARGETS)}")
    if args.quick:
        args.duration = args.duration or 5
        args.rounds = args.rounds or 1
        cells = list(QUICK_CELLS)
    else:
        args.duration = args.duration or 15
        args.rounds = args.rounds or 2
        cells = [(p, c, m) for p in parse_list(args.protocols) for m in parse_list(args.modes)
                 for c in parse_list(args.clients, int)]
    os.makedirs(args.out, exist_ok=True)

    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer, scale=args.scale,
                       scram_iterations=args.scram_iterations, cert_key=args.cert_key)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "commit": benchenv.binary_source(args.repo),
            "mode": "quick" if args.quick else "full",
            "duration_s": args.duration, "rounds": args.rounds,
            "workload": " ".join(args.workload), "scale": args.scale,
            "pool_size": 20, "targets": args.targets, "cells": len(cells),
            "scram_iterations": args.scram_iterations, "cert_key": args.cert_key}
    t0 = time.monotonic()
    try:
        log(f"scratch {env.scratch}: PostgreSQL 15, TLS, pgbench tables")
        env.setup()
        meta["versions"] = benchenv.versions(env)
        with open(os.path.join(args.out, "pgbouncer.ini"), "w") as f:
            f.write(open(env.path("pgbouncer.ini")).read())
        log(f"{len(cells)} cells x {len(args.targets)} targets x {args.rounds} rounds, "
            f"{args.duration}s each; results in {args.out}")
        Matrix(env, args, args.out).run(cells)
    finally:
        env.close()
        meta["wall_clock_s"] = round(time.monotonic() - t0)
        meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S %Z")
        with open(os.path.join(args.out, "meta.json"), "w") as f:
            json.dump(meta, f, indent=2)
    report.main([args.out])
    log(f"done in {meta['wall_clock_s'] / 60:.1f} min: {args.out}/report.md")


if __name__ == "__main__":
    main()
