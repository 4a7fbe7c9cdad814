"""pgbench through the pooler in transaction mode: many clients, few
servers, no failed transaction. Runs -T PGBENCH_SECONDS (default 10; scripts/test.sh sets 5 in CI)."""

import os

import pytest

from bench import run_pgbench

# serial: a benchmark's load (40 clients), run alone.
pytestmark = pytest.mark.serial
SECONDS = int(os.environ.get("PGBENCH_SECONDS", "10"))


def test_pgbench_transaction_mode(pgbench_pg15, make_pooler):
    pg = pgbench_pg15
    p = make_pooler(pg, settings={"pool_mode": "transaction", "default_pool_size": 10,
                                  "max_client_conn": 100})
    rc, output, summary = run_pgbench(p, clients=40, seconds=SECONDS, threads=2)
    assert rc == 0, output
    assert summary["failed"] == 0, output
    assert summary["processed"] and summary["processed"] > 100, output
    assert pg.server_connections("testdb", "trust_user") <= 10
