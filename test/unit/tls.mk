# unit tests: tls (makes its own throwaway CA and certificates at start)
noinst_HEADERS += test/unit/tlsfix.h
check_PROGRAMS += test/unit/test_tls
TESTS += test/unit/test_tls
test_unit_test_tls_SOURCES = test/unit/test_tls.c test/unit/tlsfix.c
test_unit_test_tls_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_tls_LDADD = $(UNIT_LDADD)

# The stream transport over TLS, unbatched and on io_uring batches; recv and
# send wrapped to count the stream layer's own socket calls.
check_PROGRAMS += test/unit/test_stream_tls
TESTS += test/unit/test_stream_tls
test_unit_test_stream_tls_SOURCES = test/unit/test_stream_tls.c test/unit/streamfix.c \
	test/unit/tlsfix.c
test_unit_test_stream_tls_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_stream_tls_LDFLAGS = $(AM_LDFLAGS) -Wl,--wrap=recv -Wl,--wrap=send
test_unit_test_stream_tls_LDADD = $(UNIT_LDADD)
