import re,sys,collections
names="WORKER_READY RELOAD RELOAD_DONE SHUTDOWN PAUSE RESUME LOG_REOPEN RELOAD_COMMIT RELOAD_ABORT SLOT_REQ SLOT_GRANT SLOT_DENY SLOT_RELEASE POOL_WANT CANCEL_FWD WELCOME_PUT WELCOME_GET WELCOME LOGIN_FAILED ADMIN_REQ ADMIN_RUN ADMIN_PART ADMIN_DONE CLIENT_FD TAKEOVER LISTEN_FD LISTEN_END TAKEOVER_DONE SERVER_FD TAKEN_CLIENT TAKEN_SERVER SHUTDOWN_READY RELOAD_APPLIED SLOT_WITHDRAW CANCEL_DONE POOL_EVICT EVICT_NONE EVICT_DONE".split()
c=collections.Counter()
for line in open(sys.argv[1]):
    m=re.match(r'(\d+)\s+sendmsg\(\d+, \{.*?iov_base="((?:\\x[0-9a-f]{2}){2})',line)
    if not m: continue
    b=bytes(int(x,16) for x in re.findall(r'\\x([0-9a-f]{2})',m.group(2)))
    t=b[0]|b[1]<<8
    c[(m.group(1),names[t] if t<len(names) else t)]+=1
for k,v in sorted(c.items()): print(k,v)
g=sum(v for k,v in c.items() if k[1]=='SLOT_GRANT'); print('grants',g)
