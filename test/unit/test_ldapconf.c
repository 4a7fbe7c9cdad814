/* pgcrew — unit tests for auth/ldapconf: auth_ldap_options parsing (quoting,
 * unknown names, bad values), PostgreSQL's mode checks, ldapurl, and what a
 * login derives: server URIs, simple-bind DN, search filter. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "auth/ldapconf.h"

static bool parse(struct ldapconf *lc, const char *text, char *err)
{
	return ldapconf_parse(lc, text, err, 256);
}

static void test_simple_bind(void **state)
{
	struct ldapconf lc;
	char err[256], out[512];

	(void)state;
	assert_true(parse(&lc, "ldapserver=ldap.example.net ldapprefix=\"cn=\" "
			  "ldapsuffix=\", dc=example, dc=net\"", err));
	assert_false(lc.search);
	assert_true(ldapconf_bind_dn(&lc, "alice", out, sizeof(out)));
	assert_string_equal(out, "cn=alice, dc=example, dc=net");
	assert_true(ldapconf_uris(&lc, out, sizeof(out)));
	assert_string_equal(out, "ldap://ldap.example.net:389");
	assert_true(ldapconf_bind_dn(&lc, "", out, sizeof(out)));
	assert_false(ldapconf_bind_dn(&lc, "alice", out, 10));
}

static void test_search_bind(void **state)
{
	struct ldapconf lc;
	char err[256], out[512];

	(void)state;
	assert_true(parse(&lc, "  ldapserver=\"a b\"  ldapport=1389 ldapscheme=ldaps ldaptls=1 "
			  "ldapbasedn=dc=example,dc=net ldapbinddn=\"cn=admin\" ldapbindpasswd=s\"\"x ", err));
	assert_true(lc.search);
	assert_true(lc.starttls);
	assert_string_equal(lc.basedn, "dc=example,dc=net");
	assert_string_equal(lc.bindpasswd, "s\"\"x");      /* quotes only special at the start */
	assert_true(ldapconf_uris(&lc, out, sizeof(out)));
	assert_string_equal(out, "ldaps://a:1389 ldaps://b:1389");
	assert_true(ldapconf_filter(&lc, "alice", out, sizeof(out)));
	assert_string_equal(out, "(uid=alice)");

	assert_true(parse(&lc, "ldapserver=h ldapbasedn=o=x ldapsearchattribute=cn", err));
	assert_true(ldapconf_filter(&lc, "bob", out, sizeof(out)));
	assert_string_equal(out, "(cn=bob)");

	assert_true(parse(&lc, "ldapserver=h ldapbasedn=o=x "
			  "ldapsearchfilter=\"(|(uid=$username)(mail=$username@x))\"", err));
	assert_true(ldapconf_filter(&lc, "eve", out, sizeof(out)));
	assert_string_equal(out, "(|(uid=eve)(mail=eve@x))");
	assert_false(ldapconf_filter(&lc, "eve", out, 12));
	/* Filter metacharacters in the user name are refused. */
	const char *bad[] = { "a*", "a(", "a)", "a\\\\", "a/b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(ldapconf_filter(&lc, bad[i], out, sizeof(out)));
}

static void test_ldapurl(void **state)
{
	struct ldapconf lc;
	char err[256], out[512];

	(void)state;
	assert_true(parse(&lc, "ldapurl=\"ldaps://dir.example.net:7636/ou=people,dc=example%2Cnet??one?(uid=$username)\"", err));
	assert_string_equal(lc.scheme, "ldaps");
	assert_string_equal(lc.server, "dir.example.net");
	assert_int_equal(lc.port, 7636);
	assert_string_equal(lc.basedn, "ou=people,dc=example,net");
	assert_string_equal(lc.searchattribute, "");
	assert_int_equal(lc.scope, LDAPCONF_SCOPE_ONE);
	assert_string_equal(lc.searchfilter, "(uid=$username)");
	assert_true(lc.search);
	assert_true(ldapconf_uris(&lc, out, sizeof(out)));
	assert_string_equal(out, "ldaps://dir.example.net:7636");

	assert_true(parse(&lc, "ldapurl=ldap://h/o=x?mail", err));
	assert_string_equal(lc.searchattribute, "mail");
	assert_int_equal(lc.port, 0);
	assert_int_equal(lc.scope, LDAPCONF_SCOPE_SUB);
	assert_string_equal(lc.basedn, "o=x");

	const char *bad[] = { "ldapurl=http://h/o=x", "ldapurl=ldap://h:0/o=x", "ldapurl=ldap://h:99999/o=x",
			      "ldapurl=ldap://h/o=x?uid?tree", "ldapurl=ldap://h/o=%zz",
			      "ldapurl=ldap://h/o=x?uid?sub?(uid=$username)" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(parse(&lc, bad[i], err));
}

static void test_errors(void **state)
{
	static const struct { const char *text, *err; } cases[] = {
		{ "ldapserver=h ldapfoo=1 ldapprefix=x", "invalid LDAP key parameter: \"ldapfoo\"" },
		{ "ldapserver=h ldapport=abc ldapprefix=x", "invalid LDAP port number: \"abc\"" },
		{ "ldapserver=h ldapscheme=http ldapprefix=x", "invalid ldapscheme value: \"http\"" },
		{ "ldapserver=h ldapprefix", "LDAP option \"ldapprefix\" is not in name=value form" },
		{ "ldapserver=h ldapprefix=\"x", "unterminated quoted value for LDAP option ldapprefix" },
		{ "ldapserver=h ldapprefix=x ldapbasedn=o=x",
		  "cannot use ldapbasedn, ldapbinddn, ldapbindpasswd, ldapsearchattribute, "
		  "ldapsearchfilter, or ldapurl together with ldapprefix" },
		{ "ldapserver=h", "authentication method \"ldap\" requires argument \"ldapbasedn\", "
		  "\"ldapprefix\", or \"ldapsuffix\" to be set" },
		{ "ldapserver=h ldapbasedn=o=x ldapsearchattribute=uid ldapsearchfilter=(uid=$username)",
		  "cannot use ldapsearchattribute together with ldapsearchfilter" },
		{ "ldapprefix=cn=", "authentication method \"ldap\" requires argument \"ldapserver\" to be set" },
		{ "", "authentication method \"ldap\" requires argument \"ldapbasedn\", "
		  "\"ldapprefix\", or \"ldapsuffix\" to be set" },
	};
	struct ldapconf lc;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		err[0] = '\0';
		assert_false(parse(&lc, cases[i].text, err));
		assert_string_equal(err, cases[i].err);
	}
	char longv[600];
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	char text[700];
	snprintf(text, sizeof(text), "ldapserver=h ldapprefix=%s", longv);
	assert_false(parse(&lc, text, err));
	assert_string_equal(err, "LDAP option ldapprefix is too long");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simple_bind),
		cmocka_unit_test(test_search_bind),
		cmocka_unit_test(test_ldapurl),
		cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
