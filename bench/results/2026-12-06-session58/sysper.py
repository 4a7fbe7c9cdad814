# sysc.sh's perf counts per login: logins = the workers' socket() calls
# (every rotation login opens a new server); supervisor = the process
# without sys_enter_socket. usage: sysper.py DIR...
import csv, glob, sys
KEYS = ["sendto", "epoll_ctl", "io_uring_enter", "epoll_wait", "setsockopt", "close",
        "accept4", "sendmmsg", "recvmmsg", "getpid", "sched:sched_switch"]
for d in sys.argv[1:]:
    procs = []
    for f in glob.glob(f"{d}/perf-*.csv"):
        c = {}
        for row in csv.reader(line for line in open(f) if line.strip() and not line.startswith("#")):
            if row[0].isdigit():
                c[row[2].replace("syscalls:sys_enter_", "")] = int(row[0])
        procs.append(c)
    workers = [c for c in procs if c.get("socket", 0) > 0]
    sup = [c for c in procs if c.get("socket", 0) == 0]
    n = sum(c["socket"] for c in workers)
    print(f"{d}: {n} logins in the window")
    for k in KEYS:
        w = sum(c.get(k, 0) for c in workers) / n
        s = sum(c.get(k, 0) for c in sup) / n
        print(f"| {k} | {w:.2f} | {s:.2f} |")
