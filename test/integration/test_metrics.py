"""The Prometheus endpoint (metrics_listen) with four workers: the text parses
with prometheus_client's parser, every family has HELP and TYPE, counters and
histograms count exactly the transactions run over many connections spread
over the workers, unknown paths get 404, it is off by default, and a bad
value is a config error naming file, line and key."""

import http.client
import os
import socket
import subprocess
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import util
from pg_cluster import password

pytestmark = pytest.mark.pgcrew_only

WORKERS = 4


def start(pg, make_pooler, **settings):
    port = util.free_port()
    base = {"workers": WORKERS, "pool_mode": "transaction", "auth_type": "md5",
            "metrics_listen": f"{util.HOST}:{port}"}
    base.update(settings)
    p = make_pooler(pg, settings=base)
    p.metrics_port = port
    util.wait_until(lambda: util.port_accepts(port), 5, what="metrics port")
    return p


def get(port, path="/metrics", method="GET"):
    conn = http.client.HTTPConnection(util.HOST, port, timeout=10)
    try:
        conn.request(method, path)
        r = conn.getresponse()
        return r.status, r.getheader("Content-Type"), r.read().decode()
    finally:
        conn.close()


def scrape(p):
    status, ctype, body = get(p.metrics_port)
    assert status == 200, body
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    return body, {f.name: f for f in text_string_to_metric_families(body)}


def sample(families, family, sname, **labels):
    """Value of the sample `sname` of `family` whose labels include `labels`
    (0 when absent)."""
    f = families.get(family)
    if not f:
        return 0
    for s in f.samples:
        if s.name == sname and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return 0


def admin(p):
    return p.connect("pgbouncer", "trust_user", password=password("trust_user"))


def client(p, **kw):
    return p.connect("testdb", "trust_user", password=password("trust_user"), **kw)


def test_metrics_parse_and_count_transactions(pg15, make_pooler):
    p = start(pg15, make_pooler)
    body, fam = scrape(p)
    # Every family the parser found was declared with HELP and TYPE.
    for name, f in fam.items():
        assert f.documentation, name
        assert f"# TYPE {f.name}" in body or f"# TYPE {f.name}_total" in body, name
    assert sample(fam, "pgbouncer_up", "pgbouncer_up") == 1
    assert fam["pgbouncer_version_info"].samples[0].labels["version"].startswith("pgcrew ")
    assert fam["pgcrew_query_duration_seconds"].type == "histogram"
    assert fam["pgbouncer_stats_queries_pooled"].type == "counter"
    assert sample(fam, "pgcrew_workers", "pgcrew_workers") == WORKERS

    def counts():
        _, f = scrape(p)
        lab = {"database": "testdb", "user": "trust_user"}
        return (sample(f, "pgcrew_transaction_duration_seconds", "pgcrew_transaction_duration_seconds_count", **lab),
                sample(f, "pgcrew_transaction_duration_seconds", "pgcrew_transaction_duration_seconds_bucket",
                       le="+Inf", **lab),
                sample(f, "pgbouncer_stats_sql_transactions_pooled", "pgbouncer_stats_sql_transactions_pooled_total",
                       database="testdb"),
                sample(f, "pgcrew_query_duration_seconds", "pgcrew_query_duration_seconds_count", **lab))

    before = counts()
    n_conn, per_conn = 20, 10
    n = n_conn * per_conn
    conns = [client(p) for _ in range(n_conn)]
    try:
        from test_workers import worker_of
        assert len({worker_of(c) for c in conns}) > 1, "connections all landed on one worker"
        for c in conns:
            for i in range(per_conn):
                c.execute(f"SELECT {i}")   # distinct texts: psycopg would prepare a repeat
        # Gauges from the fan-out: 20 clients of the pool on the instance.
        _, f = scrape(p)
        assert sample(f, "pgbouncer_pools_client_active_connections", "pgbouncer_pools_client_active_connections",
                      database="testdb", user="trust_user") == n_conn
        assert sample(f, "pgbouncer_used_clients", "pgbouncer_used_clients") >= n_conn
        assert sample(f, "pgbouncer_databases_pool_size", "pgbouncer_databases_pool_size", name="testdb") == 20
        # The exporter's server count, grouped as it groups SHOW SERVERS.
        with admin(p) as a:
            servers = [r for r in a.execute("SHOW SERVERS").fetchall() if r[2] == "testdb"]
        counted = [s for s in f["pgbouncer_server_connections"].samples if s.labels["database"] == "testdb"]
        assert servers and sum(s.value for s in counted) == len(servers)
        assert {s.labels["addr"] for s in counted} == {f"{r[5]}_{r[6]}" for r in servers}
        assert {s.labels["close_needed"] for s in counted} == {"false"}
    finally:
        for c in conns:
            c.close()

    def grew():
        now = counts()
        return [a - b for a, b in zip(now, before)]

    # Histograms count at once; SHOW STATS counters reach shared memory
    # within the 200 ms flush.
    util.wait_until(lambda: grew() == [n, n, n, n], 5, what=f"{n} transactions in /metrics")
    time.sleep(0.5)
    assert grew() == [n, n, n, n]
    _, f = scrape(p)
    # Cumulative buckets never decrease, and the +Inf bucket equals _count.
    buckets = [s for s in f["pgcrew_transaction_duration_seconds"].samples
               if s.name.endswith("_bucket") and s.labels.get("database") == "testdb"]
    values = [s.value for s in buckets]
    assert values == sorted(values) and buckets[-1].labels["le"] == "+Inf"
    # Connection setup: every one of the 20 logins had a startup and auth
    # phase, and the pool's servers a login.
    assert sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_count", phase="auth") >= n_conn
    assert sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_count",
                  phase="server_login") >= 1


def test_worker_restart_counted(pg15, make_pooler):
    p = start(pg15, make_pooler)
    _, f = scrape(p)
    assert sample(f, "pgcrew_worker_restarts", "pgcrew_worker_restarts_total", worker="1") == 0
    with admin(p) as a:
        pid = [r[1] for r in a.execute("SHOW WORKERS").fetchall() if r[0] == 1][0]
    os.kill(pid, 9)
    util.wait_until(lambda: sample(scrape(p)[1], "pgcrew_worker_restarts",
                                   "pgcrew_worker_restarts_total", worker="1") == 1,
                    10, what="the restart in /metrics")
    # Every worker answers the fan-out again.
    util.wait_until(lambda: sample(scrape(p)[1], "pgbouncer_up", "pgbouncer_up") == 1, 10, what="up")


def test_unknown_path_and_method(pg15, make_pooler):
    p = start(pg15, make_pooler, workers=2)
    assert get(p.metrics_port, "/")[0] == 404
    assert get(p.metrics_port, "/metricsx")[0] == 404
    assert get(p.metrics_port, "/metrics/../x")[0] == 404
    assert get(p.metrics_port, "/metrics", method="POST")[0] == 405
    assert get(p.metrics_port, "/metrics?x=1")[0] == 200
    # Garbage, an oversized header and a request cut short cost only their
    # own connection.
    for junk in [b"\x16\x03\x01garbage\r\n\r\n", b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 100000 + b"\r\n\r\n",
                 b"GET /metr"]:
        with socket.create_connection((util.HOST, p.metrics_port), timeout=15) as s:
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                reply = s.recv(200)
            except OSError:
                reply = b""
            assert not reply.startswith(b"HTTP/1.1 200"), reply
    assert get(p.metrics_port)[0] == 200
    p.assert_alive()


def listening_ports(pid):
    """TCP ports a process listens on: its socket inodes matched against
    /proc/net/tcp{,6} rows in state LISTEN."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}") as f:
            for row in f.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def test_off_by_default(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": 2})
    with admin(p) as a:
        rows = {r[0]: r[1] for r in a.execute("SHOW CONFIG").fetchall()}
        workers = [r[1] for r in a.execute("SHOW WORKERS").fetchall()]
    assert rows["metrics_listen"] == ""
    for pid in [p.pid] + workers:
        assert listening_ports(pid) == {p.port}, pid
    # With it set, the supervisor listens on it and the workers do not.
    q = start(pg15, make_pooler, workers=2)
    with admin(q) as a:
        workers = [r[1] for r in a.execute("SHOW WORKERS").fetchall()]
    assert listening_ports(q.pid) == {q.port, q.metrics_port}
    for pid in workers:
        assert listening_ports(pid) == {q.port}, pid


@pytest.mark.parametrize("value", ["9127", "127.0.0.1:", "127.0.0.1:99999", "::1:9127"])
def test_bad_value_is_a_config_error(pg15, make_pooler, value):
    p = make_pooler(pg15, settings={"workers": 2, "metrics_listen": value}, start=False)
    p.write_config()
    line = next(i for i, l in enumerate(open(p.ini_path).read().splitlines(), 1)
                if l.startswith("metrics_listen"))
    out = subprocess.run([p.binary, p.ini_path], capture_output=True, text=True, timeout=20)
    assert out.returncode != 0
    assert f"pgbouncer.ini:{line}" in out.stderr and "metrics_listen" in out.stderr, out.stderr


def test_online_restart_hands_over_the_endpoint(pg15, make_pooler):
    """pgcrew -R: the old process lets go of metrics_listen when it hands
    over its sockets, the new one binds it and serves the scrapes."""
    from test_upgrade import start_takeover, stop
    p = start(pg15, make_pooler, workers=2)
    assert scrape(p)[1]["pgcrew_workers"].samples[0].value == 2
    new = start_takeover(p)
    try:
        p.wait_for_log(r"online restart: pid %d took over" % new.pid, timeout=10)
        p.proc.wait(timeout=15)          # no clients: the old one exits at once
        util.wait_until(lambda: util.port_accepts(p.metrics_port), 10, what="the new metrics listener")
        _, fam = scrape(p)
        assert sample(fam, "pgbouncer_up", "pgbouncer_up") == 1
        log = open(os.path.join(p.workdir, "pooler.log")).read()
        assert log.count("metrics: listening on") == 2, log
        assert new.poll() is None
    finally:
        stop(new)


def test_connection_setup_phases(pg15, make_pooler, tls_files):
    """Each login adds one sample to startup and auth, a TLS login one to
    tls, a new server connection one to server_login."""
    p = start(pg15, make_pooler, workers=2, pool_mode="session", auth_type="scram-sha-256",
              client_tls_sslmode="allow", client_tls_cert_file=tls_files["server.crt"],
              client_tls_key_file=tls_files["server.key"])

    def phases():
        _, f = scrape(p)
        return {ph: sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_count",
                           phase=ph) for ph in ("startup", "tls", "auth", "server_login")}

    before = phases()
    user, pw = "scram_user", "scram-secret"
    for mode in ("require", "require", "disable"):
        with p.connect(user=user, password=pw, sslmode=mode) as c:
            c.execute("SELECT 1")
    after = phases()
    assert after["tls"] - before["tls"] == 2
    assert after["startup"] - before["startup"] == 3
    assert after["auth"] - before["auth"] == 3
    assert after["server_login"] - before["server_login"] >= 1
    # A SCRAM exchange takes measurable time: the auth sum grew.
    _, f = scrape(p)
    assert sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_sum", phase="auth") > 0


@pytest.mark.parametrize("workers", [1, 4])
def test_slot_wait_counts_each_granted_slot(pg15, make_pooler, workers):
    """slot_wait: with several workers every new server connection waits for
    a slot of the supervisor's ledger, counted once per grant; one worker
    asks nobody, and counts none."""
    p = start(pg15, make_pooler, workers=workers, pool_mode="session")

    def counts():
        _, f = scrape(p)
        return tuple(sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_count",
                            phase=ph) for ph in ("slot_wait", "server_login"))

    before = counts()
    held = [client(p) for _ in range(3)]
    for c in held:
        c.execute("SELECT 1")
    after = counts()
    for c in held:
        c.close()
    slots, logins = after[0] - before[0], after[1] - before[1]
    assert logins >= 3, logins
    assert slots == (logins if workers > 1 else 0), (slots, logins)
    if workers > 1:
        _, f = scrape(p)
        assert sample(f, "pgcrew_connection_setup_seconds", "pgcrew_connection_setup_seconds_sum",
                      phase="slot_wait") > 0
