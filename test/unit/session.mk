# unit tests: the session core (client, server and pool state machines,
# cancel routing, the janitor's timeouts) driven through test/unit/rig.c: a
# world without a worker, a fake PostgreSQL on a Unix socket, clients on
# socketpairs and the fake clock (fakeclock.h), moved by the test.
SESSION_TESTS = test/unit/test_pool test/unit/test_client test/unit/test_server \
	test/unit/test_cancel test/unit/test_janitor
check_PROGRAMS += $(SESSION_TESTS)
TESTS += $(SESSION_TESTS)
noinst_HEADERS += test/unit/rig.h
# The rig without cmocka (also linked into test/fuzz/fuzz_session), and its
# failure hook for cmocka.
RIG_CORE = test/unit/rig.c test/unit/rig_check.c test/unit/fakeclock.c
RIG_SOURCES = $(RIG_CORE) test/unit/rig_cmocka.c

test_unit_test_pool_SOURCES = test/unit/test_pool.c $(RIG_SOURCES)
test_unit_test_pool_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_pool_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_pool_LDADD = $(UNIT_LDADD)

test_unit_test_client_SOURCES = test/unit/test_client.c $(RIG_SOURCES)
test_unit_test_client_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_client_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_client_LDADD = $(UNIT_LDADD)

test_unit_test_server_SOURCES = test/unit/test_server.c $(RIG_SOURCES)
test_unit_test_server_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_server_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_server_LDADD = $(UNIT_LDADD)

test_unit_test_cancel_SOURCES = test/unit/test_cancel.c $(RIG_SOURCES)
test_unit_test_cancel_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_cancel_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_cancel_LDADD = $(UNIT_LDADD)

test_unit_test_janitor_SOURCES = test/unit/test_janitor.c $(RIG_SOURCES)
test_unit_test_janitor_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_janitor_LDFLAGS = $(FAKECLOCK_LINK_FLAGS)
test_unit_test_janitor_LDADD = $(UNIT_LDADD)
