"""Several workers behave as one pooler: pool limits hold for the instance,
a waiting client gets a server another worker has idle, cancels reach the
worker that owns the query, a killed worker costs only its own clients, and
a RELOAD is applied by every worker or by none."""

import os
import re
import signal
import subprocess
import threading
import time

import psycopg
import pytest

import util
from bench import pgbench_command, pgbench_env, parse_summary
from pg_cluster import password
from test_limits import run_concurrently, sample_max
from test_pgcrew_only import children

pytestmark = pytest.mark.pgcrew_only

WORKERS = 4


def worker_of(conn):
    """The worker a client landed on: pgcrew puts it in the cancel key's pid."""
    return (conn.info.backend_pid >> 24) & 0x7F


def connect_on_worker(p, want, other_than=None, tries=200, **kw):
    """Reconnect until the kernel hands the connection to the wanted worker
    (want=None: any worker but other_than)."""
    for _ in range(tries):
        conn = p.connect(**kw)
        w = worker_of(conn)
        if (want is None and w != other_than) or w == want:
            return conn
        conn.close()
    pytest.fail(f"no connection landed on worker {want} in {tries} tries")


def active_sleepers(pg):
    """Backends running pg_sleep right now."""
    with pg.connect() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                            " AND query LIKE 'SELECT pg_sleep%'").fetchone()[0]


def run_pgbench_sampling(p, pg, clients, seconds, sample):
    """pgbench in the background while sample() is polled; returns
    (returncode, output, peak of sample())."""
    proc = subprocess.Popen(pgbench_command(p, clients, seconds),
                            env=pgbench_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    peak = 0
    deadline = time.monotonic() + seconds + 30
    while proc.poll() is None:
        assert time.monotonic() < deadline, "pgbench did not finish"
        peak = max(peak, sample())
        time.sleep(0.1)
    output = proc.stdout.read()
    proc.stdout.close()
    return proc.returncode, output, peak


def test_pool_size_is_instance_wide_under_pgbench(pgbench_pg15, make_pooler):
    pg = pgbench_pg15
    p = make_pooler(pg, settings={"workers": WORKERS, "pool_mode": "transaction",
                                  "default_pool_size": 5, "max_client_conn": 300})
    util.wait_until(lambda: len(children(p.pid)) == WORKERS, 10, what="workers")
    rc, output, peak = run_pgbench_sampling(
        p, pg, 120, 5, lambda: pg.server_connections("testdb", "trust_user"))
    summary = parse_summary(output)
    assert rc == 0, output
    assert summary["failed"] == 0, output
    assert summary["processed"] > 100, output
    assert 1 <= peak <= 5, f"{peak} server connections for a pool of 5"


def test_db_and_user_limits_are_instance_wide(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 5, "max_db_connections": 3})
    jobs = [("testdb", "trust_user")] * 6 + [("testdb", "scram_user")] * 6
    threads, errors = run_concurrently(p, jobs, queries=2, sleep=0.2)
    peak = sample_max(threads, lambda: pg15.open_server_connections("testdb"))
    assert not errors, errors
    assert 1 <= peak <= 3, peak
    p.stop()
    util.wait_until(lambda: pg15.server_connections() == 0, 10, what="backends to exit")

    q = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 5, "max_user_connections": 3})
    jobs = [("testdb", "trust_user")] * 6 + [("otherdb", "trust_user")] * 6
    threads, errors = run_concurrently(q, jobs, queries=2, sleep=0.2)
    peak = sample_max(threads, lambda: pg15.open_server_connections(user="trust_user"))
    assert not errors, errors
    assert 1 <= peak <= 3, peak


def test_reserve_pool_is_instance_wide(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 2, "reserve_pool_size": 1,
                                    "reserve_pool_timeout": 0.3})
    threads, errors = run_concurrently(p, [("testdb", "trust_user")] * 10, queries=3, sleep=0.4)
    peak = sample_max(threads, lambda: pg15.open_server_connections("testdb", "trust_user"))
    assert not errors, errors
    assert peak == 3, f"pool 2 + reserve 1, saw {peak} servers"


def test_min_pool_size_is_instance_wide(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 5},
                    databases={"testdb": pg15.dsn("testdb") + " min_pool_size=3"})
    conns = [p.connect() for _ in range(12)]
    try:
        assert len({worker_of(c) for c in conns}) > 1, "all clients on one worker"
        util.wait_until(lambda: pg15.server_connections("testdb", "trust_user") >= 3, 5,
                        what="min_pool_size servers")
        time.sleep(1)  # more than one janitor round in every worker
        assert pg15.server_connections("testdb", "trust_user") == 3
    finally:
        for c in conns:
            c.close()


def test_waiting_client_gets_idle_server_of_other_worker(pg15, make_pooler):
    """pool_size=1: the one server moves between workers as their clients
    take turns, socket and state: the same backend serves every query (no
    new PostgreSQL process per move), and nobody waits for
    query_wait_timeout."""
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 1, "query_wait_timeout": 10})
    a = connect_on_worker(p, 0)
    b = connect_on_worker(p, None, other_than=0)
    waits = []
    pids = set()
    try:
        for i in range(10):
            for conn in (a, b):
                started = time.monotonic()
                # Literal SQL: psycopg would prepare a repeated
                # parametrised query (test_handover.py covers that).
                pid, n = conn.execute(f"SELECT pg_backend_pid(), {i}").fetchone()
                assert n == i
                waits.append(time.monotonic() - started)
                pids.add(pid)
        assert pg15.server_connections("testdb", "trust_user") <= 1
    finally:
        a.close()
        b.close()
    print(f"hand-over between workers: max {max(waits) * 1000:.1f} ms, "
          f"median {sorted(waits)[len(waits) // 2] * 1000:.1f} ms")
    assert len(pids) == 1, f"{len(pids)} backends served 20 queries on one moving server"
    assert max(waits) < 2.0, waits
    assert "released to another worker" not in p.log_text()


def test_waiting_client_gets_idle_server_at_once(pg15, make_pooler):
    """pool_size=2 on 2 workers, one server each: while worker 1's server is
    held in a transaction, a second client of worker 1 gets worker 0's idle
    server at once (within a hand-over, as from one PgBouncer's idle list),
    the same backend, not after an idle delay or a new login."""
    p = make_pooler(pg15, settings={"workers": 2, "pool_mode": "transaction",
                                    "default_pool_size": 2, "query_wait_timeout": 10})
    a = connect_on_worker(p, 0)
    b1 = connect_on_worker(p, 1)
    b2 = connect_on_worker(p, 1)
    try:
        assert a.execute("SELECT 1").fetchone() == (1,)
        assert b1.execute("SELECT 1").fetchone() == (1,)
        b1.execute("BEGIN")
        assert b1.execute("SELECT 2").fetchone() == (2,)        # holds worker 1's server
        a_pid = a.execute("SELECT pg_backend_pid()").fetchone()[0]   # worker 0's: idle from now
        started = time.monotonic()
        b2_pid = b2.execute("SELECT pg_backend_pid()").fetchone()[0]
        waited = time.monotonic() - started
        b1.execute("COMMIT")
        assert pg15.server_connections("testdb", "trust_user") <= 2
    finally:
        for conn in (a, b1, b2):
            conn.close()
    print(f"hand-over to a waiting client: {waited * 1000:.1f} ms")
    assert b2_pid == a_pid
    assert waited < 0.15, waited


# pgcrew's REUSE_SLACK_USEC (src/session/pool.c), and a spacing past it.
REUSE_SLACK = 0.1
SPACING = 1.5 * REUSE_SLACK


def burst_one_server_per_worker(p, pg):
    """One client per worker, each holding a server at once: every worker
    ends with an idle server of its own. The clients and the backends."""
    conns = [connect_on_worker(p, w) for w in range(WORKERS)]
    for conn in conns:
        conn.execute("BEGIN")
    pids = [conn.execute("SELECT pg_backend_pid()").fetchone()[0] for conn in conns]
    for conn in conns:
        conn.execute("COMMIT")
    assert len(set(pids)) == WORKERS
    assert pg.server_connections("testdb", "trust_user") == WORKERS
    return conns, pids


def test_light_load_gathers_on_last_used_server(pg15, make_pooler):
    """server_round_robin = 0 over 4 workers that each hold an idle server:
    single queries spaced past the slack, from clients on every worker in
    turn, all run on the server used last, as in one PgBouncer, and
    server_idle_timeout closes the 3 others (before, each worker kept its
    own server warm)."""
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": WORKERS, "server_idle_timeout": 2,
                                    "query_wait_timeout": 10})
    conns, _ = burst_one_server_per_worker(p, pg15)
    used = []
    deadline = time.monotonic() + 30
    while len(used) < 2 * WORKERS or pg15.server_connections("testdb", "trust_user") > 1:
        assert time.monotonic() < deadline, \
            f"surplus servers stay: {len(used)} queries on backends {sorted(set(used))}"
        time.sleep(SPACING)        # a time condition: the previous use is past the slack
        conn = conns[len(used) % WORKERS]
        # Literal SQL: psycopg prepares a repeated query at its 5th run,
        # which takes a server of its own (a Parse and Sync).
        used.append(conn.execute(f"SELECT pg_backend_pid(), {len(used)}").fetchone()[0])
    print(f"{len(used)} queries, backends {sorted(set(used))}")
    assert len(set(used)) == 1, used
    assert pg15.server_connections("testdb", "trust_user") == 1


def test_light_load_round_robin_spreads(pg15, make_pooler):
    """server_round_robin = 1 over 4 workers that each hold an idle server:
    single queries spaced past the slack, all from one worker's client, run
    on every server in turn, the one used longest ago first, wherever it
    is idle (before, that worker used its own server only)."""
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": WORKERS, "server_round_robin": 1,
                                    "query_wait_timeout": 10})
    conns, pids = burst_one_server_per_worker(p, pg15)
    used = []
    for i in range(2 * WORKERS):
        time.sleep(SPACING)        # a time condition: the previous use is past the slack
        used.append(conns[0].execute(f"SELECT pg_backend_pid(), {i}").fetchone()[0])   # literal SQL
    print(f"backends in order of use: {used}")
    assert sorted(used[:WORKERS]) == sorted(pids), used
    assert used[WORKERS:] == used[:WORKERS], used
    assert pg15.server_connections("testdb", "trust_user") == WORKERS


def test_cancels_reach_the_owning_worker(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 4})
    bystander = p.connect()
    bystander_err = []

    def sleep_long():
        try:
            bystander.execute("SELECT pg_sleep(60)")
        except psycopg.Error as exc:
            bystander_err.append(exc)

    t = threading.Thread(target=sleep_long)
    t.start()
    owners = set()
    try:
        for i in range(50):
            with p.connect() as victim:
                owners.add(worker_of(victim))
                result = []

                def run():
                    try:
                        victim.execute("SELECT pg_sleep(30)")
                        result.append("completed")
                    except psycopg.errors.QueryCanceled:
                        result.append("canceled")
                    except psycopg.Error as exc:
                        result.append(repr(exc))

                r = threading.Thread(target=run)
                r.start()
                util.wait_until(lambda: active_sleepers(pg15) >= 2, 5,
                                what=f"query {i} running")
                victim.cancel()
                r.join(timeout=5)
                assert not r.is_alive(), f"cancel {i} did not reach its query"
                assert result == ["canceled"], (i, result)
        assert t.is_alive() and not bystander_err, "the bystander's query was cancelled"
        assert len(owners) > 1, "every victim landed on one worker"
    finally:
        bystander.cancel()
        t.join(timeout=10)
        bystander.close()


def test_killed_worker_costs_only_its_clients(pgbench_pg15, make_pooler):
    pg = pgbench_pg15
    p = make_pooler(pg, settings={"workers": WORKERS, "pool_mode": "transaction",
                                  "default_pool_size": 10, "max_client_conn": 200})
    workers = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == WORKERS
                              else None, 10, what="workers")
    proc = subprocess.Popen(pgbench_command(p, 40, 8), env=pgbench_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    def xacts():
        with p.admin() as admin:
            rows = admin.execute("SHOW STATS").fetchall()
        return sum(r[2] for r in rows if r[0] == "testdb")

    try:
        # pgbench's 40 clients are in (with this console's) and running.
        util.wait_until(lambda: sum(r["clients"] for r in p.show("WORKERS")) > 40 and xacts() > 0,
                        20, what="pgbench's 40 clients running")
        before = xacts()
        with p.admin() as admin:
            me = worker_of(admin)
            rows = admin.execute("SHOW WORKERS").fetchall()
        victim_clients = [r[2] - (1 if r[0] == me else 0) for r in rows if r[1] == workers[0]][0]
        os.kill(workers[0], signal.SIGKILL)
        output, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    aborted = set(re.findall(r"client (\d+) (?:script \d+ )?aborted", output))
    summary = parse_summary(output)
    assert summary["processed"] and summary["processed"] > 100, output
    # Only the killed worker's clients lose their connection.
    assert 1 <= len(aborted) <= victim_clients, (len(aborted), victim_clients, output[-3000:])
    util.wait_until(lambda: len(children(p.pid)) == WORKERS and workers[0] not in children(p.pid),
                    10, what="the worker to be replaced")
    for _ in range(20):
        with p.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    p.wait_for_log(r"worker \d+ \(pid %d\) killed by signal 9" % workers[0])
    # SHOW STATS keeps counting: the dead worker's transactions stay in
    # (the others' reach shared memory within their 200 ms flush).
    try:
        util.wait_until(lambda: xacts() >= summary["processed"] * 0.9, 5,
                        what="SHOW STATS to count pgbench's transactions")
    except AssertionError:
        pass                    # asserted below, with the counts
    after = xacts()
    assert before > 0 and after > before, (before, after)
    assert after >= summary["processed"] * 0.9, (after, summary["processed"])


def config_values(p, key, n=16):
    """SHOW CONFIG's value of key as seen by n fresh console connections
    (spread over the workers by the kernel)."""
    seen = {}
    for _ in range(n):
        with p.admin() as conn:
            w = worker_of(conn)
            rows = conn.execute("SHOW CONFIG").fetchall()
            seen.setdefault(w, set()).update(r[1] for r in rows if r[0] == key)
    return seen


def test_reload_applies_everywhere_or_nowhere(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "server_idle_timeout": 100})
    util.wait_until(lambda: len(children(p.pid)) == WORKERS, 10, what="workers")
    before = config_values(p, "server_idle_timeout")
    assert len(before) > 1 and all(v == {"100"} for v in before.values()), before

    p.settings["server_idle_timeout"] = 200
    p.settings["no_such_setting"] = 1
    p.write_config()
    p.reload()
    p.wait_for_log(r"no_such_setting", timeout=5)
    time.sleep(0.5)
    after_bad = config_values(p, "server_idle_timeout")
    assert all(v == {"100"} for v in after_bad.values()), after_bad

    del p.settings["no_such_setting"]
    p.write_config()
    p.reload()
    util.wait_until(lambda: all(v == {"200"} for v in config_values(p, "server_idle_timeout").values()),
                    5, what="every worker to apply the reload")


def test_console_views_cover_every_worker(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "session",
                                    "default_pool_size": 20})
    pids = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == WORKERS else None,
                           10, what="workers")
    clients = [p.connect() for _ in range(12)]
    try:
        for c in clients:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert len({worker_of(c) for c in clients}) > 1
        with p.admin() as admin:
            def rows(cmd):
                cur = admin.execute(cmd)
                names = [d.name for d in cur.description]
                return [dict(zip(names, r)) for r in cur.fetchall()]

            workers = rows("SHOW WORKERS")
            # One row per worker, in worker order (whichever answered first).
            assert [w["worker"] for w in workers] == list(range(WORKERS))
            assert sorted(w["pid"] for w in workers) == sorted(pids)
            assert sum(w["clients"] for w in workers) == 13  # 12 + this console
            assert sum(w["servers"] for w in workers) == 12

            pools = [r for r in rows("SHOW POOLS") if r["database"] == "testdb"]
            assert len(pools) == 1, pools
            assert pools[0]["cl_active"] == 12 and pools[0]["sv_active"] == 12, pools

            app = [r for r in rows("SHOW CLIENTS") if r["database"] == "testdb"]
            assert len(app) == 12
            assert len({r["id"] for r in app}) == 12, "client ids must be unique"
            assert len([r for r in rows("SHOW SERVERS")]) == 12

            dbs = {r["name"]: r for r in rows("SHOW DATABASES")}
            assert dbs["testdb"]["current_connections"] == 12
            assert dbs["testdb"]["current_client_connections"] == 12

            lists = {r["list"]: r["items"] for r in rows("SHOW LISTS")}
            assert lists["used_clients"] == 13
            assert lists["databases"] == len(dbs)

            # Workers move their counts to shared memory every 200 ms.
            util.wait_until(lambda: {r["database"]: r for r in rows("SHOW STATS")}
                            ["testdb"]["total_query_count"] >= 12, 2, what="stats of every worker")
    finally:
        for c in clients:
            c.close()


def test_console_pause_reaches_every_worker(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction"})
    util.wait_until(lambda: len(children(p.pid)) == WORKERS, 10, what="workers")
    clients = [p.connect() for _ in range(8)]
    try:
        assert len({worker_of(c) for c in clients}) > 1
        with p.admin() as admin:
            admin.execute("PAUSE testdb")
            results = {}

            def query(i, conn):
                try:
                    results[i] = conn.execute("SELECT 1").fetchone()
                except psycopg.Error as exc:
                    results[i] = exc

            threads = [threading.Thread(target=query, args=(i, c)) for i, c in enumerate(clients)]
            for t in threads:
                t.start()
            time.sleep(1)
            assert not results, f"queries ran while paused: {results}"
            admin.execute("RESUME testdb")
            for t in threads:
                t.join(timeout=10)
            assert all(results.get(i) == (1,) for i in range(8)), results
            with pytest.raises(psycopg.Error, match="no such database"):
                admin.execute("PAUSE nosuchdb")
    finally:
        for c in clients:
            c.close()


def worker_clients(p):
    """Live clients per worker from SHOW WORKERS (minus this console)."""
    with p.admin() as admin:
        me = worker_of(admin)
        rows = admin.execute("SHOW WORKERS").fetchall()
    return {r[0]: r[2] - (1 if r[0] == me else 0) for r in rows}


def test_skewed_disconnects_stay_balanced(pg15, make_pooler):
    """400 clients, all of one worker's leave, 200 more come: the new ones
    go mostly to the emptied worker, so every worker stays within 25% of
    the mean."""
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "max_client_conn": 1000})
    util.wait_until(lambda: len(children(p.pid)) == WORKERS, 10, what="workers")
    clients = [p.connect() for _ in range(400)]
    try:
        victim = worker_of(clients[0])
        for c in [c for c in clients if worker_of(c) == victim]:
            c.close()
        clients = [c for c in clients if not c.closed]
        clients += [p.connect() for _ in range(200)]
        counts = worker_clients(p)
        mean = sum(counts.values()) / WORKERS
        print(f"clients per worker after skewed disconnects: {counts}, mean {mean:.0f}")
        assert sum(counts.values()) == len(clients)
        for w, n in counts.items():
            assert abs(n - mean) <= 0.25 * mean, (w, counts)
    finally:
        for c in clients:
            c.close()


def test_fewer_servers_than_workers_under_steady_load(pg15, make_pooler):
    """default_pool_size 2 with 4 workers, clients on every worker running
    transactions back to back: a worker holding no server must not wait until
    query_wait_timeout while the holders stay busy — after the ledger's
    starvation delay a holder gives one up (servers rotate)."""
    p = make_pooler(pg15, settings={"workers": WORKERS, "pool_mode": "transaction",
                                    "default_pool_size": 2, "query_wait_timeout": 5})
    conns = [connect_on_worker(p, w % WORKERS) for w in range(WORKERS + 2)]
    done = [0] * len(conns)
    errors = []
    stop = threading.Event()

    def run(i):
        try:
            while not stop.is_set():
                conns[i].execute("SELECT pg_sleep(0.005)")
                done[i] += 1
        except psycopg.Error as e:
            errors.append(f"client {i} on worker {worker_of(conns[i])}: {e}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    time.sleep(8)
    stop.set()
    for t in threads:
        t.join(timeout=15)
    assert not errors, errors
    assert all(n > 0 for n in done), done
    assert pg15.server_connections("testdb", "trust_user") <= 2


def proc_slice(pid):
    """The scheduler slice (se.slice, ns) of a process, from /proc."""
    with open(f"/proc/{pid}/sched") as f:
        for line in f:
            if line.startswith("se.slice"):
                return int(line.split(":")[1])
    return None


def kernel_custom_slices():
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    return (major, minor) >= (6, 12) and proc_slice(os.getpid()) is not None


@pytest.mark.parametrize("workers", [1, 4])
def test_worker_sched_slice(pg15, make_pooler, workers):
    """Every worker runs with worker_sched_slice (default 0.3 ms), the
    supervisor with the kernel's default; RELOAD and SET change it in every
    worker, a respawned worker takes it, 0 gives the default back, and a
    value outside 100us..100ms is refused with the key named."""
    if not kernel_custom_slices():
        pytest.skip(f"kernel {os.uname().release} has no custom scheduler slices (Linux 6.12+)")
    default = proc_slice(os.getpid())
    assert default not in (300000, 2000000, 700000)
    p = make_pooler(pg15, settings={"workers": workers})
    pids = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == workers else None,
                           10, what="workers")

    def slices():
        return {pid: proc_slice(pid) for pid in children(p.pid)}

    # A worker sets its slice once it runs, a moment after it appears.
    util.wait_until(lambda: set(slices().values()) == {300000}, 10,
                    what=f"0.3 ms in every worker: {slices()}")
    assert proc_slice(p.pid) == default

    p.settings["worker_sched_slice"] = "2ms"
    p.write_config()
    p.reload()
    util.wait_until(lambda: set(slices().values()) == {2000000}, 5, what=f"2 ms everywhere: {slices()}")

    with p.admin() as a:
        a.execute("SET worker_sched_slice = '0.7ms'")
    util.wait_until(lambda: set(slices().values()) == {700000}, 5, what=f"0.7 ms everywhere: {slices()}")

    os.kill(pids[0], signal.SIGKILL)
    util.wait_until(lambda: len(children(p.pid)) == workers and pids[0] not in children(p.pid),
                    10, what="the worker respawned")
    # the supervisor keeps what SET changed: the new worker starts with it
    util.wait_until(lambda: set(slices().values()) == {700000}, 5,
                    what=f"the respawned worker's slice: {slices()}")

    with p.admin() as a:
        a.execute("SET worker_sched_slice = 0")
    util.wait_until(lambda: set(slices().values()) == {default}, 5, what=f"the default back: {slices()}")

    with p.admin() as a:
        with pytest.raises(psycopg.Error, match="^SET failed$"):
            a.execute("SET worker_sched_slice = '50us'")
    p.wait_for_log(r'invalid value "50us" for parameter worker_sched_slice: must be 0 or a time')
    p.settings["worker_sched_slice"] = "101ms"
    p.write_config()
    p.reload()
    p.wait_for_log(r"worker_sched_slice.*must be 0 or a time from 0.0001 s to 0.1 s", timeout=5)
    assert set(slices().values()) == {default}


@pytest.mark.parametrize("workers", [1, 4])
def test_supervisor_sched_batch(pg15, make_pooler, workers):
    """The supervisor runs as SCHED_BATCH (supervisor_sched_batch, on by
    default) and its workers as SCHED_OTHER with their own slice, respawned
    ones too; SET and RELOAD switch the supervisor, and a supervisor an
    operator started under another policy is left alone."""
    p = make_pooler(pg15, settings={"workers": workers})
    util.wait_until(lambda: len(children(p.pid)) == workers or None, 10, what="workers")

    def policies():
        return {pid: os.sched_getscheduler(pid) for pid in children(p.pid)}

    util.wait_until(lambda: os.sched_getscheduler(p.pid) == os.SCHED_BATCH or None, 5,
                    what="a SCHED_BATCH supervisor")
    # a worker gives the policy back once it runs, a moment after it appears
    util.wait_until(lambda: set(policies().values()) == {os.SCHED_OTHER} or None, 10,
                    what="every worker under SCHED_OTHER")
    if kernel_custom_slices():
        util.wait_until(lambda: {proc_slice(pid) for pid in children(p.pid)} == {300000} or None,
                        10, what="the workers' own slice")

    pid0 = children(p.pid)[0]
    os.kill(pid0, signal.SIGKILL)
    util.wait_until(lambda: len(children(p.pid)) == workers and pid0 not in children(p.pid) or None,
                    10, what="the worker respawned")
    util.wait_until(lambda: set(policies().values()) == {os.SCHED_OTHER} or None, 5,
                    what=f"the respawned worker left SCHED_BATCH: {policies()}")

    with p.admin() as a:
        a.execute("SET supervisor_sched_batch = 0")
    assert os.sched_getscheduler(p.pid) == os.SCHED_OTHER
    p.settings["supervisor_sched_batch"] = "1"
    p.write_config()
    p.reload()
    util.wait_until(lambda: os.sched_getscheduler(p.pid) == os.SCHED_BATCH or None, 5,
                    what="SCHED_BATCH again after RELOAD")
    assert set(policies().values()) == {os.SCHED_OTHER}, policies()   # running workers: no race


def test_supervisor_sched_batch_leaves_an_operators_policy(pg15, make_pooler):
    """Started under SCHED_BATCH by the operator (chrt -b), the supervisor
    and its workers keep it, through a RELOAD too: supervisor_sched_batch
    changes only the default policy, and a worker gives back only a
    SCHED_BATCH the supervisor set."""
    p = make_pooler(pg15, settings={"workers": 2, "verbose": 1}, start=False)
    p.preexec_fn = lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    p.start()
    util.wait_until(lambda: len(children(p.pid)) == 2 or None, 10, what="workers")
    line = "supervisor_sched_batch: not applied, the supervisor runs under another scheduling policy"
    p.wait_for_log(line, timeout=5)
    p.wait_for_log(line, timeout=5, since=p.reload())
    assert os.sched_getscheduler(p.pid) == os.SCHED_BATCH
    util.wait_until(lambda: {os.sched_getscheduler(pid) for pid in children(p.pid)} == {os.SCHED_BATCH}
                    or None, 5, what="the workers under the operator's policy")
