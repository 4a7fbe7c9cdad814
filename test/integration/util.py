"""Small shared helpers for the integration harness: ports, the OS user that
runs servers and the pooler, bounded waiting. Everything here is bounded in
time and talks to 127.0.0.1 only."""

import os
import pwd
import shutil
import signal
import socket
import subprocess
import stat
import threading
import time

HOST = "127.0.0.1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# PostgreSQL refuses to run as root, and PgBouncer does too, so when the
# tests run as root both run as this OS user.
SERVICE_USER = "postgres"


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def running_as_root():
    return os.geteuid() == 0


def service_popen_kwargs():
    """Extra subprocess.Popen arguments that drop root to SERVICE_USER."""
    if not running_as_root():
        return {}
    pw = pwd.getpwnam(SERVICE_USER)
    env = dict(os.environ, HOME=pw.pw_dir, USER=SERVICE_USER, LOGNAME=SERVICE_USER)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "env": env}


def give_to_service_user(path):
    """Make a directory we created usable by SERVICE_USER (recursively)."""
    if not running_as_root():
        return
    pw = pwd.getpwnam(SERVICE_USER)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)


def _world_reachable(path):
    """True if a non-owner can execute path: every parent is o+x and the file o+rx."""
    path = os.path.abspath(path)
    mode = os.stat(path).st_mode
    if (mode & (stat.S_IROTH | stat.S_IXOTH)) != (stat.S_IROTH | stat.S_IXOTH):
        return False
    parent = os.path.dirname(path)
    while True:
        if not os.stat(parent).st_mode & stat.S_IXOTH:
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def service_executable(path, scratch_dir):
    """Path to run `path` from as SERVICE_USER: in place if reachable,
    otherwise a copy in scratch_dir (a checkout under /root is not)."""
    if not running_as_root() or _world_reachable(path):
        return path
    copy = os.path.join(scratch_dir, os.path.basename(path))
    if not os.path.exists(copy):
        shutil.copy2(path, copy)
        os.chmod(copy, 0o755)
    return copy


def wait_until(predicate, timeout, interval=0.05, what="condition"):
    """Poll predicate() until it returns a truthy value; bounded by timeout.
    Returns the value, or raises AssertionError naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def cancel_when_active(pg, conn, like):
    """Cancels conn's query from a thread once pg shows a query LIKE `like`
    running (a cancel sent before the query reached a server would find
    nothing to cancel, and a fixed delay may be too short on a busy
    machine). Returns the started thread; its sent_at is when it sent."""
    def run():
        pg.wait_active(like)
        t.sent_at = time.monotonic()
        conn.cancel()
    t = threading.Thread(target=run)
    t.sent_at = None
    t.start()
    return t


def port_accepts(port, host=HOST):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def end_process(proc, sig=signal.SIGTERM, timeout=10):
    """Ends a process this test started: sig, then SIGKILL if it lingers."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
