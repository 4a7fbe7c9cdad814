/* pgcrew — unit tests for the HBA and ident files (src/auth/hba.c): a
 * rules/expected matching table, every method and option, every kind of bad
 * line with its line number, CIDR edges, first match wins, @file references,
 * long lines, missing files and the ident map. Files go to a mkdtemp
 * directory that teardown removes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/hba.h"

static char tmpdir[64];
static char *created[64];               /* files and directories, removed in reverse */
static int n_created;

static int setup(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/pgcrew-hba-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	while (n_created > 0) {
		char *p = created[--n_created];
		struct stat st;

		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			rmdir(p);
		else
			unlink(p);
		free(p);
	}
	return rmdir(tmpdir);
}

/* tmpdir/name, remembered for teardown the first time. */
static const char *tmp_path(const char *name)
{
	static char buf[4][512];
	static int next;
	char *p = buf[next++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	for (int i = 0; i < n_created; i++) {
		if (strcmp(created[i], p) == 0)
			return p;
	}
	assert_true(n_created < (int)(sizeof(created) / sizeof(created[0])));
	created[n_created] = strdup(p);
	assert_non_null(created[n_created]);
	n_created++;
	return p;
}

static const char *write_bytes(const char *name, const char *data, size_t len)
{
	const char *path = tmp_path(name);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
	return path;
}

static const char *write_file(const char *name, const char *text)
{
	return write_bytes(name, text, strlen(text));
}

static void make_dir(const char *name)
{
	const char *path = tmp_path(name);

	assert_int_equal(mkdir(path, 0700), 0);
}

/* Loads text as tmpdir/hba.conf; fails the test if the file is unreadable. */
static struct hba *load_text(const char *text, const struct hba_ident *ident)
{
	char err[1024];
	struct hba *h = NULL;
	const char *path = write_file("hba.conf", text);

	if (hba_load(path, ident, &h, err, sizeof(err)) != 0)
		fail_msg("hba_load: %s", err);
	assert_non_null(h);
	return h;
}

#define TLS 1u
#define REPL 2u

/* Line of the rule matching (where = "unix" or an IP address), 0 if none. */
static int match_line(const struct hba *h, const char *where, const char *db, const char *user, unsigned flags)
{
	struct sockaddr_storage ss;
	struct hba_conn c = { .database = db, .user = user, .tls = flags & TLS, .replication = flags & REPL };
	const struct hba_rule *r;

	memset(&ss, 0, sizeof(ss));
	if (strcmp(where, "unix") == 0) {
		c.kind = HBA_LOCAL;
	} else {
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

		c.kind = HBA_HOST;
		if (inet_pton(AF_INET, where, &sin->sin_addr) == 1) {
			sin->sin_family = AF_INET;
		} else {
			if (inet_pton(AF_INET6, where, &sin6->sin6_addr) != 1)
				fail_msg("bad test address %s", where);
			sin6->sin6_family = AF_INET6;
		}
		c.addr = (const struct sockaddr *)&ss;
	}
	r = hba_match(h, &c);
	return r ? hba_rule_line(r) : 0;
}

static const struct hba_rule *match_rule(const struct hba *h, const char *where, const char *db, const char *user)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct hba_conn c = { .kind = HBA_HOST, .database = db, .user = user, .addr = (struct sockaddr *)&sin };

	if (strcmp(where, "unix") == 0)
		c.kind = HBA_LOCAL;
	else
		assert_int_equal(inet_pton(AF_INET, where, &sin.sin_addr), 1);
	return hba_match(h, &c);
}

static void assert_no_problems(const struct hba *h)
{
	if (hba_problem_count(h) != 0)
		fail_msg("unexpected problem: %s", hba_problem(h, 0));
}

/* ---- the matching table ---- */

static const char *const table_rules[] = {
	/*  1 */ "# rules for test_match_table",
	/*  2 */ "local   sameuser   all                  peer",
	/*  3 */ "local   dbz        userz                trust     # comment",
	/*  4 */ "local   all        \"user with space\"    password",
	/*  5 */ "local   all        all                  md5",
	/*  6 */ "hostssl all        all   10.0.0.0/8     cert",
	/*  7 */ "hostnossl all      all   11.0.0.0/8     md5",
	/*  8 */ "host    all        all   127.0.0.0  255.255.255.0   password",
	/*  9 */ "host    db1        all   0.0.0.0/0      scram-sha-256",
	/* 10 */ "host    all        user1 15.0.0.0/8     md5",
	/* 11 */ "host    tmp1,all   user1,user2 , user3   16.0.0.0/8   md5",
	/* 12 */ "host    d1,d2,d3   t18user   18.0.0.0/8   trust",
	/* 13 */ "host    \"all\"      \"all\"     19.0.0.0/8   cert",
	/* 14 */ "host    \"q1\"\"q2\"   \"a , b\"   19.0.0.0/8   password",
	/* 15 */ "host    mdb        muser 199.199.199.199/32   cert",
	/* 16 */ "host    mdb2       muser 128.0.0.0/9    trust",
	/* 17 */ "host    mdb2       muser 128.0.0.0/1    md5",
	/* 18 */ "host    mdb        muser ff11::/16      md5",
	/* 19 */ "host    mdb        muser ::1/128        trust",
	/* 20 */ "host    mdb3       muser all            scram-sha-256",
	/* 21 */ "host    replication      admin   ::1/128   trust",
	/* 22 */ "host    db2,replication  admin2  ::1/128   trust",
	/* 23 */ "host    \"sameuser\" all   20.0.0.0/8     md5",
	/* 24 */ "host    sameuser   all   20.0.0.0/8     trust",
	/* 25 */ "host    \"replication\",\"@x\",\"+y\"  all  21.0.0.0/8  md5",
};

static const struct {
	int line;                       /* 0 = no rule: rejected */
	const char *where, *db, *user;
	unsigned flags;
} table[] = {
	{ 2, "unix", "bob", "bob", 0 },
	{ 3, "unix", "dbz", "userz", 0 },
	{ 4, "unix", "x", "user with space", 0 },
	{ 5, "unix", "x", "y", 0 },
	{ 5, "unix", "dbz", "userq", 0 },
	{ 5, "unix", "dbz", "userz ", 0 },           /* exact names only */
	{ 0, "unix", "x", "y", REPL },               /* all does not match replication */
	{ 6, "10.1.1.1", "db", "user", TLS },
	{ 0, "10.1.1.1", "db", "user", 0 },
	{ 0, "13.1.1.1", "db", "user", 0 },
	{ 0, "11.1.1.1", "db", "user", TLS },
	{ 7, "11.1.1.1", "db", "user", 0 },
	{ 8, "127.0.0.2", "db", "user", TLS },
	{ 8, "127.0.0.3", "db", "user", 0 },
	{ 0, "127.0.1.4", "db", "user", 0 },
	{ 9, "127.0.1.4", "db1", "user", 0 },
	{ 0, "127.0.1.4", "db1x", "user", 0 },
	{ 0, "127.0.1.4", "DB1", "user", 0 },        /* case-sensitive */
	{ 10, "15.0.0.1", "db1z", "user1", 0 },
	{ 0, "15.0.0.1", "db1z", "user2", 0 },
	{ 0, "16.0.0.1", "db2", "user", 0 },
	{ 11, "16.0.0.1", "db2", "user1", 0 },
	{ 11, "16.0.0.1", "db2", "user2", 0 },
	{ 11, "16.0.0.1", "db2", "user3", 0 },
	{ 0, "16.0.0.1", "db2", "user4", 0 },
	{ 0, "18.0.0.2", "d1", "user", 0 },
	{ 12, "18.0.0.2", "d1", "t18user", 0 },
	{ 12, "18.0.0.2", "d3", "t18user", 0 },
	{ 0, "18.0.0.2", "d4", "t18user", 0 },
	{ 0, "19.0.0.2", "db", "t19user", 0 },       /* quoted all is a name */
	{ 13, "19.0.0.2", "all", "all", 0 },
	{ 14, "19.0.0.2", "q1\"q2", "a , b", 0 },
	{ 0, "19.0.0.2", "q1q2", "a , b", 0 },
	{ 15, "199.199.199.199", "mdb", "muser", 0 },
	{ 0, "199.199.199.198", "mdb", "muser", 0 },
	{ 0, "199.199.199.200", "mdb", "muser", 0 },
	{ 16, "128.1.1.1", "mdb2", "muser", 0 },
	{ 17, "128.200.1.1", "mdb2", "muser", 0 },
	{ 17, "254.1.1.1", "mdb2", "muser", 0 },
	{ 0, "127.255.255.255", "mdb2", "muser", 0 },
	{ 18, "ff11:2::1", "mdb", "muser", 0 },
	{ 0, "ff12::1", "mdb", "muser", 0 },
	{ 19, "::1", "mdb", "muser", 0 },
	{ 0, "::2", "mdb", "muser", 0 },
	{ 20, "1.2.3.4", "mdb3", "muser", 0 },
	{ 20, "face::1", "mdb3", "muser", TLS },
	{ 0, "1.2.3.4", "mdb4", "muser", 0 },
	{ 21, "::1", "db", "admin", REPL },
	{ 21, "::1", "replication", "admin", REPL },
	{ 0, "::1", "db", "admin", 0 },
	{ 0, "::1", "replication", "admin", 0 },     /* the keyword is not a database name */
	{ 22, "::1", "db", "admin2", REPL },
	{ 22, "::1", "db2", "admin2", 0 },
	{ 0, "::1", "replication", "admin2", 0 },
	{ 0, "::1", "mdb", "muser", REPL },
	{ 23, "20.0.0.1", "sameuser", "bob", 0 },
	{ 24, "20.0.0.1", "bob", "bob", 0 },
	{ 0, "20.0.0.1", "bob", "alice", 0 },
	{ 25, "21.0.0.1", "replication", "u", 0 },
	{ 0, "21.0.0.1", "db", "u", REPL },
	{ 25, "21.0.0.1", "@x", "u", 0 },
	{ 25, "21.0.0.1", "+y", "u", 0 },
};

static void test_match_table(void **state)
{
	char text[4096] = "";
	struct hba *h;

	(void)state;
	for (size_t i = 0; i < sizeof(table_rules) / sizeof(table_rules[0]); i++) {
		strcat(text, table_rules[i]);
		strcat(text, "\n");
	}
	h = load_text(text, NULL);
	assert_no_problems(h);
	assert_int_equal(hba_rule_count(h), 24);
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		int got = match_line(h, table[i].where, table[i].db, table[i].user, table[i].flags);

		if (got != table[i].line)
			fail_msg("case %zu (%s db=%s user=%s%s%s): matched line %d, want %d", i, table[i].where,
				 table[i].db, table[i].user, table[i].flags & TLS ? " tls" : "",
				 table[i].flags & REPL ? " replication" : "", got, table[i].line);
	}
	hba_free(h);
}

/* ---- methods and options ---- */

static void test_methods(void **state)
{
	static const char *const names[] = {
		"trust", "reject", "md5", "password", "scram-sha-256", "cert", "peer", "ldap", "pam", "gss",
	};
	char text[2048] = "";
	struct hba *h;

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char line[256];

		if (i == HBA_LDAP)
			snprintf(line, sizeof(line), "host db%zu all all ldap ldapserver=h ldapbasedn=dc=x\n", i);
		else
			snprintf(line, sizeof(line), "%s db%zu all %s %s\n", i == HBA_PEER || i == HBA_PAM ? "local" : "host",
				 i, i == HBA_PEER || i == HBA_PAM ? "" : "all", names[i]);
		strcat(text, line);
	}
	h = load_text(text, NULL);
	assert_int_equal(hba_rule_count(h), HBA_METHOD_COUNT);
	for (int i = 0; i < HBA_METHOD_COUNT; i++) {
		char db[16];
		const struct hba_rule *r;

		snprintf(db, sizeof(db), "db%d", i);
		r = match_rule(h, i == HBA_PEER || i == HBA_PAM ? "unix" : "10.0.0.1", db, "u");
		assert_non_null(r);
		assert_int_equal(hba_rule_method(r), i);
		assert_int_equal(hba_rule_line(r), i + 1);
		assert_string_equal(hba_method_name(hba_rule_method(r)), names[i]);
		assert_int_equal(hba_rule_option_count(r), i == HBA_LDAP ? 2 : 0);
		assert_null(hba_rule_map(r));
		if (i == HBA_GSS)
			assert_string_equal(hba_rule_unusable(r), "GSSAPI authentication is not supported by pgcrew");
		else
			assert_null(hba_rule_unusable(r));
	}
	assert_string_equal(hba_method_name(HBA_METHOD_COUNT), "?");
	/* gss loads (so it wins over later lines) but is reported unusable */
	assert_int_equal(hba_problem_count(h), 1);
	assert_non_null(strstr(hba_problem(h, 0), "hba.conf line 10: GSSAPI authentication is not supported by pgcrew; "
				      "logins matching this line are rejected"));
	hba_free(h);
}

static void test_options(void **state)
{
	const char *ipath = write_file("ident.conf", "certmap cn1 alice\n\"my map\" root postgres\n");
	char err[512];
	struct hba_ident *id = NULL;
	struct hba *h;
	const struct hba_rule *r;
	const char *n, *v;

	(void)state;
	assert_int_equal(hba_ident_load(ipath, &id, err, sizeof(err)), 0);
	h = load_text("hostssl db1 all all cert map=certmap   # comment\n"
		      "local   db2 all peer map=\"my map\"\n"
		      "local   db3 all pam pamservice=pgcrew pam_use_hostname=1\n"
		      "host    db4 all all gss include_realm=0\n"
		      "host    db5 all all md5\n"
		      "host    db6 all all trust map=certmap map2=x\n", id);
	assert_int_equal(hba_rule_count(h), 5);
	assert_int_equal(hba_problem_count(h), 2);
	assert_non_null(strstr(hba_problem(h, 0), "line 4: GSSAPI"));
	assert_non_null(strstr(hba_problem(h, 1), "line 6: option 'map2' is not supported with auth method trust (line ignored)"));

	r = match_rule(h, "10.0.0.1", "db1", "u");
	assert_null(r);                                  /* hostssl: not without TLS */
	{
		struct sockaddr_in sin = { .sin_family = AF_INET };
		struct hba_conn c = { .kind = HBA_HOST, .tls = true, .database = "db1", .user = "u",
				      .addr = (struct sockaddr *)&sin };

		assert_int_equal(inet_pton(AF_INET, "10.0.0.1", &sin.sin_addr), 1);
		r = hba_match(h, &c);
	}
	assert_non_null(r);
	assert_string_equal(hba_rule_map(r), "certmap");
	assert_string_equal(hba_rule_option(r, "map"), "certmap");
	assert_null(hba_rule_option(r, "nope"));
	assert_string_equal(hba_rule_options_raw(r), "map=certmap");
	assert_int_equal(hba_rule_option_count(r), 1);
	hba_rule_option_at(r, 0, &n, &v);
	assert_string_equal(n, "map");
	assert_string_equal(v, "certmap");
	hba_rule_option_at(r, 1, &n, &v);
	assert_null(n);
	assert_null(v);

	r = match_rule(h, "unix", "db2", "u");
	assert_non_null(r);
	assert_string_equal(hba_rule_map(r), "my map");
	assert_string_equal(hba_rule_options_raw(r), "map=\"my map\"");

	r = match_rule(h, "unix", "db3", "u");
	assert_non_null(r);
	assert_int_equal(hba_rule_method(r), HBA_PAM);
	assert_string_equal(hba_rule_option(r, "pamservice"), "pgcrew");
	assert_string_equal(hba_rule_option(r, "pam_use_hostname"), "1");
	assert_string_equal(hba_rule_options_raw(r), "pamservice=pgcrew pam_use_hostname=1");
	assert_null(hba_rule_unusable(r));

	r = match_rule(h, "10.0.0.1", "db4", "u");
	assert_non_null(r);
	assert_int_equal(hba_rule_method(r), HBA_GSS);
	assert_string_equal(hba_rule_option(r, "include_realm"), "0");
	assert_non_null(hba_rule_unusable(r));

	r = match_rule(h, "10.0.0.1", "db5", "u");
	assert_non_null(r);
	assert_string_equal(hba_rule_options_raw(r), "");
	assert_int_equal(hba_rule_option_count(r), 0);
	assert_null(match_rule(h, "10.0.0.1", "db6", "u"));
	hba_free(h);

	/* The same map line with a map the ident file lacks. */
	h = load_text("hostssl all all all cert map=nomap\n", id);
	assert_int_equal(hba_rule_count(h), 0);
	assert_non_null(strstr(hba_problem(h, 0), "line 1: user name map 'nomap' is not in the ident file (line ignored)"));
	hba_free(h);
	hba_ident_free(id);
}

static void test_ldap_options(void **state)
{
	struct hba *h;
	const struct hba_rule *r;

	(void)state;
	h = load_text("host db1 all all ldap ldapserver=ldap.example.net ldapbasedn=dc=example,dc=net "
		      "ldapsearchattribute=uid ldapbinddn=\"cn=admin, dc=example\" "
		      "ldapbindpasswd=\"pa\"\"ss#word\"   # trailing comment\n"
		      "host db2 all all ldap ldapserver=h ldapprefix=\"cn=\" ldapsuffix=\", dc=example, dc=net\" ldaptls=1\n"
		      "host db3 all all ldap ldapurl=\"ldap://h:389/dc=x?uid?sub\"\n"
		      "host db4 all all ldap ldapserver=h ldapscheme=ldaps ldapport=636 ldapbasedn=o=x "
		      "ldapbindpasswd=ab#cd ldapsearchfilter=(uid=$username)\n", NULL);
	assert_no_problems(h);
	assert_int_equal(hba_rule_count(h), 4);

	r = match_rule(h, "10.0.0.1", "db1", "u");
	assert_non_null(r);
	assert_null(hba_rule_unusable(r));
	assert_int_equal(hba_rule_option_count(r), 5);
	assert_string_equal(hba_rule_option(r, "ldapserver"), "ldap.example.net");
	assert_string_equal(hba_rule_option(r, "ldapbasedn"), "dc=example,dc=net");
	assert_string_equal(hba_rule_option(r, "ldapsearchattribute"), "uid");
	assert_string_equal(hba_rule_option(r, "ldapbinddn"), "cn=admin, dc=example");
	assert_string_equal(hba_rule_option(r, "ldapbindpasswd"), "pa\"ss#word");
	assert_string_equal(hba_rule_options_raw(r),
			    "ldapserver=ldap.example.net ldapbasedn=dc=example,dc=net ldapsearchattribute=uid "
			    "ldapbinddn=\"cn=admin, dc=example\" ldapbindpasswd=\"pa\"\"ss#word\"");
	assert_null(hba_rule_map(r));

	r = match_rule(h, "10.0.0.1", "db2", "u");
	assert_non_null(r);
	assert_null(hba_rule_unusable(r));
	assert_string_equal(hba_rule_option(r, "ldapprefix"), "cn=");
	assert_string_equal(hba_rule_option(r, "ldapsuffix"), ", dc=example, dc=net");

	r = match_rule(h, "10.0.0.1", "db3", "u");
	assert_non_null(r);
	assert_null(hba_rule_unusable(r));
	assert_string_equal(hba_rule_option(r, "ldapurl"), "ldap://h:389/dc=x?uid?sub");

	r = match_rule(h, "10.0.0.1", "db4", "u");
	assert_non_null(r);
	assert_null(hba_rule_unusable(r));
	assert_string_equal(hba_rule_option(r, "ldapbindpasswd"), "ab#cd");     /* '#' inside a word */
	assert_string_equal(hba_rule_option(r, "ldapsearchfilter"), "(uid=$username)");
	hba_free(h);
}

/* Lines PgBouncer loads but that can never authenticate: kept, so they
 * still match first, and marked unusable. */
static const struct {
	const char *line, *why;
} unusable_cases[] = {
	{ "host all all all ldap", "auth method ldap needs ldapbasedn, ldapprefix, ldapsuffix or ldapurl" },
	{ "host all all all ldap ldapserver=h ldapfoo=1 ldapbasedn=x", "unknown LDAP option 'ldapfoo'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x map=m", "unknown LDAP option 'map'" },
	{ "host all all all ldap ldapserver=h ldapprefix=cn= ldapbasedn=dc=x", "cannot be used together with ldapprefix" },
	{ "host all all all ldap ldapserver=h ldapsuffix=,dc=x ldapbinddn=cn=y", "cannot be used together with ldapprefix" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x ldapsearchattribute=uid ldapsearchfilter=(uid=$username)",
	  "ldapsearchattribute and ldapsearchfilter cannot be used together" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x ldapport=99999", "invalid ldapport '99999'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x ldapport=abc", "invalid ldapport 'abc'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x ldapscheme=http", "invalid ldapscheme 'http'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x ldaptls=yes", "invalid ldaptls 'yes'" },
	{ "host all all all ldap ldapbasedn=x", "auth method ldap needs ldapserver or ldapurl" },
	{ "host all all all ldap ldapurl=http://x/", "invalid ldapurl 'http://x/'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x junk", "LDAP option 'junk' is not in name=value form" },
	{ "host all all all ldap ldapserver=h =x", "LDAP option '=x' is not in name=value form" },
	{ "host all all all ldap ldapserver=h ldapbasedn=\"dc=x", "unterminated quoted value for LDAP option 'ldapbasedn'" },
	{ "host all all all ldap ldapserver=h ldapbasedn=x \\", "line continuation with '\\' is not supported" },
	{ "host all all all gss", "GSSAPI authentication is not supported by pgcrew" },
	{ "host all all all peer", "peer authentication is only available on local connections" },
	{ "hostnossl all all all peer", "peer authentication is only available on local connections" },
};

static void test_unusable(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(unusable_cases) / sizeof(unusable_cases[0]); i++) {
		char text[512], want[512];
		struct hba *h;
		const struct hba_rule *r;

		snprintf(text, sizeof(text), "%s\nhost all all all trust\n", unusable_cases[i].line);
		h = load_text(text, NULL);
		assert_int_equal(hba_rule_count(h), 2);
		r = match_rule(h, "10.0.0.1", "db", "u");
		assert_non_null(r);
		assert_int_equal(hba_rule_line(r), 1);  /* still first, so trust below is not reached */
		if (!hba_rule_unusable(r) || !strstr(hba_rule_unusable(r), unusable_cases[i].why))
			fail_msg("case %zu: unusable '%s', want '%s'", i,
				 hba_rule_unusable(r) ? hba_rule_unusable(r) : "(null)", unusable_cases[i].why);
		snprintf(want, sizeof(want), "%s line 1: ", tmp_path("hba.conf"));
		if (hba_problem_count(h) != 1)
			fail_msg("case %zu: %zu problems: %s | %s", i, hba_problem_count(h), hba_problem(h, 0),
				 hba_problem(h, 1));
		if (strncmp(hba_problem(h, 0), want, strlen(want)) != 0 ||
		    !strstr(hba_problem(h, 0), "; logins matching this line are rejected"))
			fail_msg("case %zu: problem '%s'", i, hba_problem(h, 0));
		hba_free(h);
	}
}

/* ---- bad lines: skipped, reported with file and line ---- */

static const struct {
	const char *line, *error;
} bad_cases[] = {
	{ "hots all all all md5", "unknown connection type 'hots'" },
	{ "\"host\" all all all md5", "unknown connection type 'host'" },
	{ "include other.conf", "include directives are not supported" },
	{ "include_if_exists other.conf", "include_if_exists directives are not supported" },
	{ "include_dir conf.d", "include_dir directives are not supported" },
	{ ", host all all all md5", "unexpected ',' at the start of the line" },
	{ "local", "missing database field" },
	{ "local all", "missing user field" },
	{ "local db1,,db2 all trust", "empty name in database list" },
	{ "local all u1,", "user list ends with ','" },
	{ "local samerole all trust", "samerole is not supported" },
	{ "local samegroup all trust", "samegroup is not supported" },
	{ "local all +admins trust", "group membership ('+admins') is not supported" },
	{ "local +db all trust", "group membership ('+db') is not supported" },
	{ "local all /^u.*$ trust", "regular expressions ('/^u.*$') are not supported" },
	{ "local @ all trust", "'@' must be followed by a file name" },
	{ "host all all", "missing address field" },
	{ "host all all \"10.0.0.1/32\" md5", "quoted address '10.0.0.1/32': host names are not supported" },
	{ "host all all samehost md5", "samehost is not supported" },
	{ "host all all samenet md5", "samenet is not supported" },
	{ "host all all db.example.com md5", "host names are not supported: 'db.example.com'" },
	{ "host all all .example.com md5", "host names are not supported: '.example.com'" },
	{ "host all all 10.0.0.256/32 md5", "invalid IP address '10.0.0.256/32'" },
	{ "host all all fe80::1%eth0 md5", "invalid IP address 'fe80::1%eth0'" },
	{ "host all all 10.0.0.0/33 md5", "invalid prefix length '33' for an IPv4 address" },
	{ "host all all ::/129 md5", "invalid prefix length '129' for an IPv6 address" },
	{ "host all all 10.0.0.0/x md5", "invalid prefix length 'x'" },
	{ "host all all 10.0.0.0/ md5", "invalid prefix length ''" },
	{ "host all all 10.0.0.0/-1 md5", "invalid prefix length '-1'" },
	{ "host all all 10.0.0.0/+8 md5", "invalid prefix length '+8'" },
	{ "host all all 10.0.0.1 md5", "address '10.0.0.1' needs a /prefix or a netmask column, found 'md5'" },
	{ "host all all 10.0.0.1", "address '10.0.0.1' needs a /prefix or a netmask column, found the end of the line" },
	{ "host all all 10.0.0.0 ffff:: md5", "address '10.0.0.0' needs a /prefix or a netmask column, found 'ffff::'" },
	{ "host all all 10.1.2.3/8 md5", "address 10.1.2.3 has bits set outside its mask 255.0.0.0" },
	{ "host all all 10.1.2.3 255.255.0.0 md5", "address 10.1.2.3 has bits set outside its mask 255.255.0.0" },
	{ "host all all 2001:db8::1/32 md5", "address 2001:db8::1 has bits set outside its mask ffff:ffff::" },
	{ "host all all 10.0.0.0/8,11.0.0.0/8 md5", "unexpected ',' before the auth method" },
	{ "host all all 10.0.0.0/8", "missing auth method" },
	{ "host all all all foo", "unknown auth method 'foo'" },
	{ "host all all all ident", "auth method 'ident' is not supported" },
	{ "host all all all radius", "auth method 'radius' is not supported" },
	{ "host all all all \"md5\"", "the auth method must not be quoted: 'md5'" },
	{ "local all all 127.0.0.1/32 trust", "local lines have no address field: found '127.0.0.1/32'" },
	{ "local all all all trust", "local lines have no address field: found 'all'" },
	{ "host all all all md5 foo", "option 'foo' is not in name=value form" },
	{ "host all all all md5 =x", "option '=x' is not in name=value form" },
	{ "hostssl all all all md5 clientcert=verify-full", "option 'clientcert' is not supported with auth method md5" },
	{ "hostssl all all all cert map=a map=b", "option 'map' given twice" },
	{ "hostssl all all all cert map=m1", "user name map 'm1' is used but no ident file is loaded" },
	{ "hostssl all all all cert map=", "map= needs a map name" },
	{ "local all all trust map=x,y", "unexpected ',' among the options" },
	{ "local all all pam pamservice=", "pamservice must not be empty" },
	{ "local all all pam pam_use_hostname=yes", "invalid pam_use_hostname 'yes'" },
	{ "local all all pam map=x", "option 'map' is not supported with auth method pam" },
	{ "host all all all gss krb_realm=EXAMPLE.COM", "GSSAPI option 'krb_realm' is not supported" },
	{ "host all all all gss map=x", "GSSAPI option 'map' is not supported" },
	{ "host all all all gss foo=1", "option 'foo' is not supported with auth method gss" },
	{ "host \"all all all md5", "unterminated quoted string" },
	{ "host all all all md5 \\", "line continuation with '\\' is not supported" },
	{ "host all all all \\  ", "line continuation with '\\' is not supported" },
};

static void test_bad_lines(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		char text[512], want[512];
		struct hba *h;

		snprintf(text, sizeof(text), "local all all trust\n# line two\n%s\nhost all all all md5\n", bad_cases[i].line);
		h = load_text(text, NULL);
		snprintf(want, sizeof(want), "%s line 3: %s", tmp_path("hba.conf"), bad_cases[i].error);
		if (hba_problem_count(h) != 1 || !strstr(hba_problem(h, 0), want) ||
		    !strstr(hba_problem(h, 0), "(line ignored)"))
			fail_msg("case %zu (%s): %zu problems, first '%s', want '%s'", i, bad_cases[i].line,
				 hba_problem_count(h), hba_problem_count(h) ? hba_problem(h, 0) : "", want);
		/* the good lines around it still load */
		if (hba_rule_count(h) != 2)
			fail_msg("case %zu: %zu rules", i, hba_rule_count(h));
		assert_int_equal(match_line(h, "unix", "db", "u", 0), 1);
		assert_int_equal(match_line(h, "10.0.0.1", "db", "u", 0), 4);
		hba_free(h);
	}
}

static void test_err_is_first_problem(void **state)
{
	char err[512];
	struct hba *h = NULL;
	const char *path = write_file("hba.conf", "local all all trust\nhost all all all foo\nlocal all all bar\n");

	(void)state;
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), 0);
	assert_int_equal(hba_problem_count(h), 2);
	assert_string_equal(err, hba_problem(h, 0));
	assert_non_null(strstr(err, "hba.conf line 2: unknown auth method 'foo' (line ignored)"));
	assert_non_null(strstr(hba_problem(h, 1), "hba.conf line 3: unknown auth method 'bar'"));
	assert_null(hba_problem(h, 2));
	hba_free(h);
	/* clean file: err emptied; errlen 0 is allowed */
	path = write_file("hba.conf", "local all all trust\n");
	strcpy(err, "junk");
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	hba_free(h);
	assert_int_equal(hba_load(path, NULL, &h, NULL, 0), 0);
	hba_free(h);
}

static void test_nul_byte(void **state)
{
	static const char text[] = "local all all trust\nlocal all all tr\0ust\nhost all all all md5\n";
	char err[512];
	struct hba *h = NULL;
	const char *path = write_bytes("hba.conf", text, sizeof(text) - 1);

	(void)state;
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), 0);
	assert_int_equal(hba_rule_count(h), 2);
	assert_int_equal(hba_problem_count(h), 1);
	assert_non_null(strstr(hba_problem(h, 0), "line 2: line contains a NUL byte (line ignored)"));
	hba_free(h);
}

/* PgBouncer stops at nothing: every bad line is skipped and counted, but
 * only the first HBA_MAX_PROBLEMS are kept. */
static void test_problem_cap(void **state)
{
	size_t len = 0, cap = 150 * 32 + 64;
	char *text = malloc(cap);
	struct hba *h;
	char want[64];

	(void)state;
	assert_non_null(text);
	for (int i = 0; i < 150; i++)
		len += (size_t)snprintf(text + len, cap - len, "host all all all bad%d\n", i);
	snprintf(text + len, cap - len, "local all all trust\n");
	h = load_text(text, NULL);
	free(text);
	assert_int_equal(hba_rule_count(h), 1);
	assert_int_equal(hba_problem_count(h), HBA_MAX_PROBLEMS + 1);
	assert_non_null(strstr(hba_problem(h, 0), "line 1: unknown auth method 'bad0'"));
	assert_non_null(strstr(hba_problem(h, HBA_MAX_PROBLEMS - 1), "line 100: unknown auth method 'bad99'"));
	snprintf(want, sizeof(want), "... and %d more problems", 150 - HBA_MAX_PROBLEMS);
	assert_string_equal(hba_problem(h, HBA_MAX_PROBLEMS), want);
	assert_int_equal(match_line(h, "unix", "d", "u", 0), 151);
	hba_free(h);
}

/* ---- addresses ---- */

static void test_cidr_edges(void **state)
{
	struct hba *h;

	(void)state;
	h = load_text("host v4zero all 0.0.0.0/0 trust\n"              /* 1 */
		      "host v4host all 192.168.1.7/32 trust\n"         /* 2 */
		      "host v4host all 192.168.1.6/31 md5\n"           /* 3 */
		      "host v4half all 128.0.0.0/1 trust\n"            /* 4 */
		      "host v6zero all ::/0 trust\n"                   /* 5 */
		      "host v6host all 2001:db8::7/128 trust\n"        /* 6 */
		      "host v6host all 2001:db8::/64 md5\n"            /* 7 */
		      "host mapped all 10.0.0.0/8 trust\n"             /* 8 */
		      "host mapped all ::ffff:10.0.0.0/104 md5\n"      /* 9 */
		      "host mask all 172.16.0.0 255.240.0.0 trust\n"   /* 10 */
		      "host mask all 2001:db8:1:: ffff:ffff:ffff:: md5\n" /* 11 */
		      "host odd all 10.0.0.1 255.0.0.255 trust\n"      /* 12: non-contiguous mask, as PgBouncer */
		      "host bits all 10.0.0.0/07 trust\n",             /* 13: leading zero; 10.0.0.0 fits /7 */
		      NULL);
	assert_no_problems(h);
	assert_int_equal(match_line(h, "0.0.0.0", "v4zero", "u", 0), 1);
	assert_int_equal(match_line(h, "255.255.255.255", "v4zero", "u", 0), 1);
	assert_int_equal(match_line(h, "::1", "v4zero", "u", 0), 0);          /* family differs */
	assert_int_equal(match_line(h, "::ffff:1.2.3.4", "v4zero", "u", 0), 0);
	assert_int_equal(match_line(h, "192.168.1.7", "v4host", "u", 0), 2);
	assert_int_equal(match_line(h, "192.168.1.6", "v4host", "u", 0), 3);
	assert_int_equal(match_line(h, "192.168.1.8", "v4host", "u", 0), 0);
	assert_int_equal(match_line(h, "128.0.0.0", "v4half", "u", 0), 4);
	assert_int_equal(match_line(h, "255.255.255.255", "v4half", "u", 0), 4);
	assert_int_equal(match_line(h, "127.255.255.255", "v4half", "u", 0), 0);
	assert_int_equal(match_line(h, "::", "v6zero", "u", 0), 5);
	assert_int_equal(match_line(h, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "v6zero", "u", 0), 5);
	assert_int_equal(match_line(h, "1.2.3.4", "v6zero", "u", 0), 0);
	assert_int_equal(match_line(h, "2001:db8::7", "v6host", "u", 0), 6);
	assert_int_equal(match_line(h, "2001:db8::8", "v6host", "u", 0), 7);
	assert_int_equal(match_line(h, "2001:db8:0:0:ffff:ffff:ffff:ffff", "v6host", "u", 0), 7);
	assert_int_equal(match_line(h, "2001:db8:0:1::", "v6host", "u", 0), 0);
	/* IPv4-mapped IPv6 clients are IPv6: only the ::ffff: rule sees them */
	assert_int_equal(match_line(h, "10.1.2.3", "mapped", "u", 0), 8);
	assert_int_equal(match_line(h, "::ffff:10.1.2.3", "mapped", "u", 0), 9);
	assert_int_equal(match_line(h, "::ffff:11.1.2.3", "mapped", "u", 0), 0);
	assert_int_equal(match_line(h, "172.31.255.255", "mask", "u", 0), 10);
	assert_int_equal(match_line(h, "172.32.0.0", "mask", "u", 0), 0);
	assert_int_equal(match_line(h, "2001:db8:1::5", "mask", "u", 0), 11);
	assert_int_equal(match_line(h, "2001:db8:2::5", "mask", "u", 0), 0);
	assert_int_equal(match_line(h, "10.200.7.1", "odd", "u", 0), 12);
	assert_int_equal(match_line(h, "10.200.7.2", "odd", "u", 0), 0);
	assert_int_equal(match_line(h, "11.255.0.1", "bits", "u", 0), 13);
	assert_int_equal(match_line(h, "12.0.0.1", "bits", "u", 0), 0);
	hba_free(h);
}

static void test_conn_edges(void **state)
{
	struct hba *h = load_text("host all all 10.0.0.0/8 md5\nhost all all all trust\nlocal all all peer\n", NULL);
	struct sockaddr_un_like { sa_family_t family; char path[32]; } un = { .family = AF_UNIX };
	struct hba_conn c = { .kind = HBA_HOST, .database = NULL, .user = NULL };
	const struct hba_rule *r;

	(void)state;
	/* no address or a non-IP one: only "all" can match */
	r = hba_match(h, &c);
	assert_non_null(r);
	assert_int_equal(hba_rule_line(r), 2);
	c.addr = (const struct sockaddr *)&un;
	assert_int_equal(hba_rule_line(hba_match(h, &c)), 2);
	/* a Unix socket login never matches host lines, whatever the address */
	c.kind = HBA_LOCAL;
	assert_int_equal(hba_rule_line(hba_match(h, &c)), 3);
	assert_null(hba_match(h, NULL));
	assert_null(hba_match(NULL, &c));
	hba_free(h);
}

/* ---- ordering ---- */

static void test_first_match_wins(void **state)
{
	struct hba *h;

	(void)state;
	h = load_text("host all all 10.0.0.0/8 reject\n"           /* 1 */
		      "host all all 10.0.0.0/8 trust\n"            /* 2: never reached */
		      "host db1 all 0.0.0.0/0 md5\n"               /* 3 */
		      "this line is bad\n"                         /* 4: skipped */
		      "host all all 0.0.0.0/0 password\n"          /* 5 */
		      "host all all all trust\n"                   /* 6 */
		      "local all all reject\n"                     /* 7 */
		      "local all all trust\n",                     /* 8 */
		      NULL);
	assert_int_equal(hba_problem_count(h), 1);
	assert_int_equal(hba_rule_count(h), 7);
	assert_int_equal(match_line(h, "10.1.1.1", "db1", "u", 0), 1);
	assert_int_equal(hba_rule_method(match_rule(h, "10.1.1.1", "db1", "u")), HBA_REJECT);
	assert_int_equal(match_line(h, "11.1.1.1", "db1", "u", 0), 3);
	assert_int_equal(match_line(h, "11.1.1.1", "db2", "u", 0), 5);
	assert_int_equal(match_line(h, "::1", "db2", "u", 0), 6);
	assert_int_equal(match_line(h, "unix", "db2", "u", 0), 7);
	hba_free(h);
}

static void test_syntax_details(void **state)
{
	struct hba *h;

	(void)state;
	h = load_text("\n"
		      "   \t  \n"
		      "# full comment\n"
		      "\t# indented comment\n"
		      "local\tdb1\tu1\ttrust\r\n"                       /* 5: tabs, CRLF */
		      "  host db2 u2 10.0.0.0/8 md5#no space before comment\n"   /* 6 */
		      "host db3,db4 ,db5 u3 10.0.0.0/8 md5\n"           /* 7: blanks around commas */
		      "host db6, \t db7 u4 10.0.0.0/8 md5\n"            /* 8: list continues after ', ' */
		      "host \"db 8\",\"d,9\",\"d#10\" \"u \"\"5\"\"\" 10.0.0.0/8 md5\n" /* 9 */
		      "host d\"b 1\"1 u6 10.0.0.0/8 md5\n"             /* 10: quoted part inside a word */
		      "host \"\" u7 10.0.0.0/8 md5\n"                   /* 11: empty quoted name */
		      "host all all 10.0.0.0/8 trust # a \\\n",         /* 12: backslash in a comment is text */
		      NULL);
	assert_no_problems(h);
	assert_int_equal(match_line(h, "unix", "db1", "u1", 0), 5);
	assert_int_equal(match_line(h, "10.0.0.1", "db2", "u2", 0), 6);
	assert_int_equal(match_line(h, "10.0.0.1", "db5", "u3", 0), 7);
	assert_int_equal(match_line(h, "10.0.0.1", "db7", "u4", 0), 8);
	assert_int_equal(match_line(h, "10.0.0.1", "db 8", "u \"5\"", 0), 9);
	assert_int_equal(match_line(h, "10.0.0.1", "d,9", "u \"5\"", 0), 9);
	assert_int_equal(match_line(h, "10.0.0.1", "d#10", "u \"5\"", 0), 9);
	assert_int_equal(match_line(h, "10.0.0.1", "db 11", "u6", 0), 10);
	assert_int_equal(match_line(h, "10.0.0.1", "", "u7", 0), 11);
	assert_int_equal(match_line(h, "10.0.0.1", "x", "u7", 0), 12);
	hba_free(h);
}

static void test_gssenc_lines(void **state)
{
	struct hba *h;

	(void)state;
	h = load_text("hostgssenc all all all trust\n"
		      "hostnogssenc all all all trust\n"
		      "hostgssenc all all bogus trust\n"
		      "host all all all md5\n", NULL);
	assert_int_equal(hba_rule_count(h), 3);
	assert_int_equal(hba_problem_count(h), 3);
	assert_non_null(strstr(hba_problem(h, 0), "line 1: hostgssenc and hostnogssenc lines never match"));
	assert_non_null(strstr(hba_problem(h, 1), "line 2: hostgssenc and hostnogssenc lines never match"));
	assert_non_null(strstr(hba_problem(h, 2), "line 3: host names are not supported: 'bogus' (line ignored)"));
	assert_int_equal(match_line(h, "10.0.0.1", "d", "u", 0), 4);
	assert_int_equal(match_line(h, "10.0.0.1", "d", "u", TLS), 4);
	assert_int_equal(match_line(h, "unix", "d", "u", 0), 0);
	hba_free(h);
}

/* ---- @file ---- */

static void test_at_files(void **state)
{
	char text[2048], abs_users[512], want[1024], path[512];
	struct hba *h = NULL;
	char err[512];

	(void)state;
	make_dir("at");
	make_dir("at/users");
	write_file("at/dbs.txt", "# databases\n"
		   "db1, db2\n"
		   " db3   \"db four\"   # comment\n"
		   "\n"
		   "sameuser\n");
	write_file("at/users/admins.txt", "alice bob\n@more.txt\n");      /* nested: relative to at/users */
	write_file("at/users/more.txt", "carol,\"dave x\"");               /* no final newline */
	snprintf(abs_users, sizeof(abs_users), "%s", write_file("abs-users.txt", "zed\n"));
	write_file("at/repl.txt", "replication\n");
	write_file("at/bad.txt", "ok\n+grp\n");
	write_file("at/users/missing-nested.txt", "a\n@nope.txt\n");
	write_file("at/self.txt", "@self.txt\n");
	write_file("at/userall.txt", "all\n");
	write_file("at/empty.txt", "# nobody\n\n");
	snprintf(text, sizeof(text),
		 "host @dbs.txt @users/admins.txt 10.0.0.0/8 md5\n"        /* 1 */
		 "host all @%s 11.0.0.0/8 trust\n"                         /* 2 */
		 "host @repl.txt all 12.0.0.0/8 trust\n"                   /* 3 */
		 "host @bad.txt all all md5\n"                             /* 4 */
		 "host @users/missing-nested.txt all all md5\n"            /* 5 */
		 "host @self.txt all all md5\n"                            /* 6 */
		 "host @users all all md5\n"                               /* 7 */
		 "host \"@dbs.txt\" all 13.0.0.0/8 md5\n"                  /* 8 */
		 "host @userall.txt @userall.txt 14.0.0.0/8 trust\n"       /* 9 */
		 "host db1,@empty.txt,db9 all 15.0.0.0/8 trust\n",         /* 10 */
		 abs_users);
	snprintf(path, sizeof(path), "%s", write_file("at/hba.conf", text));
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), 0);
	assert_int_equal(hba_rule_count(h), 6);
	assert_int_equal(hba_problem_count(h), 4);

	snprintf(want, sizeof(want), "%s line 4: '%s' line 2: group membership ('+grp') is not supported (line ignored)",
		 path, tmp_path("at/bad.txt"));
	assert_string_equal(hba_problem(h, 0), want);
	snprintf(want, sizeof(want), "%s line 5: '%s' line 2: @nope.txt: could not open '%s': No such file or directory",
		 path, tmp_path("at/users/missing-nested.txt"), tmp_path("at/users/nope.txt"));
	if (!strstr(hba_problem(h, 1), want))
		fail_msg("'%s' lacks '%s'", hba_problem(h, 1), want);
	snprintf(want, sizeof(want), "%s line 6: '%s': @self.txt: @file references nested more than 10 deep (line ignored)",
		 path, tmp_path("at/self.txt"));
	assert_string_equal(hba_problem(h, 2), want);
	snprintf(want, sizeof(want), "%s line 7: @users: could not read '%s': Is a directory", path, tmp_path("at/users"));
	if (!strstr(hba_problem(h, 3), want))
		fail_msg("'%s' lacks '%s'", hba_problem(h, 3), want);

	assert_int_equal(match_line(h, "10.1.1.1", "db1", "alice", 0), 1);
	assert_int_equal(match_line(h, "10.1.1.1", "db four", "carol", 0), 1);
	assert_int_equal(match_line(h, "10.1.1.1", "dave x", "dave x", 0), 1);      /* sameuser from the file */
	assert_int_equal(match_line(h, "10.1.1.1", "db3", "bob", 0), 1);
	assert_int_equal(match_line(h, "10.1.1.1", "db5", "alice", 0), 0);
	assert_int_equal(match_line(h, "10.1.1.1", "db1", "eve", 0), 0);
	assert_int_equal(match_line(h, "10.1.1.1", "db1", "@more.txt", 0), 0);
	assert_int_equal(match_line(h, "11.0.0.1", "anydb", "zed", 0), 2);
	assert_int_equal(match_line(h, "11.0.0.1", "anydb", "alice", 0), 0);
	assert_int_equal(match_line(h, "12.0.0.1", "x", "u", REPL), 3);
	assert_int_equal(match_line(h, "12.0.0.1", "replication", "u", 0), 0);
	assert_int_equal(match_line(h, "13.0.0.1", "@dbs.txt", "u", 0), 8);
	assert_int_equal(match_line(h, "13.0.0.1", "db1", "u", 0), 0);
	assert_int_equal(match_line(h, "14.0.0.1", "any", "one", 0), 9);
	assert_int_equal(match_line(h, "15.0.0.1", "db9", "u", 0), 10);
	assert_int_equal(match_line(h, "15.0.0.1", "db2", "u", 0), 0);
	hba_free(h);

	/* A relative @file is found next to the HBA file, not in the cwd. */
	assert_int_equal(chdir("/"), 0);
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), 0);
	assert_int_equal(match_line(h, "10.1.1.1", "db2", "alice", 0), 1);
	hba_free(h);
}

/* ---- long lines ---- */

static void test_long_lines(void **state)
{
	const size_t nusers = 5000, big = 100000;
	size_t cap = nusers * 8 + big * 4 + 1024, len = 0;
	char *text = malloc(cap), *name = malloc(big + 1);
	struct hba *h;

	(void)state;
	assert_non_null(text);
	assert_non_null(name);
	len += (size_t)snprintf(text + len, cap - len, "host d1 ");
	for (size_t i = 0; i < nusers; i++)
		len += (size_t)snprintf(text + len, cap - len, "%su%zu", i ? "," : "", i);
	len += (size_t)snprintf(text + len, cap - len, " 10.0.0.0/8 md5\n");          /* 1 */
	memset(name, 'x', big);
	name[big] = '\0';
	len += (size_t)snprintf(text + len, cap - len, "host \"%s\" all all trust\n", name);  /* 2 */
	text[len++] = '#';                                                            /* 3: long comment */
	memset(text + len, 'c', big);
	len += big;
	text[len++] = '\n';
	len += (size_t)snprintf(text + len, cap - len, "host all all all %s\n", name); /* 4: long bad method */
	len += (size_t)snprintf(text + len, cap - len, "local all all trust\n");      /* 5 */
	text[len] = '\0';
	h = load_text(text, NULL);
	free(text);
	assert_int_equal(hba_rule_count(h), 3);
	assert_int_equal(match_line(h, "10.0.0.1", "d1", "u0", 0), 1);
	assert_int_equal(match_line(h, "10.0.0.1", "d1", "u4999", 0), 1);
	assert_int_equal(match_line(h, "10.0.0.1", "d1", "u2500", 0), 1);
	assert_int_equal(match_line(h, "10.0.0.1", "d1", "u5000", 0), 0);
	assert_int_equal(match_line(h, "10.0.0.1", name, "anyone", 0), 2);
	name[big - 1] = '\0';
	assert_int_equal(match_line(h, "10.0.0.1", name, "anyone", 0), 0);
	assert_int_equal(match_line(h, "unix", "d", "u", 0), 5);
	/* the message quotes a shortened name */
	assert_int_equal(hba_problem_count(h), 1);
	assert_non_null(strstr(hba_problem(h, 0), "line 4: unknown auth method 'xxxx"));
	assert_non_null(strstr(hba_problem(h, 0), "...' (line ignored)"));
	assert_true(strlen(hba_problem(h, 0)) < 512);
	free(name);
	hba_free(h);
}

/* ---- files that cannot be read ---- */

static void test_missing_file(void **state)
{
	char err[512], want[512];
	struct hba *h = (struct hba *)&err;     /* must be reset to NULL */
	const char *path = tmp_path("no-such-hba.conf");

	(void)state;
	assert_int_equal(hba_load(path, NULL, &h, err, sizeof(err)), -1);
	assert_null(h);
	snprintf(want, sizeof(want), "could not open HBA file '%s': No such file or directory", path);
	assert_string_equal(err, want);
	/* PgBouncer rejects everybody then; so does a NULL hba */
	assert_int_equal(match_line(NULL, "10.0.0.1", "d", "u", 0), 0);
	assert_int_equal(hba_problem_count(NULL), 0);
	assert_null(hba_problem(NULL, 0));
	assert_int_equal(hba_rule_count(NULL), 0);
	hba_free(NULL);

	make_dir("hba-dir");
	assert_int_equal(hba_load(tmp_path("hba-dir"), NULL, &h, err, sizeof(err)), -1);
	assert_null(h);
	assert_non_null(strstr(err, "could not read HBA file '"));
	assert_non_null(strstr(err, "': Is a directory"));

	/* an empty file loads and rejects everybody */
	h = load_text("", NULL);
	assert_int_equal(hba_rule_count(h), 0);
	assert_no_problems(h);
	assert_int_equal(match_line(h, "unix", "d", "u", 0), 0);
	hba_free(h);
}

/* ---- ident file ---- */

static void test_ident(void **state)
{
	char err[512];
	struct hba_ident *id = NULL;
	const char *path = write_file("ident.conf",
				      "# MAP  SYSTEM  DATABASE\n"            /* 1 */
				      "certmap  alice.example  alice\n"      /* 2 */
				      "certmap  \"bob smith\"  bob   # c\n"  /* 3 */
				      "certmap  admin-cn  all\n"             /* 4 */
				      "certmap  carol  \"all\"\n"            /* 5 */
				      "peermap  root  postgres\n"            /* 6 */
				      "peermap  /^(.*)$  \\1\n"              /* 7 */
				      "peermap  root  +admins\n"             /* 8 */
				      "include  other.conf\n"                /* 9 */
				      "peermap  root\n"                      /* 10 */
				      "peermap  root postgres extra\n"       /* 11 */
				      "peermap  a,b  c\n"                    /* 12 */
				      "\"quoted map\"  x  y\n"               /* 13 */
				      "peermap\n"                            /* 14 */
				      "peermap \"unterminated x\n");         /* 15 */

	(void)state;
	assert_int_equal(hba_ident_load(path, &id, err, sizeof(err)), 0);
	assert_int_equal(hba_ident_problem_count(id), 8);
	assert_string_equal(err, hba_ident_problem(id, 0));
	assert_non_null(strstr(hba_ident_problem(id, 0), "ident.conf line 7: regular expressions ('/^(.*)$') are not supported (line ignored)"));
	assert_non_null(strstr(hba_ident_problem(id, 1), "line 8: group membership ('+admins') is not supported"));
	assert_non_null(strstr(hba_ident_problem(id, 2), "line 9: include directives are not supported"));
	assert_non_null(strstr(hba_ident_problem(id, 3), "line 10: missing database user name field"));
	assert_non_null(strstr(hba_ident_problem(id, 4), "line 11: unexpected text after the database user name"));
	assert_non_null(strstr(hba_ident_problem(id, 5), "line 12: lists are not allowed in the ident file"));
	assert_non_null(strstr(hba_ident_problem(id, 6), "line 14: missing system user name field"));
	assert_non_null(strstr(hba_ident_problem(id, 7), "line 15: unterminated quoted string"));
	assert_null(hba_ident_problem(id, 8));

	assert_true(hba_ident_match(id, "certmap", "alice.example", "alice"));
	assert_false(hba_ident_match(id, "certmap", "alice.example", "bob"));
	assert_false(hba_ident_match(id, "peermap", "alice.example", "alice"));
	assert_true(hba_ident_match(id, "certmap", "bob smith", "bob"));
	assert_true(hba_ident_match(id, "certmap", "admin-cn", "anyone"));
	assert_true(hba_ident_match(id, "certmap", "carol", "all"));
	assert_false(hba_ident_match(id, "certmap", "carol", "carol"));
	assert_true(hba_ident_match(id, "peermap", "root", "postgres"));
	assert_false(hba_ident_match(id, "peermap", "root", "admins"));
	assert_true(hba_ident_match(id, "quoted map", "x", "y"));
	assert_false(hba_ident_match(id, NULL, "x", "y"));
	assert_false(hba_ident_match(NULL, "certmap", "alice.example", "alice"));
	assert_true(hba_ident_has_map(id, "certmap"));
	assert_true(hba_ident_has_map(id, "quoted map"));
	assert_false(hba_ident_has_map(id, "nomap"));
	assert_false(hba_ident_has_map(id, NULL));
	assert_false(hba_ident_has_map(NULL, "certmap"));
	hba_ident_free(id);
	hba_ident_free(NULL);
	assert_int_equal(hba_ident_problem_count(NULL), 0);

	id = (struct hba_ident *)&err;
	assert_int_equal(hba_ident_load(tmp_path("no-such-ident.conf"), &id, err, sizeof(err)), -1);
	assert_null(id);
	assert_non_null(strstr(err, "could not open ident file '"));
	assert_non_null(strstr(err, "no-such-ident.conf': No such file or directory"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match_table),
		cmocka_unit_test(test_methods),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_ldap_options),
		cmocka_unit_test(test_unusable),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_err_is_first_problem),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_problem_cap),
		cmocka_unit_test(test_cidr_edges),
		cmocka_unit_test(test_conn_edges),
		cmocka_unit_test(test_first_match_wins),
		cmocka_unit_test(test_syntax_details),
		cmocka_unit_test(test_gssenc_lines),
		cmocka_unit_test(test_long_lines),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_ident),
		cmocka_unit_test(test_at_files),            /* last: it changes the cwd */
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
