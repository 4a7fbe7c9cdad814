"""pgcrew's image, for real under podman: configured from the environment
as the common PgBouncer images are (DATABASE_URL, DB_*, settings by their
upper-case names), against a PostgreSQL container; psql through the
published port with SCRAM and TLS; the password in no log and no command
line; pgcrew as PID 1 and as user pgcrew; the probes flip during PAUSE and
shutdown; SIGTERM drains; a mounted pgbouncer.ini, reloaded on SIGHUP; bad
values stop the container with a clear message."""

import os
import subprocess

import psycopg
import pytest

import podman as pm


def psql(port, sql, dbname="postgres", sslmode="require", timeout=20):
    env = dict(os.environ, PGPASSWORD=pm.PG_PASSWORD, PGCONNECT_TIMEOUT="5")
    return subprocess.run(["psql", f"host={pm.HOST} port={port} dbname={dbname} user=postgres "
                           f"sslmode={sslmode}", "-XAtc", sql],
                          capture_output=True, text=True, env=env, timeout=timeout)


def connect(port, dbname="postgres", **kw):
    return psycopg.connect(host=pm.HOST, port=port, dbname=dbname, user="postgres",
                           password=pm.PG_PASSWORD, connect_timeout=5, autocommit=True, **kw)


@pytest.fixture
def tls(tmp_path):
    """A self-signed key and certificate the image's user can read."""
    d = tmp_path / "tls"
    d.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=pgcrew", "-keyout", d / "tls.key", "-out", d / "tls.crt"],
                   check=True, capture_output=True, timeout=60)
    for f in d.iterdir():
        os.chown(f, 6432, 6432)
        f.chmod(0o600)
    d.chmod(0o755)
    return d


def env_pgcrew(container, pg, net, tmp_path, tls, *extra):
    """pgcrew from the environment: the password in an env file, the rest
    as a PgBouncer image user would give it."""
    port, mport = pm.free_port(), pm.free_port()
    env = tmp_path / "pgcrew.env"
    env.write_text(f"DATABASE_URL=postgres://postgres@{pg}:5432/postgres\n"
                   f"DB_PASSWORD={pm.PG_PASSWORD}\n"
                   "POOL_MODE=transaction\nMAX_CLIENT_CONN=200\nDEFAULT_POOL_SIZE=5\nWORKERS=2\n"
                   "CLIENT_TLS_SSLMODE=require\nCLIENT_TLS_KEY_FILE=/tls/tls.key\n"
                   "CLIENT_TLS_CERT_FILE=/tls/tls.crt\n")
    name = container("--network", net, "-p", f"{pm.HOST}:{port}:5432", "-p", f"{pm.HOST}:{mport}:9127",
                     "-v", f"{tls}:/tls:ro", "--env-file", str(env), *extra, pm.IMAGE)
    pm.wait_status(mport, "/readyz", 200, 60)
    return name, port, mport


def test_env_config_psql_scram_tls(container, pg, net, tmp_path, tls):
    name, port, mport = env_pgcrew(container, pg, net, tmp_path, tls)
    r = psql(port, "SELECT current_user, 6 * 7")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "postgres|42"
    with connect(port, sslmode="require") as c:
        assert c.info.pgconn.ssl_in_use
    r = psql(port, "SELECT 1", sslmode="disable")   # client_tls_sslmode = require
    assert r.returncode != 0
    r = subprocess.run(["psql", f"host={pm.HOST} port={port} dbname=postgres user=postgres "
                        "sslmode=require password=wrong", "-XAtc", "SELECT 1"],
                       capture_output=True, text=True, timeout=20)
    assert "SASL authentication failed" in r.stderr       # SCRAM, as PgBouncer words it
    # pgcrew is PID 1, as the image's user; the secret is on no command
    # line and in no log line.
    top = pm.podman("top", name, "pid", "user", "args").stdout
    pid1 = [line for line in top.splitlines()[1:] if line.split()[0] == "1"]
    assert pid1 and pid1[0].split()[1] == "pgcrew" and "pgcrew /run/pgcrew/pgcrew.ini" in pid1[0], top
    assert len(top.splitlines()) == 1 + 3, top          # supervisor and 2 workers
    assert pm.PG_PASSWORD not in top
    log = pm.logs(name)
    assert pm.PG_PASSWORD not in log and "Sup3r" not in log
    assert "wrote /run/pgcrew/pgcrew.ini: database postgres" in log
    # The metrics endpoint is there too.
    status, body = pm.http_get(mport, "/metrics")
    assert status == 200 and "pgbouncer_up 1" in body


def test_probes_pause_and_sigterm_drain(container, pg, net, tmp_path, tls):
    name, port, mport = env_pgcrew(container, pg, net, tmp_path, tls)
    assert pm.http_get(mport, "/healthz") == (200, "ok\n")
    with connect(port, dbname="pgbouncer", sslmode="require") as adm:
        adm.execute("PAUSE")
        assert "paused" in pm.wait_status(mport, "/readyz", 503, 10)
        adm.execute("RESUME")
        pm.wait_status(mport, "/readyz", 200, 10)
    client = connect(port, sslmode="require")
    assert client.execute("SELECT 1").fetchone() == (1,)
    pm.podman("kill", "--signal", "TERM", name)
    assert "shutting down" in pm.wait_status(mport, "/readyz", 503, 10)
    assert pm.http_get(mport, "/healthz")[0] == 200
    # New clients are refused; the connected one is served until it leaves.
    r = psql(port, "SELECT 1")
    assert r.returncode != 0
    assert client.execute("SELECT 2").fetchone() == (2,)
    assert pm.podman("inspect", "-f", "{{.State.Running}}", name).stdout.strip() == "true"
    client.close()
    assert pm.exit_code(name, 30) == 0


def test_mounted_ini_and_sighup(container, pg, net, tmp_path):
    """A PgBouncer image user's files, mounted at /etc/pgbouncer, as
    edoburu's image writes them (user = postgres: ignored, not root)."""
    etc = tmp_path / "etc"
    etc.mkdir()
    quoted = pm.PG_PASSWORD.replace("'", "''")
    ini = etc / "pgbouncer.ini"
    ini.write_text("[databases]\n"
                   f"postgres = host={pg} port=5432 user=postgres password='{quoted}'\n"
                   "[pgbouncer]\nlisten_addr = 0.0.0.0\nlisten_port = 6432\n"
                   "auth_type = scram-sha-256\nauth_file = /etc/pgbouncer/userlist.txt\n"
                   "admin_users = postgres\nuser = postgres\nmetrics_listen = *:9127\n"
                   "workers = 1\n")
    (etc / "userlist.txt").write_text(f'"postgres" "{pm.PG_PASSWORD}"\n')
    for f in etc.iterdir():
        f.chmod(0o644)
    port, mport = pm.free_port(), pm.free_port()
    name = container("--network", net, "-p", f"{pm.HOST}:{port}:6432", "-p", f"{pm.HOST}:{mport}:9127",
                     "-v", f"{etc}:/etc/pgbouncer:ro", pm.IMAGE)
    pm.wait_status(mport, "/readyz", 200, 60)
    assert "using the mounted /etc/pgbouncer/pgbouncer.ini" in pm.logs(name)
    r = psql(port, "SELECT 1", sslmode="disable")
    assert r.returncode == 0 and r.stdout.strip() == "1", r.stderr
    assert psql(port, "SELECT 1", dbname="reloaded", sslmode="disable").returncode != 0
    with ini.open("a") as f:
        f.write(f"[databases]\nreloaded = host={pg} port=5432 dbname=postgres user=postgres "
                f"password='{quoted}'\n")
    pm.podman("kill", "--signal", "HUP", name)
    pm.wait_until(lambda: psql(port, "SELECT current_database()", dbname="reloaded",
                               sslmode="disable").stdout.strip() == "postgres",
                  15, what="the database added to the mounted ini after SIGHUP")
    assert "got SIGHUP" in pm.logs(name)


@pytest.mark.parametrize("env, message", [
    ({"DB_HOST": "db", "POOL_MODE": "bogus"}, "POOL_MODE: must be one of: session, transaction, statement"),
    ({"DB_HOST": "db", "DB_PORT": "99999"}, "DB_PORT (or DATABASE_URL's port) must be a number"),
    ({"DATABASE_URL": "mysql://u@h/db"}, "DATABASE_URL must start with postgres://"),
    ({"DB_HOST": "db", "PGBOUNCER_MAX_CLIENT_CONN": "lots"}, "PGBOUNCER_MAX_CLIENT_CONN: must be an integer"),
    ({}, "no configuration: mount /etc/pgbouncer/pgbouncer.ini"),
])
def test_bad_env_stops_the_container(env, message):
    args = []
    for k, v in env.items():
        args += ["-e", f"{k}={v}"]
    r = pm.podman("run", "--rm", *args, pm.IMAGE, check=False, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert f"pgcrew-entrypoint: FATAL: {message}" in r.stderr


def test_image_facts():
    info = pm.podman("image", "inspect", "-f", "{{.Config.User}} {{.Config.Entrypoint}} {{.Size}}",
                     pm.IMAGE).stdout.split()
    assert info[0] == "6432:6432"
    assert "/usr/libexec/pgcrew/pgcrew-entrypoint" in info[1]
    print(f"image {pm.IMAGE}: {int(info[-1]) / 1e6:.0f} MB")
    r = pm.podman("run", "--rm", pm.IMAGE, "-V", timeout=60)
    assert r.stdout.startswith("pgcrew ") or r.stderr.startswith("pgcrew "), r
