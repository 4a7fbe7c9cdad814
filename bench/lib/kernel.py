"""How often each pooler enters the kernel per transaction, and what that
costs: pgbench -S (transaction pooling, the bench's PostgreSQL 15 and ini)
against PgBouncer and pgcrew targets, where a pgcrew target may carry extra
settings (pgcrew-w1:io_uring=1) and another binary (pgcrew-w1:bin=/path). While pgbench runs, `perf stat` counts, in
the pooler's processes only, the system calls (all, and by kind), the
context switches and the wake-ups the pooler causes; /proc gives its CPU
time over the same window, and pgbench's per-transaction log the
transactions inside it. Targets of a cell run one after another, the order
rotated each round. Prints a table per cell, with each target's ratios
against PgBouncer.

usage: kernel.py --scratch DIR --pgcrew BIN [--targets ...] [--clients 40,500]
                 [--protocols simple] [--rounds 3] [--duration 10]"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, PGBIN, USER, log  # noqa: E402

WARMUP_S = 2
SETTLE_S = 2        # pgbench's own connections first: counted from here
SYSCALLS = ["recvfrom", "sendto", "epoll_wait", "epoll_ctl", "io_uring_enter", "read", "write",
            "recvmsg", "sendmsg"]
EVENTS = (["raw_syscalls:sys_enter", "sched:sched_switch", "sched:sched_wakeup"]
          + [f"syscalls:sys_enter_{s}" for s in SYSCALLS])


def parse_target(spec):
    """'pgcrew-w1:io_uring=1:x=y' -> ('pgcrew-w1', ['io_uring=1', 'x=y'])."""
    base, *settings = spec.split(":")
    return base, settings


def target_binary(env, spec):
    """A target's own binary (bin=PATH), copied where the service user can
    run it; None for the default."""
    for s in parse_target(spec)[1]:
        key, _, value = s.partition("=")
        if key.strip() == "bin":
            dst = env.path("bin", "pgcrew-" + str(abs(hash(value)) % 100000))
            shutil.copyfile(value, dst)
            os.chmod(dst, 0o755)
            benchenv.chown_service(dst)
            return dst
    return None


def target_ini(env, spec):
    """The ini a target runs with: its base ini plus its own settings."""
    base, settings = parse_target(spec)
    settings = [s for s in settings if s.partition("=")[0].strip() != "bin"]
    if base == "pgbouncer" or not settings:
        return base
    name = spec.replace(":", "+").replace("=", "-")
    with open(env.path(f"{base}.ini")) as f:
        text = f.read()
    text += "".join(f"{k.strip()} = {v.strip()}\n" for k, _, v in (s.partition("=") for s in settings))
    with open(env.path(f"{name}.ini"), "w") as f:
        f.write(text)
    benchenv.chown_service(env.path(f"{name}.ini"))
    return name


def perf_counts(pids, seconds):
    out = subprocess.run(["perf", "stat", "-x", ",", "-e", ",".join(EVENTS),
                          "-p", ",".join(map(str, pids)), "--", "sleep", str(seconds)],
                         capture_output=True, text=True, timeout=seconds + 60)
    counts = {}
    for line in out.stderr.splitlines():
        f = line.split(",")
        if len(f) > 3 and f[0].strip().isdigit():
            counts[f[2].split(":")[-1].replace("sys_enter_", "")] = int(f[0])
    if "sys_enter" not in counts:
        raise RuntimeError(f"perf stat gave no counts: {out.stderr[-500:]}")
    return counts


def window_xacts(prefix, t0, t1):
    """Transactions pgbench logged as ending inside [t0, t1), and their
    latencies (us)."""
    lat = []
    for path in glob.glob(prefix + ".*"):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 6 and p[2].isdigit():
                    end = int(p[4]) + int(p[5]) / 1e6
                    if t0 <= end < t1:
                        lat.append(int(p[2]))
        os.unlink(path)
    lat.sort()
    return lat


def one_run(env, pooler, clients, proto, duration, label, penv):
    base = [f"{PGBIN}/pgbench", "-h", HOST, "-p", str(env.port), "-U", USER, "-n", "-S",
            "-M", proto, "-c", str(clients), "-j", "2"]
    subprocess.run(base + ["-T", str(WARMUP_S), DB], env=penv, capture_output=True, timeout=300)
    prefix = env.path(f"log-{label}")
    bench = subprocess.Popen(base + ["-T", str(duration + SETTLE_S + 2), "--log",
                                     f"--log-prefix={prefix}", DB],
                             env=penv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=env.scratch)
    try:
        time.sleep(SETTLE_S)
        pids = pooler.pids()
        cpu0, t0 = pooler.cpu_ticks(), time.time()
        counts = perf_counts(pids, duration)
        cpu1, t1 = pooler.cpu_ticks(), time.time()
    finally:
        bench.wait(timeout=duration + 300)
    lat = window_xacts(prefix, t0, t1)
    n = len(lat)
    if not n:
        raise RuntimeError(f"{label}: no transaction in the window")
    row = {k: v / n for k, v in counts.items()}
    row["tps"] = n / (t1 - t0)
    row["cpu_us"] = (cpu1 - cpu0) / os.sysconf("SC_CLK_TCK") * 1e6 / n
    row["p50_ms"] = lat[n // 2] / 1000
    row["p99_ms"] = lat[int(n * 0.99)] / 1000
    return row


COLUMNS = [("tps", "TPS", "{:.0f}"), ("cpu_us", "CPU us/tx", "{:.2f}"),
           ("sys_enter", "syscalls/tx", "{:.2f}"), ("sched_switch", "switches/tx", "{:.3f}"),
           ("sched_wakeup", "wakeups/tx", "{:.3f}"), ("p50_ms", "p50 ms", "{:.2f}"),
           ("p99_ms", "p99 ms", "{:.2f}")]


def report(cell, results):
    """results: {target: [row, ...]} -> a markdown table of means (and the
    ratio to PgBouncer of TPS, CPU and syscalls)."""
    mean = {t: {k: sum(r.get(k, 0) for r in rows) / len(rows) for k in rows[0]}
            for t, rows in results.items()}
    ref = mean.get("pgbouncer")
    print(f"\n### {cell}\n")
    head = [h for _, h, _ in COLUMNS] + ["by kind (per tx)"]
    if ref:
        head[1:1] = ["TPS vs PgB", "CPU vs PgB", "syscalls vs PgB"]
    print("| target | " + " | ".join(head) + " |")
    print("|---|" + "---:|" * len(head))
    for t, m in mean.items():
        cells = [fmt.format(m.get(k, 0)) for k, _, fmt in COLUMNS]
        kinds = ", ".join(f"{s} {m[s]:.2f}" for s in SYSCALLS if m.get(s, 0) >= 0.005)
        if ref:
            cells[1:1] = [f"{m['tps'] / ref['tps']:.2f}", f"{m['cpu_us'] / ref['cpu_us']:.2f}",
                          f"{m['sys_enter'] / ref['sys_enter']:.2f}"]
        print(f"| {t} | " + " | ".join(cells) + f" | {kinds} |")
    spread = {t: max(r["tps"] for r in rows) / min(r["tps"] for r in rows)
              for t, rows in results.items()}
    print("\nrounds' TPS spread: " + ", ".join(f"{t} {s:.2f}x" for t, s in spread.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--targets", default="pgcrew-w1,pgcrew-w1:io_uring=1,pgcrew-auto,"
                                         "pgcrew-auto:io_uring=1,pgbouncer")
    ap.add_argument("--clients", default="40,500")
    ap.add_argument("--protocols", default="simple")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER,
                    help="the PgBouncer binary of the pgbouncer targets")
    ap.add_argument("--ssl", action="store_true",
                    help="clients connect with TLS (PGSSLMODE=require): the ssl cells")
    args = ap.parse_args()
    targets = [t for t in args.targets.split(",") if t]

    shutil.rmtree(args.scratch, ignore_errors=True)
    env = benchenv.Env(args.scratch, args.pgcrew, pgbouncer_bin=args.pgbouncer)
    env.setup()
    inis = {t: target_ini(env, t) for t in targets}
    default_bin = env.pgcrew_bin
    bins = {t: target_binary(env, t) or default_bin for t in targets}
    penv = dict(os.environ, PGPASSWORD=env.password, PGSSLMODE="require" if args.ssl else "disable",
                PGAPPNAME="")
    try:
        for proto in args.protocols.split(","):
            for clients in map(int, args.clients.split(",")):
                results = {t: [] for t in targets}
                for rnd in range(args.rounds):
                    order = targets[rnd % len(targets):] + targets[:rnd % len(targets)]
                    for t in order:
                        env.pgcrew_bin = bins[t]
                        pooler = env.start_pooler(inis[t])
                        row = one_run(env, pooler, clients, proto, args.duration,
                                      f"{inis[t]}-{clients}-{rnd}", penv)
                        problems = env.stop_pooler()
                        if problems:
                            raise RuntimeError(f"{t}: {problems}")
                        results[t].append(row)
                        log(f"{proto} c={clients} round {rnd} {t}: tps {row['tps']:.0f} cpu "
                            f"{row['cpu_us']:.2f} us/tx, {row['sys_enter']:.2f} syscalls/tx")
                report(f"{proto}{', ssl' if args.ssl else ''}, {clients} clients "
                       f"({args.rounds} rounds of {args.duration} s)", results)
    finally:
        env.close()


if __name__ == "__main__":
    main()
