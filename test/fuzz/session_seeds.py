#!/usr/bin/env python3
"""Seeds for the fuzz_session target (test/fuzz/fuzz_session*.c), written in
its input format: what real clients send at startup and login (psql,
pg_basebackup, pg_receivewal, pg_recvlogical, psycopg, pgx, asyncpg, pgJDBC,
node-postgres), the captured client streams of corpus/fuzz_client_stream
turned into actions, and the crash of issue 32 (a replication client hanging
up at the password prompt of an unknown database). Writes
test/fuzz/corpus/fuzz_session/ (committed; run it again after changing the
input format, whose tables below must stay in step with the C files).

usage: python3 test/fuzz/session_seeds.py

The input format
----------------
Six bytes choose the world:
  0  auth_type: AUTH index (low 3 bits, modulo 7); HBA text index (>> 3)
  1  pool mode (bits 0-1), max_prepared_statements 4 (0x04), 2 workers
     (0x08), min_pool_size 1 (0x10), reserve pool (0x20),
     application_name_add_host (0x40), disable_pqexec (0x80)
  2  5 s timeouts: client_login (0x01), query_wait (0x02),
     idle_transaction (0x04), query (0x08), server lifetime/idle (0x10),
     client_idle (0x20), server_connect + login_retry 1 s (0x40),
     transaction + cancel_wait (0x80)
  3  default_pool_size 1 + (bits 0-1), max_client_conn 3 (0x04),
     max_db/user_connections 2 (0x08), ignore_startup_parameters (0x10),
     server_reset_query_always (0x20), server_check_query (0x40),
     "* =" autodb (0x80)
  4  auth_user alice (0x01), max_db/user_client_connections 2 (0x02),
     supervisor holds its answers (0x04), query_wait_notify (0x08),
     server_round_robin (0x10), verbose 2 (0x20), sql_prepared_statements
     (0x40), "replication =" database (0x80)
  5  no "db" database (0x01), no "forced" (0x02), "sess" pool_size 2
     (0x04), server_fast_close (0x08), connect_query on "db" (0x10),
     [users] carol in statement mode with max_user_connections 1 (0x20),
     max_packet_size 300 (0x40), auth_dbname sess (0x80)
  6  (read at the start only; a RELOAD keeps it) client TLS with
     client_tls_sslmode allow (0x01), require instead (0x02, with 0x01), the
     console with admin_users alice and stats_users bob (0x04), the stream
     layer's io_uring batches where the kernel gives a ring (0x08)
Then up to 64 actions, one byte each (what = low 5 bits, slot = high 3)
followed by that action's arguments; see OP and the functions below. A
RELOAD takes bytes 0-5 as above (the number of workers stays).
"""

import os
import re
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus", "fuzz_session")
CAPTURED = os.path.join(HERE, "corpus", "fuzz_client_stream")

# fuzz_session.c: AUTH_TYPES, HBA_TEXTS, CLIENT_OPS, SERVER_OPS, act()
AUTH = {"trust": 0, "any": 1, "plain": 2, "md5": 3, "scram-sha-256": 4, "hba": 5, "cert": 6}
POOL = {"session": 0, "transaction": 1, "statement": 2}
OP = {
    "step": 0, "tls": 1, "big": 2, "startup": 3, "ssl": 4, "gssenc": 5, "cancel": 6,
    "auth_good": 7, "auth_bad": 8, "query": 9, "extended": 10, "message": 11, "bytes": 12,
    "terminate": 13, "hangup": 14, "console": 15,
    "server_step": 16, "server_big": 17, "server_piece": 19, "server_message": 22,
    "server_hangup": 24,
    "clock": 26, "piece": 27, "sup": 29, "reload": 31,
}
# The world's seventh byte (fuzz_session.c enum extras).
X_TLS, X_TLS_REQUIRE, X_CONSOLE, X_URING = 0x01, 0x02, 0x04, 0x08
# fuzz_session_client.c: tls_op's ways, big_op's kinds, CONSOLE_COMMANDS, CONSOLE_USERS
TLS_STEP, TLS_COMPLETE, TLS_GARBAGE, TLS_CUT = 0, 1, 2, 3
BIG_BIND, BIG_PARSE_BIND, BIG_DESCRIBE, BIG_EXECUTE = 0, 1, 2, 3


def c_strings(path, array):
    """The string literals of a C array of fuzz_session_client.c, in order
    (read from the source, so the two cannot drift apart)."""
    with open(os.path.join(HERE, path)) as f:
        text = f.read()
    body = text[text.index(array + "[] = {"):]
    return re.findall(r'"((?:[^"\\]|\\.)*)"', body[:body.index("};")])


CONSOLE_COMMANDS = c_strings("fuzz_session_client.c", "CONSOLE_COMMANDS")
CONSOLE_USER = {"alice": 0, "bob": 1, "pgbouncer": 2, "carol": 3}
# fuzz_session_client.c: VERSIONS, USERS, DATABASES, PARAMS, QUERIES, SEQS
VERSION = {"3.0": 0, "3.2": 4, "2.0": 5, "3.5": 6, "4.0": 7}
USER = {"alice": 0, "bob": 1, "carol": 2, "dave": 3, "mallory": 4, "": 5, "long": 6,
        "pgbouncer": 7, None: 12}
DATABASE = {"db": 0, "forced": 1, "sess": 2, "replication": 3, "nosuch": 4,
            "pgbouncer": 5, "": 6, None: 7, "long": 8, "alice": 9, "postgres": 14}
PARAMS = [
    ("replication", ["true", "database", "on", "off", "yes", "0", "maybe", "", "TRUE"]),
    ("options", ["-c DateStyle=ISO", "-c search_path=public", "--client_encoding=UTF8",
                 "-c statement_timeout=0", "-c geqo=off", "-cTimeZone=UTC\\ x", "garbage",
                 "", "-c a", "-c extra_float_digits=3"]),
    ("application_name", ["psql", "pg_basebackup", "pg_receivewal", "PostgreSQL JDBC Driver",
                          "", "asyncpg", "long", "pgx", "pgbench"]),
    ("client_encoding", ["UTF8", "'utf-8'", "LATIN1", "SQL_ASCII", "", "UNICODE"]),
    ("DateStyle", ["ISO", "ISO, MDY", "German"]),
    ("TimeZone", ["UTC", "Europe/Berlin", ""]),
    ("extra_float_digits", ["3", "2"]),
    ("IntervalStyle", ["postgres", "iso_8601"]),
    ("search_path", ["public", "\"$user\", public"]),
    ("statement_timeout", ["0", "5000"]),
    ("_pq_.protocol_managed_params", ["", "x"]),
    ("geqo", ["off"]),
    ("standard_conforming_strings", ["on", "off"]),
    ("user", ["alice", "bob", "carol", "mallory", ""]),
    ("database", ["db", "forced", "nosuch", "replication", ""]),
]
QUERY = {"SELECT 1": 0, "BEGIN": 1, "COMMIT": 2, "ROLLBACK": 3, "": 4,
         "SET DateStyle = German": 5, "SET application_name = 'x'": 6, "RESET ALL": 7,
         "DISCARD ALL": 8, "PREPARE p1 AS SELECT 1": 9, "EXECUTE p1": 10,
         "DEALLOCATE p1": 11, "DEALLOCATE ALL": 12, "LISTEN x": 13, "IDENTIFY_SYSTEM": 14,
         "BEGIN; SELECT 1; COMMIT": 15}
SEQ = {"PBDES": 0, "PS": 1, "BES": 2, "PBES": 3, "PH": 4, "CS": 5, "PBDEH": 6, "DS": 7,
       "P": 8, "ES": 9, "PBEPBES": 10, "FS": 11, "PDS": 12, "BDES": 13, "S": 14, "H": 15}
STATEMENT = {"": 0, "s1": 1, "s2": 2, "PGCREW_1": 3}
# fuzz_session_server.c: login_step / ready_step modes (modulo 12)
LOGIN_OK, LOGIN_MD5, LOGIN_CLEARTEXT, LOGIN_SASL, LOGIN_REFUSED, LOGIN_BUSY, \
    LOGIN_NEGOTIATE, LOGIN_HANGUP = 0, 5, 6, 7, 8, 9, 10, 11
ANSWER, ANSWER_ERROR, ANSWER_ONE, ANSWER_ASYNC, ANSWER_FATAL, ANSWER_FAILED_XACT, \
    ANSWER_EXTRA_RFQ = 0, 6, 7, 8, 9, 10, 11
# fuzz_session_sup.c: fz_sup_op
SUP_DELIVER_ALL, SUP_DELIVER_ONE, SUP_PHANTOM_ASK, SUP_PHANTOM_RELEASE, \
    SUP_LOGIN_FAILED, SUP_CANCEL, SUP_HOLD, SUP_PHANTOM_GIVES = range(8)


def world(auth="trust", hba=0, pool="session", prepared=False, workers=1, b1=0, b2=0,
          b3=0, b4=0, b5=0):
    """The six bytes of the configuration."""
    a = AUTH[auth] | hba << 3
    m = POOL[pool] | (4 if prepared else 0) | (8 if workers == 2 else 0) | b1
    return bytes([a, m, b2, b3, b4, b5])


class Script:
    """A world (world()'s arguments and the extras byte), then actions in
    the target's encoding."""

    def __init__(self, auth="trust", extras=0, **kw):
        self.auth_type = auth
        self.b = bytearray(world(auth, **kw) + bytes([extras]))

    def op(self, name, slot=0, *args):
        self.b.append(OP[name] | slot << 5)
        self.b.extend(args)
        return self

    def startup(self, slot=0, user="alice", db="db", params=(), version="3.0", tcp=False,
                raw=None, op="startup"):
        """params: (name, value) pairs from PARAMS; raw: one pair of our own."""
        mask, values = 0, []
        for name, value in params:
            i = [p[0] for p in PARAMS].index(name)
            mask |= 1 << i
            values.append((i, PARAMS[i][1].index(value)))
        if raw is not None:
            mask |= 0x8000
        a = VERSION[version] | (8 if tcp else 0) | USER[user] << 4
        args = [a, DATABASE[db], mask >> 8, mask & 0xff] + [v for _, v in sorted(values)]
        self.op(op, slot, *args)
        if raw is not None:
            k, v = raw
            pair = k.encode() + b"\0" + v.encode()
            self.b.extend([len(pair)])
            self.b.extend(pair)
        return self

    def step(self, slot=0):
        """A logged-in client's step: a query (one more byte)."""
        return self.op("step", slot, QUERY["SELECT 1"])

    def auth(self, slot=0):
        return self.op("auth_good", slot)

    def wrong_auth(self, slot=0, how=0):
        return self.op("auth_bad", slot, how)

    def query(self, sql, slot=0):
        return self.op("query", slot, QUERY[sql])

    def extended(self, seq, slot=0, name="", sql="SELECT 1"):
        return self.op("extended", slot, SEQ[seq], STATEMENT[name], QUERY[sql])

    def message(self, type_, body, slot=0):
        body = bytes(body)[:255]
        return self.op("message", slot, ord(type_), len(body), *body)

    def server(self, mode=LOGIN_OK, slot=0):
        return self.op("server_step", slot, mode)

    def hangup(self, slot=0):
        return self.op("hangup", slot)

    def clock(self, step):
        return self.op("clock", 0, step)

    def sup(self, what, arg=0):
        """The phantom's ask, release, failed login and cancel take a pool
        (or client) index; delivering and holding take nothing."""
        takes = what in (SUP_PHANTOM_ASK, SUP_PHANTOM_RELEASE, SUP_LOGIN_FAILED, SUP_CANCEL,
                         SUP_PHANTOM_GIVES)
        return self.op("sup", 0, what, *([arg] if takes else []))

    def reload(self, auth="trust", **kw):
        """RELOAD into the world of world()'s arguments."""
        self.op("reload")
        self.b.extend(world(auth, **kw))
        return self

    def cancel(self, key_of=0, tcp=False):
        """A CancelRequest with the key fake client key_of was given."""
        return self.op("cancel", 0, key_of, 1 if tcp else 0)

    def tls(self, slot=0, how=TLS_STEP, k=0, junk=b""):
        """Without a connection: TCP and SSLRequest; then the handshake's
        next step as `how` says (garbage: junk, up to 15 bytes)."""
        junk = bytes(junk)[:15]
        self.op("tls", slot, how | len(junk) << 4, k)
        self.b.extend(junk)
        return self

    def big(self, size, slot=0, kind=BIG_BIND, name="s1"):
        """A named Parse and a large message (size about n bytes, at most
        98302), held."""
        v = min(0xffff, size * 2 // 3)
        return self.op("big", slot, kind | STATEMENT[name] << 2, v >> 8 & 0xff, v & 0xff)

    def piece(self, n=None, slot=0):
        """A piece of what the client holds back: n bytes (None: all)."""
        return self.op("piece", slot, *piece_bytes(n))

    def console(self, command=None, slot=0, user="alice", tcp=False):
        """Log in to the console, or (logged in) run a command."""
        m = CONSOLE_USER[user] | (4 if tcp else 0)
        pick = CONSOLE_COMMANDS.index(command) if command else 0
        return self.op("console", slot, m, pick)

    def server_big(self, size, first=None, slot=0, datarow=False):
        """A large filler message from a server (at most 98302 bytes),
        held; `first` bytes go."""
        v = min(0xffff, size * 2 // 3)
        self.op("server_big", slot, 1 if datarow else 0, v >> 8 & 0xff, v & 0xff)
        self.b.extend(piece_bytes(first))
        return self

    def server_piece(self, n=None, slot=0):
        return self.op("server_piece", slot, *piece_bytes(n))

    def data(self):
        return bytes(self.b)


def piece_bytes(n):
    """piece_len()'s two bytes for n bytes (None: everything)."""
    if n is None:
        return [0xc0, 0]
    if 1 <= n <= 64:
        return [n - 1, 0]
    if n <= 16384:
        return [0x40 | (n - 1) >> 8, (n - 1) & 0xff]
    return [0x80 | (n // 4096 - 1), 0]


def exchanges(auth, user):
    """How many messages the client's side of the authentication takes:
    SCRAM two (md5 with a SCRAM secret is SCRAM too), cleartext and md5
    one, trust and any none."""
    if auth == "scram-sha-256" or (auth == "md5" and user == "carol"):
        return 2
    return 1 if auth in ("plain", "md5") else 0


def login(s, slot=0, server=True, **kw):
    """A client's startup, its password, the pool's first server logging in."""
    s.startup(slot, **kw)
    for _ in range(exchanges(s.auth_type, kw.get("user", "alice"))):
        s.auth(slot)
    if server:
        s.server(LOGIN_OK)
    return s


# ---- what real clients send ----

def client_seeds():
    seeds = {}
    # psql 16 on a terminal: application_name, client_encoding; SCRAM.
    s = Script("scram-sha-256")
    login(s, user="carol", params=[("application_name", "psql"), ("client_encoding", "UTF8")])
    s.query("SELECT 1").server(ANSWER).query("BEGIN").server(ANSWER).query("COMMIT")
    seeds["psql-scram"] = s.server(ANSWER).op("terminate").data()
    # psql with sslmode=prefer and gssencmode=prefer: GSSENC, SSL, then startup.
    s = Script("md5")
    s.op("gssenc").op("ssl")
    login(s, user="bob", params=[("application_name", "psql")])
    seeds["psql-gssenc-ssl-md5"] = s.query("SELECT 1").server(ANSWER).data()
    # psql, a wrong password.
    s = Script("md5")
    s.startup(user="alice", params=[("application_name", "psql")]).wrong_auth()
    seeds["psql-wrong-password"] = s.data()
    # pg_basebackup: replication=true (as the issue has it, no database;
    # libpq also sends database=replication, below).
    s = Script("trust", b4=0x80)
    login(s, user="alice", db=None,
          params=[("replication", "true"), ("application_name", "pg_basebackup")])
    s.query("IDENTIFY_SYSTEM").server(ANSWER)
    seeds["pg_basebackup"] = s.data()
    # pg_receivewal: dbname=replication, replication=true, over TCP, md5.
    s = Script("md5", b4=0x80)
    login(s, user="bob", db="replication", tcp=True,
          params=[("replication", "true"), ("application_name", "pg_receivewal")])
    seeds["pg_receivewal"] = s.query("IDENTIFY_SYSTEM").server(ANSWER).data()
    # pg_recvlogical: replication=database on an ordinary database.
    s = Script("scram-sha-256")
    login(s, user="carol", params=[("replication", "database")])
    seeds["pg_recvlogical"] = s.query("IDENTIFY_SYSTEM").server(ANSWER).data()
    # psycopg 3: user and database only; a pipeline (Sync at the end).
    s = Script("scram-sha-256", pool="transaction", prepared=True)
    login(s, user="carol")
    s.extended("PBDEH").extended("PBDEH").extended("S").server(ANSWER)
    seeds["psycopg-pipeline"] = s.data()
    # pgx: prepares named statements (Parse, Describe, Sync), then runs them.
    s = Script("md5", pool="transaction", prepared=True)
    login(s, user="bob", params=[("application_name", "pgx")])
    s.extended("PDS", name="s1").server(ANSWER).extended("BES", name="s1").server(ANSWER)
    seeds["pgx-prepared"] = s.data()
    # asyncpg: client_encoding='utf-8' (quoted), its statement cache.
    s = Script("scram-sha-256", pool="transaction", prepared=True)
    login(s, user="carol", params=[("client_encoding", "'utf-8'"), ("application_name", "asyncpg")])
    s.extended("PDS", name="s2").server(ANSWER).extended("BDES", name="s2").server(ANSWER)
    seeds["asyncpg"] = s.data()
    # pgJDBC: client_encoding, DateStyle, TimeZone, extra_float_digits (in
    # ignore_startup_parameters, as JDBC users of PgBouncer set it).
    s = Script("md5", pool="transaction", b3=0x10)
    login(s, user="bob", params=[("client_encoding", "UTF8"), ("DateStyle", "ISO"),
                                 ("TimeZone", "Europe/Berlin"), ("extra_float_digits", "3"),
                                 ("application_name", "PostgreSQL JDBC Driver")])
    s.extended("PBDES").server(ANSWER).query("BEGIN").server(ANSWER)
    seeds["pgjdbc"] = s.query("COMMIT").server(ANSWER).data()
    # node-postgres: client_encoding UTF8, a query, then its early
    # Terminate on another connection (a client ended before it connected).
    s = Script("plain")
    login(s, user="alice", params=[("client_encoding", "UTF8")])
    s.query("SELECT 1").server(ANSWER).op("terminate", 1)
    seeds["node-postgres"] = s.data()
    # libpq 18 asking for protocol 3.2 with a _pq_ option: NegotiateProtocolVersion.
    s = Script("trust")
    login(s, user="alice", version="3.2",
          params=[("_pq_.protocol_managed_params", "x")])
    seeds["libpq18-protocol-3.2"] = s.query("SELECT 1").server(ANSWER).data()
    # options with -c pieces, PgBouncer's startup parameter handling.
    s = Script("trust", b3=0x10)
    login(s, user="alice", params=[("options", "-c DateStyle=ISO"),
                                               ("statement_timeout", "0")])
    seeds["options"] = s.query("SELECT 1").server(ANSWER).data()
    return seeds


# ---- paths through the session core ----

def path_seeds():
    seeds = {}
    # Issue 32: replication=true, unknown database, hang-up at the password
    # prompt (the client has no pool): crashed the worker before 115d58d.
    s = Script("md5")
    s.startup(user="alice", db="nosuch", params=[("replication", "true")]).hangup()
    seeds["issue32-replication-hangup"] = s.data()
    # The same for a known database and a wrong password, and for
    # replication=database on trust while the pool logs in.
    s = Script("scram-sha-256")
    s.startup(user="carol", db="db", params=[("replication", "true")]).wrong_auth()
    seeds["replication-wrong-password"] = s.data()
    s = Script("trust")
    s.startup(user="alice", db="db", params=[("replication", "database")]).hangup()
    seeds["replication-waiting-hangup"] = s.data()
    # Cancel of a running query with the key the client was given.
    s = Script("trust", pool="transaction")
    login(s)
    s.query("SELECT 1").cancel(0).server(ANSWER)
    seeds["cancel-running"] = s.data()
    # Server login refused, then a client waiting through the retry.
    s = Script("trust", b2=0x40)
    s.startup(user="alice").server(LOGIN_REFUSED).startup(1, user="alice").clock(1)
    seeds["server-login-refused"] = s.data()
    # The server asks md5, then SCRAM.
    s = Script("trust")
    s.startup(user="bob").server(LOGIN_MD5).server(LOGIN_OK).query("SELECT 1").server(ANSWER)
    seeds["server-md5"] = s.data()
    s = Script("trust")
    s.startup(user="alice", db="db").server(LOGIN_SASL).server(LOGIN_SASL).server(LOGIN_SASL)
    seeds["server-scram"] = s.query("SELECT 1").server(ANSWER).data()
    # Timeouts: login, query_wait, idle transaction, lifetime.
    s = Script("md5", b2=0xff)
    s.startup(user="alice").startup(1, user="bob").auth(1).clock(3).clock(3)
    seeds["timeouts"] = s.data()
    s = Script("trust", pool="transaction", b2=0x14)
    login(s)
    s.query("BEGIN").server(ANSWER).clock(3).clock(4)
    seeds["idle-transaction-timeout"] = s.data()
    # auth_query for a user missing from auth_file.
    s = Script("md5", b4=0x01)
    s.startup(user="alice").auth().server(LOGIN_OK)
    s.startup(1, user="mallory").server(ANSWER).auth(1)
    seeds["auth-query"] = s.data()
    # hba: the issue's crash under an HBA that lets replication in.
    s = Script("hba", hba=4)
    s.startup(user="alice", db="nosuch", params=[("replication", "true")]).hangup()
    seeds["hba-replication-hangup"] = s.data()
    # Two workers: welcome asked, slot granted, then held answers.
    s = Script("trust", pool="transaction", workers=2)
    login(s)
    s.query("SELECT 1").server(ANSWER).sup(SUP_PHANTOM_ASK, 0).query("SELECT 1").server(ANSWER)
    seeds["two-workers"] = s.data()
    s = Script("md5", workers=2, b4=0x04)
    s.startup(user="alice", params=[("replication", "true")]).auth().sup(SUP_DELIVER_ONE)
    s.hangup().sup(SUP_DELIVER_ALL)
    seeds["two-workers-held-replication"] = s.data()
    # RELOAD: "db" goes away under a logged-in client and a waiting one;
    # then auth_type and pool mode change.
    s = Script("trust", pool="transaction")
    login(s)
    s.query("BEGIN").startup(1).reload("trust", pool="transaction", b5=0x01)
    s.server(ANSWER).query("COMMIT").server(ANSWER).reload("md5", pool="statement")
    seeds["reload-drops-db"] = s.step(1).server(ANSWER).data()
    # Two workers: the phantom takes the pool's slot, a client here queues
    # for it, the phantom's idle server moves here.
    s = Script("trust", pool="transaction", workers=2, b3=0x08)
    s.sup(SUP_PHANTOM_ASK, 0).sup(SUP_PHANTOM_ASK, 0).startup()
    s.sup(SUP_PHANTOM_GIVES, 0).query("SELECT 1").server(ANSWER)
    seeds["two-workers-server-moves-in"] = s.data()
    # A pool_size 1 pool: the second client queues, the first leaves.
    s = Script("trust", pool="session")
    login(s, db="sess", user="carol")
    s.startup(1, db="sess", user="carol").hangup(0).server(ANSWER).step(1)
    seeds["queued-session"] = s.data()
    return seeds


# ---- the captured streams of corpus/fuzz_client_stream ----

CAPTURED_USERS = {"trust_user": ("trust", "alice"), "md5_user": ("md5", "bob"),
                  "scram_user": ("scram-sha-256", "carol"), "plain_user": ("plain", "alice")}


def split_messages(stream):
    """The startup packet's parameters, then (type, body) of each message."""
    n = struct.unpack(">I", stream[:4])[0]
    fields = stream[8:n].rstrip(b"\0").split(b"\0")
    params = dict(zip(fields[0::2], fields[1::2]))
    out, i = [], n
    while i + 5 <= len(stream):
        t, ln = stream[i:i + 1].decode("latin-1"), struct.unpack(">I", stream[i + 1:i + 5])[0]
        if ln < 4 or i + 1 + ln > len(stream):
            break
        out.append((t, stream[i + 5:i + 1 + ln]))
        i += 1 + ln
    return {k.decode(): v.decode() for k, v in params.items()}, out


def converted(stream):
    """A captured client stream as actions: its startup (the user mapped to
    one of the userlist's, unknown parameters as the raw one), the right
    answer at each password message, each other message framed as it was
    (bodies over 255 bytes cut, keeping the final NUL), and the fake server
    answering after each."""
    params, msgs = split_messages(stream)
    auth, user = CAPTURED_USERS.get(params.get("user"), ("trust", "alice"))
    known = {name: values for name, values in PARAMS}
    chosen, raw = [], None
    for k, v in params.items():
        if k in ("user", "database"):
            continue
        if k in known and v in known[k]:
            chosen.append((k, v))
        elif raw is None:
            raw = (k, v)
    s = Script(auth, pool="transaction", prepared=True)
    s.startup(user=user, db="db", params=chosen, raw=raw)
    logged_in = False
    for t, body in msgs[:40]:
        if t == "p":
            s.auth()
            continue
        if not logged_in:
            s.server(LOGIN_OK)
            logged_in = True
        if t == "X":
            s.op("terminate")
            break
        if len(body) > 255:
            body = body[:254] + b"\0"
        s.message(t, body)
        if t in "QSH":
            s.server(ANSWER)
    return s.data()


def captured_seeds():
    seeds = {}
    if not os.path.isdir(CAPTURED):
        return seeds
    for name in sorted(os.listdir(CAPTURED)):
        with open(os.path.join(CAPTURED, name), "rb") as f:
            seeds["captured-" + name] = converted(f.read())
    return seeds


def write_corpus(out, seeds):
    """Replaces the seed files in out with seeds (name: bytes); also used
    by stream_seeds.py."""
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(out):
        os.unlink(os.path.join(out, name))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(f"{len(seeds)} seeds in {os.path.relpath(out)}", file=sys.stderr)


# ---- issue 40: the reproductions of /work/shared/repro, as actions ----

def issue40_seeds():
    seeds = {}
    # big_bind_overflow.py / tls_bind_stuck.py: a TLS client Parses a named
    # statement, then Binds it with a parameter over 16 kB (transaction
    # mode, max_prepared_statements, io_uring batches): compact() wrote
    # past the buffer, or the client hung with its server linked.
    for name, sync_first in (("issue40-tls-big-bind", True), ("issue40-tls-big-bind-one-batch", False)):
        s = Script("md5", pool="transaction", prepared=True, extras=X_TLS | X_URING)
        s.tls().tls(how=TLS_COMPLETE)
        login(s, user="bob")
        if sync_first:
            s.extended("PS", name="s2").server(ANSWER)
            s.big(98000, name="s2").piece()
        else:
            s.big(98000, kind=BIG_PARSE_BIND, name="s2").piece()
        s.server(ANSWER).server(ANSWER)
        seeds[name] = s.data()
    s = Script("md5", pool="transaction", prepared=True, extras=X_TLS | X_URING)
    s.tls().tls(how=TLS_COMPLETE)
    login(s, user="bob")
    s.extended("PS", name="s2").server(ANSWER).big(50000, name="s2")
    for _ in range(6):
        s.piece(8192)
    seeds["issue40-tls-big-bind-pieces"] = s.server(ANSWER).hangup().data()
    # show_sockets_tls_segv.py: SHOW SOCKETS and SHOW ACTIVE_SOCKETS while
    # clients sit after 'S' with no ClientHello, with part of one, mid
    # handshake, and up: tls_conn_info() crashed in libssl.
    s = Script("trust", extras=X_TLS | X_CONSOLE)
    s.tls(1).tls(2).tls(2, how=TLS_CUT, k=5).tls(3).tls(3, how=TLS_STEP)
    s.console(user="alice").console("SHOW SOCKETS").console("SHOW ACTIVE_SOCKETS")
    s.tls(3, how=TLS_COMPLETE).console("SHOW SOCKETS").console("SHOW CLIENTS")
    seeds["issue40-show-sockets-mid-tls"] = s.data()
    # half_message_server_reuse.py: a header announcing more than comes
    # (CopyData of 16 MB with 33 bytes, a Query of 200 with 24; a Bind
    # held back after its first piece), then a hang-up, the client linked:
    # the server went back to the pool mid-message.
    for name, raw in (("issue40-half-copydata-hangup", b"d" + struct.pack(">I", 16777216) + b"y" * 33),
                      ("issue40-half-query-hangup",
                       b"Q" + struct.pack(">I", 200) + b"select 'only part of it")):
        s = Script("trust", pool="transaction")
        login(s)
        s.query("SELECT 1").server(ANSWER).op("bytes", 0, len(raw), *raw).hangup()
        login(s, slot=1, server=False)
        seeds[name] = s.query("SELECT 1", slot=1).server(ANSWER).data()
    s = Script("trust", pool="transaction", prepared=True)
    login(s)
    s.extended("PS", name="s1").server(ANSWER).big(60000, name="s1").piece(5000).hangup()
    seeds["issue40-half-bind-hangup"] = s.data()
    # error_mid_message.py: the server streams a CopyData (held after its
    # first piece) and the client sends a malformed Parse: the pooler's
    # FATAL went out inside the relayed message.
    s = Script("trust", pool="transaction", prepared=True)
    login(s)
    s.query("SELECT 1").server_big(98000, first=3000)
    s.message("P", b"s1\0select 1\0\x00\x05\x00\x00\x00\x17")
    seeds["issue40-fatal-inside-copydata"] = s.server_piece().data()
    # The client leaves while the SET for its startup parameters (the
    # server said DateStyle ISO, MDY) is unanswered: the server went back
    # to the pool owing that answer to the next client.
    s = Script("trust", pool="transaction")
    login(s, params=[("DateStyle", "German")])
    s.query("SELECT 1").hangup().server(ANSWER)
    login(s, slot=1, server=False, params=[("DateStyle", "German")])
    seeds["issue40-setvars-unanswered-hangup"] = s.query("SELECT 1", slot=1).server(ANSWER).data()
    return seeds


def main():
    write_corpus(OUT, {**client_seeds(), **path_seeds(), **captured_seeds(), **issue40_seeds()})


if __name__ == "__main__":
    main()
