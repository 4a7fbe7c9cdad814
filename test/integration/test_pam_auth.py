"""PAM authentication: auth_type = pam (PgBouncer's service name
"pgbouncer") and the HBA pam method with pamservice=. The test writes its
own PAM service into /etc/pam.d/ under a unique name (removed at teardown):
pam_exec runs a script that accepts one user/password pair, so success and
failure are deterministic without touching the machine's accounts."""

import os
import uuid

import psycopg
import pytest

import util

pytestmark = pytest.mark.pgcrew_only

PAM_PASSWORD = "pam-pass"
CHECK = """#!/bin/sh
# pam_exec expose_authtok: the password arrives on stdin.
pw=$(tr -d '\\000')
[ "$PAM_USER" = trust_user ] && [ "$pw" = "{pw}" ] && [ -n "$PAM_RHOST" ]
"""


@pytest.fixture(scope="module")
def pam_service(session_dir):
    if not util.running_as_root():
        pytest.skip("needs root to write a PAM service into /etc/pam.d")
    lib = "/lib/x86_64-linux-gnu/security/pam_exec.so"
    if not os.path.exists(lib) and not os.path.exists("/usr/lib/x86_64-linux-gnu/security/pam_exec.so"):
        pytest.skip("pam_exec not installed")
    d = os.path.join(session_dir, "pam")
    os.makedirs(d)
    os.chmod(d, 0o755)
    script = os.path.join(d, "check.sh")
    with open(script, "w") as f:
        f.write(CHECK.format(pw=PAM_PASSWORD))
    os.chmod(script, 0o755)
    name = f"pgcrew-test-{uuid.uuid4().hex[:12]}"
    path = os.path.join("/etc/pam.d", name)
    with open(path, "w") as f:
        f.write(f"auth     required  pam_exec.so expose_authtok quiet {script}\n"
                "account  required  pam_permit.so\n")
    try:
        yield name
    finally:
        os.unlink(path)


def login(p, user, pw, **kw):
    with p.connect(dbname="testdb", user=user, password=pw, connect_timeout=10, **kw) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


def test_pam_hba_service(pg15, make_pooler, pam_service):
    hba = f"host all all 127.0.0.1/32 pam pamservice={pam_service}\n"
    p = make_pooler(pg15, settings={"auth_type": "hba"}, hba=hba)
    assert login(p, "trust_user", PAM_PASSWORD) == "trust_user"
    with pytest.raises(psycopg.OperationalError, match="auth failed"):
        login(p, "trust_user", "wrong")
    with pytest.raises(psycopg.OperationalError, match="auth failed"):
        login(p, "md5_user", PAM_PASSWORD)
    assert "pam_authenticate() failed" in open(p.logfile).read()


def test_pam_auth_type_default_service(pg15, make_pooler, pam_service):
    # PgBouncer's service name "pgbouncer": with no such file in /etc/pam.d,
    # PAM uses "other" (pam_unix on Debian), where trust_user is no account.
    if os.path.exists("/etc/pam.d/pgbouncer"):
        pytest.skip("/etc/pam.d/pgbouncer exists on this machine")
    p = make_pooler(pg15, settings={"auth_type": "pam"})
    with pytest.raises(psycopg.OperationalError, match="auth failed"):
        login(p, "trust_user", PAM_PASSWORD)
    assert "pam_authenticate() failed" in open(p.logfile).read()


@pytest.mark.parametrize("workers", [1, 4])
@pytest.mark.parametrize("repl", [None, "true"])
def test_pam_unknown_database(pg15, make_pooler, pam_service, workers, repl):
    """A right PAM password for a database pgcrew does not have is answered
    with PgBouncer's `no such database` (the check runs first, so only
    valid credentials learn which databases exist) and costs nobody
    else anything: the client has no database and no pool (issue 32)."""
    from test_pgcrew_only import children
    hba = (f"host all all 127.0.0.1/32 pam pamservice={pam_service}\n"
           f"host replication all 127.0.0.1/32 pam pamservice={pam_service}\n")
    p = make_pooler(pg15, settings={"auth_type": "hba", "workers": workers}, hba=hba)
    pids = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == workers else None,
                           10, what="every worker up")
    before = [p.connect(dbname="testdb", user="trust_user", password=PAM_PASSWORD)
              for _ in range(2 * workers)]
    kw = {"replication": repl} if repl else {}
    for _ in range(2 * workers):
        with pytest.raises(psycopg.OperationalError, match="no such database: nosuch"):
            p.connect(dbname="nosuch", user="trust_user", password=PAM_PASSWORD,
                      connect_timeout=10, **kw)
    assert children(p.pid) == pids, "a worker died and was respawned"
    for conn in before:
        assert conn.execute("SELECT 1").fetchone() == (1,)
