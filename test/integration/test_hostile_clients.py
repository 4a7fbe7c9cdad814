"""What one authenticated client must never do to the others (issue 40,
the reproductions of shared/repro/): a Bind larger than the I/O buffer to
a renamed statement, over TLS and plain TCP; the console listing clients
that sit in every TLS state; a client that announces more bytes than it
sends and hangs up (its server must not serve the next client); a FATAL
of the pooler's sent while the client receives a COPY (never inside a
message). Every test checks that no worker was restarted, and the
harness fails it on any sanitizer report. The second CI pass runs this
file with io_uring = 0 (scripts/test.sh)."""

import struct
import threading

import pytest

import pooler as pooler_mod
import util
import wire

WORKERS_MATRIX = (1, 4)

TRANSPORTS = [pytest.param(True, id="tls"), pytest.param(False, id="plain")]


def start(pg, make_pooler, tls_files, **extra):
    """Transaction pooling on one server (a pool of 1 makes every reuse
    case certain), TLS allowed, prepared statements renamed (pgcrew; the
    harness's PgBouncer 1.18 does not know the setting and passes names
    through)."""
    s = {"pool_mode": "transaction", "default_pool_size": 1,
         "client_tls_sslmode": "allow",
         "client_tls_cert_file": tls_files["server.crt"],
         "client_tls_key_file": tls_files["server.key"]}
    s.update(extra)
    p = make_pooler(pg, settings=s, start=False)
    if p.kind != "pgbouncer":
        p.settings["max_prepared_statements"] = 100
    return p.start()


def connect(p, tls, appname, timeout=10.0):
    raw = wire.RawConn(p.port, timeout=timeout)
    if tls:
        raw.start_tls()
    raw.send(wire.startup_packet("trust_user", "testdb", application_name=appname))
    raw.read_until(b"Z", timeout)
    return raw


def cstr(text):
    return text.encode() + b"\0"


def parse(name, sql):
    return wire.message(b"P", cstr(name) + cstr(sql) + struct.pack("!H", 0))


def bind_text(stmt, value):
    return wire.message(b"B", cstr("") + cstr(stmt) + struct.pack("!HHI", 0, 1, len(value))
                        + value + struct.pack("!H", 0))


EXECUTE_SYNC = wire.message(b"E", cstr("") + struct.pack("!I", 0)) + wire.message(b"S")


def worker_pids(p):
    """Each worker's pid (pgcrew), or the one process (PgBouncer)."""
    if p.kind == "pgbouncer":
        return [p.pid]
    return [row["pid"] for row in p.show("WORKERS")]


def assert_unhurt(p, pids):
    """Nothing died: the pooler, and every worker (none restarted)."""
    p.assert_alive()
    assert worker_pids(p) == pids
    log = p.log_text()
    assert "exited with status" not in log and "killed by signal" not in log, p.log_tail()


def clients_named(p, prefix):
    return [r for r in p.show("CLIENTS") if (r.get("application_name") or "").startswith(prefix)]


def answered_alone(p, appname, timeout=10.0):
    """A new client of the pool gets its own answer."""
    with connect(p, False, appname, timeout) as c:
        c.send(wire.query_message(f"SELECT '{appname}'::text"))
        msgs = c.read_until(b"Z", timeout)
    rows = [body for kind, body in msgs if kind == b"D"]
    assert len(rows) == 1 and appname.encode() in rows[0], msgs


# -- item 1: a Bind larger than the buffer, after a named Parse -------------

@pytest.mark.parametrize("tls", TRANSPORTS)
def test_bind_larger_than_the_buffer(pg15, make_pooler, tls_files, tls):
    """Parse of a named statement, then Bind/Execute/Sync with a parameter
    of 50-100 kB: pgcrew renames the statement in place (the head grows
    into the buffer's headroom) while the rest of the Bind streams through.
    Every round is answered with its own value; clients that hang up
    without reading are gone from SHOW CLIENTS and leave the pool's one
    server for the next client."""
    p = start(pg15, make_pooler, tls_files)
    pids = worker_pids(p)
    for r, size in enumerate((100_000, 16_400, 50_000, 16_384 * 3 + 11, 65_536, 99_999)):
        value = bytes([ord("a") + r]) * size
        with connect(p, tls, f"bigbind{r}") as c:
            # A name of its own each round: the harness's PgBouncer passes
            # names through to the pool's one backend.
            c.send(parse(f"s{r}", "select $1::text") + wire.message(b"S"))
            kinds = [k for k, _ in c.read_until(b"Z")]
            assert kinds == [b"1", b"Z"], kinds
            c.send(bind_text(f"s{r}", value) + EXECUTE_SYNC)
            if r % 2:
                continue                    # hangs up without reading the answer
            msgs = c.read_until(b"Z", timeout=20)
            rows = [body for kind, body in msgs if kind == b"D"]
            assert len(rows) == 1 and rows[0][-size:] == value, [k for k, _ in msgs]
    util.wait_until(lambda: not clients_named(p, "bigbind"), 10,
                    what="clients that hung up to leave SHOW CLIENTS")
    answered_alone(p, "after_bigbind")
    assert_unhurt(p, pids)


# -- item 2: the console and clients in every TLS state ---------------------

# Every SHOW view: those of the harness's PgBouncer (1.18), then those it
# lacks (pgcrew's own, and PgBouncer's newer ones).
CONSOLE_VIEWS = ["SOCKETS", "ACTIVE_SOCKETS", "CLIENTS", "SERVERS", "POOLS", "FDS",
                 "DATABASES", "USERS", "STATS", "STATS_TOTALS", "STATS_AVERAGES", "TOTALS",
                 "LISTS", "MEM", "CONFIG", "VERSION", "DNS_HOSTS", "DNS_ZONES"]
PGCREW_VIEWS = ["STATE", "PEERS", "PEER_POOLS", "PROTOCOLS", "WORKERS", "HOSTS"]


def open_in_state(p, state):
    raw = wire.RawConn(p.port, timeout=5)
    if state == "plain_connected":
        return raw                                   # nothing sent
    if state == "plain_half_startup":
        raw.send(wire.startup_packet("trust_user", "testdb")[:7])
        return raw
    if state == "sslrequest":
        assert raw.ssl_request() == b"S"             # no ClientHello yet
        return raw
    if state == "hello_partial":
        assert raw.ssl_request() == b"S"
        raw.send(bytes.fromhex("160301020001"))      # the start of a ClientHello
        return raw
    raw.start_tls()
    if state == "tls_garbage":
        raw.send(b"\x00\x00\x00\x09garbage")
    elif state == "tls_half_startup":
        raw.send(wire.startup_packet("trust_user", "testdb")[:9])
    return raw                                       # "tls_up": no startup packet


STATES = ["plain_connected", "plain_half_startup", "sslrequest", "hello_partial", "tls_up",
          "tls_half_startup", "tls_garbage"]


def test_console_with_clients_in_every_tls_state(pg15, make_pooler, tls_files):
    """Every SHOW view while clients sit before, inside and just after
    their TLS handshake (a monitoring system polling SHOW SOCKETS must
    never crash a worker): four of each, so that with four workers every
    worker likely holds some."""
    p = start(pg15, make_pooler, tls_files)
    pids = worker_pids(p)
    held = [open_in_state(p, st) for st in STATES for _ in range(4)]
    try:
        with p.connect() as busy:                    # a linked server in the views too
            busy.execute("SELECT 1")
        views = CONSOLE_VIEWS + (PGCREW_VIEWS if p.kind == "pgcrew" else [])
        with p.admin() as adm:
            for _ in range(2):
                for view in views:
                    adm.execute(f"SHOW {view}").fetchall()
            socks = pooler_mod.show_rows(adm, "SOCKETS")
        # pgcrew lists all but the connections that sent nothing yet (not
        # accepted before their first byte: TCP_DEFER_ACCEPT) and those
        # refused for their garbage. (PgBouncer 1.18 leaves out some of
        # those mid-handshake.)
        listed = [r for r in socks if r["type"] == "C" and r["database"] != "pgbouncer"]
        assert len(listed) >= (4 * (len(STATES) - 2) if p.kind == "pgcrew" else 1), socks
    finally:
        for raw in held:
            raw.close()
    assert_unhurt(p, pids)


# -- item 3: a half-written message, then a hang-up -------------------------

HALF_MESSAGES = [
    # CopyData announcing 16 MB, 33 bytes of it sent
    pytest.param(b"d" + struct.pack("!I", 16 << 20) + b"select 'x'::text" + b"y" * 17, id="copydata"),
    # Query announcing 200 bytes, 24 sent
    pytest.param(b"Q" + struct.pack("!I", 200) + b"select 'only part of it", id="query"),
]


def pkt_remain(p, appname):
    """The pooler's pkt_remain for the client named appname (SHOW SOCKETS)."""
    rows = [r for r in p.show("SOCKETS")
            if r["type"] == "C" and r.get("application_name") == appname]
    return rows[0]["pkt_remain"] if rows else None


@pytest.mark.parametrize("half", HALF_MESSAGES)
@pytest.mark.parametrize("tls", TRANSPORTS)
def test_half_message_then_hangup(pg15, make_pooler, tls_files, tls, half):
    """Client A announces more bytes than it sends and hangs up (RST). The
    server holding the start of A's message is closed, never given to
    client B, whose query PostgreSQL would read as the rest of A's: B is
    answered, in every round."""
    p = start(pg15, make_pooler, tls_files)
    pids = worker_pids(p)
    for r in range(3):
        a = connect(p, tls, f"halfA{r}")
        a.send(wire.query_message("select 1"))
        a.read_until(b"Z")
        a.send(half)
        util.wait_until(lambda: (pkt_remain(p, f"halfA{r}") or 0) > 0, 10,
                        what="the pooler to have routed the start of A's message")
        a.reset()
        answered_alone(p, f"halfB{r}")
    util.wait_until(lambda: not clients_named(p, "halfA"), 10,
                    what="A to leave SHOW CLIENTS")
    if p.kind == "pgcrew":
        assert "client disconnect before everything was sent to the server" in p.log_text()
    assert_unhurt(p, pids)


# -- item 4: the pooler's FATAL never inside a relayed message --------------

def frames(data):
    """(types, how it ends): 'whole', or 'cut' when the last message is
    incomplete; AssertionError on a frame no backend sends."""
    pos, types = 0, []
    while pos + 5 <= len(data):
        kind = data[pos:pos + 1]
        length = struct.unpack("!i", data[pos + 1:pos + 5])[0]
        assert kind in b"RKSZTDCdcGHEN1234nstIAv" and 4 <= length < (1 << 24), \
            f"bad frame at byte {pos}: {data[pos:pos + 48]!r}"
        if pos + 1 + length > len(data):
            return types, "cut"
        types.append(kind)
        pos += 1 + length
    return types, "whole" if pos == len(data) else "cut"


@pytest.mark.pgcrew_only       # PgBouncer writes its FATAL wherever the relay is
@pytest.mark.parametrize("tls", TRANSPORTS)
def test_fatal_never_inside_a_message(pg15, make_pooler, tls_files, tls):
    """The server streams COPY TO STDOUT rows to the client, which then
    sends a malformed Parse: the pooler closes the client. What the client
    receives is whole messages, then either the FATAL as a whole message
    or the end of the connection (a message cut short when its rest never
    came); never the FATAL's bytes inside a CopyData."""
    p = start(pg15, make_pooler, tls_files)
    pids = worker_pids(p)
    malformed = wire.message(b"P", cstr("s1") + cstr("select 1") + struct.pack("!HI", 5, 23))
    for r in range(8):
        c = connect(p, tls, f"copy{r}")
        got = bytearray()
        started = threading.Event()
        sql = f"copy (select repeat('x', {10 + 7 * r}) || g from generate_series(1, 20000) g) to stdout"

        def reader():
            try:
                while True:
                    chunk = c.sock.recv(65536)
                    if not chunk:
                        return
                    got.extend(chunk)
                    if len(got) > 4096 * (r + 1):
                        started.set()
            except OSError:
                pass
            finally:
                started.set()

        th = threading.Thread(target=reader)
        th.start()
        c.send(wire.query_message(sql))
        assert started.wait(20)
        try:
            c.send(malformed)
        except OSError:
            pass
        th.join(30)
        assert not th.is_alive()
        c.close()
        types, end = frames(bytes(got))
        if b"E" in types:
            assert types[-1] == b"E", types[-5:]
        fatal_at = bytes(got).find(b"broken Parse packet")
        if end == "cut":
            assert fatal_at < 0, "the FATAL was written inside a message"
    answered_alone(p, "after_copy")
    assert_unhurt(p, pids)
