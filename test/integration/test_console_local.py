"""PgBouncer's console rule for the local administrator: user "pgbouncer"
over the Unix socket, from the UID pgcrew runs as, gets the console without
a password and with admin rights; from another UID, or over TCP, it is an
ordinary user, here one without a password in auth_file: its login fails
as any unknown user's does (PgBouncer 1.25 looks the user up before it
says "not allowed")."""

import os
import subprocess

import pytest

import util


def psql_console(p, host, sql, as_service_user):
    cmd = ["psql", "-X", "-At", "-h", host, "-p", str(p.port), "-U", "pgbouncer",
           "-d", "pgbouncer", "-c", sql]
    if as_service_user:
        cmd = ["setpriv", f"--reuid={util.SERVICE_USER}", f"--regid={util.SERVICE_USER}",
               "--init-groups"] + cmd
    env = dict(os.environ, PGCONNECT_TIMEOUT="10", PGPASSWORD="wrong")
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)


def test_local_admin_same_uid(pg15, make_pooler):
    if os.geteuid() != 0:
        pytest.fail("needs root to run psql as the service user")
    p = make_pooler(pg15, settings={"auth_type": "md5", "admin_users": "trust_user"})
    r = psql_console(p, p.workdir, "SHOW VERSION", as_service_user=True)
    assert r.returncode == 0 and r.stdout.startswith(("pgcrew", "PgBouncer")), r.stderr
    # Admin rights, not only SHOW: PAUSE/RESUME are allowed.
    r = psql_console(p, p.workdir, "RESUME", as_service_user=True)
    assert "admin access needed" not in r.stderr, r.stderr
    # Another UID (root) on the same socket, and TCP: an ordinary login.
    r = psql_console(p, p.workdir, "SHOW VERSION", as_service_user=False)
    assert r.returncode != 0 and "password authentication failed" in r.stderr, r.stderr
    r = psql_console(p, util.HOST, "SHOW VERSION", as_service_user=True)
    assert r.returncode != 0 and "password authentication failed" in r.stderr, r.stderr
