"""The pooler under test as a child process: writes pgbouncer.ini and
userlist.txt from dicts, runs the binary in the foreground, exposes its log,
reload and stop, and on stop fails the test if a sanitizer reported anything.
Works with pgcrew and with PgBouncer (PGCREW_BIN=.cache/pgbouncer-1.25.2/bin/pgbouncer)."""

import glob
import os
import re
import signal
import subprocess
import time

import psycopg

import util
import wire

# Settings PgBouncer does not know: never written when validating against it.
PGCREW_ONLY_KEYS = frozenset({"workers", "auth_query_cache_ttl", "unnamed_statement_cache",
                              "sql_prepared_statements", "proxy_protocol",
                              "proxy_protocol_sources", "io_uring",
                              "server_max_protocol_version",
                              "pool_idle_timeout"})     # PgBouncer's development branch

SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer")

STOP_TIMEOUT = 10.0
START_TIMEOUT = 10.0


def binary_kind(binary):
    """'pgbouncer' or 'pgcrew', from the binary's -V output (or PGCREW_MODE)."""
    forced = os.environ.get("PGCREW_MODE")
    if forced:
        return forced
    out = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=10)
    text = (out.stdout + out.stderr).strip().lower()
    return "pgbouncer" if text.startswith("pgbouncer") else "pgcrew"


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


class Pooler:
    """One pooler process. config sections are plain dicts; edit them and call
    write_config() + reload() to test reloads."""

    def __init__(self, binary, kind, workdir, settings=None, databases=None,
                 users=None, userlist=None, hba=None, asan_quarantine_mb=None):
        self.binary = binary
        # ASan keeps freed memory in a quarantine of up to 256 MB by default:
        # a test of flat RSS under allocation churn sets a small one.
        self.asan_quarantine_mb = asan_quarantine_mb
        # run in the child before exec, as an operator's wrapper (chrt) would
        self.preexec_fn = None
        self.kind = kind
        self.workdir = workdir
        self.port = util.free_port()
        self.host = util.HOST
        self.ini_path = os.path.join(workdir, "pgbouncer.ini")
        self.userlist_path = os.path.join(workdir, "userlist.txt")
        self.logfile = os.path.join(workdir, "pooler.log")
        self.stdout_path = os.path.join(workdir, "stdout.txt")
        self.stderr_path = os.path.join(workdir, "stderr.txt")
        self.settings = {
            "listen_addr": util.HOST,
            "listen_port": self.port,
            "unix_socket_dir": workdir,
            "logfile": self.logfile,
            "auth_file": self.userlist_path,
            "auth_type": "trust",
            "admin_users": "trust_user",
            "pool_mode": "session",
            "server_login_retry": 1,
            # PgBouncer's default (120 s) would let a broken pooler stall a
            # test for minutes; tests that need it set their own value.
            "query_wait_timeout": 20,
        }
        # PGCREW_IO_URING=0 runs every pgcrew of the suite with recv/send
        # instead of io_uring batches, the default (scripts/test.sh's second
        # pass); =1 asks for io_uring where a test's ini does not say.
        if os.environ.get("PGCREW_IO_URING") in ("0", "1") and kind == "pgcrew":
            self.settings["io_uring"] = int(os.environ["PGCREW_IO_URING"])
        self.settings.update(settings or {})
        self.databases = dict(databases or {})
        self.users = dict(users or {})
        self.userlist = dict(userlist or {})
        self.hba = hba
        self.peers = {}  # peer_id -> connection string ([peers] section)
        self.proc = None
        self.daemon_pid = None  # set by start_daemon(): the backgrounded pooler
        self.connections = []

    # -- files ---------------------------------------------------------------

    def _ini_text(self):
        lines = ["[pgbouncer]"]
        for key, value in self.settings.items():
            if self.kind == "pgbouncer" and key in PGCREW_ONLY_KEYS:
                continue
            lines.append(f"{key} = {format_value(value)}")
        lines.append("")
        lines.append("[databases]")
        lines += [f"{name} = {dsn}" for name, dsn in self.databases.items()]
        lines.append("")
        lines.append("[users]")
        lines += [f"{name} = {opts}" for name, opts in self.users.items()]
        if self.peers:
            lines += ["", "[peers]"]
            lines += [f"{pid} = {dsn}" for pid, dsn in self.peers.items()]
        return "\n".join(lines) + "\n"

    def write_config(self, raw_ini=None):
        """Write the ini (or raw_ini verbatim, to test broken files) and userlist."""
        if self.hba is not None:
            hba_path = os.path.join(self.workdir, "hba.conf")
            with open(hba_path, "w") as f:
                f.write(self.hba)
            self.settings["auth_hba_file"] = hba_path
        with open(self.ini_path, "w") as f:
            f.write(raw_ini if raw_ini is not None else self._ini_text())
        with open(self.userlist_path, "w") as f:
            for user, secret in self.userlist.items():
                f.write(f'"{user}" "{secret}"\n')
        util.give_to_service_user(self.workdir)

    # -- process -------------------------------------------------------------

    def _env(self, base):
        assert re.fullmatch(r"[A-Za-z0-9_./-]+", self.workdir), self.workdir
        env = dict(base if base is not None else os.environ)
        env["ASAN_OPTIONS"] = ("detect_leaks=1:abort_on_error=0:"
                               f"log_path={self.workdir}/asan")
        if self.asan_quarantine_mb is not None:
            env["ASAN_OPTIONS"] += f":quarantine_size_mb={self.asan_quarantine_mb}"
        env["UBSAN_OPTIONS"] = f"print_stacktrace=1:log_path={self.workdir}/ubsan"
        env["LSAN_OPTIONS"] = f"log_path={self.workdir}/asan"
        return env

    def start(self):
        self.write_config()
        kw = util.service_popen_kwargs()
        kw["env"] = self._env(kw.get("env"))
        if self.preexec_fn:
            kw["preexec_fn"] = self.preexec_fn
        binary = util.service_executable(self.binary, self.workdir)
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([binary, self.ini_path], cwd=self.workdir,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, **kw)
        deadline = time.monotonic() + START_TIMEOUT
        while not wire.pooler_accepts(self.port):
            if self.proc.poll() is not None:
                raise AssertionError(f"pooler exited with {self.proc.returncode} "
                                     f"during start\n{self.diagnostics()}")
            if time.monotonic() > deadline:
                self._kill()
                raise AssertionError(f"pooler did not accept on port {self.port} "
                                     f"within {START_TIMEOUT}s\n{self.diagnostics()}")
            time.sleep(0.05)
        return self

    def start_daemon(self, timeout=START_TIMEOUT):
        """Start with -d (settings must name a pidfile): the launcher must exit
        0, the pidfile must name a live process, and the port must accept.
        Afterwards .pid is the daemon's pid; stop() signals it."""
        pidfile = self.settings["pidfile"]
        self.write_config()
        kw = util.service_popen_kwargs()
        kw["env"] = self._env(kw.get("env"))
        binary = util.service_executable(self.binary, self.workdir)
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen([binary, "-d", self.ini_path], cwd=self.workdir,
                                         stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=err, **kw)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"pooler -d did not return within {timeout}s\n"
                                 f"{self.diagnostics()}")
        if rc != 0:
            raise AssertionError(f"pooler -d exited with {rc}\n{self.diagnostics()}")

        def daemon_from_pidfile():
            text = _read(pidfile).strip()
            if text.isdigit() and pid_alive(int(text)):
                return int(text)
            return None

        self.daemon_pid = util.wait_until(daemon_from_pidfile, timeout,
                                          what=f"pidfile {pidfile} naming a live process")
        deadline = time.monotonic() + timeout
        while not wire.pooler_accepts(self.port):
            if not pid_alive(self.daemon_pid):
                raise AssertionError(f"daemon {self.daemon_pid} exited during start\n"
                                     f"{self.diagnostics()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"daemon did not accept on port {self.port} "
                                     f"within {timeout}s\n{self.diagnostics()}")
            time.sleep(0.05)
        return self

    def _stop_daemon(self):
        """SIGINT the daemon started by start_daemon() and wait for it to go."""
        if self.daemon_pid is None or not pid_alive(self.daemon_pid):
            return []
        os.kill(self.daemon_pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT
        while pid_alive(self.daemon_pid):
            if time.monotonic() > deadline:
                os.kill(self.daemon_pid, signal.SIGKILL)
                return [f"daemon {self.daemon_pid} did not exit within {STOP_TIMEOUT}s of SIGINT"]
            time.sleep(0.05)
        return []

    @property
    def pid(self):
        return self.daemon_pid if self.daemon_pid is not None else self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self):
        assert self.alive(), f"pooler died (rc={self.proc.returncode})\n{self.diagnostics()}"

    def reload(self):
        """SIGHUP; returns the log offset before the signal for wait_for_log."""
        mark = len(self.log_text())
        os.kill(self.pid, signal.SIGHUP)
        return mark

    def _kill(self):
        if self.alive():
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self):
        """SIGINT and wait; then fail on a hang, a crash or any sanitizer report."""
        if self.proc is None:
            return
        for conn in self.connections:
            conn.close()
        self.connections = []
        problems = self._stop_daemon()
        if self.alive():
            os.kill(self.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill()
                problems.append(f"pooler did not exit within {STOP_TIMEOUT}s of SIGINT")
        rc = self.proc.returncode
        if rc is not None and rc < 0 and rc != -signal.SIGINT:
            problems.append(f"pooler ended by signal {-rc}")
        elif rc is not None and rc > 0 and not problems:
            problems.append(f"pooler exited with status {rc}")
        problems += self.sanitizer_problems()
        if problems:
            raise AssertionError("\n".join(problems) + "\n" + self.diagnostics())

    def sanitizer_problems(self):
        found = []
        for path in sorted(glob.glob(os.path.join(self.workdir, "asan*")) +
                           glob.glob(os.path.join(self.workdir, "ubsan*"))):
            found.append(f"sanitizer report {path}:\n{_read(path)}")
        for path in (self.logfile, self.stderr_path):
            text = _read(path)
            if any(m in text for m in SANITIZER_MARKERS):
                found.append(f"sanitizer output in {os.path.basename(path)}:\n{text[-20000:]}")
        return found

    # -- logs ----------------------------------------------------------------

    def log_text(self):
        text = _read(self.logfile)
        return text if text else _read(self.stderr_path)

    def wait_for_log(self, regex, timeout=5.0, since=0):
        """Wait until the log (after offset `since`) matches regex; return the match."""
        pattern = re.compile(regex)
        return util.wait_until(lambda: pattern.search(self.log_text(), since),
                               timeout, what=f"log line /{regex}/\n{self.log_tail()}")

    def log_tail(self, n=30):
        return "".join(self.log_text().splitlines(True)[-n:])

    def diagnostics(self):
        return (f"--- pooler log ({self.logfile}) ---\n{self.log_tail(60)}"
                f"--- stderr ---\n{_read(self.stderr_path)[-4000:]}")

    # -- clients -------------------------------------------------------------

    def conninfo(self, dbname="testdb", user="trust_user", **kw):
        params = dict(host=self.host, port=self.port, dbname=dbname, user=user,
                      connect_timeout=5)
        params.update(kw)
        return params

    def connect(self, dbname="testdb", user="trust_user", autocommit=True, **kw):
        """A psycopg connection through the pooler, closed on stop()."""
        conn = psycopg.connect(autocommit=autocommit, **self.conninfo(dbname, user, **kw))
        self.connections.append(conn)
        return conn

    def admin(self, user="trust_user", **kw):
        """A connection to the admin console (database pgbouncer)."""
        return self.connect("pgbouncer", user, **kw)

    # -- the console, for waits and samples ----------------------------------

    def show(self, what, user="trust_user", **kw):
        """SHOW <what> on a console connection of its own (kw: more
        connection parameters, such as a password): rows as dicts."""
        with psycopg.connect(autocommit=True, **self.conninfo("pgbouncer", user, **kw)) as adm:
            return show_rows(adm, what)

    def pool(self, db="testdb", user="trust_user", **kw):
        """The SHOW POOLS row of (db, user), or None."""
        return next((r for r in self.show("POOLS", **kw)
                     if r["database"] == db and r["user"] == user), None)

    def wait_pool(self, pred, timeout=20, db="testdb", user="trust_user", what="SHOW POOLS",
                  **kw):
        """Wait until pred(SHOW POOLS row of (db, user)) holds; returns the row."""
        def matching():
            row = self.pool(db, user, **kw)
            return row if row and pred(row) else None
        return util.wait_until(matching, timeout, what=f"{what} ({db}/{user})")

    def wait_every_worker(self, pred, workers, timeout=20, what="every worker", **kw):
        """Wait until pred(console connection) holds on a console connection
        of each of the `workers` workers (the kernel spreads new connections
        over them; pgcrew names the worker in the cancel key's pid). One
        process (PgBouncer) counts as one worker."""
        seen = set()

        def one_more():
            with psycopg.connect(autocommit=True, **self.conninfo("pgbouncer", **kw)) as adm:
                w = (adm.info.backend_pid >> 24) & 0x7F if self.kind == "pgcrew" else 0
                if pred(adm):
                    seen.add(w)
            return len(seen) >= (workers if self.kind == "pgcrew" else 1)
        util.wait_until(one_more, timeout, what=what)


def show_rows(adm, what):
    """SHOW <what> on console connection adm: rows as dicts."""
    cur = adm.execute(f"SHOW {what}")
    cols = [c.name for c in cur.description]
    return [dict(zip(cols, r)) for r in cur.fetchall()]


def pid_alive(pid):
    """True while pid exists and is not a zombie (a daemon is not our child)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""
