"""Helpers of the container tests: podman with a time bound on every call,
free ports, bounded polls, the probes over HTTP, and names unique to this
run so that nothing of another run (or anyone else's) is touched."""

import http.client
import os
import socket
import subprocess
import time

RUN = f"pgcrew-ct-{os.getpid()}"          # every name this run makes starts so
IMAGE = os.environ.get("PGCREW_IMAGE", "localhost/pgcrew:latest")
PG_IMAGE = os.environ.get("PGCREW_PG_IMAGE", "localhost/pgcrew-test-postgres:latest")
PG_PASSWORD = "Sup3r secret'pw"           # a space and a quote: quoting is tested too
HOST = "127.0.0.1"


def podman(*args, timeout=120, check=True, input=None):
    r = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout,
                       input=input)
    if check and r.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {r.returncode}\n{r.stdout}\n{r.stderr}")
    return r


def free_port():
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def wait_until(fn, timeout, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = fn()
            if v:
                return v
        except Exception as e:              # noqa: BLE001 - kept for the message
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what} (last error: {last})")
        time.sleep(interval)


def http_get(port, path, timeout=3):
    conn = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def wait_status(port, path, status, timeout=30):
    def answered():
        s, body = http_get(port, path)
        return body if s == status else None
    return wait_until(answered, timeout, what=f"{path} on port {port} to answer {status}")


def logs(name):
    r = podman("logs", name, check=False, timeout=30)
    return r.stdout + r.stderr


def remove(*names):
    for n in names:
        podman("rm", "-f", "-t", "5", n, check=False, timeout=60)


def exit_code(name, timeout):
    """podman wait, bounded: the container's exit status."""
    r = podman("wait", name, timeout=timeout)
    return int(r.stdout.strip().splitlines()[-1])
