"""A network partition between pgcrew and PostgreSQL: pgcrew runs in a
network namespace made by the test, reaching PostgreSQL over a veth pair
(through a relay on the host end, since PostgreSQL listens on loopback);
clients reach pgcrew through its Unix socket, which no partition cuts.
Taking the veth link down mid-query must be detected by TCP keepalive
(tcp_keepalive/keepidle/keepintvl/keepcnt), the client gets an error, and
service returns when the link comes back. Needs root (ip netns)."""

import os
import socket
import subprocess
import threading
import time

import psycopg
import pytest

import util

# serial: a network namespace and veth pair of the machine, and keepalive timing.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]


def ip(*args, ns=None):
    cmd = (["ip", "netns", "exec", ns, "ip"] if ns else ["ip"]) + list(args)
    subprocess.run(cmd, check=True, capture_output=True, timeout=20)


class Relay:
    """TCP relay on (host, 0) to 127.0.0.1:port, one thread pair per connection."""

    def __init__(self, host, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.bind((host, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.stop = threading.Event()
        self.conns = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stop.is_set():
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            s = socket.create_connection((util.HOST, self.target))
            self.conns += [c, s]
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        for x in (src, dst):
            try:
                x.close()
            except OSError:
                pass

    def close(self):
        """Also ends relayed sessions, so their backends exit."""
        self.stop.set()
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


@pytest.fixture
def netns():
    """A namespace with one veth pair to the host: (ns, host_if, host_ip, ns_ip)."""
    if os.geteuid() != 0:
        pytest.fail("the partition test needs root for ip netns (CI runs as root)")
    tag = os.getpid() % 100000
    ns, host_if, ns_if = f"pgcrew{tag}", f"pcv{tag}h", f"pcv{tag}n"
    net = f"10.213.{tag % 250}"
    ip("netns", "add", ns)
    try:
        ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        ip("link", "set", ns_if, "netns", ns)
        ip("addr", "add", f"{net}.1/30", "dev", host_if)
        ip("link", "set", host_if, "up")
        ip("addr", "add", f"{net}.2/30", "dev", ns_if, ns=ns)
        ip("link", "set", ns_if, "up", ns=ns)
        ip("link", "set", "lo", "up", ns=ns)
        yield ns, host_if, f"{net}.1"
    finally:
        subprocess.run(["ip", "link", "del", host_if], capture_output=True, timeout=20)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)


def start_in_ns(p, ns):
    p.write_config()
    env = p._env(None)
    binary = util.service_executable(p.binary, p.workdir)
    cmd = ["ip", "netns", "exec", ns, "setpriv", f"--reuid={util.SERVICE_USER}",
           f"--regid={util.SERVICE_USER}", "--init-groups", binary, p.ini_path]
    with open(p.stderr_path, "w") as err:
        p.proc = subprocess.Popen(cmd, cwd=p.workdir, env=env, stdin=subprocess.DEVNULL,
                                  stdout=err, stderr=err)
    util.wait_until(lambda: _query(p), 15, what="pgcrew in the namespace")


def _query(p, sql="SELECT 1"):
    try:
        with psycopg.connect(host=p.workdir, port=p.port, dbname="testdb", user="trust_user",
                             connect_timeout=5, autocommit=True) as conn:
            return conn.execute(sql).fetchone()
    except psycopg.Error:
        return None


def test_partition_detected_by_keepalive(pg15, make_pooler, netns):
    ns, host_if, host_ip = netns
    relay = Relay(host_ip, pg15.port)
    p = None
    try:
        p = make_pooler(pg15, start=False, settings={
            "workers": 1, "listen_addr": "127.0.0.1",
            "tcp_keepalive": 1, "tcp_keepidle": 1, "tcp_keepintvl": 1, "tcp_keepcnt": 2,
            "tcp_user_timeout": 2000, "server_connect_timeout": 3, "query_wait_timeout": 10},
            databases={"testdb": f"host={host_ip} port={relay.port} dbname=testdb"})
        start_in_ns(p, ns)
        result = {}

        def long_query():
            started = time.monotonic()
            try:
                with psycopg.connect(host=p.workdir, port=p.port, dbname="testdb",
                                     user="trust_user", connect_timeout=5) as conn:
                    conn.execute("SELECT pg_sleep(30)")
                result["ok"] = True
            except psycopg.Error as e:
                result["error"] = str(e)
            result["secs"] = time.monotonic() - started

        t = threading.Thread(target=long_query)
        t.start()
        pg15.wait_active("SELECT pg_sleep(30)")
        ip("link", "set", host_if, "down")
        try:
            t.join(timeout=20)
            assert not t.is_alive(), "the query outlived the partition by 20 s"
            assert "error" in result, result
            # keepidle 1 s + 2 probes 1 s apart: well before pg_sleep(30) ends.
            assert result["secs"] < 15, result
            p.assert_alive()
        finally:
            ip("link", "set", host_if, "up")
        util.wait_until(lambda: _query(p) == (1,), 20, what="service after the partition")
    finally:
        # Stop pgcrew while its namespace still exists (fixtures are torn
        # down first), then the relay; backends the relay kept (pg_sleep
        # does not notice a vanished client) are ended.
        if p is not None and p.proc is not None:
            p.stop()
        relay.close()
        with pg15.connect() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE backend_type = 'client backend' AND usename = 'trust_user'")
