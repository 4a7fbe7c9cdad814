# libFuzzer targets, one per parser, one of the stream transport, and one of
# the session core on the unit rig (configure --enable-fuzzing with CC=clang; scripts/fuzz.sh does
# both). "make fuzz" runs every target over its seed corpus
# (test/fuzz/corpus/<target>): FUZZ_RUNS executions each, or FUZZ_SECONDS of
# fuzzing each when that is set, at most FUZZ_TIME_CAP seconds each when
# that is set. See test/fuzz/README.md.
if FUZZING
FUZZ_TARGETS = test/fuzz/fuzz_startup test/fuzz/fuzz_client_stream \
	test/fuzz/fuzz_server_stream test/fuzz/fuzz_scram_server \
	test/fuzz/fuzz_scram_client test/fuzz/fuzz_config test/fuzz/fuzz_connstr \
	test/fuzz/fuzz_userlist test/fuzz/fuzz_hba test/fuzz/fuzz_console \
	test/fuzz/fuzz_prepared test/fuzz/fuzz_sqlprep test/fuzz/fuzz_proxyproto \
	test/fuzz/fuzz_session test/fuzz/fuzz_stream
noinst_PROGRAMS = $(FUZZ_TARGETS)
# Only the fuzz targets lack a program_LDADD of their own.
LDADD = libpgcrew.a $(PGCREW_LIBS)
FUZZ_LINK = $(AM_LDFLAGS) -fsanitize=fuzzer
FUZZ_COMMON = test/fuzz/fuzz_util.c test/fuzz/fuzz.h

test_fuzz_fuzz_startup_SOURCES = test/fuzz/fuzz_startup.c $(FUZZ_COMMON)
test_fuzz_fuzz_startup_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_client_stream_SOURCES = test/fuzz/fuzz_client_stream.c $(FUZZ_COMMON)
test_fuzz_fuzz_client_stream_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_server_stream_SOURCES = test/fuzz/fuzz_server_stream.c $(FUZZ_COMMON)
test_fuzz_fuzz_server_stream_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_scram_server_SOURCES = test/fuzz/fuzz_scram_server.c $(FUZZ_COMMON)
test_fuzz_fuzz_scram_server_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_scram_client_SOURCES = test/fuzz/fuzz_scram_client.c $(FUZZ_COMMON)
test_fuzz_fuzz_scram_client_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_config_SOURCES = test/fuzz/fuzz_config.c $(FUZZ_COMMON)
test_fuzz_fuzz_config_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_connstr_SOURCES = test/fuzz/fuzz_connstr.c $(FUZZ_COMMON)
test_fuzz_fuzz_connstr_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_userlist_SOURCES = test/fuzz/fuzz_userlist.c $(FUZZ_COMMON)
test_fuzz_fuzz_userlist_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_hba_SOURCES = test/fuzz/fuzz_hba.c $(FUZZ_COMMON)
test_fuzz_fuzz_hba_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_console_SOURCES = test/fuzz/fuzz_console.c $(FUZZ_COMMON)
test_fuzz_fuzz_console_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_prepared_SOURCES = test/fuzz/fuzz_prepared.c $(FUZZ_COMMON)
test_fuzz_fuzz_prepared_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_sqlprep_SOURCES = test/fuzz/fuzz_sqlprep.c $(FUZZ_COMMON)
test_fuzz_fuzz_sqlprep_LDFLAGS = $(FUZZ_LINK)
test_fuzz_fuzz_proxyproto_SOURCES = test/fuzz/fuzz_proxyproto.c $(FUZZ_COMMON)
test_fuzz_fuzz_proxyproto_LDFLAGS = $(FUZZ_LINK)
# The stream transport alone: three streams on socketpairs, a scripted owner.
test_fuzz_fuzz_stream_SOURCES = test/fuzz/fuzz_stream.c $(FUZZ_COMMON)
test_fuzz_fuzz_stream_LDFLAGS = $(FUZZ_LINK)
# The session core on the unit rig (test/unit/rig.c, without cmocka), with
# the clock wrapped as for the session unit tests.
test_fuzz_fuzz_session_SOURCES = test/fuzz/fuzz_session.c test/fuzz/fuzz_session_client.c \
	test/fuzz/fuzz_session_server.c test/fuzz/fuzz_session_sup.c test/fuzz/fuzz_session.h \
	test/fuzz/fuzz_session_io.c test/fuzz/fuzz_session_tls.c \
	test/unit/rig.c test/unit/rig_check.c test/unit/rig.h \
	test/unit/fakeclock.c test/unit/fakeclock.h $(FUZZ_COMMON)
test_fuzz_fuzz_session_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/test/unit
test_fuzz_fuzz_session_LDFLAGS = $(FUZZ_LINK) -Wl,--wrap=util_monotonic

FUZZ_RUNS = 200000
FUZZ_SECONDS =
FUZZ_TIME_CAP =
fuzz: $(FUZZ_TARGETS)
	FUZZ_RUNS='$(FUZZ_RUNS)' FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_TIME_CAP='$(FUZZ_TIME_CAP)' \
	$(SHELL) $(srcdir)/test/fuzz/run.sh $(srcdir)/test/fuzz/corpus $(FUZZ_TARGETS)
.PHONY: fuzz
else
fuzz:
	@echo "make fuzz: configure with CC=clang --enable-fuzzing (or run scripts/fuzz.sh)" >&2; exit 1
.PHONY: fuzz
endif
