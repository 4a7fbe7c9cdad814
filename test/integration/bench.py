"""Running pgbench through the pooler and reading its summary."""

import os
import re
import subprocess

from pg_cluster import password, pgbench_binary


def pgbench_command(pooler, clients, seconds, user="trust_user", threads=2, extra=()):
    return [pgbench_binary(), "-h", pooler.host, "-p", str(pooler.port), "-U", user,
            "-c", str(clients), "-j", str(threads), "-T", str(seconds), "-n",
            *extra, "testdb"]


def pgbench_env(user="trust_user"):
    return dict(os.environ, PGPASSWORD=password(user), PGCONNECT_TIMEOUT="10")


def run_pgbench(pooler, clients, seconds, user="trust_user", **kw):
    """Run pgbench to completion; returns (returncode, output, summary)."""
    proc = subprocess.run(pgbench_command(pooler, clients, seconds, user, **kw),
                          env=pgbench_env(user), capture_output=True, text=True,
                          timeout=seconds + 30)
    output = proc.stdout + proc.stderr
    return proc.returncode, output, parse_summary(output)


def parse_summary(output):
    """Numbers from pgbench's summary: processed, failed (None if absent)."""
    summary = {}
    m = re.search(r"number of transactions actually processed: (\d+)", output)
    summary["processed"] = int(m.group(1)) if m else None
    m = re.search(r"number of failed transactions: (\d+)", output)
    summary["failed"] = int(m.group(1)) if m else None
    m = re.search(r"tps = ([\d.]+)", output)
    summary["tps"] = float(m.group(1)) if m else None
    return summary
