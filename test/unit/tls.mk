# unit tests: tls (makes its own throwaway CA and certificates at start)
noinst_HEADERS += test/unit/tlsfix.h
check_PROGRAMS += test/unit/test_tls
TESTS += test/unit/test_tls
test_unit_test_tls_SOURCES = test/unit/test_tls.c test/unit/tlsfix.c
test_unit_test_tls_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_tls_LDADD = $(UNIT_LDADD)

