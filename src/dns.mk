# DNS: per-worker c-ares channel on the worker's libevent base, with a
# PgBouncer-style per-name cache (dns_max_ttl, dns_nxdomain_ttl, resolv_conf).
libpgcrew_a_SOURCES += src/dns.c
noinst_HEADERS += include/dns.h
