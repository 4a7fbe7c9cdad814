# unit tests: proto
check_PROGRAMS += test/unit/test_packet
TESTS += test/unit/test_packet
test_unit_test_packet_SOURCES = test/unit/test_packet.c
test_unit_test_packet_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_packet_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_build
TESTS += test/unit/test_build
test_unit_test_build_SOURCES = test/unit/test_build.c
test_unit_test_build_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_build_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_startup
TESTS += test/unit/test_startup
test_unit_test_startup_SOURCES = test/unit/test_startup.c
test_unit_test_startup_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_startup_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_error
TESTS += test/unit/test_error
test_unit_test_error_SOURCES = test/unit/test_error.c
test_unit_test_error_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_error_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_sqlprep
TESTS += test/unit/test_sqlprep
test_unit_test_sqlprep_SOURCES = test/unit/test_sqlprep.c
test_unit_test_sqlprep_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_sqlprep_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_proxyproto
TESTS += test/unit/test_proxyproto
test_unit_test_proxyproto_SOURCES = test/unit/test_proxyproto.c
test_unit_test_proxyproto_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_proxyproto_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_cancelkey
TESTS += test/unit/test_cancelkey
test_unit_test_cancelkey_SOURCES = test/unit/test_cancelkey.c
test_unit_test_cancelkey_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_cancelkey_LDADD = $(UNIT_LDADD)
