"""Peer authentication (HBA method peer on local lines): the OS user of a
Unix-socket client, from SO_PEERCRED, must equal the requested user or be
mapped to it by auth_ident_file (map=). Clients run as a given OS user with
setpriv; psycopg in the test process is the test's own OS user (root or not,
never the service user's mapped names)."""

import os
import pwd
import subprocess

import psycopg
import pytest

import util
from pg_cluster import PG15_BINDIR, password

# PostgreSQL's wording (PgBouncer says "unix socket login rejected").
pytestmark = pytest.mark.pgcrew_only

HBA = """
local   all   postgres     peer
local   all   trust_user   peer map=m
local   all   md5_user     peer
host    all   all          127.0.0.1/32   peer
"""
IDENT = "m  postgres  trust_user\n"


def failed(user):
    return f'Peer authentication failed for user "{user}"'


@pytest.fixture
def peer_pooler(pg15, make_pooler):
    if not util.running_as_root():
        pytest.skip("needs root to run clients as another OS user")
    users = {db: pg15.dsn(db) for db in ("testdb", "otherdb")}
    # The OS user postgres logs in as itself; its server login is trust_user's.
    users["peerdb"] = pg15.dsn("testdb", user="trust_user", password=password("trust_user"))
    p = make_pooler(pg15, settings={"auth_type": "hba"}, databases=users, hba=HBA, start=False)
    p.userlist["postgres"] = "unused"
    ident = os.path.join(p.workdir, "ident.conf")
    with open(ident, "w") as f:
        f.write(IDENT)
    p.settings["auth_ident_file"] = ident
    p.start()
    return p


def psql_as(os_user, p, user, dbname):
    """psql over the Unix socket as OS user os_user: (returncode, output)."""
    pw = pwd.getpwnam(os_user)
    cmd = ["timeout", "20", "setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}",
           "--clear-groups", os.path.join(PG15_BINDIR, "psql"), "-X", "-A", "-t",
           "-h", p.workdir, "-p", str(p.port), "-U", user, "-d", dbname,
           "-c", "SELECT current_user"]
    env = dict(os.environ, PGCONNECT_TIMEOUT="5", HOME=pw.pw_dir)
    env.pop("PGPASSWORD", None)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env, cwd="/")
    return out.returncode, (out.stdout + out.stderr).strip()


def test_peer_same_name(peer_pooler):
    rc, out = psql_as("postgres", peer_pooler, "postgres", "peerdb")
    assert rc == 0, out
    assert out == "trust_user"


def test_peer_mapped(peer_pooler):
    rc, out = psql_as("postgres", peer_pooler, "trust_user", "testdb")
    assert rc == 0, out
    assert out == "trust_user"


def test_peer_wrong_user(peer_pooler):
    # OS user postgres asking for md5_user: no map, names differ.
    rc, out = psql_as("postgres", peer_pooler, "md5_user", "testdb")
    assert rc != 0 and failed("md5_user") in out, out
    # The test process (root) is not in map m.
    with pytest.raises(psycopg.OperationalError, match=failed("trust_user")):
        psycopg.connect(host=peer_pooler.workdir, port=peer_pooler.port, dbname="testdb",
                        user="trust_user", connect_timeout=5)
    log = open(peer_pooler.logfile).read()
    assert 'no match in ident map "m" for OS user "root"' in log
    assert "provided user name (md5_user) and authenticated user name (postgres) do not match" in log


def test_peer_on_tcp_refused(peer_pooler):
    with pytest.raises(psycopg.OperationalError, match="pg_hba.conf rejects connection"):
        peer_pooler.connect(dbname="testdb", user="trust_user", connect_timeout=5)
    assert "peer authentication is only available on local connections" in open(
        peer_pooler.logfile).read()
