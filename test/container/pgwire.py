"""A few PostgreSQL wire-protocol steps the drivers do not expose, for the
cancel test: a SCRAM-SHA-256 login that keeps the BackendKeyData, a simple
query, and a CancelRequest sent to any address. Every read is bounded."""

import base64
import hashlib
import hmac
import os
import socket
import struct


class Conn:
    def __init__(self, host, port, timeout=10):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        self.key = None                     # (pid, secret) from BackendKeyData

    def close(self):
        self.sock.close()

    def send(self, kind, payload):
        self.sock.sendall(kind + struct.pack("!I", len(payload) + 4) + payload)

    def read(self):
        """One message: (kind, payload)."""
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!I", self.buf[1:5])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        n = struct.unpack("!I", self.buf[1:5])[0]
        kind, payload, self.buf = self.buf[:1], self.buf[5:1 + n], self.buf[1 + n:]
        return kind, payload

    def read_until(self, kind):
        msgs = []
        while True:
            m = self.read()
            msgs.append(m)
            if m[0] == kind:
                return msgs

    def login(self, user, password, dbname):
        params = f"user\0{user}\0database\0{dbname}\0\0".encode()
        body = struct.pack("!I", 196608) + params
        self.sock.sendall(struct.pack("!I", len(body) + 4) + body)
        kind, p = self.read()
        if kind == b"E":
            raise RuntimeError(error_text(p))
        assert kind == b"R" and struct.unpack("!I", p[:4])[0] == 10, (kind, p)
        assert b"SCRAM-SHA-256\0" in p[4:], p
        self._scram(password, user)
        for kind, p in self.read_until(b"Z"):
            if kind == b"K":
                self.key = struct.unpack("!II", p[:8])
            if kind == b"E":
                raise RuntimeError(error_text(p))

    def _scram(self, password, user):
        nonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = f"n=,r={nonce}"
        first = ("n,," + first_bare).encode()
        self.send(b"p", b"SCRAM-SHA-256\0" + struct.pack("!I", len(first)) + first)
        kind, p = self.read()
        if kind == b"E":
            raise RuntimeError(error_text(p))
        server_first = p[4:].decode()
        fields = dict(f.split("=", 1) for f in server_first.split(","))
        salt, iters, rnonce = base64.b64decode(fields["s"]), int(fields["i"]), fields["r"]
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iters)
        client_key = hmac.new(salted, b"Client Key", "sha256").digest()
        stored = hashlib.sha256(client_key).digest()
        final_bare = f"c=biws,r={rnonce}"
        auth_msg = f"{first_bare},{server_first},{final_bare}".encode()
        sig = hmac.new(stored, auth_msg, "sha256").digest()
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
        self.send(b"p", f"{final_bare},p={proof}".encode())
        kind, p = self.read()
        if kind == b"E":
            raise RuntimeError(error_text(p))
        assert kind == b"R" and struct.unpack("!I", p[:4])[0] == 12, (kind, p)   # SASLFinal
        kind, p = self.read()
        assert kind == b"R" and struct.unpack("!I", p[:4])[0] == 0, (kind, p)     # AuthenticationOk

    def query(self, sql):
        self.send(b"Q", sql.encode() + b"\0")


def error_fields(payload):
    out = {}
    for part in payload.split(b"\0"):
        if part:
            out[chr(part[0])] = part[1:].decode(errors="replace")
    return out


def error_text(payload):
    f = error_fields(payload)
    return f"{f.get('C')}: {f.get('M')}"


def cancel(host, port, key, timeout=10):
    """A CancelRequest for key (pid, secret) to host:port."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(struct.pack("!IIII", 16, 80877102, *key))
        s.recv(1)                           # the pooler closes it when done
