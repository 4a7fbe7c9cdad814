#!/usr/bin/env python3
"""Seed corpora for the fuzz targets from real traffic: starts a throwaway
PostgreSQL 15 (the integration harness's PgCluster), a recording TCP proxy in
front of it, and drives it with psql (SCRAM, md5, errors, COPY), pgbench
(-M simple/extended/prepared) and psycopg (pipeline mode). Each connection's
two byte streams become seeds: client and server streams, the startup
packet, and the SCRAM messages of each side. Config-file seeds are copied
from etc/ and test/unit/data/. Writes test/fuzz/corpus/ (committed).

usage: .venv/bin/python test/fuzz/capture.py   (as root or the postgres user)
"""

import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "test", "integration"))

import pg_cluster  # noqa: E402
import util  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")
MAX_SEED = 64 * 1024


class Recorder:
    """A TCP proxy: every accepted connection is relayed to the server and
    both directions are recorded in full."""

    def __init__(self, upstream_port):
        self.upstream = upstream_port
        self.sock = socket.socket()
        self.sock.bind((util.HOST, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.sessions = []   # [client bytes, server bytes]
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection((util.HOST, self.upstream))
            rec = [bytearray(), bytearray()]
            with self.lock:
                self.sessions.append(rec)
            threading.Thread(target=self._pipe, args=(c, s, rec[0]), daemon=True).start()
            threading.Thread(target=self._pipe, args=(s, c, rec[1]), daemon=True).start()

    @staticmethod
    def _pipe(src, dst, buf):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                buf += data
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def messages(stream, startup):
    """(type, body) of each whole message; type 0 for the startup packet."""
    pos = 0
    if startup:
        while pos + 8 <= len(stream):
            n = struct.unpack("!I", stream[pos:pos + 4])[0]
            code = struct.unpack("!I", stream[pos + 4:pos + 8])[0]
            yield 0, bytes(stream[pos:pos + n])
            pos += n
            if code != 80877103:   # SSLRequest: another startup packet follows
                break
            pos += 1                # the server's 'N'
    while pos + 5 <= len(stream):
        t = stream[pos]
        n = struct.unpack("!I", stream[pos + 1:pos + 5])[0]
        yield t, bytes(stream[pos + 5:pos + 1 + n])
        pos += 1 + n


def scram_parts(client, server):
    """(client-first, client-final) and (server-first, server-final)."""
    cl = [b for t, b in messages(client, True) if t == ord("p")]
    sv = [b for t, b in messages(server, False) if t == ord("R") and len(b) >= 4]
    c_first = c_final = s_first = s_final = None
    if len(cl) >= 2 and b"SCRAM" in cl[0]:
        mech_end = cl[0].index(b"\0")
        c_first = cl[0][mech_end + 5:]
        c_final = cl[1]
    for b in sv:
        code = struct.unpack("!I", b[:4])[0]
        if code == 11:
            s_first = b[4:]
        elif code == 12:
            s_final = b[4:]
    out = []
    if c_first is not None:
        out.append(("fuzz_scram_server", c_first + b"\0" + c_final))
    if s_first is not None and s_final is not None:
        out.append(("fuzz_scram_client", s_first + b"\0" + s_final))
    return out


def interleaved(client, server):
    """Seed for fuzz_prepared: the client's messages up to each Sync (or
    Query), then the server's replies up to the matching ReadyForQuery; one
    direction byte (0 client, 1 server) before each message."""
    def frame(t, b):
        return bytes([t]) + struct.pack("!I", len(b) + 4) + b
    cl = [(t, b) for t, b in messages(client, True) if t not in (0, ord("p"))]
    sv = [(t, b) for t, b in messages(server, False)]
    # Skip the login: everything up to the first ReadyForQuery.
    first = next((i for i, (t, _) in enumerate(sv) if t == ord("Z")), len(sv))
    sv = sv[first + 1:]
    out, si = bytearray(), 0
    for t, b in cl:
        out += b"\0" + frame(t, b)
        if t in (ord("S"), ord("Q")):
            while si < len(sv):
                st, sb = sv[si]
                si += 1
                out += b"\1" + frame(st, sb)
                if st == ord("Z"):
                    break
    return bytes([3]) + bytes(out)   # config byte: max 4 statements


def save(target, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    data = bytes(data[:MAX_SEED])
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()[:16]), "wb") as f:
        f.write(data)


def drive(port):
    env = dict(os.environ, PGHOST=util.HOST, PGPORT=str(port), PGDATABASE="testdb",
               PGSSLMODE="disable", PGCONNECT_TIMEOUT="10")
    bindir = pg_cluster.PG15_BINDIR

    def run(args, user, **kw):
        e = dict(env, PGUSER=user, PGPASSWORD=pg_cluster.password(user))
        subprocess.run(args, env=e, timeout=120, check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)

    psql = [os.path.join(bindir, "psql"), "-X", "-v", "ON_ERROR_STOP=0"]
    run(psql + ["-c", "SELECT 1; SELECT * FROM pg_settings LIMIT 3",
                "-c", "SELECT no_such_column", "-c", "SET search_path = public",
                "-c", "CREATE TEMP TABLE t(a int, b text); COPY t FROM STDIN",
                "-c", "COPY (SELECT g, md5(g::text) FROM generate_series(1, 50) g) TO STDOUT",
                "-c", "BEGIN; SELECT 1/0; ROLLBACK", "-c", "NOTIFY x; LISTEN x"],
        "scram_user", input=b"1\tx\n2\ty\n\\.\n")
    run(psql + ["-c", "SELECT current_user"], "md5_user")
    run(psql + ["-c", "SELECT current_user"], "plain_user")
    pgbench = pg_cluster.pgbench_binary()
    run([pgbench, "-i", "-s", "1", "-q"], "trust_user")
    for mode in ("simple", "extended", "prepared"):
        run([pgbench, "-M", mode, "-c", "1", "-t", "10", "-n"], "scram_user")
    import psycopg
    with psycopg.connect(host=util.HOST, port=port, dbname="testdb", user="scram_user",
                         password=pg_cluster.password("scram_user"), sslmode="disable",
                         prepare_threshold=0) as conn:
        with conn.pipeline():
            for i in range(3):
                conn.execute("SELECT %s::int + 1, %s::text", (i, "x"))
        try:
            with conn.pipeline():
                conn.execute("SELECT 1/0")
                conn.execute("SELECT 2")
        except psycopg.Error:
            pass


def static_seeds():
    configs = [os.path.join(REPO, "etc", "pgcrew.ini"),
               os.path.join(REPO, "etc", "packaged", "pgcrew.ini")]
    datadir = os.path.join(REPO, "test", "unit", "data", "config")
    configs += [os.path.join(datadir, f) for f in os.listdir(datadir) if f.endswith(".ini")]
    for path in configs:
        with open(path, "rb") as f:
            save("fuzz_config", f.read())
    for path in (os.path.join(REPO, "etc", "userlist.txt"),
                 os.path.join(datadir, "userlist_good.txt")):
        with open(path, "rb") as f:
            save("fuzz_userlist", f.read())
    save("fuzz_userlist", b'"alice" "md5d41d8cd98f00b204e9800998ecf8427e"\n;c\n"bob" "SCRAM-SHA-256$4096:c2FsdA==$'
         b'WrFUzmCiU9ItPLCWFXHUBTNTh4GJtQpWpjBeUvyL3VQ=:6kmzNkaPNmwfIvHbDQLSwhd9VWRzQoFqZwW3dI0Sm5I="\n')
    for text in (b"host=127.0.0.1 port=5432 dbname=app user=u password='p w' pool_size=5",
                 b"host=a,b,c port=1,2,3 load_balance_hosts=round-robin pool_mode=transaction",
                 b"dbname=x auth_user=au auth_query='SELECT 1 FROM t WHERE u=$1' connect_query='SET x=1'",
                 b"host=/tmp client_encoding=UTF8 datestyle=ISO timezone=UTC application_name=a",
                 b"pool_mode=session max_user_connections=3 max_user_client_connections=9",
                 b"host=::1 port=6432 min_pool_size=2 reserve_pool_size=1 max_db_connections=10"):
        save("fuzz_connstr", text)
    save("fuzz_hba", b"local all all trust\nhost all all 127.0.0.1/32 scram-sha-256\n"
         b"hostssl sameuser @admins ::1/128 cert map=m\nhostnossl db1,db2 u1,u2 0.0.0.0/0 md5\n"
         b"host replication all all reject\nhost all all 10.0.0.0 255.0.0.0 ldap ldapserver=x\0"
         b"m alice alice\nm /^(.*)@corp$ \\1\n")
    for cmd in (b"SHOW POOLS", b"show stats_totals;", b"PAUSE db", b"KILL_CLIENT 17",
                b"SET default_pool_size = 30", b"set log_connections to 'off'",
                b"SHUTDOWN WAIT_FOR_CLIENTS", b"RESUME", b"-c search_path=x --work-mem=1 -cA=b\\ c"):
        save("fuzz_console", cmd)


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    base = tempfile.mkdtemp(prefix="pgcrew-capture-")
    os.chmod(base, 0o755)
    pg = pg_cluster.PgCluster("capture", pg_cluster.PG15_BINDIR, base)
    try:
        pg.init()
        rec = Recorder(pg.port)
        drive(rec.port)
    finally:
        pg.stop()
    for client, server in rec.sessions:
        if not client:
            continue
        save("fuzz_client_stream", client)
        save("fuzz_server_stream", server)
        save("fuzz_prepared", interleaved(client, server))
        first = next(messages(client, True), None)
        if first:
            save("fuzz_startup", first[1])
        for target, data in scram_parts(client, server):
            save(target, data)
    static_seeds()
    shutil.rmtree(base, ignore_errors=True)
    for t in sorted(os.listdir(CORPUS)):
        print(f"{t}: {len(os.listdir(os.path.join(CORPUS, t)))} seeds")


if __name__ == "__main__":
    main()
