"""pgcrew's own behaviour: the supervisor restarts a worker that dies, and
clients of the instance can connect again within seconds."""

import os
import signal
import time

import psycopg
import pytest

import util


def children(pid):
    """Direct child pids of pid, from /proc (bounded, no external tools)."""
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path) as f:
            return sorted(int(x) for x in f.read().split())
    except FileNotFoundError:
        pass
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return sorted(found)


def connect_within(p, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(autocommit=True, **p.conninfo(connect_timeout=2)) as conn:
                return conn.execute("SELECT 1").fetchone()
        except psycopg.OperationalError:
            assert time.monotonic() < deadline, f"no service within {timeout}s\n{p.log_tail()}"
            time.sleep(0.1)


@pytest.mark.pgcrew_only
def test_killed_worker_is_replaced(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "workers": 2})
    workers = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) >= 2 else None,
                              10, what="two worker processes")
    victim = workers[0]
    os.kill(victim, signal.SIGKILL)
    replaced = util.wait_until(
        lambda: (lambda now: now if len(now) >= 2 and victim not in now else None)(
            children(p.pid)), 10, what="a new worker to replace the killed one")
    assert victim not in replaced
    p.assert_alive()
    # Many short connections so that both workers' listeners are exercised.
    for _ in range(20):
        assert connect_within(p, 5) == (1,)


@pytest.mark.pgcrew_only
def test_workers_setting_controls_process_count(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": 3})
    util.wait_until(lambda: len(children(p.pid)) == 3, 10, what="three worker processes")
    with p.connect() as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
