"""Two pgcrew binaries, before and after a change, on bench/run's simple
cell (pgbench -S, simple protocol, plain TCP, transaction pooling, the
bench's PostgreSQL 15 and ini): for each workers setting, both binaries run
in every round, their order swapped from round to round. Per run: TPS and
the p50/p99 of per-transaction latency from pgbench --log (optionally at a
fixed rate, -R). Prints one line per run and a summary (mean TPS per
target, the after/before ratio, the spread of the rounds).

usage: ab.py --scratch DIR --before BIN --after BIN [--workers 1,auto]
             [--clients 40] [--rounds 4] [--duration 15] [--rate R]
             [--before-setting KEY=VALUE ...] [--after-setting KEY=VALUE ...]

The settings are added to that side's pgcrew ini, so one binary can be
compared with itself under two settings (e.g. --before-setting
worker_sched_slice=0)."""

import argparse
import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, PGBIN, USER, log  # noqa: E402

WARMUP_S = 3


def copy_binary(env, src, name):
    """The service user runs the poolers: a copy it can read."""
    dst = env.path("bin", name)
    shutil.copyfile(src, dst)
    os.chmod(dst, 0o755)
    benchenv.chown_service(dst)
    return dst


def write_side_ini(env, base, which, settings):
    """pgcrew-wN-before.ini / -after.ini: the target's ini plus that side's
    settings (KEY=VALUE)."""
    with open(env.path(f"{base}.ini")) as f:
        text = f.read()
    for kv in settings:
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"bad setting {kv!r}: want KEY=VALUE")
        text += f"{key.strip()} = {value.strip()}\n"
    with open(env.path(f"{base}-{which}.ini"), "w") as f:
        f.write(text)
    benchenv.chown_service(env.path(f"{base}-{which}.ini"))


def latencies(prefix):
    lat = []
    for path in glob.glob(prefix + ".*"):
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 6 and p[2].isdigit():
                    lat.append(int(p[2]))
        os.unlink(path)
    lat.sort()
    return lat


def one_run(env, args, label, penv):
    base = [f"{PGBIN}/pgbench", "-h", HOST, "-p", str(env.port), "-U", USER, "-n", "-S",
            "-c", str(args.clients), "-j", "2"]
    subprocess.run(base + ["-T", str(WARMUP_S), DB], env=penv, capture_output=True, timeout=120)
    prefix = env.path(f"log-{label}")
    cmd = base + ["-T", str(args.duration), "--log", f"--log-prefix={prefix}"]
    if args.rate:
        cmd += ["-R", str(args.rate)]
    subprocess.run(cmd + [DB], env=penv, capture_output=True, timeout=args.duration + 120,
                   cwd=env.scratch)
    lat = latencies(prefix)
    n = len(lat)
    if not n:
        raise RuntimeError(f"{label}: pgbench ran no transaction")
    return n / args.duration, lat[n // 2] / 1000, lat[int(n * 0.99)] / 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--workers", default="1,auto")
    ap.add_argument("--clients", type=int, default=40)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=int, default=15)
    ap.add_argument("--rate", type=int, default=0)
    ap.add_argument("--before-setting", action="append", default=[])
    ap.add_argument("--after-setting", action="append", default=[])
    args = ap.parse_args()
    workers = [w for w in args.workers.split(",") if w]

    shutil.rmtree(args.scratch, ignore_errors=True)
    env = benchenv.Env(args.scratch, args.before)
    env.setup()
    bins = {"before": copy_binary(env, args.before, "pgcrew-before"),
            "after": copy_binary(env, args.after, "pgcrew-after")}
    env.write_inis(workers={f"pgcrew-w{w}": w for w in workers})
    for which, extra in (("before", args.before_setting), ("after", args.after_setting)):
        for w in workers:
            write_side_ini(env, f"pgcrew-w{w}", which, extra)
    penv = dict(os.environ, PGPASSWORD=env.password, PGSSLMODE="disable", PGAPPNAME="")
    results = {}
    try:
        for rnd in range(args.rounds):
            for w in workers:
                order = ["before", "after"] if rnd % 2 == 0 else ["after", "before"]
                for which in order:
                    env.pgcrew_bin = bins[which]
                    env.start_pooler(f"pgcrew-w{w}-{which}")
                    tps, p50, p99 = one_run(env, args, f"{which}-w{w}-{rnd}", penv)
                    problems = env.stop_pooler()
                    if problems:
                        raise RuntimeError(f"{which} workers={w}: {problems}")
                    results.setdefault((w, which), []).append((tps, p50, p99))
                    print(f"round={rnd} workers={w} binary={which} tps={tps:.0f} "
                          f"p50={p50:.2f} p99={p99:.2f}", flush=True)
    finally:
        env.close()
    for w in workers:
        mean = {}
        for which in ("before", "after"):
            runs = results[(w, which)]
            tps = [r[0] for r in runs]
            mean[which] = sum(tps) / len(tps)
            print(f"workers={w} {which}: mean {mean[which]:.0f} TPS (rounds {min(tps):.0f}-"
                  f"{max(tps):.0f}, spread {max(tps) / min(tps):.2f}x), p50 "
                  + "/".join(f"{r[1]:.2f}" for r in runs) + " ms, p99 "
                  + "/".join(f"{r[2]:.2f}" for r in runs) + " ms")
        print(f"workers={w} after/before: {mean['after'] / mean['before']:.2f}x")
    log("done")


if __name__ == "__main__":
    main()
