/* pgcrew — unit tests for proto/packet: header framing (partial, coalesced,
 * boundary and hostile lengths), TLS sniffing, type names, ReadyForQuery
 * status, and the sticky body reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto/packet.h"

#define MAX_PKT_2G 2147483648u

struct hdr_case {
	const char *name;
	uint8_t bytes[8];
	size_t avail;
	bool startup;
	uint32_t max_len;
	enum pkt_status want;
	uint32_t want_len;      /* checked when want == PKT_OK */
};

static const struct hdr_case hdr_cases[] = {
	{ "typed 0 bytes", { 0 }, 0, false, 2048, PKT_NEED_MORE, 0 },
	{ "typed 1 byte", { 'Q' }, 1, false, 2048, PKT_NEED_MORE, 0 },
	{ "typed 2 bytes", { 'Q', 0 }, 2, false, 2048, PKT_NEED_MORE, 0 },
	{ "typed 3 bytes", { 'Q', 0, 0 }, 3, false, 2048, PKT_NEED_MORE, 0 },
	{ "typed 4 bytes", { 'Q', 0, 0, 0 }, 4, false, 2048, PKT_NEED_MORE, 0 },
	{ "typed len 0", { 'Q', 0, 0, 0, 0 }, 5, false, 2048, PKT_BAD, 0 },
	{ "typed len 3", { 'Q', 0, 0, 0, 3 }, 5, false, 2048, PKT_BAD, 0 },
	{ "typed len 4 empty body", { 'X', 0, 0, 0, 4 }, 5, false, 2048, PKT_OK, 5 },
	{ "typed exactly max", { 'Q', 0, 0, 0x07, 0xFF }, 5, false, 2048, PKT_OK, 2048 },
	{ "typed max + 1", { 'Q', 0, 0, 0x08, 0x00 }, 5, false, 2048, PKT_BAD, 0 },
	{ "typed 2^31 vs 2048", { 'Q', 0x80, 0, 0, 0 }, 5, false, 2048, PKT_BAD, 0 },
	{ "typed 2^31 vs 2GB", { 'Q', 0x80, 0, 0, 0 }, 5, false, MAX_PKT_2G, PKT_BAD, 0 },
	{ "typed 2^31-1 vs 2GB", { 'Q', 0x7F, 0xFF, 0xFF, 0xFF }, 5, false, MAX_PKT_2G, PKT_OK, MAX_PKT_2G },
	{ "typed 0xFFFFFFFF vs 2GB", { 'Q', 0xFF, 0xFF, 0xFF, 0xFF }, 5, false, MAX_PKT_2G, PKT_BAD, 0 },
	{ "typed 0xFFFFFFFF vs UINT32_MAX", { 'Q', 0xFF, 0xFF, 0xFF, 0xFF }, 5, false, UINT32_MAX, PKT_BAD, 0 },
	{ "typed 1GB vs 2GB", { 'D', 0x40, 0, 0, 0 }, 5, false, MAX_PKT_2G, PKT_OK, 0x40000001 },
	{ "typed 1GB vs 2048", { 'D', 0x40, 0, 0, 0 }, 5, false, 2048, PKT_BAD, 0 },
	{ "startup 3 bytes", { 0, 0, 0 }, 3, true, PKT_STARTUP_MAX, PKT_NEED_MORE, 0 },
	{ "startup len 4", { 0, 0, 0, 4 }, 4, true, PKT_STARTUP_MAX, PKT_BAD, 0 },
	{ "startup len 7", { 0, 0, 0, 7 }, 4, true, PKT_STARTUP_MAX, PKT_BAD, 0 },
	{ "startup len 8", { 0, 0, 0, 8 }, 4, true, PKT_STARTUP_MAX, PKT_OK, 8 },
	{ "startup len 10000", { 0, 0, 0x27, 0x10 }, 4, true, PKT_STARTUP_MAX, PKT_OK, 10000 },
	{ "startup len 10001", { 0, 0, 0x27, 0x11 }, 4, true, PKT_STARTUP_MAX, PKT_BAD, 0 },
	{ "startup 10001 even if max_len larger", { 0, 0, 0x27, 0x11 }, 4, true, UINT32_MAX, PKT_BAD, 0 },
	{ "startup 0xFFFFFFFF", { 0xFF, 0xFF, 0xFF, 0xFF }, 4, true, PKT_STARTUP_MAX, PKT_BAD, 0 },
	{ "startup TLS hello bytes", { 0x16, 0x03, 0x01, 0x02 }, 4, true, PKT_STARTUP_MAX, PKT_BAD, 0 },
};

static void test_header_table(void **state)
{
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(hdr_cases); i++) {
		const struct hdr_case *c = &hdr_cases[i];
		struct pkt_hdr h = { 0xAA, 0xAAAAAAAA, 0xAAAAAAAA };
		const char *why = NULL;
		enum pkt_status st = pkt_parse_header(c->bytes, c->avail, c->startup, c->max_len, &h, &why);
		print_message("case: %s -> %s\n", c->name, pkt_status_name(st));
		assert_int_equal(st, c->want);
		if (st == PKT_BAD)
			assert_non_null(why);
		if (st != PKT_OK)
			continue;
		assert_int_equal(h.len, c->want_len);
		assert_int_equal(h.hdr_len, c->startup ? 4 : 5);
		assert_int_equal(h.type, c->startup ? 0 : c->bytes[0]);
	}
}

/* Three messages in one read, the last one cut short: the caller advances by
 * each h.len and must stop at the partial one. */
static void test_coalesced(void **state)
{
	(void)state;
	static const uint8_t buf[] = {
		'1', 0, 0, 0, 4,                       /* ParseComplete */
		'C', 0, 0, 0, 11, 'S', 'E', 'L', 'E', 'C', 'T', 0,
		'Z', 0, 0, 0, 5, 'I',
		'D', 0, 0,                             /* partial header */
	};
	static const uint8_t want_type[] = { '1', 'C', 'Z' };
	static const uint32_t want_len[] = { 5, 12, 6 };
	size_t off = 0;
	int n = 0;

	for (;;) {
		struct pkt_hdr h;
		enum pkt_status st = pkt_parse_header(buf + off, sizeof(buf) - off, false, 2048, &h, NULL);
		if (st != PKT_OK || h.len > sizeof(buf) - off) {
			assert_int_equal(st, PKT_NEED_MORE);
			break;
		}
		assert_true(n < 3);
		assert_int_equal(h.type, want_type[n]);
		assert_int_equal(h.len, want_len[n]);
		off += h.len;
		n++;
	}
	assert_int_equal(n, 3);
	assert_int_equal(off, sizeof(buf) - 3);
	char st;
	assert_true(pkt_ready_status(buf + 17, 6, &st));
	assert_int_equal(st, 'I');
}

/* A header that arrives one byte at a time is accepted only when complete. */
static void test_header_split(void **state)
{
	(void)state;
	static const uint8_t q[] = { 'Q', 0, 0, 0, 13, 's', 'e', 'l', 'e', 'c', 't', ' ', '1', 0 };
	struct pkt_hdr h;
	for (size_t avail = 0; avail < 5; avail++)
		assert_int_equal(pkt_parse_header(q, avail, false, 2048, &h, NULL), PKT_NEED_MORE);
	assert_int_equal(pkt_parse_header(q, 5, false, 2048, &h, NULL), PKT_OK);
	assert_int_equal(h.len, sizeof(q));
}

static void test_tls_hello(void **state)
{
	(void)state;
	static const uint8_t hello[] = { 0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00 };
	static const uint8_t server_hello[] = { 0x16, 0x03, 0x03, 0x00, 0x40, 0x02 };
	static const uint8_t alert[] = { 0x15, 0x03, 0x03, 0x00, 0x02, 0x02 };
	static const uint8_t ssl_req[] = { 0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F };
	static const uint8_t bad_minor[] = { 0x16, 0x03, 0x09, 0x00 };

	assert_true(pkt_is_tls_hello(hello, sizeof(hello)));
	assert_true(pkt_is_tls_hello(hello, 4));
	assert_false(pkt_is_tls_hello(hello, 2));
	assert_false(pkt_is_tls_hello(server_hello, sizeof(server_hello)));
	assert_false(pkt_is_tls_hello(alert, sizeof(alert)));
	assert_false(pkt_is_tls_hello(ssl_req, sizeof(ssl_req)));
	assert_false(pkt_is_tls_hello(bad_minor, sizeof(bad_minor)));
}

static void test_type_names(void **state)
{
	(void)state;
	assert_string_equal(pkt_type_name('Q', false), "Query");
	assert_string_equal(pkt_type_name('Z', true), "ReadyForQuery");
	assert_string_equal(pkt_type_name('D', false), "Describe");
	assert_string_equal(pkt_type_name('D', true), "DataRow");
	assert_string_equal(pkt_type_name('S', false), "Sync");
	assert_string_equal(pkt_type_name('S', true), "ParameterStatus");
	assert_string_equal(pkt_type_name(0, false), "StartupPacket");
	assert_string_equal(pkt_type_name('Z', false), "unknown");
	assert_string_equal(pkt_type_name(0xFF, true), "unknown");
	assert_string_equal(pkt_status_name(PKT_BAD), "bad");
}

static void test_ready_status(void **state)
{
	(void)state;
	static const struct { uint8_t b[7]; size_t len; bool ok; char st; } cases[] = {
		{ { 'Z', 0, 0, 0, 5, 'I' }, 6, true, 'I' },
		{ { 'Z', 0, 0, 0, 5, 'T' }, 6, true, 'T' },
		{ { 'Z', 0, 0, 0, 5, 'E' }, 6, true, 'E' },
		{ { 'Z', 0, 0, 0, 5, 'X' }, 6, false, 0 },
		{ { 'Z', 0, 0, 0, 6, 'I' }, 6, false, 0 },
		{ { 'C', 0, 0, 0, 5, 'I' }, 6, false, 0 },
		{ { 'Z', 0, 0, 0, 5, 'I' }, 5, false, 0 },
		{ { 'Z', 0, 0, 0, 5, 'I', 0 }, 7, false, 0 },
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char st = '?';
		assert_int_equal(pkt_ready_status(cases[i].b, cases[i].len, &st), cases[i].ok);
		if (cases[i].ok)
			assert_int_equal(st, cases[i].st);
		else
			assert_int_equal(st, '?');
	}
}

static void test_reader_values(void **state)
{
	(void)state;
	static const uint8_t body[] = {
		0x7F, 0x12, 0x34, 0xDE, 0xAD, 0xBE, 0xEF, 0xFF, 0xFF, 0xFF, 0xFE,
		'a', 'b', 0, 0, 1, 2, 3,
	};
	struct pkt_reader r;
	pkt_reader_init(&r, body, sizeof(body));
	assert_int_equal(pkt_get_u8(&r), 0x7F);
	assert_int_equal(pkt_get_u16(&r), 0x1234);
	assert_int_equal(pkt_get_u32(&r), 0xDEADBEEF);
	assert_int_equal(pkt_get_i32(&r), -2);
	assert_string_equal(pkt_get_string(&r), "ab");
	assert_string_equal(pkt_get_string(&r), "");
	assert_false(pkt_get_end(&r));
	const uint8_t *b = pkt_get_bytes(&r, 3);
	assert_non_null(b);
	assert_memory_equal(b, "\x01\x02\x03", 3);
	assert_true(pkt_get_end(&r));
	assert_false(r.failed);
}

/* Every kind of overrun fails, leaves pos alone, and sticks. */
static void test_reader_overrun(void **state)
{
	(void)state;
	static const uint8_t body[] = { 1, 2, 3 };
	struct pkt_reader r;

	pkt_reader_init(&r, body, sizeof(body));
	assert_int_equal(pkt_get_u32(&r), 0);
	assert_true(r.failed);
	assert_int_equal(r.pos, 0);
	assert_int_equal(pkt_get_u8(&r), 0);       /* sticky although 1 byte fits */
	assert_false(pkt_get_end(&r));

	pkt_reader_init(&r, body, sizeof(body));
	assert_int_equal(pkt_get_u16(&r), 0x0102);
	assert_int_equal(pkt_get_u16(&r), 0);
	assert_true(r.failed);

	pkt_reader_init(&r, body, sizeof(body));
	assert_null(pkt_get_bytes(&r, 4));
	assert_true(r.failed);

	pkt_reader_init(&r, body, sizeof(body));
	assert_non_null(pkt_get_bytes(&r, 3));
	assert_true(pkt_get_end(&r));
	assert_int_equal(pkt_get_u8(&r), 0);
	assert_false(pkt_get_end(&r));

	pkt_reader_init(&r, body, sizeof(body));   /* no NUL anywhere */
	assert_string_equal(pkt_get_string(&r), "");
	assert_true(r.failed);

	pkt_reader_init(&r, NULL, 0);              /* empty body */
	assert_true(pkt_get_end(&r));
	assert_non_null(pkt_get_bytes(&r, 0));
	assert_string_equal(pkt_get_string(&r), "");
	assert_true(r.failed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_header_table),
		cmocka_unit_test(test_coalesced),
		cmocka_unit_test(test_header_split),
		cmocka_unit_test(test_tls_hello),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_ready_status),
		cmocka_unit_test(test_reader_values),
		cmocka_unit_test(test_reader_overrun),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
