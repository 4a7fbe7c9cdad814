import re,sys,glob,os
d=sys.argv[1]
tps={}
for line in open(d+'/run.log'):
    m=re.search(r'tps (\S+)\s+round 0: ([\d.]+) TPS',line)
    if m: tps[m.group(1)]=float(m.group(2))
for t in tps:
    rows={}
    for line in open(f'{d}/{t}.stat.txt'):
        m=re.match(r'\s*(\S+)\s+([\d,]+)\s+(\S+)',line)
        if not m: continue
        pid,cnt,ev=m.group(1),int(m.group(2).replace(',','')),m.group(3)
        rows.setdefault(ev,{})[pid]=cnt
    print("==",t, tps[t])
    for ev,dd in rows.items():
        tot=sum(dd.values())
        if tot==0: continue
        per=" ".join(f"{p.split('-')[-1]}:{c/5/tps[t]:.2f}" for p,c in sorted(dd.items()) if c)
        print(f"  {ev.split(':')[-1]:28s} {tot/5/tps[t]:7.2f}/tx  {per}")
