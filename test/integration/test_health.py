"""The probes on metrics_listen, with one worker and with four: /healthz
answers 200 while the supervisor and every worker run, and 503 naming the
worker when one stops (SIGSTOP) until it runs again (SIGCONT); /readyz
answers 200 once every worker listens, and 503 during PAUSE (console and
SIGUSR1) until RESUME, and from the start of a shutdown (SIGTERM) on.
Every wait is a bounded poll."""

import http.client
import os
import signal

import pytest

import util

pytestmark = pytest.mark.pgcrew_only

WORKERS_MATRIX = (1, 4)
# A stopped worker fails /healthz once its heartbeat is 2 s old
# (METRICS_STALE_USEC); the janitor beats every 200 ms.
HUNG_WITHIN = 8


def start(pg, make_pooler, **settings):
    port = util.free_port()
    base = {"pool_mode": "transaction", "metrics_listen": f"{util.HOST}:{port}"}
    base.update(settings)
    p = make_pooler(pg, settings=base)
    p.metrics_port = port
    util.wait_until(lambda: util.port_accepts(port), 10, what="metrics port")
    return p


def get(p, path, method="GET"):
    conn = http.client.HTTPConnection(util.HOST, p.metrics_port, timeout=5)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def wait_status(p, path, status, timeout=10, what=None):
    """Poll path until it answers status; returns the body."""
    def answered():
        s, body = get(p, path)
        return body if s == status else None
    return util.wait_until(answered, timeout, interval=0.1, what=what or f"{path} -> {status}")


def test_probes_pause_resume(pg15, make_pooler, pooler_workers):
    p = start(pg15, make_pooler)
    assert wait_status(p, "/readyz", 200, 20) == "ok\n"
    assert get(p, "/healthz") == (200, "ok\n")
    adm = p.admin()
    adm.execute("PAUSE")
    body = wait_status(p, "/readyz", 503, what="/readyz 503 during PAUSE")
    assert "paused" in body
    assert get(p, "/healthz")[0] == 200          # paused is alive
    adm.execute("RESUME")
    wait_status(p, "/readyz", 200, what="/readyz 200 after RESUME")
    # The signals do the same.
    os.kill(p.pid, signal.SIGUSR1)
    wait_status(p, "/readyz", 503, what="/readyz 503 after SIGUSR1")
    os.kill(p.pid, signal.SIGUSR2)
    wait_status(p, "/readyz", 200, what="/readyz 200 after SIGUSR2")
    # PAUSE of one database leaves the instance ready.
    adm.execute("PAUSE testdb")
    assert get(p, "/readyz")[0] == 200
    adm.execute("RESUME testdb")


def test_probes_methods_and_paths(pg15, make_pooler):
    p = start(pg15, make_pooler, workers=1)
    wait_status(p, "/readyz", 200, 20)
    assert get(p, "/healthz", "HEAD") == (200, "")
    assert get(p, "/readyz", "POST")[0] == 405
    assert get(p, "/livez")[0] == 404


def test_healthz_fails_for_a_stopped_worker(pg15, make_pooler, pooler_workers):
    p = start(pg15, make_pooler)
    wait_status(p, "/readyz", 200, 20)
    workers = p.show("WORKERS")
    victim = workers[-1]
    pid = int(victim["pid"])
    os.kill(pid, signal.SIGSTOP)
    try:
        body = wait_status(p, "/healthz", 503, HUNG_WITHIN, what="/healthz 503 for a stopped worker")
        assert f"worker {victim['worker']}: no heartbeat for" in body
        assert get(p, "/readyz")[0] == 503
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_status(p, "/healthz", 200, 5, what="/healthz 200 after SIGCONT")
    wait_status(p, "/readyz", 200, 5, what="/readyz 200 after SIGCONT")
    p.assert_alive()


def test_readyz_fails_from_shutdown_on(pg15, make_pooler, pooler_workers):
    p = start(pg15, make_pooler)
    wait_status(p, "/readyz", 200, 20)
    client = p.connect()                 # keeps SIGTERM's WAIT_FOR_CLIENTS waiting
    assert client.execute("SELECT 1").fetchone() == (1,)
    os.kill(p.pid, signal.SIGTERM)
    body = wait_status(p, "/readyz", 503, what="/readyz 503 on SIGTERM")
    assert "shutting down" in body
    assert get(p, "/healthz")[0] == 200          # draining is alive
    assert client.execute("SELECT 2").fetchone() == (2,)
    client.close()
    p.proc.wait(timeout=10)
    assert p.proc.returncode == 0
