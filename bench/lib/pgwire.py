"""A minimal PostgreSQL frontend for measurements: StartupMessage, SCRAM-SHA-256
(no channel binding), TLS by SSLRequest or direct (ALPN "postgresql"), one
simple query. connect() timestamps every phase; AsyncClient (asyncio) is used
to hold thousands of idle logged-in clients."""

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import time

SSL_REQUEST = struct.pack("!II", 8, 80877103)
_salted_cache = {}


class PgError(Exception):
    pass


def startup_message(user, database):
    body = struct.pack("!I", 196608)
    for k, v in (("user", user), ("database", database)):
        body += k.encode() + b"\0" + v.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def message(tag, payload):
    return tag + struct.pack("!I", len(payload) + 4) + payload


def error_text(payload):
    fields = {}
    for part in payload.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return f"{fields.get('S', 'ERROR')}: {fields.get('M', '?')}"


class Scram:
    """SCRAM-SHA-256 client, RFC 5802/7677, without channel binding. The salted
    password is cached per (password, salt, iterations), as any client that
    logs in many times could."""

    def __init__(self, password):
        self.password = password
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n=,r={self.nonce}"
        self.server_signature = None

    def initial(self):
        data = ("n,," + self.first_bare).encode()
        mech = b"SCRAM-SHA-256\0"
        return message(b"p", mech + struct.pack("!i", len(data)) + data)

    def final(self, server_first):
        attrs = dict(kv.split("=", 1) for kv in server_first.decode().split(","))
        if not attrs["r"].startswith(self.nonce):
            raise PgError("SCRAM: server nonce does not extend ours")
        salt = base64.b64decode(attrs["s"])
        iters = int(attrs["i"])
        key = (self.password, salt, iters)
        salted = _salted_cache.get(key)
        if salted is None:
            salted = hashlib.pbkdf2_hmac("sha256", self.password.encode(), salt, iters)
            _salted_cache[key] = salted
        client_key = hmac.new(salted, b"Client Key", hashlib.sha256).digest()
        stored_key = hashlib.sha256(client_key).digest()
        without_proof = f"c=biws,r={attrs['r']}"
        auth_message = f"{self.first_bare},{server_first.decode()},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, hashlib.sha256).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = hmac.new(salted, b"Server Key", hashlib.sha256).digest()
        self.server_signature = hmac.new(server_key, auth_message, hashlib.sha256).digest()
        data = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        return message(b"p", data)

    def check(self, server_final):
        attrs = dict(kv.split("=", 1) for kv in server_final.decode().split(","))
        if base64.b64decode(attrs.get("v", "")) != self.server_signature:
            raise PgError("SCRAM: wrong server signature")


class _Reader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise PgError("connection closed by the server")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def message(self):
        head = self.read(5)
        length = struct.unpack("!I", head[1:5])[0]
        return head[:1], self.read(length - 4)


def tls_context(cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    ctx.check_hostname = True
    return ctx


def connect(host, port, user, password, database, tls=None, cafile=None, timeout=30,
            query="SELECT 1"):
    """Open, log in, run `query` once, close. tls: None, "request"
    (SSLRequest) or "direct". Returns phase durations in seconds:
    tcp, tls, startup (StartupMessage to the server's SASL request), scram
    (SASL exchange to AuthenticationOk), login (AuthenticationOk to the first
    ReadyForQuery: for a pooler, the server-side login or cached welcome),
    query, ready (start to ReadyForQuery), total."""
    now = time.perf_counter
    t = {"start": now()}
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t["tcp"] = now()
    try:
        if tls == "request":
            sock.sendall(SSL_REQUEST)
            answer = sock.recv(1)
            if answer != b"S":
                raise PgError(f"SSLRequest refused ({answer!r})")
            sock = tls_context(cafile).wrap_socket(sock, server_hostname=host)
        elif tls == "direct":
            ctx = tls_context(cafile)
            ctx.set_alpn_protocols(["postgresql"])
            sock = ctx.wrap_socket(sock, server_hostname=host)
        t["tls"] = now()
        r = _Reader(sock)
        sock.sendall(startup_message(user, database))
        scram = Scram(password)
        while True:
            tag, body = r.message()
            if tag == b"E":
                raise PgError(error_text(body))
            if tag != b"R":
                raise PgError(f"unexpected message {tag!r} during authentication")
            code = struct.unpack("!I", body[:4])[0]
            if code == 10:
                t["auth_request"] = now()
                if b"SCRAM-SHA-256\0" not in body[4:]:
                    raise PgError("server does not offer SCRAM-SHA-256")
                sock.sendall(scram.initial())
            elif code == 11:
                sock.sendall(scram.final(body[4:]))
            elif code == 12:
                scram.check(body[4:])
            elif code == 0:
                t["auth_ok"] = now()
                break
            else:
                raise PgError(f"authentication method {code} (only SCRAM is measured)")
        while True:
            tag, body = r.message()
            if tag == b"E":
                raise PgError(error_text(body))
            if tag == b"Z":
                t["ready"] = now()
                break
        if query:
            sock.sendall(message(b"Q", query.encode() + b"\0"))
            while True:
                tag, body = r.message()
                if tag == b"E":
                    raise PgError(error_text(body))
                if tag == b"Z":
                    break
        t["query"] = now()
        try:
            sock.sendall(message(b"X", b""))
        except OSError:
            pass
    finally:
        sock.close()
    s = t["start"]
    auth_request = t.get("auth_request", t["auth_ok"])
    return {
        "tcp": t["tcp"] - s,
        "tls": t["tls"] - t["tcp"],
        "startup": auth_request - t["tls"],
        "scram": t["auth_ok"] - auth_request,
        "login": t["ready"] - t["auth_ok"],
        "query": t["query"] - t["ready"],
        "ready": t["ready"] - s,
        "total": t["query"] - s,
    }


PHASES = ("tcp", "tls", "startup", "scram", "login", "query", "ready", "total")


class AsyncClient:
    """One logged-in client held open (asyncio streams)."""

    def __init__(self):
        self.reader = None
        self.writer = None

    async def _message(self):
        head = await self.reader.readexactly(5)
        length = struct.unpack("!I", head[1:5])[0]
        return head[:1], await self.reader.readexactly(length - 4)

    async def login(self, host, port, user, password, database, tls_ctx=None, direct=False):
        """tls_ctx None: plain TCP; else TLS by SSLRequest, or from the first
        byte when direct (the context must then offer ALPN "postgresql")."""
        import asyncio
        if direct:
            self.reader, self.writer = await asyncio.open_connection(
                host, port, ssl=tls_ctx, server_hostname=host)
        else:
            self.reader, self.writer = await asyncio.open_connection(host, port)
        if tls_ctx is not None and not direct:
            self.writer.write(SSL_REQUEST)
            await self.writer.drain()
            answer = await self.reader.readexactly(1)
            if answer != b"S":
                raise PgError("SSLRequest refused")
            await self.writer.start_tls(tls_ctx, server_hostname=host)
        self.writer.write(startup_message(user, database))
        scram = Scram(password)
        while True:
            tag, body = await self._message()
            if tag == b"E":
                raise PgError(error_text(body))
            if tag == b"Z":
                return
            if tag == b"R":
                code = struct.unpack("!I", body[:4])[0]
                if code == 10:
                    self.writer.write(scram.initial())
                elif code == 11:
                    self.writer.write(scram.final(body[4:]))
                elif code == 12:
                    scram.check(body[4:])
                elif code != 0:
                    raise PgError(f"authentication method {code}")
                await self.writer.drain()

    async def query(self, sql="SELECT 1"):
        self.writer.write(message(b"Q", sql.encode() + b"\0"))
        await self.writer.drain()
        while True:
            tag, body = await self._message()
            if tag == b"E":
                raise PgError(error_text(body))
            if tag == b"Z":
                return

    def close(self):
        if self.writer is not None:
            try:
                self.writer.write(message(b"X", b""))
            except Exception:  # noqa: BLE001 - closing anyway
                pass
            self.writer.close()
