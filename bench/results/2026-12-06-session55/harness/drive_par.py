import sys, socket, threading, time
sys.path.insert(0, "/work/main/bench/lib")
import pgwire
port = int(sys.argv[1]); n = int(sys.argv[2]); par = int(sys.argv[3])
nxt = [0]; lock = threading.Lock(); errs = [0]
def login(u):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(pgwire.startup_message(f"u{u}", "bench"))
    r = pgwire._Reader(s)
    while True:
        tag, body = r.message()
        if tag == b"Z": break
        if tag == b"E": raise Exception(body)
    s.sendall(pgwire.message(b"Q", b"SELECT 1\0"))
    while True:
        tag, body = r.message()
        if tag == b"Z": break
    s.close()
def worker():
    while True:
        with lock:
            u = nxt[0]; nxt[0] += 1
        if u >= n: return
        try: login(u % 1000)
        except Exception as e: errs[0] += 1
ts = [threading.Thread(target=worker) for _ in range(par)]
t0 = time.time(); [t.start() for t in ts]; [t.join() for t in ts]
print(f"{n} logins, {par} in flight, {time.time()-t0:.1f} s, errors {errs[0]}")
