"""LDAP authentication against a real slapd (Debian's slapd package) that
the test configures (slapd.conf with -f), starts on a free loopback port as
the service user, fills with ldapadd and stops by pid: auth_type = ldap
with auth_ldap_options (simple bind) and the HBA ldap method (search+bind);
wrong password, unknown user, a user known only to LDAP, slapd down, a
client gone while its bind is pending, and the queue limit."""

import os
import shutil
import socket
import subprocess
import time

import psycopg
import pytest

import util
import wire
from pg_cluster import password

SUFFIX = "dc=pgcrew,dc=test"
PEOPLE = f"ou=people,{SUFFIX}"
ROOTDN = f"cn=admin,{SUFFIX}"
ROOTPW = "ldap-admin-secret"
LDAP_PASSWORD = "ldap-pass"

pytestmark = pytest.mark.pgcrew_only

SLAPD_CONF = """
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
pidfile {dir}/slapd.pid
modulepath /usr/lib/ldap
moduleload back_mdb
database mdb
maxsize 10485760
suffix "{suffix}"
rootdn "{rootdn}"
rootpw {rootpw}
directory {dir}/db
access to attrs=userPassword by anonymous auth by * none
access to * by * read
"""


def person(uid, pw):
    return (f"dn: uid={uid},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: {uid}\n"
            f"cn: {uid}\nsn: {uid}\nuserPassword: {pw}\n\n")


LDIF = (f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\no: pgcrew\n"
        f"dc: pgcrew\n\ndn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n\n"
        + person("trust_user", LDAP_PASSWORD)
        # Known to LDAP only (not in auth_file): its LDAP password is also its
        # PostgreSQL password, which the pool's server login then uses.
        + person("md5_user", password("md5_user")))


@pytest.fixture(scope="module")
def slapd(session_dir):
    slapd_bin = shutil.which("slapd") or "/usr/sbin/slapd"
    if not os.path.exists(slapd_bin) or not shutil.which("ldapadd"):
        pytest.skip("slapd / ldap-utils not installed (scripts/deps.sh test)")
    d = os.path.join(session_dir, "slapd")
    os.makedirs(os.path.join(d, "db"))
    conf = os.path.join(d, "slapd.conf")
    with open(conf, "w") as f:
        f.write(SLAPD_CONF.format(dir=d, suffix=SUFFIX, rootdn=ROOTDN, rootpw=ROOTPW))
    util.give_to_service_user(d)
    port = util.free_port()
    url = f"ldap://{util.HOST}:{port}/"
    cmd = [slapd_bin, "-d", "0", "-f", conf, "-h", url]
    kw = {}
    if util.running_as_root():
        cmd += ["-u", util.SERVICE_USER, "-g", util.SERVICE_USER]
    log = open(os.path.join(d, "slapd.log"), "w")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, **kw)
    try:
        util.wait_until(lambda: proc.poll() is not None or util.port_accepts(port), 20,
                        what="slapd to listen")
        assert proc.poll() is None, open(os.path.join(d, "slapd.log")).read()
        ldif = os.path.join(d, "people.ldif")
        with open(ldif, "w") as f:
            f.write(LDIF)
        out = subprocess.run(["ldapadd", "-x", "-H", url, "-D", ROOTDN, "-w", ROOTPW, "-f", ldif],
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stdout + out.stderr
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def simple_options(port):
    return (f'ldapserver={util.HOST} ldapport={port} ldapprefix="uid=" '
            f'ldapsuffix=",{PEOPLE}"')


def ldap_userlist():
    users = {u: password(u) for u in ("trust_user", "scram_user", "plain_user")}
    return users     # md5_user is known to LDAP only


def login(p, user, pw, db="testdb"):
    with p.connect(dbname=db, user=user, password=pw, connect_timeout=10) as conn:
        return conn.execute("SELECT current_user").fetchone()[0]


FAILED = "LDAP authentication failed"


def test_ldap_simple_bind(pg15, make_pooler, slapd):
    p = make_pooler(pg15, settings={"auth_type": "ldap", "auth_ldap_options": simple_options(slapd)},
                    userlist=ldap_userlist())
    # The LDAP password, not the auth_file one; the server login uses auth_file's.
    assert login(p, "trust_user", LDAP_PASSWORD) == "trust_user"
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "trust_user", password("trust_user"))
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "ghost", "whatever")
    # An empty password would be an anonymous bind, which LDAP accepts.
    with send_password_login(p, "trust_user", "") as conn:
        kind, payload = conn.read_message(10)
        assert kind == b"E" and wire.error_fields(payload)["M"] == FAILED
    # In LDAP only: the password it gave serves the pool's server logins.
    assert login(p, "md5_user", password("md5_user")) == "md5_user"
    log = open(p.logfile).read()
    assert "LDAP login failed for user uid=trust_user," in log
    assert "LDAP login failed for user uid=ghost," in log


def test_ldap_search_bind_hba(pg15, make_pooler, slapd):
    hba = (f'host all all 127.0.0.1/32 ldap ldapserver={util.HOST} ldapport={slapd} '
           f'ldapbasedn="{SUFFIX}" ldapsearchattribute=uid\n'
           f'local all all ldap ldapurl="ldap://{util.HOST}:{slapd}/{SUFFIX}?uid?sub" '
           f'ldapbinddn="{ROOTDN}" ldapbindpasswd={ROOTPW}\n')
    p = make_pooler(pg15, settings={"auth_type": "hba"}, userlist=ldap_userlist(), hba=hba)
    assert login(p, "trust_user", LDAP_PASSWORD) == "trust_user"
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "trust_user", "wrong")
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "ghost", "whatever")
    # A filter metacharacter never reaches the search.
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "trust_user)(uid=*", LDAP_PASSWORD)
    # ldapurl + ldapbinddn, over the Unix socket.
    with psycopg.connect(host=p.workdir, port=p.port, dbname="testdb", user="trust_user",
                         password=LDAP_PASSWORD, connect_timeout=10) as conn:
        assert conn.execute("SELECT current_user").fetchone()[0] == "trust_user"
    log = open(p.logfile).read()
    assert 'LDAP user "ghost" does not exist' in log
    assert "invalid character in user name for LDAP authentication" in log


def test_ldap_server_down(pg15, make_pooler):
    dead = util.free_port()     # nothing listens there
    p = make_pooler(pg15, settings={"auth_type": "ldap", "auth_ldap_options": simple_options(dead)},
                    userlist=ldap_userlist())
    start = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match=FAILED):
        login(p, "trust_user", LDAP_PASSWORD)
    assert time.monotonic() - start < 8
    assert "Can't contact LDAP server" in open(p.logfile).read()


def test_ldap_bad_options(pg15, make_pooler, slapd):
    # Refused when loading (PgBouncer would start and fail every login)...
    p = make_pooler(pg15, settings={"auth_type": "ldap",
                                    "auth_ldap_options": "ldapserver=127.0.0.1 ldapfoo=1"},
                    userlist=ldap_userlist(), start=False)
    with pytest.raises(AssertionError, match='auth_ldap_options: invalid LDAP key parameter: "ldapfoo"'):
        p.start()
    p.proc = None       # its failure to start was the point
    # ... and on RELOAD, which keeps the old settings.
    p = make_pooler(pg15, settings={"auth_type": "ldap", "auth_ldap_options": simple_options(slapd)},
                    userlist=ldap_userlist())
    p.settings["auth_ldap_options"] = "ldapserver=127.0.0.1 ldapprefix=x ldapbasedn=o=x"
    p.write_config()
    mark = p.reload()
    p.wait_for_log(r"config reload failed, keeping the old configuration: .*auth_ldap_options: "
                   r"cannot use ldapbasedn.* together with ldapprefix", since=mark)
    assert login(p, "trust_user", LDAP_PASSWORD) == "trust_user"


@pytest.fixture
def black_hole():
    """A TCP port that accepts connections and never answers: every LDAP
    request to it waits for libldap's timeout."""
    s = socket.socket()
    s.bind((util.HOST, 0))
    s.listen(256)
    yield s.getsockname()[1]
    s.close()


def accept_queue(port):
    """Connections waiting to be accepted on a listening TCP port of
    127.0.0.1 (its rx_queue in /proc/net/tcp)."""
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            local, state = fields[1], fields[3]
            if state == "0A" and local == f"0100007F:{port:04X}":     # LISTEN
                return int(fields[4].split(":")[1], 16)
    return 0


def send_password_login(p, user, pw):
    conn = wire.RawConn(p.port, timeout=10)
    conn.send(wire.startup_packet(user, "testdb"))
    kind, payload = conn.read_message(5)
    assert kind == b"R" and payload[:4] == b"\0\0\0\3", (kind, payload)   # cleartext
    conn.send(wire.message(b"p", pw.encode() + b"\0"))
    return conn


def test_ldap_client_gone_while_pending(pg15, make_pooler, black_hole):
    p = make_pooler(pg15, settings={"auth_type": "ldap",
                                    "auth_ldap_options": simple_options(black_hole),
                                    "workers": 1},
                    userlist=ldap_userlist())
    conn = send_password_login(p, "trust_user", LDAP_PASSWORD)
    conn.close()    # gone while the bind waits on the black hole
    util.wait_until(lambda: "client_gone=1" in open(p.logfile).read(), 30,
                    what="the pending LDAP answer to be dropped")
    assert p.proc.poll() is None


def test_ldap_queue_full(pg15, make_pooler, black_hole):
    p = make_pooler(pg15, settings={"auth_type": "ldap",
                                    "auth_ldap_options": simple_options(black_hole),
                                    "workers": 1, "max_client_conn": 200},
                    userlist=ldap_userlist())
    conns = [send_password_login(p, "trust_user", LDAP_PASSWORD) for _ in range(70)]
    try:
        refused = 0
        for c in conns[60:]:
            try:
                kind, payload = c.read_message(1)
            except (TimeoutError, OSError):
                continue
            if kind == b"E":
                fields = wire.error_fields(payload)
                assert "too many authentication requests" in fields["M"], fields
                refused += 1
        assert refused == 6       # 64 queued or running, the rest refused
        log = open(p.logfile).read()
        assert "authentication queue full: method=LDAP user=trust_user pending=64 max=64" in log
    finally:
        for c in conns:
            c.close()


def test_ldap_stop_while_bind_pending(pg15, make_pooler, black_hole):
    """A worker told to stop while a thread is inside libldap leaves at once
    without running exit-time cleanup under the thread's feet (libldap's
    global state is freed by exit handlers)."""
    p = make_pooler(pg15, settings={"auth_type": "ldap",
                                    "auth_ldap_options": simple_options(black_hole),
                                    "workers": 1},
                    userlist=ldap_userlist())
    conns = [send_password_login(p, "trust_user", LDAP_PASSWORD) for _ in range(5)]
    # The two threads are now waiting on the black hole.
    util.wait_until(lambda: accept_queue(black_hole) >= 2, 20,
                    what="both auth threads connected to the black hole")
    started = time.monotonic()
    p.stop()
    assert time.monotonic() - started < 5
    assert "authentication threads still busy, exiting without cleanup" in open(p.logfile).read()
    for c in conns:
        c.close()
