"""TLS clients on the io_uring batches (issue 42): what must hold however
the ciphertext arrives and however slowly it is read. The client here
drives its TLS by hand (Python's ssl over memory BIOs), so the test
chooses every byte boundary of the records on the wire. Runs with
io_uring on (the default) and, in the second CI pass, off: the same
behaviour either way, and PgBouncer's."""

import socket
import ssl
import struct
import time

import pytest

import util
import wire

WORKERS_MATRIX = (1, 4)


class HandTLS:
    """A TLS client whose ciphertext goes through our hands: send() gives
    the records to write, and the test decides how to cut them."""

    def __init__(self, port, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:     # before connect(): TCP sizes its window from it in the handshake
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect((util.HOST, port))
        self.sock.sendall(struct.pack("!II", 8, wire.SSL_REQUEST_CODE))
        assert self.sock.recv(1) == b"S"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.inc, self.out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.inc, self.out, server_hostname="localhost")
        self.plain = b""
        for _ in range(100):
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                self.sock.sendall(self.out.read())
                self.inc.write(self.sock.recv(65536))
        self.sock.sendall(self.out.read())

    def records(self, data):
        """The ciphertext of data, not sent."""
        self.tls.write(data)
        return self.out.read()

    def send(self, data):
        self.sock.sendall(self.records(data))

    def _more(self, deadline, chunk=65536):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        got = self.sock.recv(chunk)
        if not got:
            raise EOFError("the pooler closed the connection")
        self.inc.write(got)
        while True:
            try:
                self.plain += self.tls.read(1 << 20)
            except ssl.SSLWantReadError:
                return
            except ssl.SSLZeroReturnError:
                raise EOFError("close_notify") from None

    def read_message(self, timeout=10.0, chunk=65536):
        deadline = time.monotonic() + timeout
        while len(self.plain) < 5 or len(self.plain) < 1 + struct.unpack("!I", self.plain[1:5])[0]:
            self._more(deadline, chunk)
        n = 1 + struct.unpack("!I", self.plain[1:5])[0]
        kind, payload, self.plain = self.plain[:1], self.plain[5:n], self.plain[n:]
        return kind, payload

    def read_until(self, kind, timeout=10.0, chunk=65536):
        msgs = []
        while not msgs or msgs[-1][0] != kind:
            msgs.append(self.read_message(timeout, chunk))
        return msgs

    def close(self):
        self.sock.close()


def start(pg, make_pooler, tls_files, **extra):
    s = {"client_tls_sslmode": "require",
         "client_tls_cert_file": tls_files["server.crt"],
         "client_tls_key_file": tls_files["server.key"],
         "pool_mode": "transaction"}
    s.update(extra)
    return make_pooler(pg, settings=s)


def login(p, rcvbuf=None):
    c = HandTLS(p.port, rcvbuf)
    c.send(wire.startup_packet("trust_user", "testdb"))
    c.read_until(b"Z")
    return c


@pytest.mark.parametrize("cut", [1, 2, 5, 7, 100])
def test_records_cut_anywhere(pg15, make_pooler, tls_files, cut):
    """A query's records arrive `cut` bytes at a time, each piece in a
    send of its own after the pooler had the previous one (it answers a
    query in between): every query is answered, whole, in order."""
    p = start(pg15, make_pooler, tls_files)
    c = login(p)
    other = login(p)
    for i in range(3):
        rec = c.records(wire.query_message(f"SELECT {i} AS n, repeat('x', 300)"))
        for at in range(0, len(rec), cut):
            c.sock.sendall(rec[at:at + cut])
            if at % (cut * 40) == 0:     # the pooler has had this piece: it answers another
                other.send(wire.query_message("SELECT 1"))
                other.read_until(b"Z")
        msgs = c.read_until(b"Z")
        rows = [m for m in msgs if m[0] == b"D"]
        assert len(rows) == 1 and rows[0][1][6:7] == str(i).encode(), msgs
    c.close()
    other.close()
    p.assert_alive()


def test_slow_reader_of_a_large_result(pg15, make_pooler, tls_files):
    """4 MB back to a client that reads in small pieces with a small
    socket buffer: the pooler waits for it (no unbounded buffering, no
    loss), and other clients of the pool are served meanwhile."""
    p = start(pg15, make_pooler, tls_files, default_pool_size=2)
    c = login(p, rcvbuf=8192)
    c.send(wire.query_message("SELECT repeat('y', 4 * 1024 * 1024)"))
    other = login(p)
    got = []
    deadline = time.monotonic() + 120
    while not got or got[-1][0] != b"Z":
        assert time.monotonic() < deadline
        got.append(c.read_message(timeout=30, chunk=4096))
        if len(got) == 2:       # the DataRow has started: ask on another client
            other.send(wire.query_message("SELECT 2"))
            assert other.read_until(b"Z")[-1][0] == b"Z"
    rows = [m for m in got if m[0] == b"D"]
    assert len(rows) == 1 and rows[0][1].endswith(b"y" * 1000)
    assert len(rows[0][1]) == 4 * 1024 * 1024 + 6
    c.close()
    other.close()
    p.assert_alive()


def test_client_hangs_up_mid_record(pg15, make_pooler, tls_files):
    """A client sends half of a record and hangs up: its connection goes,
    the pool's server is not held, the next client is served."""
    p = start(pg15, make_pooler, tls_files, default_pool_size=1)
    c = login(p)
    rec = c.records(wire.query_message("SELECT 42"))
    c.sock.sendall(rec[:len(rec) // 2])
    c.close()
    d = login(p)
    d.send(wire.query_message("SELECT 43"))
    assert any(m[0] == b"D" for m in d.read_until(b"Z"))
    d.close()
    util.wait_until(lambda: all(r["state"] != "active" or r["link"] == ""
                                for r in p.show("CLIENTS")), 10, what="no client left linked")
