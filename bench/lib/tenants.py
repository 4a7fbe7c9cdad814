"""Many tenants (bench/tenants; see bench/README.md): N pools of a few
clients each, every pool a role of its own (u0 .. uN-1) on one database,
default_pool_size = 1 and max_db_connections bounded, so that a pool
without a server takes one from an idle pool (PgBouncer's eviction).

All targets run at once, each on a port of its own with the same settings,
and every step is interleaved among them: the first login of each pool
(pool i on every target before pool i + 1, the order of the targets
rotated), a later login to an existing pool the same way, memory taken of
each at the same moments, and SELECT 1 transactions in short slices, one
target at a time, rotated. Measured per target:

* login latency, p50/p99: connect to ReadyForQuery (`login`) and to the
  end of the first SELECT 1 (`first_query`: a pooler that logs in to the
  server only at the first query pays it there), for the first login of a
  pool with no server yet and for a later login to that pool;
* memory per pool: sum of VmRSS and of Pss over the pooler's processes,
  after the N pools exist with their clients connected and idle, minus the
  baseline (pooler started, one login of user bench done), divided by N;
* TPS: `--active` coroutines each running SELECT 1 on an idle client of a
  pool drawn at random, for `--duration` seconds per target;
* the console and the metrics page with every pool in use: SHOW POOLS and
  SHOW SERVERS (psql, its start and login included: the same for every
  target) and pgcrew's GET /metrics, timed once with the pooler idle and
  once in the middle of the target's first TPS slice.

usage: tenants.py --scratch DIR --out DIR --pgcrew BIN --repo DIR [options]
       tenants.py --report DIR      (redraw tenants.md from its CSV files)"""

import argparse
import asyncio
import csv
import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, PGBIN, USER, log  # noqa: E402
import pgwire  # noqa: E402

TARGETS = ("pgcrew-w1", "pgcrew-auto", "pgbouncer")
BASE = "pgbouncer"
CONN_ERRORS = (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, pgwire.PgError)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def machine_busy_ticks():
    """Busy CPU ticks of the whole machine (all CPUs, less idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v) - v[3] - v[4]


def ms(v):
    return None if v is None else round(v * 1000, 3)


# -- environment -------------------------------------------------------------

class Tenants:
    """The bench Env plus N roles, a userlist of them and one ini per target."""

    def __init__(self, env, max_pools, targets, limit, clients_per_pool, samples, pgcrew_set=()):
        self.samples = samples
        self.pgcrew_set = list(pgcrew_set)     # KEY=VALUE lines for pgcrew's inis only
        self.env = env
        self.max_pools = max_pools
        self.targets = targets
        self.limit = limit
        self.clients_per_pool = clients_per_pool
        self.ports = {}
        self.metrics_ports = {}

    def setup(self):
        env = self.env
        env.setup(pgbench_init=False)
        t0 = time.monotonic()
        # One verifier for every role: the same password and salt, so the
        # client derives its key once and every login costs what bench's does.
        # CREATE ROLE ... PASSWORD costs PostgreSQL 15 about 15 ms a role
        # here (10,000 roles in one DO block: minutes), without a password
        # 0.03 ms: the roles are made bare and get the verifier in one UPDATE
        # of the catalog (a superuser's setting; the update invalidates the
        # caches as ALTER ROLE would).
        env.psql(f"DO $$ BEGIN FOR i IN 0..{self.max_pools - 1} LOOP "
                 "EXECUTE format('CREATE ROLE u%s LOGIN', i); END LOOP; END $$")
        env.psql("SET allow_system_table_mods = on; UPDATE pg_authid SET rolpassword = "
                 f"'{env.verifier}' WHERE rolname ~ '^u[0-9]+$'")
        with open(os.path.join(env.pgdata, "pg_hba.conf"), "a") as f:
            f.write(f"host {DB} all 127.0.0.1/32 scram-sha-256\n")   # PostgreSQL 15: no regex here
        env.psql("SELECT pg_reload_conf()")
        log(f"{self.max_pools} roles in {time.monotonic() - t0:.1f} s")
        with open(env.path("userlist.txt"), "w") as f:
            f.write(f'"{USER}" "{env.verifier}"\n')
            for i in range(self.max_pools):
                f.write(f'"u{i}" "{env.verifier}"\n')
        port = env.port
        for target in self.targets:
            self.ports[target] = benchenv.free_port(port)
            port = self.ports[target] + 1
            if target.startswith("pgcrew-"):
                self.metrics_ports[target] = benchenv.free_port(port)
                port = self.metrics_ports[target] + 1
            with open(self.ini(target), "w") as f:
                f.write(self.ini_text(target))
        benchenv.chown_service(env.scratch)

    def ini(self, target):
        return self.env.path(f"tenants-{target}.ini")

    def settings(self):
        return benchenv.many_roles_settings(
            self.env, self.limit, self.max_pools * self.clients_per_pool + self.samples + 100)

    def ini_text(self, target):
        env = self.env
        lines = ["; written by bench/tenants: the same settings for every target",
                 "[databases]", f"{DB} = host={HOST} port={env.pgport} dbname={DB}", "",
                 "[pgbouncer]", f"listen_port = {self.ports[target]}"]
        lines += [f"{k} = {v}" for k, v in self.settings().items()]
        if target.startswith("pgcrew-"):
            lines.append(f"workers = {'auto' if target == 'pgcrew-auto' else 1}")
            lines.append(f"metrics_listen = {HOST}:{self.metrics_ports[target]}")
            lines += benchenv.pgcrew_set_lines(self.pgcrew_set)
        return "\n".join(lines) + "\n"

    def command(self, target):
        binary = self.env.pgbouncer_bin if target == "pgbouncer" else self.env.pgcrew_bin
        return [binary, self.ini(target)]

    def start(self, target):
        p = benchenv.Pooler(target, self.command(target), self.ports[target],
                            self.env.path(f"tenants-{target}.stderr"))
        p.start()
        return p

    def time_console(self, target, command):
        """(ms, rows) of one console command through psql, login included."""
        envv = dict(os.environ, PGPASSWORD=self.env.password, PGSSLMODE="disable")
        t0 = time.monotonic()
        out = subprocess.run([f"{PGBIN}/psql", "-h", HOST, "-p", str(self.ports[target]),
                              "-U", USER, "-d", "pgbouncer", "-AtX", "-c", command],
                             capture_output=True, text=True, env=envv, timeout=120)
        took = (time.monotonic() - t0) * 1000
        if out.returncode != 0:
            return None, out.stderr.strip()[:200]
        return round(took, 1), len(out.stdout.splitlines())

    def time_metrics(self, target):
        """(ms, bytes) of one GET /metrics, or (None, None) for PgBouncer."""
        if target not in self.metrics_ports:
            return None, None
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.metrics_ports[target]}/metrics",
                                        timeout=120) as r:
                body = r.read()
        except OSError as e:
            return None, str(e)[:200]
        return round((time.monotonic() - t0) * 1000, 1), len(body)

    def time_views(self, target):
        """SHOW POOLS, SHOW SERVERS and /metrics, one after another."""
        pools_ms, pools_rows = self.time_console(target, "SHOW POOLS")
        servers_ms, servers_rows = self.time_console(target, "SHOW SERVERS")
        metrics_ms, metrics_bytes = self.time_metrics(target)
        return {"pools_ms": pools_ms, "pools_rows": pools_rows, "servers_ms": servers_ms,
                "servers_rows": servers_rows, "metrics_ms": metrics_ms,
                "metrics_bytes": metrics_bytes}

    def show_lists(self, target):
        """SHOW LISTS of the target's console as {list: items}."""
        envv = dict(os.environ, PGPASSWORD=self.env.password, PGSSLMODE="disable")
        out = subprocess.run([f"{PGBIN}/psql", "-h", HOST, "-p", str(self.ports[target]),
                              "-U", USER, "-d", "pgbouncer", "-AtX", "-F", " ", "-c",
                              "SHOW LISTS"], capture_output=True, text=True, env=envv,
                             timeout=60)
        lists = {}
        for line in out.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                lists[parts[0]] = int(parts[1])
        return lists

    def backends(self):
        """PostgreSQL client backends of the tenants' roles."""
        return int(self.env.psql("SELECT count(*) FROM pg_stat_activity WHERE "
                                 "usename ~ '^u[0-9]+$'"))


# -- clients: one process per target -----------------------------------------
# A process may hold 20,000 descriptors here (the hard limit cannot be
# raised), and 10,000 pools on three targets need more: each target's
# clients live in a process of their own (an agent), which the run drives
# step by step over a pipe, so the steps stay interleaved. Timings are taken
# in the agent, around the connection alone.

async def login(port, pool, password, timeout=60):
    """Log client of pool `pool` in and run one SELECT 1: (client, seconds
    to ReadyForQuery, seconds to the end of the query)."""
    now = time.perf_counter
    c = pgwire.AsyncClient()
    t0 = now()
    try:
        await asyncio.wait_for(c.login(HOST, port, f"u{pool}", password, DB), timeout)
        t1 = now()
        await asyncio.wait_for(c.query(), timeout)
        return c, t1 - t0, now() - t0
    except BaseException:
        c.close()
        raise


def note(errors, e):
    msg = (str(e) or type(e).__name__)[:160]
    errors[msg] = errors.get(msg, 0) + 1


class AgentState:
    """The clients of one target, by pool, in the agent process."""

    def __init__(self, port, password, pools):
        self.port = port
        self.password = password
        self.clients = [[] for _ in range(pools)]
        self.errors = {}

    async def op_login(self, pool):
        try:
            c, ready, total = await login(self.port, pool, self.password)
        except CONN_ERRORS as e:
            note(self.errors, e)
            return {"error": True}
        self.clients[pool].append(c)
        return {"ready": ready, "total": total}

    async def op_bulk(self, wanted, parallel, seed):
        """Untimed logins until every pool has `wanted` clients."""
        sem = asyncio.Semaphore(parallel)

        async def one(pool):
            async with sem:
                await self.op_login(pool)

        jobs = [one(pool) for pool, cl in enumerate(self.clients)
                for _ in range(wanted - len(cl))]
        random.Random(seed).shuffle(jobs)
        await asyncio.gather(*jobs)
        return {}

    async def op_tps(self, active, duration, seed):
        """`active` coroutines, each running SELECT 1 on an idle client of
        a random pool until the end of the window; completions inside it
        count."""
        free, rng = self.clients, random.Random(seed)
        n = len(free)
        lat, errors, lost = [], {}, [0]
        cpu0, t0 = time.process_time(), time.perf_counter()
        end = t0 + duration

        async def worker():
            while time.perf_counter() < end:
                pool = rng.randrange(n)
                if not free[pool]:
                    await asyncio.sleep(0)
                    continue
                c = free[pool].pop()
                t1 = time.perf_counter()
                try:
                    await asyncio.wait_for(c.query(), 120)
                except CONN_ERRORS as e:
                    note(errors, e)
                    c.close()
                    lost[0] += 1
                    continue
                t2 = time.perf_counter()
                free[pool].append(c)
                if t2 <= end:
                    lat.append(t2 - t1)

        await asyncio.gather(*(worker() for _ in range(active)))
        window = time.perf_counter() - t0
        return {"lat": lat, "errors": errors, "lost": lost[0], "window": window,
                "cpu_share": (time.process_time() - cpu0) / window}

    async def op_status(self):
        return {"clients": sum(len(c) for c in self.clients), "errors": self.errors}


async def agent_loop(port, password, pools):
    st = AgentState(port, password, pools)
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        cmd = json.loads(line)
        op = cmd.pop("op")
        if op == "quit":
            break
        answer = await getattr(st, f"op_{op}")(**cmd)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    for cl in st.clients:
        for c in cl:
            c.close()
    await asyncio.sleep(0.2)


class Agent:
    """The run's side of one agent process."""

    def __init__(self, port, password, pools):
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--agent", str(port), str(pools)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1,
            env=dict(os.environ, TENANTS_PASSWORD=password))

    def call(self, op, **kw):
        self.proc.stdin.write(json.dumps(dict(kw, op=op)) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tenants agent exited ({self.proc.poll()})")
        return json.loads(line)

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write('{"op": "quit"}\n')
                self.proc.stdin.close()
                self.proc.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait(timeout=10)


def timed_logins(state, pools, kind):
    """One login per pool and target, pool by pool, the targets in a
    rotating order: latencies into state[target][kind]."""
    targets = list(state)
    for n, pool in enumerate(pools):
        k = n % len(targets)
        for target in targets[k:] + targets[:k]:
            r = state[target]["agent"].call("login", pool=pool)
            if "ready" in r:
                state[target][kind].append((r["ready"], r["total"]))
        if n and n % 2000 == 0:
            log(f"  {kind}: {n} pools")


# -- the run -----------------------------------------------------------------

def memory(pooler):
    return {"rss": pooler.rss_kb(), "pss": pooler.pss_kb()}


def snapshot(ten, state, poolers, key, settle):
    """After `settle` seconds of quiet: each target's memory and SHOW LISTS."""
    time.sleep(settle)
    for t in ten.targets:
        state[t]["mem"][key] = memory(poolers[t])
        state[t][f"lists_{key}"] = ten.show_lists(t)


def clients_per_pool(args, n):
    """--clients-per-pool, or fewer where a pooler could not hold them in
    its descriptors (each pooler holds N x this + the timed later logins +
    its servers)."""
    import resource
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    fit = max(1, (nofile - args.samples - args.max_db_connections - 500) // n)
    if fit < args.clients_per_pool:
        log(f"N={n}: {fit} client(s) per pool, not {args.clients_per_pool}: a process may "
            f"hold {nofile} descriptors here")
    return min(fit, args.clients_per_pool)


def run_pools(ten, n, args, loads):
    """One measurement of N pools on every target; returns (rows, slices)."""
    env = ten.env
    cpp = clients_per_pool(args, n)
    state, poolers = {}, {}
    try:
        for target in ten.targets:
            poolers[target] = ten.start(target)
        for target in ten.targets:
            # a first login (user bench, its own pool), then the baseline
            pgwire.connect(HOST, ten.ports[target], USER, env.password, DB)
            state[target] = {"agent": Agent(ten.ports[target], env.password, n),
                             "first": [], "later": [], "mem": {}}
        snapshot(ten, state, poolers, "base", args.settle)
        loads.append(("start", loadavg()))
        rng = random.Random(n)

        log(f"N={n}: first login of each pool, interleaved")
        t0 = time.monotonic()
        timed_logins(state, range(n), "first")
        first_s = time.monotonic() - t0
        snapshot(ten, state, poolers, "one", args.settle)
        loads.append(("first logins", loadavg()))

        sample = rng.sample(range(n), min(n, args.samples))
        log(f"N={n}: a later login to {len(sample)} existing pools, interleaved")
        t0 = time.monotonic()
        timed_logins(state, sample, "later")
        later_s = time.monotonic() - t0
        log(f"N={n}: up to {cpp} clients per pool ({args.parallel} logins in flight)")
        t0 = time.monotonic()
        for t in ten.targets:
            state[t]["agent"].call("bulk", wanted=cpp, parallel=args.parallel, seed=n)
        bulk_s = time.monotonic() - t0
        snapshot(ten, state, poolers, "all", args.settle)
        loads.append(("later logins", loadavg()))
        backends_idle = ten.backends()
        for t in ten.targets:
            state[t]["views_idle"] = ten.time_views(t)

        slices = []
        for r in range(args.rounds):
            order = ten.targets[r % len(ten.targets):] + ten.targets[:r % len(ten.targets)]
            for t in order:
                slices.append(one_slice(state[t], poolers[t], t, r, n, args, rng, ten))
                loads.append((f"tps {t} {r}", loadavg()))
        for t in ten.targets:
            st = state[t]["agent"].call("status")
            state[t]["clients"], state[t]["errors"] = st["clients"], st["errors"]
        rows = [row(t, n, state[t], poolers[t], slices, args,
                    {"clients_per_pool": cpp, "first_logins_s": round(first_s, 1),
                     "later_logins_s": round(later_s, 1), "bulk_logins_s": round(bulk_s, 1),
                     "pg_backends_idle": backends_idle})
                for t in ten.targets]
        return rows, slices
    finally:
        for s in state.values():
            s["agent"].close()
        for p in poolers.values():
            for problem in p.stop():
                log(problem)


def one_slice(s, pooler, target, rnd, n, args, rng, ten):
    log(f"  tps {target:11} round {rnd}: {args.duration} s")
    cpu0, busy0 = pooler.cpu_ticks(), machine_busy_ticks()
    viewer = None
    if rnd == 0:
        # The console and the metrics page in the middle of the slice.
        def views():
            time.sleep(args.duration / 3)
            s["views_load"] = ten.time_views(target)
        viewer = threading.Thread(target=views, daemon=True)
        viewer.start()
    t0 = time.monotonic()
    a = s["agent"].call("tps", active=args.active, duration=args.duration,
                        seed=rng.randrange(1 << 30))
    window = time.monotonic() - t0
    if viewer:
        viewer.join()
    cpu = (pooler.cpu_ticks() - cpu0) / benchenv.CLK_TCK
    busy = (machine_busy_ticks() - busy0) / benchenv.CLK_TCK
    lat = a["lat"]
    sl = {"pools": n, "target": target, "round": rnd, "transactions": len(lat),
          "tps": round(len(lat) / args.duration, 1), "p50_ms": ms(benchenv.pct(lat, 0.5)),
          "p99_ms": ms(benchenv.pct(lat, 0.99)),
          "pooler_cpu_us_per_tx": round(cpu * 1e6 / len(lat), 1) if lat else None,
          "pooler_cpu_share": round(cpu / busy, 3) if busy else None,
          "client_cpu_share_of_one_core": round(a["cpu_share"], 3),
          "machine_busy": round(busy / window / (os.cpu_count() or 1), 3),
          "clients_lost": a["lost"],
          "errors": "; ".join(f"{v} x {k}" for k, v in a["errors"].items()),
          "window_s": round(window, 2), "lat": lat}
    log(f"  tps {target:11} round {rnd}: {sl['tps']} TPS, p50 {sl['p50_ms']} ms, "
        f"p99 {sl['p99_ms']} ms, pooler {sl['pooler_cpu_us_per_tx']} us/tx, client "
        f"{sl['client_cpu_share_of_one_core']} of a core {sl['errors'][:200]}")
    return sl


def row(target, n, s, pooler, slices, args, extra):
    mem = s["mem"]
    mine = [x for x in slices if x["target"] == target]
    lat = [v for x in mine for v in x["lat"]]
    tx = sum(x["transactions"] for x in mine)
    r = {"pools": n, "target": target,
         "clients": s["clients"],
         "failed_logins": sum(s["errors"].values())}
    for kind in ("first", "later"):
        v = s[kind]
        r[f"{kind}_logins"] = len(v)
        r[f"{kind}_login_p50_ms"] = ms(benchenv.pct([a for a, _ in v], 0.5))
        r[f"{kind}_login_p99_ms"] = ms(benchenv.pct([a for a, _ in v], 0.99))
        r[f"{kind}_query_p50_ms"] = ms(benchenv.pct([b for _, b in v], 0.5))
        r[f"{kind}_query_p99_ms"] = ms(benchenv.pct([b for _, b in v], 0.99))
    r["tps"] = round(tx / (args.duration * len(mine)), 1) if mine else None
    r["tps_min"] = min((x["tps"] for x in mine), default=None)
    r["tps_max"] = max((x["tps"] for x in mine), default=None)
    r["tx_p50_ms"] = ms(benchenv.pct(lat, 0.5))
    r["tx_p99_ms"] = ms(benchenv.pct(lat, 0.99))
    cpu = [x["pooler_cpu_us_per_tx"] for x in mine if x["pooler_cpu_us_per_tx"]]
    r["pooler_cpu_us_per_tx"] = round(sum(cpu) / len(cpu), 1) if cpu else None
    r["client_cpu_share_of_one_core"] = max((x["client_cpu_share_of_one_core"] for x in mine),
                                            default=None)
    for k in ("rss", "pss"):
        r[f"{k}_base_kb"] = mem["base"][k]
        r[f"{k}_one_client_kb"] = mem["one"][k]
        r[f"{k}_all_clients_kb"] = mem["all"][k]
        r[f"{k}_bytes_per_pool"] = round((mem["all"][k] - mem["base"][k]) * 1024 / n)
        r[f"{k}_bytes_per_pool_1client"] = round((mem["one"][k] - mem["base"][k]) * 1024 / n)
        extra_clients = r["clients"] - n
        if extra_clients > 0:
            r[f"{k}_bytes_per_extra_client"] = round((mem["all"][k] - mem["one"][k]) * 1024
                                                     / extra_clients)
    r["processes"] = len(pooler.pids())
    r["pools_listed"] = s.get("lists_all", {}).get("pools")
    # (free_servers is PgBouncer's cache of unused objects, not idle servers)
    r["used_servers_listed"] = s.get("lists_all", {}).get("used_servers")
    r["clients_lost"] = sum(x["clients_lost"] for x in mine)
    r["worker_restarts"] = pooler.restarts()
    for when in ("idle", "load"):
        for k, v in s.get(f"views_{when}", {}).items():
            r[f"{k}_{when}"] = v
    r.update(extra)
    errs = "; ".join(f"{v} x {k}" for k, v in s["errors"].items())
    errs += "".join(f"; tps round {x['round']}: {x['errors']}" for x in mine if x["errors"])
    r["errors"] = errs.strip("; ")
    return r


# -- report ------------------------------------------------------------------

def ratio(a, b):
    return f"{a / b:.2f}" if a and b else "n/a"


def markdown(rows, slices, meta):
    v = meta["versions"]
    out = ["# pgcrew bench: tenants\n",
           f"* {meta['started']}, commit `{meta['commit']}`; {v['pgcrew']}; {v['pgbouncer']}; "
           f"{v['postgres']}; {v['cpus']} CPUs ({v['cpu']}); sched_autogroup {v.get('sched_autogroup', '?')}",
           f"* load average (1 min) during the run: {meta['load_min']}-{meta['load_max']}; "
           f"wall clock {meta['wall_clock_s']} s",
           f"* {meta['settings']}\n"]
    for n in sorted({r["pools"] for r in rows}):
        rs = {r["target"]: r for r in rows if r["pools"] == n}
        base = rs.get(BASE, {})
        cpp = next(iter(rs.values())).get("clients_per_pool", "?")
        out += [f"## {n} pools, {cpp} client(s) per pool\n",
                "| target | first login p50 / p99 ms | + first query p50 / p99 ms "
                "| later login p50 / p99 ms | TPS (min-max) | tx p50 / p99 ms "
                "| pooler us/tx | RSS B/pool, all clients | PSS B/pool, all clients | PSS B/pool, 1 client "
                "| PSS B/extra client | failed logins | lost clients |",
                "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        for t, r in rs.items():
            out.append(
                f"| {t} | {r['first_login_p50_ms']} / {r['first_login_p99_ms']} "
                f"| {r['first_query_p50_ms']} / {r['first_query_p99_ms']} "
                f"| {r['later_login_p50_ms']} / {r['later_login_p99_ms']} "
                f"| {r['tps']} ({r['tps_min']}-{r['tps_max']}) "
                f"| {r['tx_p50_ms']} / {r['tx_p99_ms']} | {r['pooler_cpu_us_per_tx']} "
                f"| {r['rss_bytes_per_pool']} | {r['pss_bytes_per_pool']} "
                f"| {r['pss_bytes_per_pool_1client']} "
                f"| {r.get('pss_bytes_per_extra_client', 'n/a')} | {r['failed_logins']} "
                f"| {r['clients_lost']} |")
        if base:
            cols = [("first login", "first_login"), ("+ query", "first_query"),
                    ("later login", "later_login"), ("+ query", "later_query")]
            out += ["", f"Against {BASE} (ratios: below 1 is faster or smaller, TPS above 1 "
                    "is better; '+ query' is the login and its first SELECT 1):", "",
                    "| target | " + " | ".join(f"{c} p50 | p99" for c, _ in cols)
                    + " | TPS | pooler us/tx | PSS per pool (1 client) |",
                    "|---|" + "---:|" * (2 * len(cols) + 3)]
            for t, r in rs.items():
                if t == BASE:
                    continue
                cells = [ratio(r[f"{k}_{q}_ms"], base[f"{k}_{q}_ms"])
                         for _, k in cols for q in ("p50", "p99")]
                cells += [ratio(r["tps"], base["tps"]),
                          ratio(r["pooler_cpu_us_per_tx"], base["pooler_cpu_us_per_tx"]),
                          ratio(r["pss_bytes_per_pool_1client"],
                                base["pss_bytes_per_pool_1client"])]
                out.append(f"| {t} | " + " | ".join(cells) + " |")
        out += ["", "Console and metrics with every pool in use (psql's start and login "
                "included; 'load': in the middle of the first TPS slice):", "",
                "| target | SHOW POOLS ms idle / load (rows) | SHOW SERVERS ms idle / load (rows) "
                "| /metrics ms idle / load | /metrics bytes | /metrics us per pool, idle |",
                "|---|---|---|---|---:|---:|"]
        for t, r in rs.items():
            m = r.get("metrics_ms_idle")
            per_pool = round(m * 1000 / n, 1) if isinstance(m, (int, float)) else "n/a"
            out.append(f"| {t} | {r.get('pools_ms_idle')} / {r.get('pools_ms_load')} "
                       f"({r.get('pools_rows_idle')}) | {r.get('servers_ms_idle')} / "
                       f"{r.get('servers_ms_load')} ({r.get('servers_rows_idle')}) "
                       f"| {r.get('metrics_ms_idle')} / {r.get('metrics_ms_load')} "
                       f"| {r.get('metrics_bytes_idle')} | {per_pool} |")
        out += ["", "| slice | target | round | TPS | p50 / p99 ms | pooler us/tx "
                "| pooler share of busy CPU | client share of a core | machine busy |",
                "|---|---|---:|---:|---|---:|---:|---:|---:|"]
        for i, s in enumerate(x for x in slices if x["pools"] == n):
            out.append(f"| {i} | {s['target']} | {s['round']} | {s['tps']} "
                       f"| {s['p50_ms']} / {s['p99_ms']} | {s['pooler_cpu_us_per_tx']} "
                       f"| {s['pooler_cpu_share']} | {s['client_cpu_share_of_one_core']} "
                       f"| {s['machine_busy']} |")
        out.append("")
        for t, r in rs.items():
            if r["errors"]:
                out.append(f"* {t}: {r['errors'][:600]}")
        out.append("")
    return "\n".join(out)


def write(out, rows, slices, meta):
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(os.path.join(out, "tenants.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)
    sf = [k for k in (slices[0] if slices else {}) if k != "lat"]
    with open(os.path.join(out, "slices.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, sf, extrasaction="ignore")
        w.writeheader()
        w.writerows(slices)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=2)
    with open(os.path.join(out, "tenants.md"), "w") as f:
        f.write(markdown(rows, slices, meta))


def redraw(out):
    """tenants.md again from tenants.csv, slices.csv and meta.json."""
    rows = benchenv.read_csv(os.path.join(out, "tenants.csv"))
    slices = benchenv.read_csv(os.path.join(out, "slices.csv"))
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(out, "tenants.md"), "w") as f:
        f.write(markdown(rows, slices, meta))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        redraw(sys.argv[2])
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--agent":
        asyncio.run(agent_loop(int(sys.argv[2]), os.environ["TENANTS_PASSWORD"],
                               int(sys.argv[3])))
        return
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--pools", default="1000,10000", help="N, comma-separated: one run each")
    ap.add_argument("--quick", action="store_true", help="--pools 200 --duration 4 --rounds 1")
    benchenv.add_pgcrew_set(ap)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--clients-per-pool", type=int, default=2)
    ap.add_argument("--max-db-connections", type=int, default=150,
                    help="per target (all targets run at once: PostgreSQL gets "
                         "targets x this + 30 max_connections)")
    ap.add_argument("--samples", type=int, default=1000,
                    help="pools whose later login is timed (one at a time)")
    ap.add_argument("--parallel", type=int, default=32, help="untimed logins in flight")
    ap.add_argument("--active", type=int, default=200,
                    help="transactions in flight in the TPS slices")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per TPS slice")
    ap.add_argument("--rounds", type=int, default=2, help="TPS slices per target")
    ap.add_argument("--settle", type=float, default=2.0)
    args = ap.parse_args()
    if args.quick:
        args.pools, args.duration, args.rounds = "200", 4.0, 1
    pools = [int(x) for x in args.pools.split(",") if x]
    targets = [t for t in args.targets.split(",") if t]
    for t in targets:
        if t not in TARGETS:
            ap.error(f"unknown target {t}: one of {', '.join(TARGETS)}")
    os.makedirs(args.out, exist_ok=True)
    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer,
                       max_connections=len(targets) * args.max_db_connections + 30)
    ten = Tenants(env, max(pools), targets, args.max_db_connections, args.clients_per_pool,
                  args.samples, args.pgcrew_set)
    rows, slices, loads = [], [], []
    t_start = time.monotonic()
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "args": vars(args)}
    try:
        ten.setup()
        meta.update({"commit": benchenv.binary_source(args.repo),
                     "versions": benchenv.versions(env)})
        for n in pools:
            t0 = time.monotonic()
            r, s = run_pools(ten, n, args, loads)
            rows += r
            slices += s
            meta[f"wall_clock_{n}_s"] = round(time.monotonic() - t0)
            for x in r:
                log(f"N={n} {x['target']:11} first {x['first_query_p50_ms']}/"
                    f"{x['first_query_p99_ms']} ms, later {x['later_query_p50_ms']}/"
                    f"{x['later_query_p99_ms']} ms, {x['tps']} TPS, PSS "
                    f"{x['pss_bytes_per_pool']} B/pool, RSS {x['rss_bytes_per_pool']} B/pool "
                    f"{x['errors'][:200]}")
        for t in targets:
            with open(os.path.join(args.out, f"{t}.ini"), "w") as f:
                f.write(ten.ini_text(t))
    finally:
        env.close()
        meta["wall_clock_s"] = round(time.monotonic() - t_start)
        meta["loadavg"] = loads
        meta["load_min"] = min((x for _, x in loads), default=None)
        meta["load_max"] = max((x for _, x in loads), default=None)
        meta["settings"] = (
            f"pool_mode = transaction, default_pool_size = 1, max_db_connections = "
            f"{args.max_db_connections} per target (PostgreSQL max_connections "
            f"{env.max_connections}: the targets run at once), auth_type = scram-sha-256 "
            f"(one verifier for all roles), plain TCP; {args.clients_per_pool} clients per "
            f"pool (fewer where the descriptors do not allow it: below); later logins timed on {args.samples} pools; TPS: {args.active} "
            f"transactions in flight on random pools, {args.rounds} x {args.duration} s "
            "per target")
        if rows:
            write(args.out, rows, slices, meta)
            log(f"done in {meta['wall_clock_s']} s: {args.out}/tenants.md")


if __name__ == "__main__":
    main()
