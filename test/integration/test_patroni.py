"""pgcrew in front of a Patroni cluster (Debian's patroni and etcd-server):
one etcd, two Patroni nodes running PostgreSQL 15 (127.0.0.1 and 127.0.0.2,
one port), and pgcrew listing both nodes with target_session_attrs =
read-write. `patronictl switchover` under 20 writers in transaction pooling:
writes go on through pgcrew without a RELOAD; the time from the switchover
to the first write on the new primary and the failed transactions are
printed. With load_balance_hosts disable and round-robin, four workers.

PgBouncer has no target_session_attrs."""

import os
import shutil
import subprocess
import time
import urllib.request

import psycopg
import pytest

import util
from pg_cluster import PG15_BINDIR
from test_failover import Writers

# serial: Patroni's leader lease (ttl 10 s) must not expire on a starved CPU.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]
NODES = (("node1", "127.0.0.1"), ("node2", "127.0.0.2"))

PATRONI_YML = """scope: pgcrew
name: {name}
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:{rest}
  connect_address: 127.0.0.1:{rest}
etcd3:
  hosts: 127.0.0.1:{etcd}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    postgresql:
      use_pg_rewind: false
      parameters:
        max_connections: 100
        max_wal_senders: 10
        fsync: "off"
        synchronous_commit: "off"
  initdb:
    - encoding: UTF8
    - no-locale
  pg_hba:
    - local all all trust
    - host all all 127.0.0.0/8 trust
    - host replication all 127.0.0.0/8 trust
postgresql:
  listen: {ip}:{port}
  connect_address: {ip}:{port}
  data_dir: {dir}/data
  bin_dir: {bindir}
  pgpass: {dir}/pgpass
  authentication:
    superuser:
      username: postgres
      password: unused
    replication:
      username: replicator
      password: unused
  parameters:
    unix_socket_directories: '{dir}'
  basebackup:
    - checkpoint: fast
"""


def rest(port, path):
    """HTTP status of Patroni's REST endpoint (/primary, /replica), 0 if down."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


@pytest.fixture
def cluster(request, session_dir):
    if not shutil.which("patroni") or not shutil.which("etcd"):
        pytest.fail("patroni and etcd-server must be installed (scripts/deps.sh)")
    base = os.path.join(session_dir, f"patroni-{request.node.callspec.id}")
    os.makedirs(base)
    procs = []
    try:
        etcd_port, peer_port = util.free_port(), util.free_port()
        etcd = subprocess.Popen(
            ["etcd", "--name", "e1", "--data-dir", os.path.join(base, "etcd"),
             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
             "--initial-cluster", f"e1=http://127.0.0.1:{peer_port}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(base, "etcd.log"), "w"))
        procs.append(etcd)
        util.wait_until(lambda: util.port_accepts(etcd_port), 20, what="etcd to listen")
        port = util.free_port()
        nodes = []
        for name, ip in NODES:
            d = os.path.join(base, name)
            os.makedirs(d, mode=0o700)
            yml = os.path.join(d, "patroni.yml")
            node = {"name": name, "ip": ip, "rest": util.free_port(), "yml": yml, "dir": d}
            with open(yml, "w") as f:
                f.write(PATRONI_YML.format(name=name, rest=node["rest"], etcd=etcd_port, ip=ip,
                                           port=port, dir=d, bindir=PG15_BINDIR))
            nodes.append(node)
        util.give_to_service_user(base)
        for i, node in enumerate(nodes):
            kw = util.service_popen_kwargs()
            node["proc"] = subprocess.Popen(["patroni", node["yml"]], stdout=subprocess.DEVNULL,
                                            stderr=open(os.path.join(node["dir"], "patroni.log"), "w"),
                                            **kw)
            procs.append(node["proc"])
            want = "/primary" if i == 0 else "/replica"
            util.wait_until(lambda: rest(node["rest"], want) == 200, 60,
                            what=f"{node['name']} to run as {want[1:]}")
            if i == 0:
                prepare(nodes[0]["ip"], port)
        # A switchover needs a healthy replica: streaming, not only running.
        util.wait_until(lambda: streaming(nodes[0]["ip"], port), 60, what="node2 to stream")
        yield nodes, port
    finally:
        for proc in reversed(procs):
            util.end_process(proc, timeout=30)


def connect(ip, port, dbname="postgres"):
    return psycopg.connect(host=ip, port=port, user="postgres", dbname=dbname, autocommit=True,
                           connect_timeout=5)


def streaming(ip, port):
    with connect(ip, port) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_replication"
                            " WHERE state = 'streaming'").fetchone()[0] == 1


def prepare(ip, port):
    with connect(ip, port) as conn:
        conn.execute("CREATE ROLE trust_user LOGIN")
        conn.execute("CREATE DATABASE testdb")
    with connect(ip, port, "testdb") as conn:
        conn.execute("CREATE TABLE fo (id serial primary key)")
        conn.execute("GRANT ALL ON fo, fo_id_seq TO trust_user")


@pytest.mark.fixed_workers
@pytest.mark.timeout(240)
@pytest.mark.parametrize("lb", ["disable", "round-robin"])
def test_patroni_switchover(cluster, pg15, make_pooler, lb):
    nodes, port = cluster
    hosts = ",".join(ip for _, ip in NODES)
    p = make_pooler(pg15, settings={"pool_mode": "transaction", "workers": 4,
                                    "default_pool_size": 10, "query_wait_timeout": 60},
                    databases={"rw": f"host={hosts} port={port} dbname=testdb "
                                     f"target_session_attrs=read-write load_balance_hosts={lb}"})
    with Writers(p) as w:
        time.sleep(2)
        started = time.monotonic()
        r = subprocess.run(["patronictl", "-c", nodes[0]["yml"], "switchover", "--leader", "node1",
                            "--candidate", "node2", "--force"], capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0 and "witched over" in r.stdout, r.stdout + r.stderr
        util.wait_until(lambda: rest(nodes[1]["rest"], "/primary") == 200, 60,
                        what="node2 to be the primary")
        promoted = time.monotonic()
        w.wait_write_after(promoted, 60)
        time.sleep(2)
    first, failed, _ = w.after(promoted)
    print(f"patroni switchover, load_balance_hosts={lb}: node2 reported primary "
          f"{(promoted - started) * 1000:.0f} ms after `patronictl switchover` began; first "
          f"write on it {(first - started) * 1000:.0f} ms after it began; "
          f"{failed} failed transactions")
    with connect(nodes[1]["ip"], port, "testdb") as conn:
        assert not conn.execute("SELECT pg_is_in_recovery()").fetchone()[0]
    with p.connect("rw") as conn:
        assert conn.execute("SELECT host(inet_server_addr())").fetchone()[0] == nodes[1]["ip"]
