import csv,sys
for d in sys.argv[1:]:
    rows=list(csv.DictReader(open(f"{d}/rotation.csv")))
    for t in ["pgcrew-auto","pgcrew-w1"]:
        r=[x for x in rows if x["target"]==t]
        if not r: continue
        base=[x for x in r if x["phase"]=="baseline"][0]
        ch=[x for x in r if x["phase"]=="chunk"]
        cpu=(float(ch[-1]["cpu_s"])-float(base["cpu_s"]))/(int(ch[-1]["roles_passed"])-int(base["roles_passed"]))*1e6
        print(f"| {d.split('/')[-1].replace('rot-','')} | {t} | {' / '.join(x['chunk_p50_ms'] for x in ch)} | {' / '.join(x['chunk_p99_ms'] for x in ch)} | {' / '.join(x['logins_per_s'] for x in ch)} | {cpu:.0f} |")
