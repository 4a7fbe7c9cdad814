"""pgcrew with workers = 4 on a machine whose CPUs are taken: 2 busy loops per
CPU beside it for the whole run, as on a distribution's build machine, and
two pgbench runs (two pools of one database) for STARVATION_SECONDS
(default 60). Every limit holds throughout (max_client_conn, the pool size,
max_db_connections: sampled in pg_stat_activity, counting the backends
whose server pgcrew still holds, SHOW POOLS, SHOW SERVERS and SHOW LISTS), extra clients are refused with PgBouncer's text, no
client is lost (pgbench: no aborted client, no failed transaction), SHOW
STATS counts exactly pgbench's transactions, and client_idle_timeout and
query_timeout fire no earlier than set (measured by clients beside the
load)."""

import os
import re
import select
import subprocess
import sys
import threading
import time

import psycopg
import pytest

import util
from bench import parse_summary, pgbench_command, pgbench_env
from pooler import show_rows

# serial: its busy loops take every CPU, and it times the timeouts.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]    # workers = 4

SECONDS = int(os.environ.get("STARVATION_SECONDS", "60"))
CLIENTS = 10                 # per pgbench run
USERS = ("trust_user", "plain_user")
POOL_SIZE = 3
MAX_DB = 5                   # below 2 x POOL_SIZE: the two pools compete
MAX_CLIENTS = 2 * CLIENTS + 6
TIMEOUT = 2                  # client_idle_timeout, query_timeout (s) of the probes

# One busy loop: pure CPU; it ends by itself once the test's process is
# gone, even if the finally below never runs.
SPIN = ("import os\n"
        "parent = os.getppid()\n"
        "while os.getppid() == parent:\n"
        "    for _ in range(200000):\n"
        "        pass\n")


def busy_loops(n):
    return [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(n)]


def end_all(procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
    for proc in procs:
        proc.wait(10)


class Sampler:
    """Samples the counts that limits bound, in PostgreSQL and in the
    console, until stopped; keeps the highest of each and every violation."""

    def __init__(self, p, pg):
        self.p, self.pg = p, pg
        self.peak = {}
        self.bad = []
        self.samples = 0
        self.errors = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run)

    def note(self, what, value, limit):
        self.peak[what] = max(self.peak.get(what, 0), value)
        if value > limit:
            self.bad.append(f"{what} = {value} > {limit}")

    def one(self, pgconn, adm):
        # A backend whose server pgcrew has closed counts no more (it may
        # take a while to exit beside the busy loops): as in PgBouncer, a
        # closed server's slot opens the next server at once.
        rows = pgconn.execute("SELECT usename, client_port FROM pg_stat_activity WHERE"
                              " backend_type = 'client backend' AND datname = 'testdb'").fetchall()
        open_ports = self.pg.open_client_ports()
        backends = {}
        for user, port in rows:
            if port in open_ports:
                backends[user] = backends.get(user, 0) + 1
        self.peak["backends of testdb, exiting ones too"] = max(
            self.peak.get("backends of testdb, exiting ones too", 0), len(rows))
        for user in USERS:
            self.note(f"backends of {user}", backends.get(user, 0), POOL_SIZE)
        self.note("backends of testdb", sum(backends.values()), MAX_DB)

        pools = [r for r in show_rows(adm, "POOLS") if r["database"] == "testdb"]
        servers = {r["user"]: sum(r[k] for k in r if k.startswith("sv_")) for r in pools}
        for user in USERS:
            self.note(f"SHOW POOLS servers of {user}", servers.get(user, 0), POOL_SIZE)
        self.note("SHOW POOLS servers of testdb", sum(servers.values()), MAX_DB)

        listed = [r for r in show_rows(adm, "SERVERS") if r["database"] == "testdb"]
        for user in USERS:
            self.note(f"SHOW SERVERS of {user}", sum(r["user"] == user for r in listed), POOL_SIZE)
        self.note("SHOW SERVERS of testdb", len(listed), MAX_DB)

        self.note("SHOW LISTS used_clients", used_clients(adm), MAX_CLIENTS)
        self.samples += 1

    def run(self):
        try:
            with self.pg.connect() as pgconn, \
                    psycopg.connect(autocommit=True, **self.p.conninfo("pgbouncer")) as adm:
                while not self.stop.wait(0.2):
                    self.one(pgconn, adm)
        except Exception as exc:  # collected and asserted by the test
            self.errors.append(repr(exc))


def used_clients(adm):
    return {r["list"]: r["items"] for r in show_rows(adm, "LISTS")}["used_clients"]


def clients_of_testdb(adm):
    return sum(r[k] for r in show_rows(adm, "POOLS") if r["database"] == "testdb"
               for k in r if k.startswith("cl_"))


def fill_to_the_limit(p, adm):
    """Clients until the pooler refuses one: the refusal's text, and the
    clients counted at that moment (SHOW LISTS on adm, a console connection
    opened before)."""
    held, refusal = [], None
    try:
        while refusal is None and len(held) <= MAX_CLIENTS:
            try:
                held.append(psycopg.connect(autocommit=True, **p.conninfo(connect_timeout=30)))
            except psycopg.OperationalError as exc:
                refusal = str(exc)
        return refusal, used_clients(adm)
    finally:
        for conn in held:
            conn.close()


def idle_probe(p):
    """A client that stays idle after a query: seconds from sending it to
    the pooler closing the client (client_idle_timeout)."""
    with psycopg.connect(autocommit=True, **p.conninfo("otherdb", "md5_user",
                                                       connect_timeout=30)) as conn:
        sent = time.monotonic()
        conn.execute("SELECT 1")
        ready, _, _ = select.select([conn.fileno()], [], [], 60)
        closed = time.monotonic()
        assert ready, "client_idle_timeout never fired"
        with pytest.raises(psycopg.OperationalError, match="client_idle_timeout"):
            conn.execute("SELECT 1")
        return closed - sent


def query_probe(p):
    """A query longer than query_timeout: seconds from sending it to the
    pooler's error."""
    with psycopg.connect(autocommit=True, **p.conninfo("otherdb", "scram_user",
                                                       connect_timeout=30)) as conn:
        sent = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="query timeout"):
            conn.execute("SELECT pg_sleep(60)")
        return time.monotonic() - sent


def probes(p, stop, measured, errors):
    try:
        while not stop.is_set():
            measured["client_idle_timeout"].append(idle_probe(p))
            measured["query_timeout"].append(query_probe(p))
    except BaseException as exc:  # collected and asserted by the test
        errors.append(repr(exc))


def total_xacts(p):
    return sum(r["total_xact_count"] for r in p.show("STATS") if r["database"] == "testdb")


@pytest.mark.timeout(SECONDS + 180)
def test_limits_and_timeouts_hold_under_cpu_starvation(pgbench_pg15, make_pooler):
    pg = pgbench_pg15
    loops = busy_loops(2 * len(os.sched_getaffinity(0)))
    benches, sampler, stop = [], None, threading.Event()
    try:
        p = make_pooler(pg, settings={
            "workers": 4, "pool_mode": "transaction", "default_pool_size": POOL_SIZE,
            "max_db_connections": MAX_DB, "max_client_conn": MAX_CLIENTS,
            "query_wait_timeout": 120},
            users={"md5_user": f"client_idle_timeout={TIMEOUT}",
                   "scram_user": f"query_timeout={TIMEOUT}"})
        sampler = Sampler(p, pg)
        sampler.thread.start()
        before = total_xacts(p)
        benches = [subprocess.Popen(pgbench_command(p, CLIENTS, SECONDS, user=u),
                                    env=pgbench_env(u), stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True) for u in USERS]
        adm = p.admin()
        util.wait_until(lambda: clients_of_testdb(adm) == 2 * CLIENTS, 60,
                        what="pgbench's clients in")
        started = time.monotonic()

        # max_client_conn: the clients beyond it are refused, with
        # PgBouncer's text, when exactly that many are in.
        refusal, at_refusal = fill_to_the_limit(p, adm)
        assert refusal and "no more connections allowed (max_client_conn)" in refusal, refusal
        assert at_refusal == MAX_CLIENTS, at_refusal
        util.wait_until(lambda: used_clients(adm) <= 2 * CLIENTS + 2, 30,
                        what="the extra clients gone")
        adm.close()

        measured = {"client_idle_timeout": [], "query_timeout": []}
        probe_errors = []
        prober = threading.Thread(target=probes, args=(p, stop, measured, probe_errors))
        prober.start()
        outputs = [b.communicate(timeout=SECONDS + 120)[0] for b in benches]
        stop.set()
        prober.join(120)
        sampler.stop.set()
        sampler.thread.join(60)
    finally:
        stop.set()
        if sampler:
            sampler.stop.set()
        end_all(benches)
        end_all(loops)
    elapsed = time.monotonic() - started

    # No client lost: every pgbench client ran to the end, nothing failed,
    # and the pooler closed none of them.
    summaries = [parse_summary(out) for out in outputs]
    for b, out, s in zip(benches, outputs, summaries):
        assert b.returncode == 0, out[-3000:]
        assert "aborted" not in out, out[-3000:]
        assert s["failed"] in (0, None) and s["processed"] and s["processed"] > 0, out[-3000:]
    processed = sum(s["processed"] for s in summaries)
    errors = re.findall(r"C-\d+: testdb/\S+ pooler error: (.*)", p.log_text())
    refused = [e for e in errors if e == "no more connections allowed (max_client_conn)"]
    assert len(refused) == 1 and len(errors) == 1, errors[:10]      # only the extra client

    # SHOW STATS counts pgbench's transactions: those it finished (at the
    # end of -T it lets the ones under way finish), plus the two queries
    # each run makes first (the scale, the partitioning of pgbench_accounts).
    expected = processed + 2 * len(USERS)
    try:
        util.wait_until(lambda: total_xacts(p) - before >= expected, 10,
                        what="SHOW STATS to count pgbench's transactions")
    except AssertionError:
        pass                    # asserted below, with the counts
    counted = total_xacts(p) - before

    # The limits held at every sample.
    assert not sampler.errors, sampler.errors
    assert sampler.samples >= 20, f"only {sampler.samples} samples"
    assert not sampler.bad, sampler.bad[:20]

    # The timeouts fired, never before their time.
    assert not probe_errors, probe_errors
    for name, values in measured.items():
        assert len(values) >= 3, (name, values)
        assert min(values) >= TIMEOUT, f"{name} fired after {min(values):.3f} s (set: {TIMEOUT} s)"
    p.assert_alive()

    print(f"starvation: {len(loops)} busy loops, {elapsed:.0f} s, pgbench {processed} "
          f"transactions ({[s['tps'] for s in summaries]} tps), SHOW STATS {counted}; "
          f"{sampler.samples} samples, peaks {sampler.peak}; client_idle_timeout fired after "
          f"{min(measured['client_idle_timeout']):.2f}-{max(measured['client_idle_timeout']):.2f} s, "
          f"query_timeout after {min(measured['query_timeout']):.2f}-"
          f"{max(measured['query_timeout']):.2f} s (set {TIMEOUT} s)")
    assert counted == expected, (counted, expected, summaries)
