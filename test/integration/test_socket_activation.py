"""systemd socket activation (the packaged pgcrew.socket): sockets passed as
fds 3.. with LISTEN_PID/LISTEN_FDS are used instead of listen_addr and
unix_socket_dir, by every worker; the service manager's Unix socket path is
left in place at exit. The protocol is spoken here by the test itself, as
systemd would: listening sockets made before exec, moved to fds 3 and 4."""

import fcntl
import os
import socket
import subprocess
import tempfile

import psycopg
import pytest

import util

pytestmark = pytest.mark.pgcrew_only


def high_fd(sock):
    """A duplicate of sock's fd numbered >= 60, so moving it to 3 or 4 in the
    child cannot overwrite the other one."""
    return fcntl.fcntl(sock.fileno(), fcntl.F_DUPFD, 60)


def start_activated(p, fds, listen_pid="$$"):
    """Run pgcrew like systemd does: the given fds become 3, 4, ... and
    LISTEN_PID/LISTEN_FDS describe them (LISTEN_PID=$$ is the pid that exec
    keeps). The Pooler object then owns the process (teardown stops it)."""
    p.write_config()
    moves = " ".join(f"{3 + i}<&{fd} {fd}<&-" for i, fd in enumerate(fds))
    script = (f"exec {moves}; export LISTEN_PID={listen_pid} LISTEN_FDS={len(fds)}; "
              'exec "$0" "$@"')
    kw = util.service_popen_kwargs()
    env = p._env(kw.pop("env", None))
    binary = util.service_executable(p.binary, p.workdir)
    with open(p.stderr_path, "w") as err:
        p.proc = subprocess.Popen(["bash", "-c", script, binary, p.ini_path], cwd=p.workdir,
                                  env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                  pass_fds=fds, **kw)
    for fd in fds:
        os.close(fd)
    return p.proc


def listening_tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((util.HOST, 0))
    s.listen(64)
    return s


def listening_unix(port):
    d = tempfile.mkdtemp(prefix="sdsock-")
    os.chmod(d, 0o755)
    path = os.path.join(d, f".s.PGSQL.{port}")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o777)
    s.listen(64)
    return s, d, path


def query(**conninfo):
    with psycopg.connect(dbname="testdb", user="trust_user", connect_timeout=5,
                         autocommit=True, **conninfo) as conn:
        return conn.execute("SELECT current_database()").fetchone()[0]


def test_passed_sockets_replace_listen_addr(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": 2}, start=False)
    tcp = listening_tcp()
    tcp_port = tcp.getsockname()[1]
    unix, unix_dir, unix_path = listening_unix(tcp_port)
    proc = start_activated(p, [high_fd(tcp), high_fd(unix)])
    tcp.close()
    unix.close()   # pgcrew holds its own copies now

    p.wait_for_log(r"socket passed from service manager \(fd 4\)", timeout=10)
    log = p.log_text()
    assert "socket passed from service manager (fd 3)" in log
    assert "sockets passed from service manager, cf_listen_addr ignored" in log
    assert "sockets passed from service manager, cf_unix_socket_dir ignored" in log

    util.wait_until(lambda: util.port_accepts(tcp_port), 10, what="passed TCP socket")
    # Many connections at once, so both workers take some from the one queue.
    conns = [psycopg.connect(host=util.HOST, port=tcp_port, dbname="testdb",
                             user="trust_user", connect_timeout=5, autocommit=True)
             for _ in range(8)]
    try:
        for c in conns:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert query(host=unix_dir, port=tcp_port) == "testdb"
        # listen_addr/listen_port and unix_socket_dir were ignored.
        assert not util.port_accepts(p.port)
        assert not os.path.exists(os.path.join(p.workdir, f".s.PGSQL.{p.port}"))
        with psycopg.connect(host=util.HOST, port=tcp_port, dbname="pgbouncer",
                             user="trust_user", autocommit=True, connect_timeout=5) as adm:
            rows = adm.execute("SHOW WORKERS").fetchall()
        assert len(rows) == 2
    finally:
        for c in conns:
            c.close()

    proc.send_signal(2)   # SIGINT
    assert proc.wait(timeout=15) == 0
    # The service manager owns the path: pgcrew must not unlink it.
    assert os.path.exists(unix_path)


def test_listen_pid_of_another_process_is_ignored(pg15, make_pooler):
    """LISTEN_PID names another process: the fds are not ours (sd_listen_fds
    semantics), so pgcrew listens where its config says."""
    p = make_pooler(pg15, start=False)
    tcp = listening_tcp()
    start_activated(p, [high_fd(tcp)], listen_pid="1")
    tcp.close()
    util.wait_until(lambda: util.port_accepts(p.port), 10, what="configured port")
    assert query(host=util.HOST, port=p.port) == "testdb"
    assert "passed from service manager" not in p.log_text()


def test_passed_fd_that_is_not_a_listening_socket(pg15, make_pooler):
    p = make_pooler(pg15, start=False)
    a, b = socket.socketpair()
    proc = start_activated(p, [high_fd(a)])
    a.close()
    b.close()
    assert proc.wait(timeout=15) != 0
    assert "fd 3 passed from service manager is not a listening stream socket" in p.log_text()
    p.proc = None   # exited as it should: nothing for teardown to stop
