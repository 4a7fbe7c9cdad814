# unit tests: dns (real c-ares on a private event_base; the fake-DNS-server
# cases skip unless port 53 can be bound on a loopback address)
check_PROGRAMS += test/unit/test_dns
TESTS += test/unit/test_dns
test_unit_test_dns_SOURCES = test/unit/test_dns.c test/unit/fakeclock.c
test_unit_test_dns_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_dns_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_dns_LDADD = $(UNIT_LDADD)
