# unit tests: auth
check_PROGRAMS += test/unit/test_crypto test/unit/test_md5 test/unit/test_scram \
	test/unit/test_hba
TESTS += test/unit/test_crypto test/unit/test_md5 test/unit/test_scram \
	test/unit/test_hba
test_unit_test_crypto_SOURCES = test/unit/test_crypto.c
test_unit_test_crypto_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_crypto_LDADD = $(UNIT_LDADD)
test_unit_test_md5_SOURCES = test/unit/test_md5.c
test_unit_test_md5_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_md5_LDADD = $(UNIT_LDADD)
test_unit_test_scram_SOURCES = test/unit/test_scram.c
test_unit_test_scram_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_scram_LDADD = $(UNIT_LDADD)
test_unit_test_hba_SOURCES = test/unit/test_hba.c
test_unit_test_hba_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_hba_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_authcache test/unit/test_authquery
TESTS += test/unit/test_authcache test/unit/test_authquery
test_unit_test_authcache_SOURCES = test/unit/test_authcache.c
test_unit_test_authcache_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_authcache_LDADD = $(UNIT_LDADD)
test_unit_test_authquery_SOURCES = test/unit/test_authquery.c
test_unit_test_authquery_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_authquery_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_ldapconf
TESTS += test/unit/test_ldapconf
test_unit_test_ldapconf_SOURCES = test/unit/test_ldapconf.c
test_unit_test_ldapconf_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_ldapconf_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_peerauth
TESTS += test/unit/test_peerauth
test_unit_test_peerauth_SOURCES = test/unit/test_peerauth.c
test_unit_test_peerauth_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_peerauth_LDADD = $(UNIT_LDADD)

check_PROGRAMS += test/unit/test_authpool
TESTS += test/unit/test_authpool
test_unit_test_authpool_SOURCES = test/unit/test_authpool.c
test_unit_test_authpool_CFLAGS = $(UNIT_CFLAGS)
test_unit_test_authpool_LDADD = $(UNIT_LDADD)
