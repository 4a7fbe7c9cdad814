"""Raw PostgreSQL wire-protocol helpers for tests that must send bytes no
driver would: hand-built startup packets, bad lengths, truncated messages.
Every read is bounded by a socket timeout."""

import socket
import ssl
import struct
import time

import util

PROTOCOL_3_0 = 196608
SSL_REQUEST_CODE = 80877103


def startup_packet(user, database, **params):
    body = struct.pack("!I", PROTOCOL_3_0)
    fields = {"user": user, "database": database}
    fields.update(params)
    for key, value in fields.items():
        body += key.encode() + b"\0" + value.encode() + b"\0"
    body += b"\0"
    return struct.pack("!I", len(body) + 4) + body


def message(kind, payload=b""):
    return kind + struct.pack("!I", len(payload) + 4) + payload


def query_message(sql):
    return message(b"Q", sql.encode() + b"\0")


class RawConn:
    """A plain TCP connection to host:port with bounded reads."""

    def __init__(self, port, host=util.HOST, timeout=5.0, source=None):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def ssl_request(self):
        """Send an SSLRequest; returns the pooler's one-byte answer."""
        self.send(struct.pack("!II", 8, SSL_REQUEST_CODE))
        return self.sock.recv(1)

    def start_tls(self):
        """SSLRequest, then a TLS handshake without verification: every
        later send and read goes through TLS."""
        assert self.ssl_request() == b"S", "the pooler refused TLS"
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        self.sock = ctx.wrap_socket(self.sock, server_hostname="localhost")
        return self

    def reset(self):
        """Hang up with a TCP RST (SO_LINGER 0), as a crashed client does."""
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.sock.close()

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _fill(self, deadline):
        self.sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed by peer")
        self.buf += chunk

    def read_message(self, timeout=5.0):
        """Return (type byte, payload) of the next backend message."""
        deadline = time.monotonic() + timeout
        while len(self.buf) < 5:
            self._fill(deadline)
        kind = self.buf[:1]
        length = struct.unpack("!I", self.buf[1:5])[0]
        while len(self.buf) < 1 + length:
            self._fill(deadline)
        payload = self.buf[5:1 + length]
        self.buf = self.buf[1 + length:]
        return kind, payload

    def read_until(self, kind, timeout=5.0):
        """Read messages until one of type `kind`; returns all read, in order."""
        deadline = time.monotonic() + timeout
        seen = []
        while True:
            msg = self.read_message(max(0.01, deadline - time.monotonic()))
            seen.append(msg)
            if msg[0] == kind:
                return seen

    def wait_closed(self, timeout=5.0):
        """Read and discard until the peer closes; returns the bytes received.
        Raises AssertionError if the peer keeps the connection open."""
        deadline = time.monotonic() + timeout
        received = self.buf
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                return received
            if not chunk:
                return received
            received += chunk
        raise AssertionError(f"peer did not close within {timeout}s; got {received[:200]!r}")

    def closed_with_error(self, timeout=5.0):
        """Wait for the close; the ErrorResponse text if one came first, else ''."""
        data = self.wait_closed(timeout)
        if data[:1] == b"E" and len(data) >= 5:
            length = struct.unpack("!I", data[1:5])[0]
            return error_fields(data[5:1 + length]).get("M", "")
        return ""

    def login_trust(self, user, database, timeout=5.0):
        """Startup without a password; returns once ReadyForQuery arrives."""
        self.send(startup_packet(user, database))
        msgs = self.read_until(b"Z", timeout)
        errors = [p for k, p in msgs if k == b"E"]
        assert not errors, f"login failed: {errors}"
        return msgs


def error_fields(payload):
    """Decode an ErrorResponse payload into {field code: text}."""
    fields = {}
    for part in payload.split(b"\0"):
        if part:
            fields[chr(part[0])] = part[1:].decode(errors="replace")
    return fields


def pooler_accepts(port, host=util.HOST):
    """Like port_accepts, for a pooler: the probe also sends an SSLRequest
    and waits (briefly) for its one-byte answer before it closes, so the
    worker that took it has handled it. A bare connect and close could sit
    in the backlog of a worker not yet running and be counted against
    max_client_conn together with the test's first clients. Any end of
    the exchange (an answer, a refusal, a timeout) still means the port
    accepts: a pooler that wants a PROXY header first closes instead."""
    try:
        with socket.create_connection((host, port), timeout=0.5) as s:
            try:
                s.sendall(struct.pack("!II", 8, SSL_REQUEST_CODE))
                s.recv(1)
            except OSError:
                pass
            return True
    except OSError:
        return False
