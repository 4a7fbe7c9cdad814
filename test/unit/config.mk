# unit tests: config (ini grammar, connection strings, userlist, settings/load).
# Data files live in test/unit/data/config; test_config also reads
# etc/pgcrew.ini and doc/config.md from the source tree.
CONFIG_TEST_CFLAGS = $(UNIT_CFLAGS) -DDATADIR='"$(abs_top_srcdir)/test/unit/data"' \
	-DTOP_SRCDIR='"$(abs_top_srcdir)"'

check_PROGRAMS += test/unit/test_ini test/unit/test_connstr \
	test/unit/test_userlist test/unit/test_config
TESTS += test/unit/test_ini test/unit/test_connstr \
	test/unit/test_userlist test/unit/test_config

test_unit_test_ini_SOURCES = test/unit/test_ini.c
test_unit_test_ini_CFLAGS = $(CONFIG_TEST_CFLAGS)
test_unit_test_ini_LDADD = $(UNIT_LDADD)

test_unit_test_connstr_SOURCES = test/unit/test_connstr.c
test_unit_test_connstr_CFLAGS = $(CONFIG_TEST_CFLAGS)
test_unit_test_connstr_LDADD = $(UNIT_LDADD)

test_unit_test_userlist_SOURCES = test/unit/test_userlist.c
test_unit_test_userlist_CFLAGS = $(CONFIG_TEST_CFLAGS)
test_unit_test_userlist_LDADD = $(UNIT_LDADD)

test_unit_test_config_SOURCES = test/unit/test_config.c
test_unit_test_config_CFLAGS = $(CONFIG_TEST_CFLAGS)
test_unit_test_config_LDADD = $(UNIT_LDADD)
