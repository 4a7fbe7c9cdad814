"""The throwaway environment shared by bench/run, bench/connect and bench/idle:
a PostgreSQL 15 with SCRAM and TLS on 127.0.0.1, a self-signed CA, one
PgBouncer-format ini shared by pgcrew and PgBouncer, and the poolers as
child processes observed through /proc.

Everything lives under one scratch directory. Every process started here is
stopped by its pid; every wait is bounded."""

import base64
import csv
import glob
import hashlib
import hmac
import os
import pwd
import re
import secrets
import signal
import socket
import subprocess
import sys
import time

PGBIN = "/usr/lib/postgresql/15/bin"
PGBOUNCER_DEBIAN = "/usr/sbin/pgbouncer"   # Debian 12's PgBouncer 1.18
# PgBouncer 1.25.2 as scripts/pgbouncer_ref.sh builds it (scripts/deps.sh test
# runs that): the version the targets are set against.
PGBOUNCER_REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                             ".cache", "pgbouncer-1.25.2", "bin", "pgbouncer")


def default_pgbouncer():
    """The PgBouncer every bench runs unless told otherwise (--pgbouncer):
    $PGBOUNCER_BIN when set, else the 1.25.2 reference build when it is
    there, else Debian's 1.18."""
    given = os.environ.get("PGBOUNCER_BIN")
    if given:
        return given
    if os.access(PGBOUNCER_REF, os.X_OK):
        return os.path.normpath(PGBOUNCER_REF)
    return PGBOUNCER_DEBIAN


PGBOUNCER = default_pgbouncer()
HOST = "127.0.0.1"
USER = "bench"
DB = "bench"
SERVICE_USER = "postgres"          # PostgreSQL and PgBouncer refuse to run as root
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024

TARGETS = ("pgcrew-w1", "pgcrew-auto", "pgbouncer", "pgbouncer-auto", "postgres")
# pgbouncer-auto: one PgBouncer per online CPU on one port (so_reuseport, as
# PgBouncer's documentation suggests for using several cores), each with
# its share of the pool and its own queue. Opt-in: not in the defaults.
DEFAULT_TARGETS = ("pgcrew-w1", "pgcrew-auto", "pgbouncer", "postgres")

# The certificate's key: RSA 2048 as scripts/demo.sh, or P-256 (ECDSA), whose
# signature costs the server a few percent of an RSA one per TLS handshake.
CERT_KEYS = {
    "rsa2048": ["-newkey", "rsa:2048"],
    "p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
}


def scram_verifier(password, iterations):
    """A SCRAM-SHA-256 verifier as PostgreSQL stores it (RFC 7677), for an
    iteration count PostgreSQL 15 cannot be told to use: the cost of a login
    for the client (its PBKDF2) follows the count the server sends."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = lambda b: base64.b64encode(b).decode()
    return f"SCRAM-SHA-256${iterations}:{b64(salt)}${b64(stored)}:{b64(server_key)}"


def sigterm_exits():
    """SIGTERM/SIGHUP raise SystemExit, so `finally` blocks stop what we started."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def port_accepts(port, host=HOST):
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def free_port(start):
    """The first port from start on where nothing listens and we can bind."""
    for port in range(start, start + 200):
        if port_accepts(port):
            continue
        try:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((HOST, port))
            return port
        except OSError:
            continue
    raise RuntimeError(f"no free port in {start}..{start + 199}")


def as_root():
    return os.geteuid() == 0


def own_session():
    """BENCH_POOLER_SESSION=own: the pooler leads a session of its own, as
    a service manager starts it, instead of sharing the bench's (under
    Linux's autogroup a session is a scheduling group: bench/README.md)."""
    return os.environ.get("BENCH_POOLER_SESSION") == "own"


def service_kwargs():
    """subprocess arguments that drop root to the service user."""
    if not as_root():
        return {}
    pw = pwd.getpwnam(SERVICE_USER)
    env = dict(os.environ, HOME=pw.pw_dir, USER=SERVICE_USER, LOGNAME=SERVICE_USER)
    return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": [], "env": env}


def chown_service(path):
    if not as_root():
        return
    pw = pwd.getpwnam(SERVICE_USER)
    for root, dirs, files in os.walk(path):
        os.chown(root, pw.pw_uid, pw.pw_gid)
        for name in dirs + files:
            os.lchown(os.path.join(root, name), pw.pw_uid, pw.pw_gid)


def run(args, timeout=300, check=True, service=False, **kw):
    if service:
        kw.update(service_kwargs())
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, args))} failed ({proc.returncode}):\n"
                           f"{proc.stdout}\n{proc.stderr}")
    return proc


# -- /proc ------------------------------------------------------------------

def _stat_fields(pid):
    """Fields of /proc/pid/stat after the command name (index 0 = state)."""
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


def children(pid):
    """Direct children of pid (scan of /proc: bounded by the process count)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if int(_stat_fields(int(entry))[1]) == pid:
                kids.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return kids


def proc_status_kb(pid, key):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def proc_pss_kb(pid):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


# -- TLS and PostgreSQL --------------------------------------------------------

class Env:
    """Scratch dir, certificates, PostgreSQL, userlist and the shared ini."""

    def __init__(self, scratch, pgcrew_bin, pgbouncer_bin=PGBOUNCER, scale=10,
                 max_connections=620, scram_iterations=4096, cert_key="rsa2048"):
        if cert_key not in CERT_KEYS:
            raise ValueError(f"cert_key {cert_key!r}: one of {', '.join(CERT_KEYS)}")
        self.scratch = os.path.abspath(scratch)
        self.scram_iterations = scram_iterations
        self.cert_key = cert_key
        self.pgcrew_bin = pgcrew_bin
        self.pgbouncer_bin = pgbouncer_bin
        self.scale = scale
        self.max_connections = max_connections
        self.pgdata = os.path.join(self.scratch, "pgdata")
        self.sock = os.path.join(self.scratch, "sock")
        self.tls = os.path.join(self.scratch, "tls")
        self.password = secrets.token_hex(12)
        self.pgport = None
        self.port = None
        self.verifier = None
        self.pooler = None

    # paths
    @property
    def ca(self):
        return os.path.join(self.tls, "ca.crt")

    def path(self, *parts):
        return os.path.join(self.scratch, *parts)

    def setup(self, pgbench_init=True):
        if os.path.exists(self.path("pgdata", "postmaster.pid")):
            raise RuntimeError(f"{self.scratch} holds a running PostgreSQL; stop it first")
        os.makedirs(self.sock, exist_ok=True)
        os.makedirs(self.tls, exist_ok=True)
        os.makedirs(self.path("bin"), exist_ok=True)
        self._copy_binaries()
        self._make_tls()
        self.pgport = free_port(25432)
        self.port = free_port(26432)
        chown_service(self.scratch)
        self._start_pg()
        self._make_roles(pgbench_init)
        self.write_inis()

    def _copy_binaries(self):
        # The service user cannot run a binary under /root: use copies.
        here = os.path.dirname(os.path.abspath(__file__))
        for name, src in (("pgcrew", self.pgcrew_bin), ("pgbouncer", self.pgbouncer_bin),
                          ("multiproc.py", os.path.join(here, "multiproc.py"))):
            if src and os.path.exists(src):
                dst = self.path("bin", name)
                with open(src, "rb") as fi, open(dst, "wb") as fo:
                    fo.write(fi.read())
                os.chmod(dst, 0o755)
        self.pgcrew_bin = self.path("bin", "pgcrew")
        self.pgbouncer_bin = self.path("bin", "pgbouncer")

    def _make_tls(self):
        t = self.tls
        key = CERT_KEYS[self.cert_key]
        run(["openssl", "req", "-x509", *key, "-nodes", "-keyout",
             f"{t}/ca.key", "-out", f"{t}/ca.crt", "-days", "30", "-subj", "/CN=pgcrew bench CA"])
        run(["openssl", "req", *key, "-nodes", "-keyout", f"{t}/server.key",
             "-out", f"{t}/server.csr", "-subj", "/CN=127.0.0.1"])
        with open(f"{t}/san.cnf", "w") as f:
            f.write("subjectAltName = IP:127.0.0.1, DNS:localhost\n")
        run(["openssl", "x509", "-req", "-in", f"{t}/server.csr", "-CA", f"{t}/ca.crt",
             "-CAkey", f"{t}/ca.key", "-CAcreateserial", "-out", f"{t}/server.crt",
             "-days", "30", "-extfile", f"{t}/san.cnf"])
        os.chmod(f"{t}/server.key", 0o600)
        os.chmod(f"{t}/ca.key", 0o600)

    def _start_pg(self):
        chown_service(self.scratch)
        run([f"{PGBIN}/initdb", "-D", self.pgdata, "-U", "postgres", "-A", "trust",
             "-E", "UTF8", "--no-locale", "--no-sync"], service=True)
        conf = {
            "listen_addresses": "'127.0.0.1'",
            "port": self.pgport,
            "unix_socket_directories": f"'{self.sock}'",
            "max_connections": self.max_connections,
            "shared_buffers": "256MB",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "password_encryption": "'scram-sha-256'",
            "ssl": "on",
            "ssl_cert_file": f"'{self.tls}/server.crt'",
            "ssl_key_file": f"'{self.tls}/server.key'",
            "log_connections": "off",
            "log_min_messages": "warning",
        }
        with open(os.path.join(self.pgdata, "postgresql.conf"), "a") as f:
            f.write("\n# pgcrew bench\n")
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")
        with open(os.path.join(self.pgdata, "pg_hba.conf"), "w") as f:
            f.write("local all all trust\n"
                    "host all postgres 127.0.0.1/32 trust\n"
                    f"host all {USER} 127.0.0.1/32 scram-sha-256\n")
        chown_service(self.scratch)
        run([f"{PGBIN}/pg_ctl", "-D", self.pgdata, "-l", self.path("postgres.log"),
             "-w", "-t", "60", "start"], service=True)

    def stop_pg(self):
        if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
            run([f"{PGBIN}/pg_ctl", "-D", self.pgdata, "-m", "fast", "-w", "-t", "60", "stop"],
                check=False, service=True)

    def psql(self, sql, db="postgres"):
        return run([f"{PGBIN}/psql", "-h", self.sock, "-p", str(self.pgport), "-U", "postgres",
                    "-d", db, "-qAtX", "-v", "ON_ERROR_STOP=1", "-c", sql]).stdout.strip()

    def _make_roles(self, pgbench_init):
        # PostgreSQL 15 hashes with 4096 iterations and has no
        # scram_iterations; it takes a ready verifier of any count.
        password = self.password
        if self.scram_iterations != 4096:
            password = scram_verifier(self.password, self.scram_iterations)
        self.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{password}'")
        self.psql(f"CREATE DATABASE {DB} OWNER {USER}")
        self.verifier = self.psql(f"SELECT rolpassword FROM pg_authid WHERE rolname = '{USER}'")
        if pgbench_init:
            log(f"pgbench -i -s {self.scale}")
            run([f"{PGBIN}/pgbench", "-i", "-q", "-s", str(self.scale), "-h", self.sock,
                 "-p", str(self.pgport), "-U", USER, DB], timeout=900)
            self.psql("VACUUM ANALYZE", db=DB)

    def backends(self, state=None):
        """Client backends of the bench user now in PostgreSQL (in `state`,
        e.g. 'idle', when given)."""
        where = f" AND state = '{state}'" if state else ""
        return int(self.psql("SELECT count(*) FROM pg_stat_activity "
                             f"WHERE usename = '{USER}' AND backend_type = 'client backend'"
                             + where))

    # -- the shared ini ----------------------------------------------------

    def write_inis(self, extra=None, db_extra="", workers=None, pgcrew_extra=None):
        """pgbouncer.ini is the one configuration; pgcrew-w1.ini and
        pgcrew-auto.ini %include it and add only `workers` (a key PgBouncer
        does not know). extra: more [pgbouncer] keys for every target;
        db_extra: appended to the database's connection string; workers:
        more pgcrew targets, as {name: workers}, e.g. {"pgcrew-w4": 4};
        pgcrew_extra: keys only pgcrew reads (PgBouncer 1.18 rejects unknown
        keys), added to every pgcrew-*.ini, e.g. metrics_listen."""
        with open(self.path("userlist.txt"), "w") as f:
            f.write(f'"{USER}" "{self.verifier}"\n')
        settings = {
            "listen_addr": HOST,
            "listen_port": self.port,
            "unix_socket_dir": self.sock,
            "logfile": "",
            "auth_type": "scram-sha-256",
            "auth_file": self.path("userlist.txt"),
            "admin_users": USER,
            "pool_mode": "transaction",
            "default_pool_size": 20,
            "max_client_conn": 12000,
            "client_tls_sslmode": "prefer",
            "client_tls_cert_file": f"{self.tls}/server.crt",
            "client_tls_key_file": f"{self.tls}/server.key",
            "client_tls_ca_file": f"{self.tls}/ca.crt",
            "server_tls_sslmode": "disable",
            "log_connections": 0,
            "log_disconnections": 0,
            "query_wait_timeout": 120,
        }
        settings.update(extra or {})
        lines = ["; written by bench/: read by pgcrew and PgBouncer alike", "[databases]",
                 f"{DB} = host={HOST} port={self.pgport} dbname={DB}{db_extra}", "",
                 "[pgbouncer]"]
        lines += [f"{k} = {v}" for k, v in settings.items()]
        with open(self.path("pgbouncer.ini"), "w") as f:
            f.write("\n".join(lines) + "\n")
        self._write_pgbouncer_auto(lines)
        own = "".join(f"{k} = {v}\n" for k, v in (pgcrew_extra or {}).items())
        targets = {"pgcrew-w1": "1", "pgcrew-auto": "auto"}
        targets.update(workers or {})
        for name, n in targets.items():
            with open(self.path(f"{name}.ini"), "w") as f:
                f.write(f"%include {self.path('pgbouncer.ini')}\n[pgbouncer]\nworkers = {n}\n"
                        + own)
        chown_service(self.scratch)

    def pgbouncer_auto_instances(self):
        """(ini, unix socket directory) of each PgBouncer of pgbouncer-auto:
        one per online CPU."""
        return [(self.path(f"pgbouncer-auto-{i}.ini"), self.path("sock", f"pgbouncer-{i}"))
                for i in range(1, (os.cpu_count() or 1) + 1)]

    def _write_pgbouncer_auto(self, lines):
        """The same settings with so_reuseport, a unix socket directory
        each, the pool split evenly."""
        instances = self.pgbouncer_auto_instances()
        n = len(instances)
        for ini, sock in instances:
            os.makedirs(sock, exist_ok=True)
            own = []
            for line in lines:
                key = line.split(" = ", 1)[0]
                if key == "unix_socket_dir":
                    line = f"unix_socket_dir = {sock}"
                elif key == "default_pool_size":
                    line = f"default_pool_size = {max(1, int(line.split(' = ')[1]) // n)}"
                own.append(line)
            own.append("so_reuseport = 1")
            with open(ini, "w") as f:
                f.write("\n".join(own) + "\n")

    def target_command(self, target):
        if target == "pgbouncer":
            return [self.pgbouncer_bin, self.path("pgbouncer.ini")]
        if target == "pgbouncer-auto":
            cmd = [sys.executable, self.path("bin", "multiproc.py")]
            for ini, _ in self.pgbouncer_auto_instances():
                cmd += ["--", self.pgbouncer_bin, ini]
            return cmd
        if target.startswith("pgcrew-"):       # pgcrew-w1, pgcrew-auto, pgcrew-wN
            return [self.pgcrew_bin, self.path(f"{target}.ini")]
        raise ValueError(target)

    def target_port(self, target):
        return self.pgport if target == "postgres" else self.port

    def start_pooler(self, target):
        self.stop_pooler()
        sockets = [os.path.join(sock, f".s.PGSQL.{self.port}")
                   for _, sock in self.pgbouncer_auto_instances()] \
            if target == "pgbouncer-auto" else []
        self.pooler = Pooler(target, self.target_command(target), self.port,
                             self.path(f"{target}.stderr"), sockets)
        self.pooler.start()
        return self.pooler

    def stop_pooler(self):
        problems = []
        if self.pooler is not None:
            problems = self.pooler.stop()
            self.pooler = None
        return problems

    def close(self):
        self.stop_pooler()
        self.stop_pg()


def add_pgcrew_set(ap):
    """--pgcrew-set KEY=VALUE (repeatable): a line more in pgcrew's inis
    only, to compare two values of a pgcrew key with one binary."""
    ap.add_argument("--pgcrew-set", action="append", default=[], metavar="KEY=VALUE",
                    type=key_value, help="one more setting in pgcrew's inis (repeatable)")


def key_value(kv):
    if "=" not in kv:
        raise ValueError(kv)
    return kv


def pgcrew_set_lines(kvs):
    return [kv.replace("=", " = ", 1) for kv in kvs]


def pct(values, q):
    """The q-quantile of values (nearest rank), None for none."""
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def read_csv(path):
    """A CSV file the benches wrote, as dicts, numbers parsed ("" is None)."""
    def num(v):
        for kind in (int, float):
            try:
                return kind(v)
            except ValueError:
                pass
        return None if v == "" else v
    with open(path) as f:
        return [{k: num(v) for k, v in r.items()} for r in csv.DictReader(f)]


def many_roles_settings(env, limit, max_client_conn):
    """The [pgbouncer] settings bench/tenants and bench/rotation give every
    target: one role per pool, SCRAM with the auth_file, transaction
    pooling, default_pool_size = 1 and max_db_connections = limit."""
    return {
        "listen_addr": HOST,
        "unix_socket_dir": env.sock,
        "logfile": "",
        "auth_type": "scram-sha-256",
        "auth_file": env.path("userlist.txt"),
        "admin_users": USER,
        "pool_mode": "transaction",
        "default_pool_size": 1,
        "max_db_connections": limit,
        "max_client_conn": max_client_conn,
        "server_tls_sslmode": "disable",
        "log_connections": 0,
        "log_disconnections": 0,
        "log_pooler_errors": 1,
        "query_wait_timeout": 60,
    }


class Pooler:
    """One pooler run in the foreground as a child; CPU and memory of the
    pooler's processes (the main process and all its children) from /proc."""

    def __init__(self, target, command, port, stderr_path, sockets=()):
        self.target = target
        self.sockets = list(sockets)      # all of them exist once every process listens
        self.command = command
        self.port = port
        self.stderr_path = stderr_path
        self.proc = None
        self.seen = set()
        # read by bench/lib/common.sh to stop a pooler an interrupted run left
        self.pidfile = stderr_path.rsplit(".", 1)[0] + ".pid"

    @property
    def pid(self):
        return self.proc.pid

    def start(self, timeout=15):
        err = open(self.stderr_path, "a")
        err.write(f"\n---- start {time.strftime('%H:%M:%S')}\n")
        err.flush()
        self.proc = subprocess.Popen(self.command, stdin=subprocess.DEVNULL,
                                     stdout=err, stderr=err, cwd=os.path.dirname(self.stderr_path),
                                     start_new_session=own_session(), **service_kwargs())
        err.close()
        with open(self.pidfile, "w") as f:
            f.write(f"{self.proc.pid}\n")
        deadline = time.monotonic() + timeout
        while not port_accepts(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.target} exited with {self.proc.returncode} at start; "
                                   f"see {self.stderr_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.target} did not accept within {timeout}s")
            time.sleep(0.02)
        # pgcrew: wait until every worker is forked (auto = online CPUs)
        fixed = re.fullmatch(r"pgcrew-w(\d+)", self.target)
        want = os.cpu_count() if self.target == "pgcrew-auto" else (
            int(fixed.group(1)) if fixed else len(self.sockets))
        deadline = time.monotonic() + 5
        while len(children(self.pid)) < want and time.monotonic() < deadline:
            time.sleep(0.02)
        # pgbouncer-auto: every process listens, or the kernel would give
        # the first one all the clients.
        while not all(os.path.exists(p) for p in self.sockets):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.target}: not every process listens; "
                                   f"see {self.stderr_path}")
            time.sleep(0.02)
        self.seen = set(self.pids())
        with open(self.pidfile, "w") as f:    # bench/lib/common.sh stops each
            f.write("".join(f"{p}\n" for p in self.pids()))

    def pids(self):
        if self.proc is None or self.proc.poll() is not None:
            return []
        return [self.pid] + children(self.pid)

    def cpu_ticks(self):
        """utime+stime of every live pooler process plus the main process's
        cutime+cstime (reaped children: a worker that died still counts)."""
        total = 0
        for pid in self.pids():
            try:
                f = _stat_fields(pid)
            except OSError:
                continue
            total += int(f[11]) + int(f[12])          # utime, stime
            if pid == self.pid:
                total += int(f[13]) + int(f[14])      # cutime, cstime
        return total

    def rss_kb(self):
        return sum(proc_status_kb(p, "VmRSS") for p in self.pids())

    def hwm_kb(self):
        return sum(proc_status_kb(p, "VmHWM") for p in self.pids())

    def pss_kb(self):
        return sum(proc_pss_kb(p) for p in self.pids())

    def reset_hwm(self):
        """Reset VmHWM to the current RSS (clear_refs 5; needs root)."""
        ok = True
        for p in self.pids():
            try:
                with open(f"/proc/{p}/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                ok = False
        return ok

    def restarts(self):
        """Worker processes that appeared after start (respawned workers)."""
        now = set(self.pids())
        return len(now - self.seen)

    def stop(self, timeout=15):
        """SIGINT (PgBouncer's safe shutdown), SIGKILL after timeout."""
        problems = []
        if self.proc is None or self.proc.poll() is not None:
            return problems
        try:
            os.unlink(self.pidfile)
        except OSError:
            pass
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            problems.append(f"{self.target} still running {timeout}s after SIGINT: killed")
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return problems


def versions(env):
    out = {}
    try:
        out["pgcrew"] = run([env.pgcrew_bin, "-V"], check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        out["pgcrew"] = "?"
    try:
        out["pgbouncer"] = run([env.pgbouncer_bin, "-V"], check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        out["pgbouncer"] = "?"
    out["postgres"] = run([f"{PGBIN}/postgres", "-V"]).stdout.strip()
    out["pgbench"] = run([f"{PGBIN}/pgbench", "-V"]).stdout.strip()
    out["kernel"] = os.uname().release
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            out["sched_autogroup"] = f.read().strip()
    except OSError:
        out["sched_autogroup"] = "?"
    out["cpus"] = str(os.cpu_count())
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"model name\s*:\s*(.*)", f.read())
            out["cpu"] = m.group(1) if m else "?"
    except OSError:
        out["cpu"] = "?"
    return out


def binary_source(repo):
    """What the measured pgcrew was built from, for the reports."""
    given = os.environ.get("PGCREW_BIN")
    if given:
        note = os.environ.get("BENCH_BIN_COMMIT")
        return f"PGCREW_BIN={given}" + (f" (built from {note})" if note else
                                        f" (repository HEAD {git_describe(repo)})")
    return git_describe(repo)


def git_describe(repo):
    try:
        head = run(["git", "-C", repo, "rev-parse", "--short", "HEAD"]).stdout.strip()
        dirty = run(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
                    check=False).stdout.strip()
        return head + ("+uncommitted changes" if dirty else "")
    except Exception:  # noqa: BLE001 - informational only
        return "?"


if __name__ == "__main__":
    sys.exit("a library: use bench/run, bench/connect or bench/idle")
