"""pytest wiring for the integration suite: picks the pooler binary, starts the
session's PostgreSQL servers, and hands tests a factory of Pooler processes.

PGCREW_BIN selects the binary (default: _build/sanitize/pgcrew). When it is
PgBouncer, tests marked pgcrew_only are skipped and pgcrew-only settings are
never written; nothing is skipped when testing pgcrew."""

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pg_cluster  # noqa: E402
import pooler as pooler_mod  # noqa: E402
import util  # noqa: E402

DEFAULT_BIN = os.path.join(util.REPO_ROOT, "_build", "sanitize", "pgcrew")


def pytest_configure(config):
    binary = os.environ.get("PGCREW_BIN", DEFAULT_BIN)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        raise pytest.UsageError(f"pooler binary {binary} not found: build it "
                                "(scripts/test.sh) or set PGCREW_BIN")
    config.pooler_binary = os.path.abspath(binary)
    config.pooler_kind = pooler_mod.binary_kind(binary)


def pytest_report_header(config):
    return f"pooler: {config.pooler_binary} ({config.pooler_kind})"


def pytest_collection_modifyitems(config, items):
    if config.pooler_kind != "pgbouncer":
        return
    skip = pytest.mark.skip(reason="pgcrew-only behaviour (validating against PgBouncer)")
    for item in items:
        if "pgcrew_only" in item.keywords:
            item.add_marker(skip)


def pytest_generate_tests(metafunc):
    """A module that sets WORKERS_MATRIX = (1, 4) runs each of its tests once
    per worker count (ids w1, w4): what holds for one PgBouncer must hold
    for several workers. A test marked fixed_workers chooses its own."""
    matrix = getattr(metafunc.module, "WORKERS_MATRIX", None)
    if (matrix and "pooler_workers" in metafunc.fixturenames
            and not metafunc.definition.get_closest_marker("fixed_workers")):
        metafunc.parametrize("pooler_workers", matrix, indirect=True,
                             ids=[f"w{w}" for w in matrix])


@pytest.fixture
def pooler_workers(request):
    """The worker count of WORKERS_MATRIX for this test, or None."""
    return getattr(request, "param", None)


@pytest.fixture(scope="session")
def worker_id(request):
    """pytest-xdist's name for this runner (gw0, gw1, ...), "master" when
    the suite runs in one process (pytest-xdist has a fixture of this name;
    this one also works without the plugin)."""
    wi = getattr(request.config, "workerinput", None)
    return wi["workerid"] if wi else "master"


@pytest.fixture(scope="session")
def pooler_kind(pytestconfig):
    return pytestconfig.pooler_kind


@pytest.fixture(scope="session")
def session_dir(request, worker_id):
    """The scratch directory of this pytest process. Under pytest-xdist each
    worker is a process with its own session fixtures, so each has its own
    directory, PostgreSQL clusters (pg15, pg18) and block of ports
    (util.free_port): a test counting the backends of a cluster counts only
    its own runner's."""
    path = tempfile.mkdtemp(prefix=f"pgcrew-it-{worker_id}-")
    os.chmod(path, 0o755)
    yield path
    if request.session.testsfailed == 0:
        shutil.rmtree(path, ignore_errors=True)
    else:
        print(f"\nintegration scratch kept for inspection: {path}")


def _cluster(name, bindir, session_dir):
    base = os.path.join(session_dir, name)
    os.makedirs(base)
    cluster = pg_cluster.PgCluster(name, bindir, base)
    try:
        cluster.init()
    except Exception:
        cluster.stop("immediate")
        raise
    return cluster


@pytest.fixture(scope="session")
def pg15(session_dir):
    cluster = _cluster("pg15", pg_cluster.PG15_BINDIR, session_dir)
    yield cluster
    cluster.stop("immediate")


@pytest.fixture(scope="session")
def pg18(session_dir):
    bindir = pg_cluster.unpack_pg18(os.path.join(session_dir, "pg18-install"))
    cluster = _cluster("pg18", bindir, session_dir)
    yield cluster
    cluster.stop("immediate")


@pytest.fixture(params=["pg15", "pg18"])
def pg(request):
    """Each PostgreSQL version in turn."""
    return request.getfixturevalue(request.param)


def default_userlist():
    return {user: pg_cluster.password(user) for user in pg_cluster.USERS}


@pytest.fixture
def make_pooler(request, pytestconfig, session_dir, pooler_workers):
    """Factory: make_pooler(pg, settings={...}, databases=..., users=...,
    userlist=..., start=True). Databases default to testdb and otherdb of pg;
    the userlist to every test user with its plaintext password. Every pooler
    is stopped (and checked for sanitizer reports) at teardown."""
    made = []
    clusters = []
    counter = [0]
    request.node.pgcrew_poolers = made      # for a failed test's report (below)

    def factory(pg, settings=None, databases=None, users=None, userlist=None,
                hba=None, start=True, asan_quarantine_mb=None):
        counter[0] += 1
        if pooler_workers is not None and "workers" not in (settings or {}):
            settings = dict(settings or {}, workers=pooler_workers)
        # Only safe characters: the path goes into ASAN_OPTIONS, where spaces
        # and colons separate options. The workdir holds the pooler's Unix
        # socket, so it and "/.s.PGSQL.<port>" must fit in sun_path (107
        # characters): the test's name is cut to what room is left.
        suffix = f"-{counter[0]}"
        room = 107 - len(session_dir) - len("/-12345678/.s.PGSQL.65535") - len(suffix)
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", request.node.name)[:max(room, 8)] + suffix
        workdir = tempfile.mkdtemp(prefix=name + "-", dir=session_dir)
        os.chmod(workdir, 0o755)
        if databases is None:
            databases = {db: pg.dsn(db) for db in pg_cluster.DATABASES}
        p = pooler_mod.Pooler(pytestconfig.pooler_binary, pytestconfig.pooler_kind,
                              workdir, settings, databases, users,
                              default_userlist() if userlist is None else userlist, hba,
                              asan_quarantine_mb)
        made.append(p)
        clusters.append(pg)
        if start:
            p.start()
        return p

    yield factory
    errors = []
    for p in made:
        try:
            p.stop()
        except AssertionError as exc:
            errors.append(str(exc))
    # Backends of a stopped pooler exit asynchronously: wait them out so the
    # next test counts only its own server connections.
    for cluster in {id(c): c for c in clusters}.values():
        if not cluster.running():
            continue            # a test stopped it (test_failover.py)
        try:
            util.wait_until(lambda: cluster.server_connections() == 0, 10,
                            what=f"{cluster.name} backends of stopped poolers to exit")
        except AssertionError as exc:
            errors.append(str(exc))
    if errors:
        pytest.fail("\n\n".join(errors), pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report carries each of its poolers' log tail and
    stderr, read before teardown stops them: a one-off failure in CI (a
    refused connection, say) can then be told from the pooler's side."""
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" or not rep.failed:
        return
    for p in getattr(item, "pgcrew_poolers", []):
        try:
            rep.sections.append((f"pooler {os.path.basename(p.workdir)}", p.diagnostics()))
        except Exception as exc:  # noqa: BLE001 - the report must not fail
            rep.sections.append(("pooler", f"no diagnostics: {exc}"))


def _pgbench_init(cluster):
    if getattr(cluster, "pgbench_ready", False):
        return
    subprocess.run([pg_cluster.pgbench_binary(), "-i", "-s", "1", "-q",
                    "-h", cluster.host, "-p", str(cluster.port),
                    "-U", pg_cluster.SUPERUSER, "testdb"],
                   check=True, capture_output=True, timeout=120)
    with cluster.connect("testdb") as conn:
        conn.execute("GRANT ALL ON ALL TABLES IN SCHEMA public TO PUBLIC")
    cluster.pgbench_ready = True


@pytest.fixture
def pgbench_pg15(pg15):
    """pg15 with pgbench tables in testdb, writable by every test user."""
    _pgbench_init(pg15)
    return pg15


@pytest.fixture(scope="session")
def tls_files(session_dir):
    """A throwaway CA and a server certificate for 127.0.0.1 signed by it."""
    d = os.path.join(session_dir, "tls")
    os.makedirs(d)

    def openssl(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext.cnf"), "w") as f:
        f.write("subjectAltName = IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", "ext.cnf")
    os.chmod(os.path.join(d, "server.key"), 0o600)
    util.give_to_service_user(d)
    return {name: os.path.join(d, name) for name in ("ca.crt", "server.crt", "server.key")}
