"""A client that hangs up anywhere in its login costs only its own
connection (issue 32): for every auth_type, with replication=true,
replication=database and without, a client closes its socket right after
the startup packet, after the pooler's first authentication request (with
SCRAM, after its client-first-message), and after a wrong password. The
workers keep their pids (none crashed and was respawned) and clients
connected before keep working. Unknown users and unknown databases are
tried too: they take the paths where the client has no pool yet."""

import base64
import os
import struct
import subprocess

import pytest

import util
import wire
from conftest import default_userlist
from pg_cluster import PG15_BINDIR, SUPERUSER
from test_pgcrew_only import children

WORKERS_MATRIX = (1, 4)

AUTH_TYPES = ["trust", "any", "plain", "md5", "scram-sha-256", "hba"]
HBA = ("host all all 127.0.0.1/32 md5\n"
       "host replication all 127.0.0.1/32 md5\n")
# (user, database): known and unknown of each; the superuser may start a
# walsender, so its replication logins open a server of their own.
TARGETS = [("scram_user", "testdb"), (SUPERUSER, "testdb"), ("nobody", "nosuch"),
           ("scram_user", "nosuch"), ("nobody", "testdb")]
REPLICATION = [None, "true", "database"]
STEPS = ["startup", "first_auth", "wrong_password"]


def startup(user, db, repl):
    params = {"replication": repl} if repl else {}
    return wire.startup_packet(user, db, **params)


def scram_first(raw, nonce):
    """SASLInitialResponse with a client-first-message."""
    first = b"n,,n=,r=" + nonce
    body = b"SCRAM-SHA-256\0" + struct.pack("!i", len(first)) + first
    raw.send(wire.message(b"p", body))


def wrong_answer(raw, kind, payload):
    """Answers the authentication request wrongly; False when there is
    nothing to answer (trust, any, or an error already)."""
    if kind != b"R":
        return False
    code = struct.unpack("!I", payload[:4])[0]
    if code == 3:                                   # cleartext
        raw.send(wire.message(b"p", b"wrong\0"))
    elif code == 5:                                 # md5
        raw.send(wire.message(b"p", b"md5" + b"0" * 32 + b"\0"))
    elif code == 10:                                # SASL
        nonce = base64.b64encode(os.urandom(18))
        scram_first(raw, nonce)
        kind, payload = raw.read_message()
        if kind != b"R" or struct.unpack("!I", payload[:4])[0] != 11:
            return True
        server_nonce = dict(part.split(b"=", 1) for part in payload[4:].split(b","))[b"r"]
        proof = base64.b64encode(os.urandom(32))
        raw.send(wire.message(b"p", b"c=biws,r=" + server_nonce + b",p=" + proof))
    else:
        return False
    return True


def hang_up(p, user, db, repl, step):
    try:
        with wire.RawConn(p.port) as raw:
            raw.send(startup(user, db, repl))
            if step == "startup":
                return
            kind, payload = raw.read_message()
            if step == "first_auth":
                if kind == b"R" and struct.unpack("!I", payload[:4])[0] == 10:
                    scram_first(raw, base64.b64encode(os.urandom(18)))
                return
            wrong_answer(raw, kind, payload)
    except (EOFError, ConnectionError, OSError):
        pass                  # refused before the step: a hang-up all the same


def login_clients(p):
    with p.admin(password=default_userlist()["trust_user"]) as admin:
        rows = admin.execute("SHOW LISTS").fetchall()
    return dict(rows)["login_clients"]


@pytest.mark.pgcrew_only
@pytest.mark.parametrize("auth_type", AUTH_TYPES)
def test_hangups(pg15, make_pooler, pooler_workers, auth_type):
    userlist = default_userlist()
    userlist[SUPERUSER] = "unused"
    p = make_pooler(pg15, settings={"auth_type": auth_type, "pool_mode": "transaction",
                                    "admin_users": "trust_user"},
                    userlist=userlist, hba=HBA if auth_type == "hba" else None)
    pids = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == pooler_workers
                           else None, 10, what="every worker up")
    # Clients that were there before, spread over the workers.
    before = [p.connect(user="md5_user", password=userlist["md5_user"])
              for _ in range(2 * pooler_workers)]
    rounds = 2 * pooler_workers
    for repl in REPLICATION:
        for user, db in TARGETS:
            for step in STEPS:
                for _ in range(rounds):
                    hang_up(p, user, db, repl, step)
    util.wait_until(lambda: login_clients(p) == 0, 20, what="every hung-up login closed")
    assert children(p.pid) == pids, "a worker died and was respawned"
    for conn in before:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.close()
    assert "killed by signal" not in p.log_text() and "exited with status" not in p.log_text()


@pytest.mark.pgcrew_only
@pytest.mark.parametrize("dbname", ["nosuch", "testdb"])
def test_psql_repl(pg15, make_pooler, pooler_workers, dbname):
    """The issue's reproduction: psql asking for a physical replication
    connection as an unknown user, stdin closed at the password prompt."""
    p = make_pooler(pg15, settings={"auth_type": "scram-sha-256"})
    pids = util.wait_until(lambda: children(p.pid) if len(children(p.pid)) == pooler_workers
                           else None, 10, what="every worker up")
    before = [p.connect(user="scram_user", password=default_userlist()["scram_user"])
              for _ in range(2 * pooler_workers)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    for _ in range(4 * pooler_workers):
        out = subprocess.run(
            [os.path.join(PG15_BINDIR, "psql"),
             f"host={p.host} port={p.port} user=nobody dbname={dbname} replication=true",
             "-c", "IDENTIFY_SYSTEM"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30, env=env)
        assert out.returncode != 0
    util.wait_until(lambda: login_clients(p) == 0, 20, what="every login closed")
    assert children(p.pid) == pids, "a worker died and was respawned"
    assert "killed by signal" not in p.log_text()
    for conn in before:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        conn.close()
