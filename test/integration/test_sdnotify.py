"""systemd readiness (sd_notify, the packaged unit's Type=notify): READY=1
once every worker accepts connections, RELOADING=1 then READY=1 around a
SIGHUP, STOPPING=1 at SIGINT; one datagram each to $NOTIFY_SOCKET."""

import os
import signal
import socket
import subprocess
import time

import pytest

import util

pytestmark = pytest.mark.pgcrew_only


def read_until(sock, word, timeout=10):
    """Datagrams until one holds word (a line of it); returns them all."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append(msg)
        if word in msg.split("\n"):
            return got
    pytest.fail(f"no {word} from pgcrew within {timeout}s; got {got}")


def test_ready_reload_stopping(pg15, make_pooler):
    p = make_pooler(pg15, settings={"workers": 2}, start=False)
    p.write_config()
    path = os.path.join(p.workdir, "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    os.chmod(path, 0o777)
    kw = util.service_popen_kwargs()
    env = p._env(kw.pop("env", None))
    env["NOTIFY_SOCKET"] = path
    binary = util.service_executable(p.binary, p.workdir)
    proc = subprocess.Popen([binary, p.ini_path], cwd=p.workdir, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, **kw)
    try:
        ready = read_until(sock, "READY=1")
        assert any(f"MAINPID={proc.pid}" in m for m in ready), ready
        # READY=1 means connections are accepted now.
        with p.connect() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        proc.send_signal(signal.SIGHUP)
        seen = read_until(sock, "READY=1")
        assert any("RELOADING=1" in m.split("\n") for m in seen), seen
        proc.send_signal(signal.SIGINT)
        read_until(sock, "STOPPING=1")
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        sock.close()
    assert not p.sanitizer_problems(), p.sanitizer_problems()
