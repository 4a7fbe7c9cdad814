"""Small shared helpers for the integration harness: ports, the OS user that
runs servers and the pooler, bounded waiting. Everything here is bounded in
time and talks to 127.0.0.1 only."""

import fcntl
import os
import pwd
import shutil
import signal
import socket
import subprocess
import stat
import tempfile
import threading
import time

HOST = "127.0.0.1"
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# PostgreSQL refuses to run as root, and PgBouncer does too, so when the
# tests run as root both run as this OS user.
SERVICE_USER = "postgres"


# Ports for servers the tests start (poolers, PostgreSQL, slapd, etcd...).
# Each pytest process (each xdist worker, or the one process of a serial
# run) hands them out from a block of its own, claimed with a lock file held
# for the process's life, so two runners never choose the same port between
# choosing it and binding it, whatever the other test sessions on the
# machine (another checkout, another run) do: they claim other blocks. The
# blocks lie below the kernel's ephemeral range, where the local ports of
# outgoing connections (and of bind to port 0) come from. Inside its block a
# process goes round, skipping ports something still holds.
PORT_BASE = 20000
PORT_BLOCK = 400
PORT_LOCK_DIR = os.path.join(tempfile.gettempdir(), "pgcrew-it-ports")
_ports = {"lock": None, "base": None, "next": 0}


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _claim_port_block():
    """Lock the first free block; its first port, or None if all are taken."""
    os.makedirs(PORT_LOCK_DIR, exist_ok=True)
    try:
        os.chmod(PORT_LOCK_DIR, 0o1777)
    except OSError:
        pass                    # made by another user: usable as it is
    for i in range((_ephemeral_low() - PORT_BASE) // PORT_BLOCK):
        try:
            f = open(os.path.join(PORT_LOCK_DIR, f"block-{i}"), "a")
        except OSError:
            continue
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _ports["lock"] = f      # kept open: the lock lasts as long as the process
        return PORT_BASE + i * PORT_BLOCK
    return None


def _port_unused(port):
    """Nothing holds port on any address: a bind to the wildcard address
    without SO_REUSEADDR fails on any listener, connection or TIME_WAIT."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("", port))
            return True
        except OSError:
            return False


def free_port():
    """A TCP port, free on every address a moment ago, that no other test
    process hands out (see PORT_BASE)."""
    if _ports["base"] is None:
        _ports["base"] = _claim_port_block() or 0
    if _ports["base"]:
        for _ in range(PORT_BLOCK):
            port = _ports["base"] + _ports["next"]
            _ports["next"] = (_ports["next"] + 1) % PORT_BLOCK
            if _port_unused(port):
                return port
    # No block (every one taken, or a narrow port range): the kernel's choice.
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
