import socket, struct, time, statistics
def startup():
    s = socket.create_connection(("127.0.0.1", 25999))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    params = b"user\0postgres\0database\0postgres\0\0"
    s.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
    buf = b""
    while not buf.endswith(b"Z\0\0\0\5I"):
        d = s.recv(65536)
        if not d: raise SystemExit("eof")
        buf += d
    return s
logins, exits = [], []
for i in range(200):
    t0 = time.perf_counter(); s = startup(); t1 = time.perf_counter()
    s.sendall(b"X\0\0\0\4")
    while s.recv(65536): pass
    t2 = time.perf_counter(); s.close()
    logins.append((t1 - t0) * 1000); exits.append((t2 - t1) * 1000)
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
print(f"login p50 {q(logins,.5):.3f} ms p99 {q(logins,.99):.3f}; Terminate to EOF p50 {q(exits,.5):.3f} ms p99 {q(exits,.99):.3f}")
