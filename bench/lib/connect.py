"""Connection-establishment latency by phase (bench/connect; see bench/README.md).

For every target and TLS negotiation (none, SSLRequest, direct TLS) it times
TCP connect, TLS handshake, StartupMessage to the SASL request, the SCRAM
exchange, AuthenticationOk to the first ReadyForQuery (for a pooler: the
server login or the cached welcome) and the first query, in three scenarios:

  steady    pooler running with a warm pool; N connections one after another
  spaced    the same warm pooler, K connections each after SPACING s of quiet:
            the baseline for a lone connection (an idle machine answers slower:
            sleeping CPUs and processes must be woken at every step)
  cold      the first connection right after the pooler started (K restarts)
  prewarm   as cold, but with min_pool_size, the database's user/password
            and connect_query = 'SELECT 1' in the ini, so the pooler can open
            servers and run their first query before any client comes; the
            client connects SPACING s after the servers are idle (at most 5 s)

The client is bench/lib/pgwire.py: it caches its salted password, so the SCRAM
phase is the server's work plus round trips, not the client's PBKDF2. libpq
(psycopg's, from .venv) is timed end to end as a cross-check."""

import argparse
import csv
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, USER, log  # noqa: E402
import pgwire  # noqa: E402
from matrix import percentile  # noqa: E402

TLS_MODES = {"none": None, "sslrequest": "request", "direct": "direct"}
MIN_POOL = 4
SPACING = 0.5


def measure(env, target, tls, n):
    samples, errors = [], {}
    for _ in range(n):
        try:
            samples.append(pgwire.connect(HOST, env.target_port(target), USER, env.password, DB,
                                          tls=TLS_MODES[tls], cafile=env.ca, timeout=30))
        except (OSError, pgwire.PgError) as e:
            msg = str(e)[:200]
            errors[msg] = errors.get(msg, 0) + 1
    return samples, errors


def libpq_measure(env, target, tls, n):
    """End-to-end psycopg.connect() + SELECT 1, seconds."""
    try:
        import psycopg
    except ImportError:
        return [], {"psycopg not installed (scripts/deps.sh test)": 1}
    kw = {"sslmode": "disable"} if tls == "none" else {
        "sslmode": "verify-full", "sslrootcert": env.ca,
        "sslnegotiation": "direct" if tls == "direct" else "postgres"}
    out, errors = [], {}
    for _ in range(n):
        t0 = time.perf_counter()
        try:
            with psycopg.connect(host=HOST, port=env.target_port(target), user=USER,
                                 password=env.password, dbname=DB, connect_timeout=30,
                                 **kw) as conn:
                conn.execute("SELECT 1").fetchone()
            out.append({"total": time.perf_counter() - t0})
        except psycopg.Error as e:
            msg = str(e).strip().splitlines()[-1][:200] if str(e).strip() else type(e).__name__
            errors[msg] = errors.get(msg, 0) + 1
    return out, errors


async def _rate(env, target, tls, seconds, concurrency):
    import asyncio
    ctx = None
    if tls != "none":
        ctx = pgwire.tls_context(env.ca)
        if tls == "direct":
            ctx.set_alpn_protocols(["postgresql"])
    done, errors = [0], {}
    deadline = time.monotonic() + seconds

    async def loop():
        while time.monotonic() < deadline:
            c = pgwire.AsyncClient()
            try:
                await asyncio.wait_for(c.login(HOST, env.target_port(target), USER,
                                               env.password, DB, ctx, tls == "direct"), 30)
                await asyncio.wait_for(c.query(), 30)
                done[0] += 1
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    pgwire.PgError) as e:
                msg = (str(e) or type(e).__name__)[:160]
                errors[msg] = errors.get(msg, 0) + 1
                if errors[msg] > 50:
                    return
            finally:
                c.close()

    t0 = time.monotonic()
    await asyncio.gather(*(loop() for _ in range(concurrency)))
    return done[0], time.monotonic() - t0, errors


def rate(env, target, tls, seconds, concurrency):
    """Connections per second with `concurrency` clients that each connect,
    log in, run SELECT 1 and close, over and over; and the pooler's CPU per
    connection."""
    import asyncio
    pooler = env.pooler
    cpu0 = pooler.cpu_ticks() if pooler else 0
    n, elapsed, errors = asyncio.run(_rate(env, target, tls, seconds, concurrency))
    cpu1 = pooler.cpu_ticks() if pooler else 0
    row = {"target": target, "tls": tls, "scenario": f"rate-{concurrency}", "n": n,
           "errors": "; ".join(f"{v} x {k}" for k, v in errors.items()), "note": ""}
    row["conn_per_s"] = round(n / elapsed, 1) if elapsed else ""
    row["cpu_us_per_conn"] = round((cpu1 - cpu0) / benchenv.CLK_TCK * 1e6 / n, 1) \
        if pooler and n else ""
    return row


def wait_backends(env, want, timeout=5.0):
    """Seconds until `want` backends are idle (logged in, connect_query done)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if env.backends(state="idle") >= want:
            return time.monotonic() - t0
        time.sleep(0.02)
    return None


def lone_connections(env, target, tls, k, before, after=None):
    """k single connections, before() ahead of each and after() behind it."""
    samples, errors = [], {}
    for _ in range(k):
        before()
        s, e = measure(env, target, tls, 1)
        samples += s
        for msg, v in e.items():
            errors[msg] = errors.get(msg, 0) + v
        if after:
            after()
    return samples, errors


def summarize(target, tls, scenario, samples, errors, extra=""):
    row = {"target": target, "tls": tls, "scenario": scenario, "n": len(samples),
           "errors": "; ".join(f"{v} x {k}" for k, v in errors.items()), "note": extra}
    for phase in pgwire.PHASES:
        vals = sorted(s[phase] for s in samples if phase in s)
        p50, p99 = percentile(vals, 0.5), percentile(vals, 0.99)
        row[f"{phase}_p50_ms"] = round(p50 * 1000, 3) if p50 is not None else ""
        row[f"{phase}_p99_ms"] = round(p99 * 1000, 3) if p99 is not None else ""
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--samples", type=int, default=300, help="steady-state connections")
    ap.add_argument("--cold", type=int, default=10, help="pooler restarts per cold scenario")
    ap.add_argument("--targets", default="pgcrew-w1,pgcrew-auto,pgbouncer,postgres")
    ap.add_argument("--rate-seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=16, help="clients in the rate test")
    ap.add_argument("--quick", action="store_true",
                    help="--samples 100 --cold 5 --rate-seconds 3")
    args = ap.parse_args()
    if args.quick:
        args.samples, args.cold, args.rate_seconds = 100, 5, 3.0
    targets = [t for t in args.targets.split(",") if t]
    os.makedirs(args.out, exist_ok=True)
    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer)

    def restart_done():
        env.stop_pooler()
        time.sleep(0.3)   # let PostgreSQL reap the pooler's backends
    rows, rates = [], []
    t_start = time.monotonic()
    try:
        env.setup(pgbench_init=False)
        meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                "commit": benchenv.binary_source(args.repo), "versions": benchenv.versions(env),
                "samples": args.samples, "cold": args.cold, "min_pool_size": MIN_POOL,
                "spacing": SPACING}
        for target in targets:
            pooled = target != "postgres"
            for tls in TLS_MODES:
                # steady state
                env.write_inis()
                if pooled:
                    env.start_pooler(target)
                measure(env, target, tls, 3)            # warm the pool and caches
                samples, errors = measure(env, target, tls, args.samples)
                rows.append(summarize(target, tls, "steady", samples, errors))
                lsamples, lerrors = libpq_measure(env, target, tls, max(20, args.samples // 3))
                rows.append(summarize(target, tls, "steady-libpq", lsamples, lerrors,
                                      "psycopg/libpq end to end, incl. its PBKDF2"))
                log(f"{target:11} {tls:10} steady: {rows[-2]['ready_p50_ms']} ms to ready "
                    f"(libpq total {rows[-1]['total_p50_ms']} ms) {rows[-2]['errors']}")
                samples, errors = lone_connections(env, target, tls, args.cold,
                                                   lambda: time.sleep(SPACING))
                rows.append(summarize(target, tls, "spaced", samples, errors,
                                      f"{SPACING} s of quiet before each"))
                rates.append(rate(env, target, tls, args.rate_seconds, args.concurrency))
                env.stop_pooler()
                log(f"{target:11} {tls:10} rate: {rates[-1]['conn_per_s']} conn/s, pooler "
                    f"{rates[-1]['cpu_us_per_conn']} us CPU/connection {rates[-1]['errors']}")
                if not pooled:
                    continue
                # cold: first connection after start
                samples, errors = lone_connections(env, target, tls, args.cold,
                                                   lambda: env.start_pooler(target), restart_done)
                rows.append(summarize(target, tls, "cold", samples, errors))
                # min_pool_size pre-warming
                env.write_inis(extra={"min_pool_size": MIN_POOL},
                               db_extra=f" user={USER} password={env.password}"
                                        " connect_query='SELECT 1'")
                warm_times = []

                def start_and_wait():
                    env.start_pooler(target)
                    warm_times.append(wait_backends(env, MIN_POOL))
                    time.sleep(SPACING)
                samples, errors = lone_connections(env, target, tls, args.cold,
                                                   start_and_wait, restart_done)
                done = [w for w in warm_times if w is not None]
                note = (f"{MIN_POOL} servers idle {percentile(sorted(done), 0.5) * 1000:.0f} ms "
                        f"after start (p50), {len(done)}/{len(warm_times)} runs" if done else
                        f"no server opened within 5 s of start (0/{len(warm_times)} runs)")
                rows.append(summarize(target, tls, "prewarm", samples, errors, note))
                env.write_inis()
                log(f"{target:11} {tls:10} cold: {rows[-2]['ready_p50_ms']} ms, prewarm: "
                    f"{rows[-1]['ready_p50_ms']} ms ({note}) {rows[-1]['errors']}")
    finally:
        env.close()
    meta["wall_clock_s"] = round(time.monotonic() - t_start)
    fields = list(rows[0].keys()) if rows else []
    with open(os.path.join(args.out, "connect.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "connect-rate.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, ["target", "tls", "scenario", "n", "conn_per_s",
                               "cpu_us_per_conn", "errors", "note"])
        w.writeheader()
        w.writerows(rates)
    meta["rate_seconds"], meta["concurrency"] = args.rate_seconds, args.concurrency
    with open(os.path.join(args.out, "connect-meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(args.out, "connect.md"), "w") as f:
        f.write(markdown(rows, meta) + rate_markdown(rates, meta))
    log(f"done in {meta['wall_clock_s']} s: {args.out}/connect.md")


def ratio(row, base):
    """total p50 of row against base's, as "1.23x"; "" when either is missing."""
    if not base or base["total_p50_ms"] in ("", 0) or row["total_p50_ms"] == "":
        return ""
    return f"{row['total_p50_ms'] / base['total_p50_ms']:.2f}x"


def markdown(rows, meta):
    v = meta["versions"]
    out = ["# pgcrew bench: connection establishment by phase\n",
           f"* {meta['started']}, commit `{meta['commit']}`; {v['pgcrew']}; {v['pgbouncer']}; "
           f"{v['postgres']}; {v['cpus']} CPUs",
           f"* steady: {meta['samples']} sequential connections (pgwire client) after 3 warm-up "
           f"ones; spaced: {meta['cold']} connections to the same warm pooler, each after "
           f"{meta['spacing']} s of quiet; cold and prewarm: {meta['cold']} pooler restarts, "
           f"one connection each; prewarm: min_pool_size = {meta['min_pool_size']} with "
           "user/password and connect_query = 'SELECT 1' on the database line, the client "
           f"connects {meta['spacing']} s after the servers are idle in pg_stat_activity "
           "(at most 5 s after start)",
           "* phases (ms, p50 / p99): tcp = connect(); tls = handshake (SSLRequest answer "
           "included); startup = StartupMessage to the SASL request; scram = SASL exchange to "
           "AuthenticationOk (client PBKDF2 cached); login = AuthenticationOk to the first "
           "ReadyForQuery; ready = start to ReadyForQuery; query = first `SELECT 1`; "
           "total = ready + query. `steady-libpq` is psycopg's libpq end to end (connect + "
           "SELECT 1, including libpq's own PBKDF2 of 4096 iterations)\n"]
    out.append("| target | TLS | scenario | n | tcp | tls | startup | scram | login | ready "
               "| first query | total | vs steady | vs spaced | errors / note |")
    out.append("|---|---|---|---:|---|---|---|---|---|---|---|---|---:|---:|---|")
    steady = {(r["target"], r["tls"]): r for r in rows if r["scenario"] == "steady"}
    spaced = {(r["target"], r["tls"]): r for r in rows if r["scenario"] == "spaced"}
    for r in rows:
        def pp(ph):
            a, b = r.get(f"{ph}_p50_ms"), r.get(f"{ph}_p99_ms")
            return "" if a in ("", None) else f"{a:.2f} / {b:.2f}"
        rel = [ratio(r, base.get((r["target"], r["tls"])))
               if r["scenario"] in ("cold", "prewarm") else "" for base in (steady, spaced)]
        if r["scenario"] == "steady-libpq":
            cells = ["", "", "", "", "", "", "", pp("total")]
        else:
            cells = [pp(p) for p in ("tcp", "tls", "startup", "scram", "login", "ready",
                                     "query", "total")]
        note = "; ".join(x for x in (r["errors"], r["note"]) if x)
        out.append(f"| {r['target']} | {r['tls']} | {r['scenario']} | {r['n']} | "
                   + " | ".join(cells + rel) + f" | {note[:300]} |")
    out.append("")
    return "\n".join(out)


def rate_markdown(rates, meta):
    out = ["## Connection rate\n",
           f"{meta['concurrency']} pgwire clients connect, log in (SCRAM), run `SELECT 1` and "
           f"close, over and over for {meta['rate_seconds']} s. The client's salted password "
           "is cached, so its cost is the TLS handshake and Python; pooler CPU per connection "
           "is utime+stime of all its processes over the test. Ratios against PgBouncer.\n",
           "| target | TLS | connections | conn/s | vs PgBouncer | pooler CPU us/conn | "
           "vs PgBouncer | errors |",
           "|---|---|---:|---:|---:|---:|---:|---|"]
    base = {r["tls"]: r for r in rates if r["target"] == "pgbouncer"}
    for r in rates:
        b = base.get(r["tls"], {})

        def rel(key):
            try:
                return f"{float(r[key]) / float(b[key]):.2f}"
            except (KeyError, TypeError, ValueError, ZeroDivisionError):
                return "n/a"
        out.append(f"| {r['target']} | {r['tls']} | {r['n']} | {r['conn_per_s']} | "
                   f"{rel('conn_per_s')} | {r['cpu_us_per_conn'] or 'n/a'} | "
                   f"{rel('cpu_us_per_conn')} | {r['errors'][:200]} |")
    out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    main()
