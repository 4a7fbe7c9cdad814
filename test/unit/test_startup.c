/* pgcrew — unit tests for proto/startup: StartupMessage, SSL/GSSENC/Cancel
 * requests, protocol 3.2 and _pq_ options, every malformed-packet refusal,
 * and the "options" parameter with escapes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "proto/packet.h"
#include "proto/startup.h"

#define V(maj, min) ((uint32_t)(maj) << 16 | (min))

static uint8_t pkt[PKT_STARTUP_MAX + 64];

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Frames body behind a length word and a version/request code into pkt. */
static size_t make(uint32_t code, const void *body, size_t body_len)
{
	size_t len = 8 + body_len;
	put32(pkt, (uint32_t)len);
	put32(pkt + 4, code);
	if (body_len)
		memcpy(pkt + 8, body, body_len);
	return len;
}

#define BODY(lit) lit, sizeof(lit) - 1     /* string literal with embedded NULs */

struct ok_case {
	const char *name;
	uint32_t version;
	const char *body;
	size_t body_len;
	const char *user, *database, *options, *replication;
	int n_params, n_unsupported;
};

static const struct ok_case ok_cases[] = {
	{ "normal", V(3, 0), BODY("user\0bob\0database\0db\0application_name\0psql\0\0"),
	  "bob", "db", NULL, NULL, 3, 0 },
	{ "database defaults to user", V(3, 0), BODY("user\0alice\0\0"), "alice", "alice", NULL, NULL, 1, 0 },
	{ "empty database defaults to user", V(3, 0), BODY("database\0\0user\0carol\0\0"),
	  "carol", "carol", NULL, NULL, 2, 0 },
	{ "options and replication", V(3, 0),
	  BODY("user\0u\0options\0-c a=b\0replication\0database\0\0"), "u", "u", "-c a=b", "database", 3, 0 },
	{ "last duplicate wins", V(3, 0), BODY("user\0first\0user\0second\0\0"), "second", "second", NULL, NULL, 2, 0 },
	{ "protocol 3.2", V(3, 2), BODY("user\0u\0database\0d\0\0"), "u", "d", NULL, NULL, 2, 0 },
	{ "_pq_ options", V(3, 0), BODY("_pq_.compression\0on\0user\0u\0_pq_.x\0y\0\0"), "u", "u", NULL, NULL, 1, 2 },
};

static void test_startup_ok(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(ok_cases); i++) {
		const struct ok_case *c = &ok_cases[i];
		struct startup_msg m;
		char err[256] = "junk";
		size_t len = make(c->version, c->body, c->body_len);

		print_message("case: %s\n", c->name);
		assert_int_equal(startup_parse(pkt, len, &m, err, sizeof(err)), STARTUP_V3);
		assert_int_equal(m.kind, STARTUP_V3);
		assert_string_equal(err, "");
		assert_int_equal(m.version, c->version);
		assert_string_equal(m.user, c->user);
		assert_string_equal(m.database, c->database);
		if (c->options)
			assert_string_equal(m.options, c->options);
		else
			assert_null(m.options);
		if (c->replication)
			assert_string_equal(m.replication, c->replication);
		else
			assert_null(m.replication);
		assert_int_equal(m.n_params, c->n_params);
		assert_int_equal(m.n_unsupported, c->n_unsupported);
		/* every pointer points into the packet itself */
		for (int k = 0; k < m.n_params; k++) {
			assert_true((const uint8_t *)m.keys[k] > pkt && (const uint8_t *)m.keys[k] < pkt + len);
			assert_true((const uint8_t *)m.vals[k] > pkt && (const uint8_t *)m.vals[k] < pkt + len);
		}
	}
}

static void test_startup_params_order(void **state)
{
	(void)state;
	struct startup_msg m;
	char err[128];
	size_t len = make(V(3, 0), BODY("_pq_.a\0x\0user\0bob\0TimeZone\0UTC\0\0"));

	assert_int_equal(startup_parse(pkt, len, &m, err, sizeof(err)), STARTUP_V3);
	assert_int_equal(m.n_params, 2);
	assert_string_equal(m.keys[0], "user");
	assert_string_equal(m.vals[0], "bob");
	assert_string_equal(m.keys[1], "TimeZone");
	assert_string_equal(m.vals[1], "UTC");
	assert_int_equal(m.n_unsupported, 1);
	assert_string_equal(m.unsupported[0], "_pq_.a");
}

static void test_requests(void **state)
{
	(void)state;
	struct startup_msg m;
	char err[128];
	static const uint8_t cancel_body[] = { 0, 0, 0x30, 0x39, 0xCA, 0xFE, 0xBA, 0xBE };

	assert_int_equal(startup_parse(pkt, make(PROTO_SSL_REQUEST, NULL, 0), &m, err, sizeof(err)),
			 STARTUP_SSL);
	assert_int_equal(m.kind, STARTUP_SSL);
	assert_int_equal(startup_parse(pkt, make(PROTO_GSSENC_REQUEST, NULL, 0), &m, err, sizeof(err)),
			 STARTUP_GSSENC);
	assert_int_equal(startup_parse(pkt, make(PROTO_CANCEL_REQUEST, cancel_body, 8), &m, err, sizeof(err)),
			 STARTUP_CANCEL);
	assert_int_equal(m.cancel.pid, 12345);
	assert_int_equal(m.cancel.len, 4);
	assert_memory_equal(m.cancel.secret, cancel_body + 4, 4);
	assert_string_equal(startup_kind_name(STARTUP_CANCEL), "cancel-request");
}

/* CancelRequest: a secret of any length from 4 bytes (protocol 3.0) to 256
 * (3.2) is taken whole; 0 to 3 bytes, 257 and more, are refused. */
static void test_cancel_lengths(void **state)
{
	(void)state;
	static const struct {
		size_t secret;
		bool ok;
	} cases[] = {
		{ 0, false }, { 1, false }, { 3, false }, { 4, true }, { 5, true }, { 31, true },
		{ 32, true }, { 33, true }, { 255, true }, { 256, true }, { 257, false }, { 1000, false },
	};
	uint8_t body[4 + 1000];
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (uint8_t)(i * 7 + 1);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct startup_msg m;
		char err[128];
		print_message("secret of %zu bytes\n", cases[i].secret);
		size_t len = make(PROTO_CANCEL_REQUEST, body, 4 + cases[i].secret);
		enum startup_kind k = startup_parse(pkt, len, &m, err, sizeof(err));
		if (!cases[i].ok) {
			assert_int_equal(k, STARTUP_BAD);
			assert_string_equal(err, "invalid length of cancel request packet");
			continue;
		}
		assert_int_equal(k, STARTUP_CANCEL);
		assert_int_equal(m.cancel.pid, (uint32_t)body[0] << 24 | body[1] << 16 | body[2] << 8 | body[3]);
		assert_int_equal(m.cancel.len, cases[i].secret);
		assert_memory_equal(m.cancel.secret, body + 4, cases[i].secret);
	}
	/* The same verdicts from the first 8 bytes, before the body is read. */
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		make(PROTO_CANCEL_REQUEST, body, 4 + cases[i].secret);
		const char *why = startup_length_refused(pkt, 12 + cases[i].secret);
		if (cases[i].ok)
			assert_null(why);
		else
			assert_string_equal(why, "invalid length of cancel request packet");
	}
	make(PROTO_SSL_REQUEST, NULL, 0);
	assert_null(startup_length_refused(pkt, 8));
	assert_string_equal(startup_length_refused(pkt, 9), "invalid length of request packet");
	make(V(3, 2), NULL, 0);
	assert_null(startup_length_refused(pkt, PKT_STARTUP_MAX));
	/* No pid at all: 8 bytes. */
	struct startup_msg m;
	char err[128];
	assert_int_equal(startup_parse(pkt, make(PROTO_CANCEL_REQUEST, NULL, 0), &m, err, sizeof(err)),
			 STARTUP_BAD);
}

struct bad_case {
	const char *name;
	uint32_t version;
	const char *body;
	size_t body_len;
	const char *err_has;    /* substring the message must contain */
};

static const struct bad_case bad_cases[] = {
	{ "protocol 2.0", V(2, 0), BODY("user\0u\0\0"), "unsupported frontend protocol 2.0: server supports 3.0 to 3.2" },
	{ "protocol 4.0", V(4, 0), BODY("user\0u\0\0"), "unsupported frontend protocol 4.0" },
	{ "unknown 1234.x", V(1234, 1), BODY(""), "unsupported frontend protocol 1234.1" },
	{ "ssl request too long", PROTO_SSL_REQUEST, BODY("xxxx"), "invalid length" },
	{ "gssenc request too long", PROTO_GSSENC_REQUEST, BODY("x"), "invalid length" },
	{ "cancel too short", PROTO_CANCEL_REQUEST, BODY("1234"), "invalid length" },
	{ "cancel with 3 secret bytes", PROTO_CANCEL_REQUEST, BODY("1234567"), "invalid length" },
	{ "no parameters at all", V(3, 0), BODY(""), "missing terminator" },
	{ "missing final NUL", V(3, 0), BODY("user\0bob\0"), "missing terminator" },
	{ "value not NUL-terminated", V(3, 0), BODY("user\0bob"), "layout" },
	{ "key not NUL-terminated", V(3, 0), BODY("user\0bob\0data"), "unterminated parameter name" },
	{ "key without value", V(3, 0), BODY("user\0bob\0lonely\0"), "parameter without value" },
	{ "bytes after terminator", V(3, 0), BODY("user\0bob\0\0x\0y\0\0"), "terminator as last byte" },
	{ "no user", V(3, 0), BODY("database\0db\0\0"), "no PostgreSQL user name" },
	{ "empty user", V(3, 0), BODY("user\0\0\0"), "no PostgreSQL user name" },
	{ "only _pq_ options", V(3, 2), BODY("_pq_.a\0b\0\0"), "no PostgreSQL user name" },
};

static void test_startup_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(bad_cases); i++) {
		const struct bad_case *c = &bad_cases[i];
		struct startup_msg m;
		char err[256] = "";
		size_t len = make(c->version, c->body, c->body_len);

		print_message("case: %s\n", c->name);
		assert_int_equal(startup_parse(pkt, len, &m, err, sizeof(err)), STARTUP_BAD);
		assert_int_equal(m.kind, STARTUP_BAD);
		if (!strstr(err, c->err_has))
			fail_msg("%s: \"%s\" lacks \"%s\"", c->name, err, c->err_has);
	}
}

/* The length word must match the bytes handed over and stay in bounds. */
static void test_startup_lengths(void **state)
{
	(void)state;
	struct startup_msg m;
	char err[128];
	size_t len = make(V(3, 0), BODY("user\0u\0\0"));

	assert_int_equal(startup_parse(pkt, len - 1, &m, err, sizeof(err)), STARTUP_BAD);   /* truncated */
	assert_string_equal(err, "invalid length of startup packet");
	assert_int_equal(startup_parse(pkt, 4, &m, err, sizeof(err)), STARTUP_BAD);
	put32(pkt, (uint32_t)len + 1);
	assert_int_equal(startup_parse(pkt, len, &m, err, sizeof(err)), STARTUP_BAD);
	put32(pkt, (uint32_t)len);
	assert_int_equal(startup_parse(pkt, len, &m, err, sizeof(err)), STARTUP_V3);

	/* 10000 bytes is the largest acceptable packet, 10001 is too big */
	static char body[PKT_STARTUP_MAX];
	size_t filler = PKT_STARTUP_MAX - 8 - strlen("user") - 1 - 2 - strlen("big") - 1 - 1;
	size_t n = 0;
	memcpy(body + n, "user\0u\0big\0", 11);
	n += 11;
	memset(body + n, 'x', filler - 1);
	n += filler - 1;
	body[n++] = '\0';
	body[n++] = '\0';
	assert_int_equal(startup_parse(pkt, make(V(3, 0), body, n), &m, err, sizeof(err)), STARTUP_V3);
	assert_int_equal(8 + n, PKT_STARTUP_MAX);
	memmove(body + 12, body + 11, n - 11);   /* one more filler byte */
	assert_int_equal(startup_parse(pkt, make(V(3, 0), body, n + 1), &m, err, sizeof(err)), STARTUP_BAD);
}

/* STARTUP_MAX_PARAMS parameters are accepted, one more is refused. */
static void test_too_many_params(void **state)
{
	(void)state;
	static char body[4096];
	struct startup_msg m;
	char err[128];

	for (int extra = 0; extra <= 1; extra++) {
		size_t n = (size_t)snprintf(body, sizeof(body), "user%cu%c", 0, 0);
		for (int i = 1; i < STARTUP_MAX_PARAMS + extra; i++)
			n += (size_t)snprintf(body + n, sizeof(body) - n, "k%d%cv%c", i, 0, 0);
		body[n++] = '\0';
		enum startup_kind k = startup_parse(pkt, make(V(3, 0), body, n), &m, err, sizeof(err));
		if (extra == 0) {
			assert_int_equal(k, STARTUP_V3);
			assert_int_equal(m.n_params, STARTUP_MAX_PARAMS);
			assert_string_equal(m.keys[STARTUP_MAX_PARAMS - 1], "k63");
		} else {
			assert_int_equal(k, STARTUP_BAD);
			assert_string_equal(err, "too many parameters in startup packet");
		}
	}
}

/* Collects "key=value" strings joined by '|'. */
struct collect {
	char out[512];
	int calls;
	int refuse_at;   /* 1-based call to refuse, 0 = never */
};

static int collect_cb(void *arg, const char *key, const char *val)
{
	struct collect *c = arg;
	size_t n = strlen(c->out);
	snprintf(c->out + n, sizeof(c->out) - n, "%s%s=%s", n ? "|" : "", key, val);
	c->calls++;
	return c->calls == c->refuse_at ? -1 : 0;
}

struct opt_case {
	const char *in;
	int rc;
	const char *want;       /* collected pairs, or error substring when rc == -1 */
};

static const struct opt_case opt_cases[] = {
	{ "", 0, "" },
	{ "   ", 0, "" },
	{ "-c search_path=app", 0, "search_path=app" },
	{ "-csearch_path=app", 0, "search_path=app" },
	{ "--search_path=app", 0, "search_path=app" },
	{ "--statement-timeout=5s", 0, "statement_timeout=5s" },
	{ "-c a=1  --b=2\t-c c=3", 0, "a=1|b=2|c=3" },
	{ "-c search_path=my\\ schema", 0, "search_path=my schema" },
	{ "-c x=back\\\\slash", 0, "x=back\\slash" },
	{ "-c x=\\-c", 0, "x=-c" },
	{ "-c x=", 0, "x=" },
	{ "-c x=a=b", 0, "x=a=b" },
	{ "-c x=trail\\", 0, "x=trail\\" },
	{ "-c", -1, "only '-c config=val' and '--config=val' are allowed" },
	{ "-c noequals", -1, "only '-c config=val' and '--config=val' are allowed" },
	{ "-c =v", -1, "only '-c config=val' and '--config=val' are allowed" },
	{ "-d 5", -1, "unsupported options startup parameter: only '-c config=val' and '--config=val' are allowed" },
	{ "-c a=1 plain", -1, "unsupported options startup parameter: only" },
	{ "-F", -1, "unsupported" },
};

static void test_options(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(opt_cases); i++) {
		const struct opt_case *c = &opt_cases[i];
		struct collect col = { .out = "" };
		char err[256] = "junk";
		int rc = startup_parse_options(c->in, collect_cb, &col, err, sizeof(err));

		print_message("case: '%s' -> %d '%s' '%s'\n", c->in, rc, col.out, err);
		assert_int_equal(rc, c->rc);
		if (rc == 0) {
			assert_string_equal(col.out, c->want);
			assert_string_equal(err, "");
		} else if (!strstr(err, c->want)) {
			fail_msg("'%s': \"%s\" lacks \"%s\"", c->in, err, c->want);
		}
	}
}

static void test_options_refused_and_long(void **state)
{
	(void)state;
	struct collect col = { .out = "", .refuse_at = 2 };
	char err[256];

	assert_int_equal(startup_parse_options("-c a=1 -c b=2 -c c=3", collect_cb, &col, err, sizeof(err)), -1);
	assert_int_equal(col.calls, 2);
	assert_string_equal(col.out, "a=1|b=2");
	assert_string_equal(err, "unsupported startup parameter in options: b");

	static char huge[PKT_STARTUP_MAX + 16];
	memcpy(huge, "-c k=", 5);
	memset(huge + 5, 'v', sizeof(huge) - 6);
	huge[sizeof(huge) - 1] = '\0';
	col = (struct collect){ .out = "" };
	assert_int_equal(startup_parse_options(huge, collect_cb, &col, err, sizeof(err)), -1);
	assert_int_equal(col.calls, 0);
	assert_string_equal(err, "options startup parameter too long");

	col = (struct collect){ .out = "" };
	assert_int_equal(startup_parse_options(NULL, collect_cb, &col, err, sizeof(err)), 0);
	assert_int_equal(col.calls, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_startup_ok),
		cmocka_unit_test(test_startup_params_order),
		cmocka_unit_test(test_requests),
		cmocka_unit_test(test_cancel_lengths),
		cmocka_unit_test(test_startup_bad),
		cmocka_unit_test(test_startup_lengths),
		cmocka_unit_test(test_too_many_params),
		cmocka_unit_test(test_options),
		cmocka_unit_test(test_options_refused_and_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
