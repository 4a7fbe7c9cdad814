"""Rotating roles (bench/rotation; see bench/README.md): does a pooler give
memory back as many distinct roles pass through it one after another, the
way Vault's dynamic credentials make a role per lease?

N roles (r0 .. rN-1, one SCRAM verifier for all) log in to one database
through one pooler instance, each role once and in order, `--parallel`
logins in flight: connect, SCRAM, SELECT 1, close. With
default_pool_size = 1, max_db_connections bounded and server_idle_timeout
= 1 (pgcrew: also pool_idle_timeout = 1) a pool's server and then the
pool itself should go soon after its one client left. The targets run one
after another, each started fresh and alone on the machine.

Measured per target: memory (sum of VmRSS and of Pss over the pooler's
processes) after the first `--warm` roles once the pools have gone (the
baseline), every `--every` roles at once, and at the end once the pools
have gone again (the final sample); with each sample pgcrew's table gauges
(/metrics), the rows of SHOW POOLS and SHOW USERS, PostgreSQL backends of
the roles, and the login latency p50/p99 and rate of the chunk just run.
Growth = final - baseline, per role passed after the baseline.

usage: rotation.py --scratch DIR --out DIR --pgcrew BIN --repo DIR [options]
       rotation.py --report DIR      (redraw rotation.md from its CSV and JSON)"""

import argparse
import asyncio
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import benchenv  # noqa: E402
from benchenv import DB, HOST, PGBIN, USER, log  # noqa: E402
import pgwire  # noqa: E402

TARGETS = ("pgcrew-w1", "pgcrew-auto", "pgbouncer")
PREFIX = "r"                       # roles r0 .. rN-1 (bench/tenants uses u)
GAUGES = ("pgcrew_shared_pools_used", "pgcrew_shared_names_used",
          "pgcrew_ledger_entries", "pgcrew_supervisor_pool_entries")
LOGIN_TIMEOUT = 60                 # seconds: one login and its SELECT 1
FULL = {"roles": 100000, "every": 10000, "warm": 1000, "target_timeout": 1200}
QUICK = {"roles": 3000, "every": 1000, "warm": 500, "target_timeout": 300}
CONSOLE_TIMEOUT = 30               # seconds: one psql of the console


def ms(v):
    return None if v is None else round(v * 1000, 2)


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def is_pgcrew(target):
    return target.startswith("pgcrew-")


# -- environment -------------------------------------------------------------

class Rotation:
    """The bench Env plus N roles, their userlist and one ini per target."""

    def __init__(self, env, roles, targets, limit, parallel, pgcrew_set=()):
        self.env = env
        self.pgcrew_set = list(pgcrew_set)     # KEY=VALUE lines for pgcrew's inis only
        self.roles = roles
        self.targets = targets
        self.limit = limit
        self.parallel = parallel
        self.ports = {}
        self.metrics_ports = {}
        self.wedged = set()        # targets whose console timed out once: not asked again

    def setup(self):
        env = self.env
        env.setup(pgbench_init=False)
        t0 = time.monotonic()
        # As bench/tenants: bare roles in one DO block, then the one verifier
        # in one UPDATE of the catalog (CREATE ROLE ... PASSWORD costs about
        # 15 ms a role here).
        env.psql(f"DO $$ BEGIN FOR i IN 0..{self.roles - 1} LOOP "
                 f"EXECUTE format('CREATE ROLE {PREFIX}%s LOGIN', i); END LOOP; END $$")
        env.psql("SET allow_system_table_mods = on; UPDATE pg_authid SET rolpassword = "
                 f"'{env.verifier}' WHERE rolname ~ '^{PREFIX}[0-9]+$'")
        with open(os.path.join(env.pgdata, "pg_hba.conf"), "a") as f:
            f.write(f"host {DB} all 127.0.0.1/32 scram-sha-256\n")
        env.psql("SELECT pg_reload_conf()")
        log(f"{self.roles} roles in {time.monotonic() - t0:.1f} s")
        self.write_userlist()
        self.write_inis()
        benchenv.chown_service(env.scratch)

    def write_userlist(self):
        v = self.env.verifier
        with open(self.env.path("userlist.txt"), "w") as f:
            f.write(f'"{USER}" "{v}"\n')
            f.writelines(f'"{PREFIX}{i}" "{v}"\n' for i in range(self.roles))

    def write_inis(self):
        port = self.env.port
        for target in self.targets:
            self.ports[target] = benchenv.free_port(port)
            port = self.ports[target] + 1
            if is_pgcrew(target):
                self.metrics_ports[target] = benchenv.free_port(port)
                port = self.metrics_ports[target] + 1
            with open(self.ini(target), "w") as f:
                f.write(self.ini_text(target))

    def ini(self, target):
        return self.env.path(f"rotation-{target}.ini")

    def settings(self):
        s = benchenv.many_roles_settings(self.env, self.limit, self.parallel + 200)
        s["server_idle_timeout"] = 1
        return s

    def ini_text(self, target):
        """The same settings for every target; pgcrew's own keys only in
        pgcrew's inis (PgBouncer has no pool_idle_timeout)."""
        lines = ["; written by bench/rotation: the same settings for every target",
                 "[databases]", f"{DB} = host={HOST} port={self.env.pgport} dbname={DB}", "",
                 "[pgbouncer]", f"listen_port = {self.ports[target]}"]
        lines += [f"{k} = {v}" for k, v in self.settings().items()]
        if is_pgcrew(target):
            lines += [f"workers = {'auto' if target == 'pgcrew-auto' else 1}",
                      "pool_idle_timeout = 1",
                      f"metrics_listen = {HOST}:{self.metrics_ports[target]}"]
            lines += benchenv.pgcrew_set_lines(self.pgcrew_set)
        return "\n".join(lines) + "\n"

    def start(self, target, timeout):
        """The pooler started and accepting (PgBouncer 1.25.2 reads a
        100,000-line auth_file in about two minutes here)."""
        binary = self.env.pgbouncer_bin if target == "pgbouncer" else self.env.pgcrew_bin
        p = benchenv.Pooler(target, [binary, self.ini(target)], self.ports[target],
                            self.env.path(f"rotation-{target}.stderr"))
        p.start(timeout=timeout)
        return p

    # -- what the pooler and PostgreSQL hold ---------------------------------

    def console_rows(self, target, command):
        """Rows of one console command through psql, or None."""
        if target in self.wedged:
            return None
        envv = dict(os.environ, PGPASSWORD=self.env.password, PGSSLMODE="disable")
        try:
            out = subprocess.run([f"{PGBIN}/psql", "-h", HOST, "-p", str(self.ports[target]),
                                  "-U", USER, "-d", "pgbouncer", "-AtX", "-c", command],
                                 capture_output=True, text=True, env=envv,
                                 timeout=CONSOLE_TIMEOUT)
        except subprocess.TimeoutExpired:
            log(f"  {target}: {command} took over {CONSOLE_TIMEOUT} s: the console is "
                "not asked again")
            self.wedged.add(target)
            return None
        return len(out.stdout.splitlines()) if out.returncode == 0 else None

    def gauges(self, target):
        """pgcrew's table gauges from /metrics as {name: value}; {} when
        there is no metrics page or it does not answer."""
        if target not in self.metrics_ports:
            return {}
        url = f"http://{HOST}:{self.metrics_ports[target]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read().decode()
        except OSError:
            return {}
        found = {}
        for line in body.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[0] in GAUGES:
                found[parts[0]] = int(float(parts[1]))
        return found

    def backends(self):
        """PostgreSQL backends of the rotating roles, or None."""
        try:
            return int(self.env.psql("SELECT count(*) FROM pg_stat_activity WHERE "
                                     f"usename ~ '^{PREFIX}[0-9]+$'"))
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            return None

    def quiet(self, target):
        """True once the target holds no role's server (and pgcrew no pool)."""
        if self.backends() != 0:
            return False
        if not is_pgcrew(target):
            return True
        return self.gauges(target).get("pgcrew_shared_pools_used") == 0

    def names_used(self, target):
        return self.gauges(target).get("pgcrew_shared_names_used")

    def empty(self, target, floor):
        """True once pgcrew keeps no more name slots than `floor` (those of
        the console's own login) and no supervisor entry (the supervisor
        sweeps them every few seconds)."""
        g = self.gauges(target)
        names = g.get("pgcrew_shared_names_used")
        return (names is not None and names <= floor
                and g.get("pgcrew_supervisor_pool_entries") == 0)

    @staticmethod
    def wait(pred, bound):
        """Wait up to `bound` seconds for pred(): (seconds waited, reached)."""
        t0 = time.monotonic()
        while True:
            if pred():
                return round(time.monotonic() - t0, 1), True
            if time.monotonic() - t0 >= bound:
                return round(time.monotonic() - t0, 1), False
            time.sleep(0.5)


# -- logins ------------------------------------------------------------------

async def login(port, role, password):
    """Connect as role, SELECT 1, close: seconds from connect to the end of
    the query. Raises on any failure (and after LOGIN_TIMEOUT)."""
    c = pgwire.AsyncClient()
    t0 = time.perf_counter()
    try:
        await asyncio.wait_for(c.login(HOST, port, f"{PREFIX}{role}", password, DB),
                               LOGIN_TIMEOUT)
        await asyncio.wait_for(c.query(), LOGIN_TIMEOUT)
        return time.perf_counter() - t0
    finally:
        c.close()


def error_key(e):
    """An error's message with role names folded, so errors count by kind."""
    msg = (str(e) or type(e).__name__)[:160]
    return re.sub(rf"\b{PREFIX}[0-9]+\b", f"{PREFIX}N", msg)


class Chunk:
    """One run of consecutive roles: their latencies and errors, and why
    it stopped early (if it did)."""

    def __init__(self):
        self.lat = []
        self.errors = {}
        self.streak = 0            # failures in a row
        self.stopped = None

    def failed(self, e):
        k = error_key(e)
        self.errors[k] = self.errors.get(k, 0) + 1
        self.streak += 1


async def pass_roles(port, password, first, last, parallel, should_stop):
    """Roles first .. last-1 in order, `parallel` in flight. should_stop(chunk)
    returns a reason to stop taking new roles, or None."""
    chunk, nxt = Chunk(), [first]

    async def worker():
        while nxt[0] < last and chunk.stopped is None:
            chunk.stopped = should_stop(chunk)
            if chunk.stopped:
                break
            role, nxt[0] = nxt[0], nxt[0] + 1
            try:
                chunk.lat.append(await login(port, role, password))
                chunk.streak = 0
            except Exception as e:  # noqa: BLE001 - counted; the run goes on
                chunk.failed(e)

    await asyncio.gather(*(worker() for _ in range(parallel)))
    chunk.next = nxt[0]
    return chunk


# -- one target --------------------------------------------------------------

def memory_sample(rot, target, pooler, users):
    """What the pooler holds now: memory (read first), gauges, console rows,
    backends. SHOW USERS only when `users`: it lists every user of the
    auth_file (N + 2 rows), and building that many rows leaves tens of MB
    in the process that answered (pgcrew: one of the workers, a different
    one from one time to the next), which the next sample would count."""
    pids = pooler.pids()
    s = {"rss_kb": pooler.rss_kb(), "pss_kb": pooler.pss_kb(),
         "pss_kb_each": " ".join(str(benchenv.proc_pss_kb(p)) for p in pids),
         "processes": len(pids), "restarts": pooler.restarts(),
         "cpu_s": round(pooler.cpu_ticks() / benchenv.CLK_TCK, 1)}
    g = rot.gauges(target)
    for name in GAUGES:
        s[name.removeprefix("pgcrew_")] = g.get(name)
    s["pools_rows"] = rot.console_rows(target, "SHOW POOLS")
    s["users_rows"] = rot.console_rows(target, "SHOW USERS") if users else None
    s["pg_backends"] = rot.backends()
    return s


def chunk_fields(chunk, seconds):
    errs = sum(chunk.errors.values())
    return {"chunk_logins": len(chunk.lat), "chunk_p50_ms": ms(benchenv.pct(chunk.lat, 0.5)),
            "chunk_p99_ms": ms(benchenv.pct(chunk.lat, 0.99)),
            "logins_per_s": round(len(chunk.lat) / seconds, 1) if seconds > 0 else None,
            "chunk_errors": errs}


def boundaries(args):
    """Where samples are taken: after the warm-up, each multiple of
    --every after it, and N."""
    marks = [min(args.warm, args.roles)]
    marks += [b for b in range(args.every, args.roles, args.every) if b > marks[0]]
    if marks[-1] != args.roles:
        marks.append(args.roles)
    return marks


class TargetRun:
    """One target from start to stop: samples, errors, status."""

    def __init__(self, rot, target, args):
        self.rot, self.target, self.args = rot, target, args
        self.samples, self.errors = [], {}
        self.status = "ok"
        self.passed = 0
        self.pooler = None
        self.t0 = time.monotonic()
        self.deadline = self.t0 + args.target_timeout

    def should_stop(self, chunk):
        if time.monotonic() > self.deadline:
            return f"target timeout ({self.args.target_timeout} s)"
        if chunk.streak >= self.args.max_failed_in_row:
            return f"{chunk.streak} logins failed in a row"
        if self.pooler.proc.poll() is not None:
            return f"pooler exited ({self.pooler.proc.returncode})"
        return None

    def run_chunk(self, last):
        t0 = time.monotonic()
        chunk = asyncio.run(pass_roles(self.rot.ports[self.target], self.rot.env.password,
                                       self.passed, last, self.args.parallel,
                                       self.should_stop))
        seconds = time.monotonic() - t0
        self.passed = chunk.next
        for k, v in chunk.errors.items():
            self.errors[k] = self.errors.get(k, 0) + v
        if chunk.stopped:
            self.status = f"stopped after {self.passed} roles: {chunk.stopped}"
        return chunk, seconds

    def sample(self, phase, extra):
        s = {"target": self.target, "phase": phase, "roles_passed": self.passed,
             "elapsed_s": round(time.monotonic() - self.t0, 1), "load1": loadavg()}
        s.update(memory_sample(self.rot, self.target, self.pooler,
                               self.args.users_every_sample))
        s.update(extra)
        s["errors_total"] = sum(self.errors.values())
        self.samples.append(s)
        log(f"  {self.target:11} {phase:8} {self.passed:7} roles: RSS {s['rss_kb']} kB, "
            f"PSS {s['pss_kb']} kB, pools used {s['shared_pools_used']}, SHOW POOLS "
            f"{s['pools_rows']} rows, backends {s['pg_backends']}, "
            f"p50/p99 {s.get('chunk_p50_ms')}/{s.get('chunk_p99_ms')} ms, "
            f"{s.get('logins_per_s')} logins/s, errors {s['errors_total']}")

    def settled_sample(self, phase, pred, bound, extra):
        waited, reached = self.rot.wait(pred, bound)
        self.sample(phase, dict(extra, settle_s=waited, settled=reached))

    def run(self):
        log(f"{self.target}: {self.args.roles} roles, {self.args.parallel} logins in flight")
        self.pooler = self.rot.start(self.target, self.args.start_timeout)
        marks = boundaries(self.args)
        quiet = lambda: self.rot.quiet(self.target)  # noqa: E731
        self.sample("start", {"start_s": round(time.monotonic() - self.t0, 1)})
        floor = self.rot.names_used(self.target) or 0     # the console's login
        chunk, sec = self.run_chunk(marks[0])
        self.settled_sample("baseline", quiet, self.args.settle, chunk_fields(chunk, sec))
        for mark in marks[1:]:
            if self.status != "ok":
                break
            chunk, sec = self.run_chunk(mark)
            self.sample("chunk", chunk_fields(chunk, sec))
        self.settled_sample("final", quiet, self.args.final_settle, {})
        if is_pgcrew(self.target) and self.args.late > 0:
            # Not part of the growth: whether what is left goes later.
            self.settled_sample("late", lambda: self.rot.empty(self.target, floor),
                                self.args.late, {})
        # SHOW USERS once, last (memory_sample says why): its rows, then
        # memory after it, not in the growth.
        rows = self.rot.console_rows(self.target, "SHOW USERS")
        time.sleep(0.5)
        self.sample("show-users", {"users_rows": rows})

    def stop(self):
        if self.pooler is not None:
            for problem in self.pooler.stop():
                log(problem)
                self.status += f"; {problem}"


def run_target(rot, target, args):
    """One target; a failure is recorded, never raised."""
    tr = TargetRun(rot, target, args)
    try:
        tr.run()
    except Exception as e:  # noqa: BLE001 - reported, then the next target runs
        tr.status = f"failed after {tr.passed} roles: {type(e).__name__}: {e}"[:400]
        log(f"{target}: {tr.status}")
    finally:
        tr.stop()
    tr.wall_s = round(time.monotonic() - tr.t0)
    return tr


# -- report ------------------------------------------------------------------

def summary(tr):
    """One summary row of a target's run."""
    r = {"target": tr.target, "roles_passed": tr.passed, "status": tr.status,
         "wall_s": tr.wall_s, "errors": sum(tr.errors.values())}
    r.update(sample_summary(tr.samples, tr.passed))
    return r


def sample_summary(samples, passed):
    """The summary's figures that come from a target's samples: rate,
    memory at start, baseline, final and peak, growth, the state at the end."""
    by = {s["phase"]: s for s in samples}
    base, final = by.get("baseline"), by.get("final")
    rates = [s["logins_per_s"] for s in samples
             if s["phase"] == "chunk" and s.get("logins_per_s")]
    r = {"logins_per_s": round(sum(rates) / len(rates), 1) if rates else None}
    if not (base and final):
        return r
    after = passed - base["roles_passed"]
    for k in ("rss", "pss"):
        growth = final[f"{k}_kb"] - base[f"{k}_kb"]
        r[f"{k}_start_kb"] = by.get("start", {}).get(f"{k}_kb")
        r[f"{k}_base_kb"], r[f"{k}_final_kb"] = base[f"{k}_kb"], final[f"{k}_kb"]
        r[f"{k}_peak_kb"] = max(s[f"{k}_kb"] for s in samples if s["phase"] != "show-users")
        r[f"{k}_growth_kb"] = growth
        r[f"{k}_bytes_per_role"] = round(growth * 1024 / after, 1) if after else None
        r[f"{k}_kb_per_1000_roles"] = round(growth * 1000 / after, 1) if after else None
    r.update(second_half(samples))
    for k in ("shared_pools_used", "shared_names_used", "ledger_entries",
              "supervisor_pool_entries", "pools_rows", "pg_backends",
              "settled", "settle_s", "restarts"):
        r[f"final_{k}"] = final.get(k)
    late = by.get("late", {})
    for k in ("rss_kb", "pss_kb", "shared_names_used", "supervisor_pool_entries", "settle_s"):
        r[f"late_{k}"] = late.get(k)
    users = by.get("show-users", {})
    r["final_users_rows"] = users.get("users_rows", final.get("users_rows"))
    r["start_s"] = by.get("start", {}).get("start_s")
    for k in ("rss", "pss"):
        r[f"{k}_after_show_users_kb"] = users.get(f"{k}_kb")
    return r


def second_half(samples):
    """kB per 1,000 roles between the chunk sample nearest half-way and the
    last one (both taken at once, mid-run): near 0 when memory has levelled
    off, the whole growth's rate when it grows with every role."""
    chunks = [s for s in samples if s["phase"] == "chunk"]
    if len(chunks) < 2:
        return {}
    last = chunks[-1]
    mid = min(chunks[:-1], key=lambda s: abs(s["roles_passed"] - last["roles_passed"] / 2))
    roles = last["roles_passed"] - mid["roles_passed"]
    return {f"{k}_kb_per_1000_roles_2nd_half": round((last[f"{k}_kb"] - mid[f"{k}_kb"])
                                                     * 1000 / roles, 1)
            for k in ("rss", "pss")}


SAMPLE_COLS = [("phase", "phase"), ("roles", "roles_passed"), ("RSS kB", "rss_kb"),
               ("PSS kB", "pss_kb"), ("pools used", "shared_pools_used"),
               ("names used", "shared_names_used"), ("ledger", "ledger_entries"),
               ("sup. pool entries", "supervisor_pool_entries"),
               ("SHOW POOLS rows", "pools_rows"), ("SHOW USERS rows", "users_rows"),
               ("PG backends", "pg_backends"), ("p50 ms", "chunk_p50_ms"),
               ("p99 ms", "chunk_p99_ms"), ("logins/s", "logins_per_s"),
               ("errors", "chunk_errors"), ("settle s", "settle_s")]


def cell(v):
    return "n/a" if v is None or v == "" else str(v)


def summary_table(sums):
    out = ["| target | roles | start RSS / PSS kB | baseline RSS / PSS kB | final RSS / PSS kB "
           "| peak RSS / PSS kB | growth RSS / PSS kB | growth per 1,000 roles RSS / PSS kB "
           "| bytes per role RSS / PSS | 2nd half, per 1,000 roles RSS / PSS kB "
           "| logins/s | errors | status |",
           "|---|---:|---|---|---|---|---|---|---|---|---:|---:|---|"]
    for r in sums:
        pair = lambda a, b: f"{cell(r.get(a))} / {cell(r.get(b))}"  # noqa: E731
        out.append(f"| {r['target']} | {r['roles_passed']} "
                   f"| {pair('rss_start_kb', 'pss_start_kb')} "
                   f"| {pair('rss_base_kb', 'pss_base_kb')} "
                   f"| {pair('rss_final_kb', 'pss_final_kb')} "
                   f"| {pair('rss_peak_kb', 'pss_peak_kb')} "
                   f"| {pair('rss_growth_kb', 'pss_growth_kb')} "
                   f"| {pair('rss_kb_per_1000_roles', 'pss_kb_per_1000_roles')} "
                   f"| {pair('rss_bytes_per_role', 'pss_bytes_per_role')} "
                   f"| {pair('rss_kb_per_1000_roles_2nd_half', 'pss_kb_per_1000_roles_2nd_half')} "
                   f"| {cell(r.get('logins_per_s'))} | {r['errors']} | {r['status']} |")
    return out


def end_table(sums):
    out = ["", "At the end, once the pools had gone (or the bounded wait ran out):", "",
           "| target | pools used | names used | ledger entries | supervisor pool entries "
           "| SHOW POOLS rows | SHOW USERS rows | PG backends | settled (s) | worker restarts "
           "| late: names / sup. entries, RSS / PSS kB (s) | RSS / PSS kB after SHOW USERS "
           "| start s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|---|---:|"]
    for r in sums:
        f = lambda k: cell(r.get(f"final_{k}"))  # noqa: E731
        out.append(f"| {r['target']} | {f('shared_pools_used')} | {f('shared_names_used')} "
                   f"| {f('ledger_entries')} | {f('supervisor_pool_entries')} "
                   f"| {f('pools_rows')} | {f('users_rows')} | {f('pg_backends')} "
                   f"| {f('settled')} ({f('settle_s')}) | {f('restarts')} "
                   f"| {late_cell(r)} | {cell(r.get('rss_after_show_users_kb'))} / "
                   f"{cell(r.get('pss_after_show_users_kb'))} | {cell(r.get('start_s'))} |")
    return out


def late_cell(r):
    if r.get("late_rss_kb") is None:
        return "n/a"
    g = lambda k: cell(r.get(f"late_{k}"))  # noqa: E731
    return (f"{g('shared_names_used')} / {g('supervisor_pool_entries')}, "
            f"{g('rss_kb')} / {g('pss_kb')} ({g('settle_s')})")


def sample_table(target, samples):
    out = [f"## {target}\n", "| " + " | ".join(c for c, _ in SAMPLE_COLS) + " |",
           "|---|" + "---:|" * (len(SAMPLE_COLS) - 1)]
    for s in samples:
        if s["target"] == target:
            out.append("| " + " | ".join(cell(s.get(k)) for _, k in SAMPLE_COLS) + " |")
    return out + [""]


def markdown(sums, samples, errors, meta):
    v = meta.get("versions", {})
    out = ["# pgcrew bench: rotating roles\n",
           f"* {meta['started']}, commit `{meta.get('commit', '?')}`; {v.get('pgcrew')}; "
           f"{v.get('pgbouncer')}; {v.get('postgres')}; {v.get('cpus')} CPUs ({v.get('cpu')}); "
           f"kernel {v.get('kernel')}, sched_autogroup {v.get('sched_autogroup', '?')}",
           f"* load average (1 min) during the run: {meta.get('load_min')}-"
           f"{meta.get('load_max')}; wall clock {meta.get('wall_clock_s')} s",
           f"* {meta['settings']}", "",
           "Growth = final - baseline; per role = growth / roles passed after the "
           "baseline. Baseline and final are taken once the pooler held no pool of a "
           "role (pgcrew: `pgcrew_shared_pools_used` 0) and PostgreSQL no backend of one "
           "(PgBouncer: the backends alone; it keeps its pools); chunk samples at once. "
           "pgcrew's 'late' sample (not in the growth) follows the final one once its "
           "name slots and supervisor entries have gone too, or after a bounded wait. "
           "SHOW USERS (every user of the auth_file) runs once, last ('show-users' "
           "sample): building its rows leaves tens of MB in the process that answered, "
           "which later samples would count. Memory is read before the console is "
           "asked; 'pss_kb_each' in rotation.csv is per process (pgcrew: supervisor "
           "first). '2nd half': the rate between the chunk samples at N/2 and N.", ""]
    out += summary_table(sums) + end_table(sums) + [""]
    for r in sums:
        out += sample_table(r["target"], samples)
        for msg, n in sorted(errors.get(r["target"], {}).items(), key=lambda x: -x[1]):
            out.append(f"* error, {n} x: {msg}")
        out.append("")
    return "\n".join(out)


def write_csv(path, rows):
    fields = []
    for r in rows:
        fields += [k for k in r if k not in fields]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fields)
        w.writeheader()
        w.writerows(rows)


def write(out, runs, meta):
    samples = [s for tr in runs for s in tr.samples]
    sums = [summary(tr) for tr in runs]
    errors = {tr.target: tr.errors for tr in runs}
    write_csv(os.path.join(out, "rotation.csv"), samples)
    write_csv(os.path.join(out, "summary.csv"), sums)
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump(dict(meta, summary=sums, errors=errors), f, indent=2)
    with open(os.path.join(out, "rotation.md"), "w") as f:
        f.write(markdown(sums, samples, errors, meta))


def redraw(out):
    """rotation.md and summary.csv again from rotation.csv and meta.json
    (the summary's figures recomputed from the samples)."""
    samples = benchenv.read_csv(os.path.join(out, "rotation.csv"))
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    sums = []
    for old in meta["summary"]:
        mine = [s for s in samples if s["target"] == old["target"]]
        keep = {k: old[k] for k in ("target", "roles_passed", "status", "wall_s", "errors")}
        sums.append(dict(keep, **sample_summary(mine, old["roles_passed"])))
    write_csv(os.path.join(out, "summary.csv"), sums)
    with open(os.path.join(out, "rotation.md"), "w") as f:
        f.write(markdown(sums, samples, meta["errors"], meta))


# -- main --------------------------------------------------------------------

def parse_args():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--pgcrew", required=True)
    ap.add_argument("--pgbouncer", default=benchenv.PGBOUNCER)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--roles", type=int, help="N: roles passed, in order (100000)")
    ap.add_argument("--every", type=int, help="roles between samples (10000)")
    ap.add_argument("--warm", type=int, help="roles before the baseline (1000)")
    ap.add_argument("--parallel", type=int, default=16, help="logins in flight")
    ap.add_argument("--max-db-connections", type=int, default=40)
    ap.add_argument("--settle", type=float, default=30,
                    help="bound on the wait for the pools to go before the baseline (s)")
    ap.add_argument("--final-settle", type=float, default=60,
                    help="the same before the final sample (s)")
    ap.add_argument("--late", type=float, default=15,
                    help="pgcrew: after the final sample, wait up to this for its name "
                         "slots and supervisor entries to go too, then a 'late' sample "
                         "(0: none)")
    ap.add_argument("--start-timeout", type=float, default=300,
                    help="seconds a pooler may take to accept after its start")
    ap.add_argument("--users-every-sample", action="store_true",
                    help="SHOW USERS in every sample, not only in the last one (it "
                         "inflates the memory of the samples after it)")
    ap.add_argument("--target-timeout", type=float,
                    help="a target still passing roles after this many seconds is stopped "
                         "(1200)")
    ap.add_argument("--max-failed-in-row", type=int, default=1000,
                    help="a target whose logins fail this many times in a row is stopped")
    benchenv.add_pgcrew_set(ap)
    ap.add_argument("--quick", action="store_true",
                    help="--roles 3000 --every 1000 --warm 500 --target-timeout 300 (options "
                         "given win)")
    args = ap.parse_args()
    for k, v in (QUICK if args.quick else FULL).items():
        if getattr(args, k) is None:        # an option given wins over --quick
            setattr(args, k, v)
    args.targets = [t for t in args.targets.split(",") if t]
    for t in args.targets:
        if t not in TARGETS:
            ap.error(f"unknown target {t}: one of {', '.join(TARGETS)}")
    if not 0 < args.warm <= args.roles or args.every < 1 or args.parallel < 1:
        ap.error("need 0 < --warm <= --roles, --every >= 1, --parallel >= 1")
    return args


def settings_text(args, env):
    return (f"{args.roles} roles ({PREFIX}0 ..), each once, in order, {args.parallel} logins "
            f"in flight (connect, SCRAM, SELECT 1, close); pool_mode = transaction, "
            f"default_pool_size = 1, max_db_connections = {args.max_db_connections}, "
            f"server_idle_timeout = 1, pgcrew also pool_idle_timeout = 1; auth_type = "
            f"scram-sha-256 (one verifier for all roles), plain TCP; PostgreSQL "
            f"max_connections {env.max_connections}; targets one after another, each "
            f"started fresh; baseline after {args.warm} roles, a sample every "
            f"{args.every} roles")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--report":
        redraw(sys.argv[2])
        return
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    benchenv.sigterm_exits()
    env = benchenv.Env(args.scratch, args.pgcrew, args.pgbouncer,
                       max_connections=args.max_db_connections + 40)
    rot = Rotation(env, args.roles, args.targets, args.max_db_connections, args.parallel,
                   args.pgcrew_set)
    meta = {"started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "args": {k: v for k, v in vars(args).items()}}
    runs, t_start = [], time.monotonic()
    try:
        rot.setup()
        meta.update({"commit": benchenv.binary_source(args.repo),
                     "versions": benchenv.versions(env)})
        for t in args.targets:
            shutil.copy(rot.ini(t), os.path.join(args.out, f"{t}.ini"))
        for t in args.targets:
            runs.append(run_target(rot, t, args))
    finally:
        env.close()
        meta["wall_clock_s"] = round(time.monotonic() - t_start)
        loads = [s["load1"] for tr in runs for s in tr.samples]
        meta["load_min"] = min(loads, default=None)
        meta["load_max"] = max(loads, default=None)
        meta["settings"] = settings_text(args, env)
        if runs:
            write(args.out, runs, meta)
            for r in (summary(tr) for tr in runs):
                log(f"{r['target']:11} {r['roles_passed']} roles: RSS {r.get('rss_base_kb')} -> "
                    f"{r.get('rss_final_kb')} kB, PSS {r.get('pss_base_kb')} -> "
                    f"{r.get('pss_final_kb')} kB, errors {r['errors']}, {r['status']}")
            log(f"done in {meta['wall_clock_s']} s: {args.out}/rotation.md")


if __name__ == "__main__":
    main()
