"""summary.csv + meta.json of a bench/run result directory -> report.md
(ratios against PgBouncer, absolute numbers) and PNG plots (gnuplot).

usage: report.py RESULT_DIR"""

import csv
import json
import os
import shutil
import subprocess
import sys

TARGETS = ("pgcrew-w1", "pgcrew-auto", "pgbouncer", "pgbouncer-auto", "postgres")
PROTOCOLS = ("simple", "extended", "prepared")
MODES = ("plain", "reconnect", "tls", "tls-reconnect")
BASE = "pgbouncer"
CERT_NAMES = {"rsa2048": "RSA 2048", "p256": "ECDSA P-256"}


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def ratio(a, b, digits=2):
    a, b = num(a), num(b)
    if a is None or b is None:
        return "n/a"
    if b == 0:
        return "inf" if a > 0 else "n/a"
    return f"{a / b:.{digits}f}"


def fmt(v, digits=1):
    x = num(v)
    if x is None:
        return "n/a" if v in (None, "", "n/a") else str(v)
    if x >= 100:
        return f"{x:.0f}"
    return f"{x:.{digits}f}" if x >= 1 or x == 0 else f"{x:.{digits + 1}f}"


def share(v):
    x = num(v)
    return "n/a" if x is None else f"{x * 100:.0f} %"


def load(outdir):
    with open(os.path.join(outdir, "summary.csv")) as f:
        rows = list(csv.DictReader(f))
    meta = {}
    path = os.path.join(outdir, "meta.json")
    if os.path.exists(path):
        with open(path) as f:
            meta = json.load(f)
    cells = {}
    for r in rows:
        cells.setdefault((r["protocol"], int(r["clients"]), r["mode"]), {})[r["target"]] = r
    return meta, cells


def status_mark(r):
    if r is None or r.get("status") == "n/a":
        return ""
    if r["status"] == "ok":
        return ""
    return " (" + r["status"] + ")"


def markdown(meta, cells):
    out = []
    v = meta.get("versions", {})
    out.append(f"# pgcrew bench: {meta.get('mode', '?')} matrix\n")
    out.append(f"* started {meta.get('started', '?')}, wall clock "
               f"{int(meta.get('wall_clock_s', 0)) // 60} min {int(meta.get('wall_clock_s', 0)) % 60} s;"
               f" commit `{meta.get('commit', '?')}`")
    out.append(f"* machine: {v.get('cpus', '?')} CPUs ({v.get('cpu', '?')}), kernel "
               f"{v.get('kernel', '?')} (sched_autogroup {v.get('sched_autogroup', '?')}); pgbench, "
               "poolers and PostgreSQL share these CPUs")
    out.append(f"* {v.get('pgcrew', '?')}; {v.get('pgbouncer', '?')}; {v.get('postgres', '?')};"
               f" {v.get('pgbench', '?')}")
    out.append(f"* pgbench `{meta.get('workload', '?')}` (scale {meta.get('scale', '?')}), "
               f"{meta.get('duration_s', '?')} s per run, {meta.get('rounds', '?')} round(s) per "
               "cell, targets interleaved; pool_mode = transaction, default_pool_size = "
               f"{meta.get('pool_size', '?')}, SCRAM client auth "
               f"({meta.get('scram_iterations', 4096)} iterations), TLS cells with "
               f"PGSSLMODE=require ({CERT_NAMES.get(meta.get('cert_key', 'rsa2048'), '?')})")
    out.append("* latency: p50/p99 of pgbench --log per-transaction samples; in reconnect "
               "cells the per-client cycle time (connect + SCRAM + transaction + close), "
               "because pgbench's logged latency leaves the connection out")
    out.append("* CPU: pooler utime+stime (all processes) per transaction in the steady "
               "window; RSS: peak of the sum of the pooler processes' VmRSS\n")
    out.append("Ratios are target / PgBouncer: TPS above 1 is better, CPU per transaction "
               "below 1 is better. `n/a`: not measured (PostgreSQL direct takes at most 500 "
               "clients) or no transaction completed. A status in brackets marks a cell "
               "that did not run cleanly: `partial` = clients aborted or transactions "
               "failed (TPS then counts completed transactions over the whole duration), "
               "`failed` = nothing completed, `errors` = every client ran to the end but "
               "pgbench printed server errors (e.g. a failed PREPARE it then ignored).\n")

    present = [t for t in TARGETS if any(t in c for c in cells.values())]
    others = [t for t in present if t != BASE]
    own_cpu = [t for t in others if t != "postgres"]      # PostgreSQL direct: no pooler
    for proto in PROTOCOLS:
        keys = sorted((k for k in cells if k[0] == proto), key=lambda k: (MODES.index(k[2]), k[1]))
        if not keys:
            continue
        out.append(f"## {proto} protocol\n")
        out.append("| cell | PgBouncer TPS | " + " | ".join(f"{t} TPS" for t in others)
                   + "".join(f" | {t} CPU/tx" for t in own_cpu) + " | PgBouncer CPU/tx (us) |")
        out.append("|---|---:|" + "---:|" * (len(others) + len(own_cpu)) + "---:|")
        for k in keys:
            c = cells[k]
            b = c.get(BASE)
            line = [f"{k[1]} clients {k[2]}", fmt(b["tps"] if b else None) + status_mark(b)]
            for t in others:
                r = c.get(t)
                line.append(ratio(r.get("tps") if r else None, b.get("tps") if b else None)
                            + status_mark(r))
            for t in own_cpu:
                r = c.get(t)
                line.append(ratio(r.get("cpu_us_per_tx") if r else None,
                                  b.get("cpu_us_per_tx") if b else None))
            line.append(fmt(b.get("cpu_us_per_tx") if b else None))
            out.append("| " + " | ".join(line) + " |")
        out.append("")
        out.append(f"Latency, ms (p50 / p99, spread = p99/p50), {proto} protocol:\n")
        out.append("| cell | " + " | ".join(present) + " |")
        out.append("|---|" + "---|" * len(present))
        for k in keys:
            c = cells[k]
            line = [f"{k[1]} clients {k[2]}"]
            for t in present:
                r = c.get(t)
                if not r or r.get("status") == "n/a" or num(r.get("lat_p50_ms")) is None:
                    line.append("n/a")
                    continue
                line.append(f"{fmt(r['lat_p50_ms'], 2)} / {fmt(r['lat_p99_ms'], 2)} "
                            f"({fmt(r['spread'], 1)}x)")
            out.append("| " + " | ".join(line) + " |")
        out.append("")

    out.append("## Absolute numbers\n")
    out.append("Pooler share: the pooler's part of the machine's busy CPU in the steady "
               "window. A pooler that cost nothing would leave at most 1 / (1 - share) "
               "times the CPU to pgbench and PostgreSQL, which bounds the TPS any pooler "
               "could reach in that cell while the machine is CPU-bound.\n")
    out.append("| protocol | clients | mode | target | status | TPS (min-max) | p50 ms | p99 ms "
               "| failed tx | aborted clients | error lines | CPU us/tx | pooler share "
               "| peak RSS KiB |")
    out.append("|---|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for k in sorted(cells, key=lambda k: (PROTOCOLS.index(k[0]), MODES.index(k[2]), k[1])):
        for t in TARGETS:
            r = cells[k].get(t)
            if not r:
                continue
            if r["status"] == "n/a":
                out.append(f"| {k[0]} | {k[1]} | {k[2]} | {t} | n/a | | | | | | | | | |")
                continue
            out.append(f"| {k[0]} | {k[1]} | {k[2]} | {t} | {r['status']} | {fmt(r['tps'])} "
                       f"({fmt(r['tps_min'])}-{fmt(r['tps_max'])}) | {fmt(r['lat_p50_ms'], 2)} | "
                       f"{fmt(r['lat_p99_ms'], 2)} | {r['failed_tx']} | {r['aborted_clients']} | "
                       f"{r.get('error_lines', '')} | {fmt(r['cpu_us_per_tx'])} | "
                       f"{share(r.get('cpu_share'))} | {r['rss_peak_kb'] or 'n/a'} |")
    out.append("")
    errors = [(k, t, r["errors"]) for k, c in cells.items() for t, r in c.items()
              if r.get("errors")]
    if errors:
        out.append("## Errors reported by pgbench\n")
        for k, t, e in sorted(errors):
            out.append(f"* {k[0]} {k[1]} clients {k[2]}, {t}: {e[:400]}")
        out.append("")
    pngs = sorted(p for p in os.listdir(meta.get("_outdir", ".")) if p.endswith(".png")) \
        if meta.get("_outdir") else []
    if pngs:
        out.append("## Plots\n")
        for p in pngs:
            out.append(f"![{p}]({p})")
        out.append("")
    return "\n".join(out)


def plots(outdir, cells):
    """tps-<protocol>.png and p99-<protocol>.png: one panel per mode, one
    line per target, clients on a log axis."""
    gnuplot = shutil.which("gnuplot")
    if not gnuplot:
        print("report: gnuplot not found, no plots", file=sys.stderr)
        return
    datadir = os.path.join(outdir, "plotdata")
    os.makedirs(datadir, exist_ok=True)
    for proto in PROTOCOLS:
        modes = [m for m in MODES if any(k[0] == proto and k[2] == m for k in cells)]
        if not modes:
            continue
        for metric, col, ylabel in (("tps", "tps", "transactions/s"),
                                    ("p99", "lat_p99_ms", "p99 latency, ms (log)")):
            rows, cols = (1, len(modes)) if len(modes) <= 2 else (2, 2)
            script = [f"set terminal pngcairo size {560 * cols},{400 * rows + 40} "
                      "font 'sans,10'",
                      f"set output '{outdir}/{metric}-{proto}.png'",
                      f"set multiplot layout {rows},{cols} title '{proto} protocol: "
                      f"{ylabel} vs clients'",
                      "set logscale x", "set xlabel 'clients'", "set key top left",
                      "set grid", "set xtics (1, 40, 120, 500, 2000)", "set xrange [0.8:2500]"]
            if metric == "p99":
                script.append("set logscale y")
            else:
                script.append("set yrange [0:*]")
            for mode in modes:
                script.append(f"set title '{mode}'")
                series = []
                for t in TARGETS:
                    pts = sorted((k[1], num(c[t].get(col))) for k, c in cells.items()
                                 if k[0] == proto and k[2] == mode and t in c
                                 and num(c[t].get(col)))
                    if not pts:
                        continue
                    path = os.path.join(datadir, f"{metric}-{proto}-{mode}-{t}.dat")
                    with open(path, "w") as f:
                        f.writelines(f"{x} {y}\n" for x, y in pts)
                    series.append(f"'{path}' using 1:2 with linespoints lw 2 pt 7 title '{t}'")
                if series:
                    script.append("plot " + ", ".join(series))
                else:
                    script.append("set label 1 'no data' at graph 0.4,0.5; plot NaN notitle;"
                                  " unset label 1")
            script.append("unset multiplot")
            r = subprocess.run([gnuplot], input="\n".join(script), text=True,
                               capture_output=True, timeout=60)
            if r.returncode != 0:
                print(f"report: gnuplot failed: {r.stderr}", file=sys.stderr)


def main(argv):
    if len(argv) != 1:
        sys.exit(__doc__)
    outdir = os.path.abspath(argv[0])
    meta, cells = load(outdir)
    plots(outdir, cells)
    meta["_outdir"] = outdir
    with open(os.path.join(outdir, "report.md"), "w") as f:
        f.write(markdown(meta, cells))


if __name__ == "__main__":
    main(sys.argv[1:])
