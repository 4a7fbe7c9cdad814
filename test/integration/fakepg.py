"""A fake PostgreSQL server for fault injection: it accepts connections on
loopback, reads the startup packet (refusing TLS with 'N'), then plays one
scripted misbehaviour. Each script is a function (sock, startup_params) that
sends what a hostile or broken server would."""

import base64
import socket
import struct
import threading

import util


def msg(kind, payload=b""):
    return kind + struct.pack("!I", len(payload) + 4) + payload


def auth(code, payload=b""):
    return msg(b"R", struct.pack("!I", code) + payload)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return buf


def read_startup(sock):
    """The startup packet's parameters (after answering SSLRequests)."""
    while True:
        n = struct.unpack("!I", recv_exact(sock, 4))[0]
        body = recv_exact(sock, n - 4)
        code = struct.unpack("!I", body[:4])[0]
        if code in (80877103, 80877104):     # SSLRequest, GSSENCRequest
            sock.sendall(b"N")
            continue
        parts = body[4:].split(b"\0")
        return dict(zip(parts[0::2], parts[1::2]))


def read_message(sock):
    kind = recv_exact(sock, 1)
    n = struct.unpack("!I", recv_exact(sock, 4))[0]
    return kind, recv_exact(sock, n - 4)


def login_ok(sock):
    """AuthenticationOk, a few ParameterStatus, BackendKeyData, ReadyForQuery."""
    out = auth(0)
    for k, v in ((b"server_version", b"15.0"), (b"client_encoding", b"UTF8"),
                 (b"standard_conforming_strings", b"on"), (b"DateStyle", b"ISO, MDY"),
                 (b"TimeZone", b"UTC"), (b"integer_datetimes", b"on")):
        out += msg(b"S", k + b"\0" + v + b"\0")
    out += msg(b"K", struct.pack("!II", 4242, 4343)) + msg(b"Z", b"I")
    sock.sendall(out)


# ---- scripts ---------------------------------------------------------------

def close_mid_message(sock, params):
    sock.sendall(b"R\x00\x00\x00\x08\x00")   # half of AuthenticationOk


def oversized_length(sock, params):
    sock.sendall(b"R" + struct.pack("!I", 0x7FFFFFF0) + b"\x00" * 64)


def error_without_sqlstate(sock, params):
    sock.sendall(msg(b"E", b"SFATAL\0Mno sqlstate here\0\0"))


def error_without_fields(sock, params):
    sock.sendall(msg(b"E", b"\0"))


def long_scram_nonce(sock, params):
    """SCRAM with a server-first nonce far over any sane length (PgBouncer
    CVE-2026-6664's shape)."""
    sock.sendall(auth(10, b"SCRAM-SHA-256\0\0"))
    kind, body = read_message(sock)
    mech_end = body.index(b"\0")
    client_first = body[mech_end + 5:]
    nonce = client_first.split(b"r=", 1)[1]
    salt = base64.b64encode(b"saltsaltsalt")
    server_first = b"r=" + nonce + b"A" * 20000 + b",s=" + salt + b",i=4096"
    sock.sendall(auth(11, server_first))


def garbage_after_login(sock, params):
    login_ok(sock)
    read_message(sock)                     # the first query
    sock.sendall(b"\x01\x00\x00\x00\x05\x00" + b"\xff" * 32)


def huge_error_after_login(sock, params):
    """An ErrorResponse of 8 MB: bigger than any I/O buffer."""
    login_ok(sock)
    read_message(sock)
    sock.sendall(msg(b"E", b"SERROR\0CXX000\0M" + b"x" * (8 << 20) + b"\0\0") + msg(b"Z", b"I"))


class FakePg:
    """Runs `script` for every connection until stop()."""

    def __init__(self, script):
        self.script = script
        self.sock = socket.socket()
        self.sock.bind((util.HOST, 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.errors = []
        self._stop = threading.Event()
        self._threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def _accept(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn):
        conn.settimeout(10)
        try:
            params = read_startup(conn)
            self.script(conn, params)
            # Linger so the pooler, not us, decides when it is over.
            conn.settimeout(0.5)
            while not self._stop.is_set():
                try:
                    if not conn.recv(65536):
                        break
                except socket.timeout:
                    continue
        except (OSError, ConnectionError, ValueError) as e:
            self.errors.append(repr(e))
        finally:
            conn.close()

    def stop(self):
        self._stop.set()
        self.sock.close()
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
