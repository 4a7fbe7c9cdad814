# cmocka unit tests: one program per module, test/unit/test_<module>.c.
# Each area owns a fragment that appends to check_PROGRAMS and TESTS.
if HAVE_CMOCKA
UNIT_LDADD = libpgcrew.a $(PGCREW_LIBS) $(CMOCKA_LIBS)
UNIT_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
# A test of code that reads the clock links fakeclock.c with these flags:
# util_monotonic then returns the time the test set (fakeclock.h).
FAKECLOCK_LINK_FLAGS = $(AM_LDFLAGS) -Wl,--wrap=util_monotonic
noinst_HEADERS += test/unit/fakeclock.h
include test/unit/config.mk
include test/unit/proto.mk
include test/unit/auth.mk
include test/unit/core.mk
include test/unit/tls.mk
include test/unit/dns.mk
include test/unit/session.mk
endif
