"""PostgreSQL restarted under load: clients in flight get errors, then the
pooler reconnects by itself and serves again without being restarted."""

import subprocess
import threading
import time

import psycopg

from bench import pgbench_command, pgbench_env, run_pgbench


def test_postgres_restart_under_load(pgbench_pg15, make_pooler):
    pg = pgbench_pg15
    p = make_pooler(pg, settings={"pool_mode": "transaction", "default_pool_size": 8,
                                  "server_login_retry": 1, "query_wait_timeout": 30})
    load = subprocess.Popen(pgbench_command(p, clients=8, seconds=8), env=pgbench_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    sleeper = p.connect()
    outcome = {}

    def long_query():
        try:
            sleeper.execute("SELECT pg_sleep(30)")
            outcome["result"] = "completed"
        except psycopg.Error as exc:
            outcome["result"] = exc

    thread = threading.Thread(target=long_query)
    try:
        thread.start()
        pg.wait_active("SELECT pg_sleep(30)")        # in flight, with pgbench's load
        pg.restart()
        thread.join(15)
        assert not thread.is_alive(), "in-flight query never failed after the restart"
        assert isinstance(outcome["result"], psycopg.Error), outcome
        out, _ = load.communicate(timeout=40)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait(10)
    p.assert_alive()
    # Service resumes: new clients work (bounded retry while servers come back).
    deadline = time.monotonic() + 10
    while True:
        try:
            with psycopg.connect(autocommit=True, **p.conninfo()) as conn:
                assert conn.execute("SELECT 1").fetchone() == (1,)
            break
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, f"no service after restart\n{p.log_tail()}"
            time.sleep(0.2)
    rc, output, summary = run_pgbench(p, clients=8, seconds=2)
    assert rc == 0 and summary["failed"] == 0, output
