"""PgBouncer's console rule for the local administrator: user "pgbouncer"
over the Unix socket, from the UID pgcrew runs as, gets the console without
a password and with admin rights; from another UID, or over TCP, it is an
ordinary user (refused here: not in admin_users or stats_users)."""

import os
import subprocess

import pytest

import util

pytestmark = pytest.mark.pgcrew_only


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
    assert r.returncode == 0 and r.stdout.startswith("pgcrew"), r.stderr
    # Admin rights, not only SHOW: PAUSE/RESUME are allowed.
    r = psql_console(p, p.workdir, "RESUME", as_service_user=True)
    assert "admin access needed" not in r.stderr, r.stderr
    # Another UID (root) on the same socket, and TCP: not allowed.
    r = psql_console(p, p.workdir, "SHOW VERSION", as_service_user=False)
    assert r.returncode != 0 and "not allowed" in r.stderr, r.stderr
    r = psql_console(p, util.HOST, "SHOW VERSION", as_service_user=True)
    assert r.returncode != 0 and "not allowed" in r.stderr, r.stderr
