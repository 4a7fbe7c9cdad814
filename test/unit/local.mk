# cmocka unit tests: one program per module, test/unit/test_<module>.c.
# Each area owns a fragment that appends to check_PROGRAMS and TESTS.
if HAVE_CMOCKA
UNIT_LDADD = libpgcrew.a $(PGCREW_LIBS) $(CMOCKA_LIBS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
include test/unit/config.mk
include test/unit/proto.mk
include test/unit/auth.mk
include test/unit/core.mk
include test/unit/tls.mk
include test/unit/dns.mk
include test/unit/session.mk
endif
