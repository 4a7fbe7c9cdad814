# ctx.sh's samples: each process's last sample (ppid, CPU ticks, voluntary
# and involuntary switches), supervisor (the one whose parent is not
# pgcrew) and workers summed, per login (20,000 roles + 1,000 warm-up).
import sys
for d in sys.argv[1:]:
    last = {}
    for line in open(f"{d}/ctx.txt"):
        t, pid, ppid, ticks, vol, nonvol = line.split()
        last[pid] = (ppid, int(ticks), int(vol), int(nonvol))
    sup = [p for p, v in last.items() if v[0] not in last]
    rows = {"supervisor": [last[p] for p in sup], "workers": [v for p, v in last.items() if p not in sup]}
    n = 21000
    out = []
    for k, vs in rows.items():
        out.append(f"{k}: {sum(v[1] for v in vs) * 1e4 / n:.0f} us, "
                   f"{sum(v[2] for v in vs) / n:.2f} vol, {sum(v[3] for v in vs) / n:.2f} invol")
    print(f"| {d} | " + " | ".join(out) + " |")
