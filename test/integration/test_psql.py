"""psql through the pooler: a query, a multi-statement script, and the
admin console (which speaks only the simple query protocol)."""

import os
import shutil
import subprocess

import pytest

from pg_cluster import PG15_BINDIR, password


def psql_binary():
    path = os.path.join(PG15_BINDIR, "psql")
    return path if os.path.exists(path) else shutil.which("psql")


def psql(p, sql, dbname="testdb", user="trust_user"):
    proc = subprocess.run(
        [psql_binary(), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql,
         f"host={p.host} port={p.port} dbname={dbname} user={user} connect_timeout=5"],
        env=dict(os.environ, PGPASSWORD=password(user)),
        capture_output=True, text=True, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


def test_psql_query(pg, make_pooler):
    p = make_pooler(pg, settings={"auth_type": "md5"})
    rc, out, err = psql(p, "SELECT current_user || '@' || current_database()",
                        user="md5_user")
    assert rc == 0, err
    assert out.strip() == "md5_user@testdb"


def test_psql_script_in_transaction_mode(pg15, make_pooler):
    p = make_pooler(pg15, settings={"pool_mode": "transaction"})
    rc, out, err = psql(p, "BEGIN; CREATE TEMP TABLE t (x int); INSERT INTO t VALUES (1), (2);"
                           " SELECT sum(x) FROM t; COMMIT;")
    assert rc == 0, err
    assert "3" in out.split()


def test_psql_error_is_reported(pg15, make_pooler):
    p = make_pooler(pg15)
    rc, out, err = psql(p, "SELECT * FROM no_such_table")
    assert rc != 0
    assert 'relation "no_such_table" does not exist' in err


@pytest.mark.parametrize("command,expect", [
    ("SHOW DATABASES", "testdb"),
    ("SHOW POOLS", "trust_user"),
    ("SHOW VERSION", ""),
])
def test_admin_console(pg15, make_pooler, command, expect):
    p = make_pooler(pg15)
    with p.connect() as conn:  # so that a pool exists for SHOW POOLS
        conn.execute("SELECT 1")
        rc, out, err = psql(p, command, dbname="pgbouncer")
    assert rc == 0, err
    assert out.strip(), f"{command} returned nothing"
    assert expect in out
