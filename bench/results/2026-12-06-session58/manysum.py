# many.sh's runs: per run the chunk's p50, p99 and logins/s of auto and
# workers = 1, then the mean of the paired differences (auto - w1) with
# the standard error. usage: manysum.py DIR
import csv, glob, math, os, sys
rows = []
for d in sorted(glob.glob(f"{sys.argv[1]}/r*/"), key=lambda p: int(os.path.basename(p.rstrip("/"))[1:])):
    r = {x["target"]: x for x in csv.DictReader(open(f"{d}/rotation.csv")) if x["phase"] == "chunk"}
    if "pgcrew-auto" not in r or "pgcrew-w1" not in r:
        continue
    rows.append((os.path.basename(d.rstrip("/")),
                 *[float(r[t][k]) for k in ("chunk_p50_ms", "chunk_p99_ms", "logins_per_s")
                   for t in ("pgcrew-auto", "pgcrew-w1")]))
print("| run | p50 auto / w1 | p99 auto / w1 | logins/s auto / w1 |")
print("|---|---|---|---|")
for n, a50, w50, a99, w99, al, wl in rows:
    print(f"| {n} | {a50:.1f} / {w50:.1f} | {a99:.1f} / {w99:.1f} | {al:.0f} / {wl:.0f} |")
for name, i in (("p50", 1), ("p99", 3), ("logins/s", 5)):
    d = [r[i] - r[i + 1] for r in rows]
    m = sum(d) / len(d)
    se = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d)) if len(d) > 1 else float("nan")
    print(f"{name}: auto - w1 = {m:+.2f} (standard error {se:.2f}, {len(d)} pairs, auto ahead in "
          f"{sum(1 for x in d if (x < 0 if i < 5 else x > 0))})")
