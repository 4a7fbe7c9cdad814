import re,sys,collections,struct
c=collections.Counter()
for line in open(sys.argv[1]):
    m=re.match(r'(\d+)\s+sendmsg\(\d+, \{.*?iov_base="((?:\\x[0-9a-f]{2})+)',line)
    if not m: continue
    b=bytes(int(x,16) for x in re.findall(r'\\x([0-9a-f]{2})',m.group(2)))
    if b[0]!=13: continue
    n,soon,over,same=struct.unpack('<iiii',b[160:176])
    c[(n,soon,over,same)]+=1
for k,v in c.most_common(20): print(k,v)
