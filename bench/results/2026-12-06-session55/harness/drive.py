import sys, time, socket, struct, statistics
sys.path.insert(0, "/work/main/bench/lib")
import pgwire
port = int(sys.argv[1]); n = int(sys.argv[2]); rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
held = []
def login(u):
    s = socket.create_connection(("127.0.0.1", port)); s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0 = time.perf_counter()
    s.sendall(pgwire.startup_message(f"u{u}", "bench"))
    r = pgwire._Reader(s)
    while True:
        tag, body = r.message()
        if tag == b"Z": break
        if tag == b"E": raise Exception(body)
    t1 = time.perf_counter()
    s.sendall(pgwire.message(b"Q", b"SELECT 1\0"))
    while True:
        tag, body = r.message()
        if tag == b"Z": break
    t2 = time.perf_counter()
    return s, t1 - t0, t2 - t0
for rnd in range(rounds):
    lat = []; q = []
    for u in range(n):
        s, a, b = login(u); lat.append(a); q.append(b)
        if rnd == 0: held.append(s)
        else: s.close()
    ev = sorted(q[160:]) if rnd == 0 else sorted(q)
    hits = sum(1 for x in q if x < 0.0015)
    print(f"round {rnd}: evicting/all +query p50 {ev[len(ev)//2]*1000:.2f} mean {statistics.mean(ev)*1000:.2f}, hits {hits}", flush=True)
    lat.sort(); q.sort()
    if 0: print(f"round {rnd}: login p50 {lat[len(lat)//2]*1000:.2f} p90 {lat[int(len(lat)*.9)]*1000:.2f}  +query p50 {q[len(q)//2]*1000:.2f} p90 {q[int(len(q)*.9)]*1000:.2f} ms", flush=True)
