"""The short soak of CI: 2,000 client connections held open through pgcrew
(workers = 2, transaction pooling), 200 of them running pgbench -S for
SOAK_SECONDS (default 60): no errors, no idle client dropped, RSS flat after
warm-up, SHOW POOLS consistent. test/soak/soak.py runs the long version
(10,000 clients, 1,000 active, 5 minutes)."""

import os
import resource
import sys

import pytest

from test_pgcrew_only import children

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "soak"))
import soak  # noqa: E402

# serial: 2,000 clients and a minute of pgbench, with RSS measured.
pytestmark = [pytest.mark.pgcrew_only, pytest.mark.serial]

CLIENTS = 2000
ACTIVE = 200


def test_soak_short(pgbench_pg15, make_pooler):
    seconds = int(os.environ.get("SOAK_SECONDS", "60"))
    old = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = soak.raise_fd_limit(CLIENTS * 2 + 1000)
    assert limit >= CLIENTS + 500, f"descriptor limit {limit}"
    try:
        p = make_pooler(pgbench_pg15, settings={
            "pool_mode": "transaction", "workers": 2, "max_client_conn": CLIENTS + 100,
            "default_pool_size": 20, "query_wait_timeout": 60},
            # Servers moving between workers allocate and free a little:
            # ASan's default quarantine would show that as RSS growth.
            asan_quarantine_mb=4)
        figures = soak.run_soak(p, pgbench_pg15, CLIENTS, ACTIVE, seconds, children)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, old)
    print(f"soak: {figures}")
