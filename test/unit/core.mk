# unit tests: core relay modules (stream transport, varcache, strpool, ipc, slot
# ledger, shared memory, SHOW row merging, console parsers, admin_ext,
# latency histograms, prepared statements, the server hand-over record,
# the workers' scheduler slice, the health probes' verdicts).
noinst_HEADERS += test/unit/streamfix.h
check_PROGRAMS += test/unit/test_stream
TESTS += test/unit/test_stream
test_unit_test_stream_SOURCES = test/unit/test_stream.c test/unit/streamfix.c
test_unit_test_stream_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_stream_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_uring
TESTS += test/unit/test_uring
test_unit_test_uring_SOURCES = test/unit/test_uring.c
test_unit_test_uring_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_uring_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_health
TESTS += test/unit/test_health
test_unit_test_health_SOURCES = test/unit/test_health.c
test_unit_test_health_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_health_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_varcache
TESTS += test/unit/test_varcache
test_unit_test_varcache_SOURCES = test/unit/test_varcache.c
test_unit_test_varcache_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_varcache_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_strpool
TESTS += test/unit/test_strpool
test_unit_test_strpool_SOURCES = test/unit/test_strpool.c
test_unit_test_strpool_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_strpool_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_ipc
TESTS += test/unit/test_ipc
test_unit_test_ipc_SOURCES = test/unit/test_ipc.c
test_unit_test_ipc_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_ipc_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_ledger
TESTS += test/unit/test_ledger
test_unit_test_ledger_SOURCES = test/unit/test_ledger.c test/unit/fakeclock.c
test_unit_test_ledger_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_ledger_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_ledger_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_welcome
TESTS += test/unit/test_welcome
test_unit_test_welcome_SOURCES = test/unit/test_welcome.c
test_unit_test_welcome_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_welcome_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_shtab
TESTS += test/unit/test_shtab
test_unit_test_shtab_SOURCES = test/unit/test_shtab.c
test_unit_test_shtab_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_shtab_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_shm
TESTS += test/unit/test_shm
test_unit_test_shm_SOURCES = test/unit/test_shm.c
test_unit_test_shm_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_shm_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_stats
TESTS += test/unit/test_stats
test_unit_test_stats_SOURCES = test/unit/test_stats.c test/unit/fakeclock.c
test_unit_test_stats_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_stats_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_stats_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_rowmerge
TESTS += test/unit/test_rowmerge
test_unit_test_rowmerge_SOURCES = test/unit/test_rowmerge.c
test_unit_test_rowmerge_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_rowmerge_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_console_parse
TESTS += test/unit/test_console_parse
test_unit_test_console_parse_SOURCES = test/unit/test_console_parse.c
test_unit_test_console_parse_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_console_parse_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_admin_ext
TESTS += test/unit/test_admin_ext
test_unit_test_admin_ext_SOURCES = test/unit/test_admin_ext.c
test_unit_test_admin_ext_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_admin_ext_LDADD = $(UNIT_LDADD)


check_PROGRAMS += test/unit/test_hist
TESTS += test/unit/test_hist
test_unit_test_hist_SOURCES = test/unit/test_hist.c
test_unit_test_hist_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_hist_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_prepared
TESTS += test/unit/test_prepared
test_unit_test_prepared_SOURCES = test/unit/test_prepared.c
test_unit_test_prepared_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_prepared_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_handover
TESTS += test/unit/test_handover
test_unit_test_handover_SOURCES = test/unit/test_handover.c
test_unit_test_handover_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_handover_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_hostrole
TESTS += test/unit/test_hostrole
test_unit_test_hostrole_SOURCES = test/unit/test_hostrole.c test/unit/fakeclock.c
test_unit_test_hostrole_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_hostrole_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_hostrole_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_link
TESTS += test/unit/test_link
test_unit_test_link_SOURCES = test/unit/test_link.c
test_unit_test_link_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_link_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_sched_slice
TESTS += test/unit/test_sched_slice
test_unit_test_sched_slice_SOURCES = test/unit/test_sched_slice.c
test_unit_test_sched_slice_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_sched_slice_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_heaptrim
TESTS += test/unit/test_heaptrim
test_unit_test_heaptrim_SOURCES = test/unit/test_heaptrim.c
test_unit_test_heaptrim_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_heaptrim_LDADD = $(UNIT_LDADD)
