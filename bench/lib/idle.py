"""Memory of idle clients (bench/idle; see bench/README.md).

For every target: start the pooler, log one client in and run a query (the
pool and one server exist), measure the pooler's processes (sum of VmRSS and
of Pss over the main process and its workers), log N clients in with SCRAM
(plain TCP, then again with TLS) and leave them idle, measure again, check a
sample of them still answers, close them, measure once more. Per-client
memory = (after - before) / N. Socket buffers live in the kernel and are not
counted by RSS."""

import argparse
import asyncio
import csv
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, USER, log  # noqa: E402
import pgwire  # noqa: E402


def memory(pooler):
    return {"rss_kb": pooler.rss_kb(), "pss_kb": pooler.pss_kb(), "procs": len(pooler.pids())}


async def open_clients(env, n, tls_ctx, parallel):
    clients, errors = [], {}
    sem = asyncio.Semaphore(parallel)

    async def one():
        async with sem:
            c = pgwire.AsyncClient()
            try:
                await asyncio.wait_for(c.login(HOST, env.port, USER, env.password, DB,
                                               tls_ctx), 60)
                clients.append(c)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    pgwire.PgError) as e:
                msg = (str(e) or type(e).__name__)[:160]
                errors[msg] = errors.get(msg, 0) + 1
                c.close()

    await asyncio.gather(*(one() for _ in range(n)))
    return clients, errors


async def check_alive(clients, k=100):
    step = max(1, len(clients) // k)
    ok = 0
    for c in clients[::step][:k]:
        try:
            await asyncio.wait_for(c.query(), 30)
            ok += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, pgwire.PgError):
            pass
    return ok, min(k, len(clients[::step]))


async def one_target(env, target, n, tls, parallel, settle):
    pooler = env.start_pooler(target)
    tls_ctx = pgwire.tls_context(env.ca) if tls else None
    first = pgwire.AsyncClient()
    await first.login(HOST, env.port, USER, env.password, DB, tls_ctx)
    await first.query()
    first.close()
    await asyncio.sleep(settle)
    before = memory(pooler)
    t0 = time.monotonic()
    clients, errors = await open_clients(env, n, tls_ctx, parallel)
    login_s = time.monotonic() - t0
    await asyncio.sleep(settle)
    after = memory(pooler)
    alive, asked = await check_alive(clients)
    for c in clients:
        c.close()
    await asyncio.sleep(settle + 1)
    closed = memory(pooler)
    problems = env.stop_pooler()
    row = {"target": target, "tls": "yes" if tls else "no", "clients": len(clients),
           "failed_logins": sum(errors.values()),
           "login_s": round(login_s, 1),
           "rss_before_kb": before["rss_kb"], "rss_after_kb": after["rss_kb"],
           "rss_closed_kb": closed["rss_kb"],
           "pss_before_kb": before["pss_kb"], "pss_after_kb": after["pss_kb"],
           "pss_closed_kb": closed["pss_kb"], "processes": before["procs"],
           "alive": f"{alive}/{asked}",
           "errors": "; ".join(f"{v} x {k}" for k, v in errors.items()) + "; ".join(problems)}
    if clients:
        row["rss_bytes_per_client"] = round((after["rss_kb"] - before["rss_kb"]) * 1024
                                            / len(clients))
        row["pss_bytes_per_client"] = round((after["pss_kb"] - before["pss_kb"]) * 1024
                                            / len(clients))
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--parallel", type=int, default=64, help="logins in flight at once")
    ap.add_argument("--targets", default="pgcrew-w1,pgcrew-auto,pgbouncer")
    ap.add_argument("--no-tls", action="store_true", help="plain TCP clients only")
    ap.add_argument("--settle", type=float, default=2.0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer)
    rows = []
    t_start = time.monotonic()
    try:
        env.setup(pgbench_init=False)
        meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "commit": benchenv.binary_source(args.repo), "versions": benchenv.versions(env),
                "clients": args.clients}
        for tls in ([False] if args.no_tls else [False, True]):
            for target in [t for t in args.targets.split(",") if t]:
                row = asyncio.run(one_target(env, target, args.clients, tls, args.parallel,
                                             args.settle))
                rows.append(row)
                log(f"{target:11} tls={row['tls']:3} {row['clients']} clients in "
                    f"{row['login_s']} s: RSS {row['rss_before_kb']} -> {row['rss_after_kb']} "
                    f"KiB ({row.get('rss_bytes_per_client')} B/client), PSS "
                    f"{row.get('pss_bytes_per_client')} B/client, alive {row['alive']} "
                    f"{row['errors'][:200]}")
    finally:
        env.close()
    meta["wall_clock_s"] = round(time.monotonic() - t_start)
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(os.path.join(args.out, "idle.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "idle-meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(args.out, "idle.md"), "w") as f:
        f.write(markdown(rows, meta))
    log(f"done in {meta['wall_clock_s']} s: {args.out}/idle.md")


def markdown(rows, meta):
    v = meta["versions"]
    out = ["# pgcrew bench: idle clients\n",
           f"* {meta['started']}, commit `{meta['commit']}`; {v['pgcrew']}; {v['pgbouncer']}",
           f"* {meta['clients']} clients log in with SCRAM (verifier in the userlist) and stay "
           "idle; memory of all the pooler's processes (main process and workers) before the "
           "first of them and after the last, per client = difference / clients. RSS sums "
           "count pages shared between pgcrew's processes once per process; Pss divides them. "
           "Kernel socket buffers are not included.\n",
           "| target | TLS | clients | failed logins | login time s | RSS before -> after KiB "
           "| RSS B/client | PSS B/client | RSS after close KiB | still answering |",
           "|---|---|---:|---:|---:|---|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r['target']} | {r['tls']} | {r['clients']} | {r['failed_logins']} | "
                   f"{r['login_s']} | {r['rss_before_kb']} -> {r['rss_after_kb']} | "
                   f"{r.get('rss_bytes_per_client', 'n/a')} | "
                   f"{r.get('pss_bytes_per_client', 'n/a')} | {r['rss_closed_kb']} | "
                   f"{r['alive']} |")
    errs = [r for r in rows if r["errors"]]
    if errs:
        out.append("")
        for r in errs:
            out.append(f"* {r['target']} tls={r['tls']}: {r['errors'][:400]}")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
