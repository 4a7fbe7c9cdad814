/* pgcrew — unit tests for proto/proxyproto: every valid v1 and v2 form, each
 * of them cut at every byte (read from a buffer of exactly that size, so
 * ASan catches an overread), what a client without a header sends first,
 * the malformed headers, and the proxy_protocol_sources list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include "proto/proxyproto.h"

#define SIG "\r\n\r\n\0\r\nQUIT\n"
#define SIG_LEN 12

struct blob {
	uint8_t b[PROXY_V2_MAX + 64];
	size_t n;
};

/* Parses a copy of exactly n bytes. */
static enum proxy_result parse(const void *bytes, size_t n, struct proxy_header *h, const char **why)
{
	uint8_t *copy = malloc(n ? n : 1);
	enum proxy_result r;

	memcpy(copy, bytes, n);
	r = proxy_parse(copy, n, h, why);
	free(copy);
	if (r == PROXY_BAD)
		assert_non_null(*why);
	else
		assert_null(*why);
	return r;
}

static void put(struct blob *b, const void *p, size_t n)
{
	assert_true(b->n + n <= sizeof(b->b));
	if (n == 0)
		return;          /* p may be NULL */
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void put_be16(struct blob *b, unsigned v)
{
	uint8_t x[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(b, x, 2);
}

/* A v2 header: signature, ver_cmd, family, then the block (its length is
 * written as len, which tests may make disagree with blen). */
static struct blob v2(uint8_t ver_cmd, uint8_t fam, unsigned len, const void *block, size_t blen)
{
	struct blob b = { .n = 0 };
	put(&b, SIG, SIG_LEN);
	put(&b, &ver_cmd, 1);
	put(&b, &fam, 1);
	put_be16(&b, len);
	put(&b, block, blen);
	return b;
}

static struct blob v2_ok(uint8_t ver_cmd, uint8_t fam, const void *block, size_t blen)
{
	return v2(ver_cmd, fam, (unsigned)blen, block, blen);
}

static struct blob text(const char *s)
{
	struct blob b = { .n = 0 };
	put(&b, s, strlen(s));
	return b;
}

/* 192.0.2.1:56324 -> 198.51.100.7:6432 */
static const uint8_t tcp4_block[12] = {
	192, 0, 2, 1, 198, 51, 100, 7, 0xDC, 0x04, 0x19, 0x20,
};
/* [2001:db8::1]:65535 -> [2001:db8::2]:0 */
static const uint8_t tcp6_block[36] = {
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
	0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2,
	0xFF, 0xFF, 0x00, 0x00,
};
/* ALPN "pg", an empty NOOP, a CRC32C value (not checked), an empty
 * UNIQUE_ID */
static const uint8_t tlvs[] = {
	0x01, 0x00, 0x02, 'p', 'g',
	0x04, 0x00, 0x00,
	0x03, 0x00, 0x04, 1, 2, 3, 4,
	0x05, 0x00, 0x00,
};

static struct blob with_tlvs(const uint8_t *block, size_t blen)
{
	struct blob b = { .n = 0 };
	put(&b, block, blen);
	put(&b, tlvs, sizeof(tlvs));
	return b;
}

static void assert_addr(const struct sockaddr_storage *ss, const char *addr, unsigned port)
{
	char buf[INET6_ADDRSTRLEN];

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
		assert_non_null(inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)));
		assert_int_equal(ntohs(in->sin_port), port);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)ss;
		assert_int_equal(ss->ss_family, AF_INET6);
		assert_non_null(inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf)));
		assert_int_equal(ntohs(in6->sin6_port), port);
	}
	assert_string_equal(buf, addr);
}

/* ---- valid headers ---- */

struct want {
	struct blob hdr;
	int version;
	bool local;
	const char *src, *dst;
	unsigned sport, dport;
};

#define V1_TCP4 "PROXY TCP4 192.0.2.1 198.51.100.7 56324 6432\r\n"
#define V1_TCP6_MAX "PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff " \
	"ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe 65535 65535\r\n"
/* the spec's worst case: 107 bytes */
#define V1_UNKNOWN_MAX "PROXY UNKNOWN ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff " \
	"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"

static size_t valid_headers(struct want *w, size_t max)
{
	struct blob b;
	size_t k = 0;
#define ADD(...) do { assert_true(k < max); w[k++] = (struct want){ __VA_ARGS__ }; } while (0)
	ADD(text(V1_TCP4), 1, false, "192.0.2.1", "198.51.100.7", 56324, 6432);
	ADD(text("PROXY TCP4 0.0.0.0 255.255.255.255 0 65535\r\n"), 1, false, "0.0.0.0", "255.255.255.255", 0, 65535);
	ADD(text("PROXY TCP6 2001:db8::1 ::1 1 10\r\n"), 1, false, "2001:db8::1", "::1", 1, 10);
	ADD(text("PROXY TCP6 ::ffff:192.0.2.1 2001:DB8:0:0:0:0:0:2 5432 6432\r\n"), 1, false,
	    "::ffff:192.0.2.1", "2001:db8::2", 5432, 6432);
	ADD(text(V1_TCP6_MAX), 1, false, "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
	    "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe", 65535, 65535);
	ADD(text("PROXY UNKNOWN\r\n"), 1, true, NULL, NULL, 0, 0);
	ADD(text("PROXY UNKNOWN 192.0.2.1 nonsense\r\n"), 1, true, NULL, NULL, 0, 0);
	ADD(text(V1_UNKNOWN_MAX), 1, true, NULL, NULL, 0, 0);
	ADD(v2_ok(0x21, 0x11, tcp4_block, 12), 2, false, "192.0.2.1", "198.51.100.7", 56324, 6432);
	b = with_tlvs(tcp4_block, 12);
	ADD(v2_ok(0x21, 0x11, b.b, b.n), 2, false, "192.0.2.1", "198.51.100.7", 56324, 6432);
	ADD(v2_ok(0x21, 0x21, tcp6_block, 36), 2, false, "2001:db8::1", "2001:db8::2", 65535, 0);
	b = with_tlvs(tcp6_block, 36);
	ADD(v2_ok(0x21, 0x21, b.b, b.n), 2, false, "2001:db8::1", "2001:db8::2", 65535, 0);
	ADD(v2_ok(0x20, 0x00, NULL, 0), 2, true, NULL, NULL, 0, 0);           /* LOCAL, health check */
	ADD(v2_ok(0x20, 0x11, tcp4_block, 12), 2, true, NULL, NULL, 0, 0);    /* LOCAL ignores the block */
	ADD(v2_ok(0x20, 0x31, "x", 1), 2, true, NULL, NULL, 0, 0);           /* ... and the family */
	ADD(v2_ok(0x20, 0x77, NULL, 0), 2, true, NULL, NULL, 0, 0);
	ADD(v2_ok(0x21, 0x00, NULL, 0), 2, true, NULL, NULL, 0, 0);           /* PROXY UNSPEC */
	ADD(v2_ok(0x21, 0x00, "\x01\x02\x03", 3), 2, true, NULL, NULL, 0, 0); /* opaque block */
#undef ADD
	return k;
}

static void check_want(const struct want *w, const struct proxy_header *h)
{
	assert_int_equal(h->version, w->version);
	assert_int_equal(h->local, w->local);
	assert_int_equal(h->len, w->hdr.n);
	if (w->local) {
		assert_int_equal(h->src.ss_family, 0);
		assert_int_equal(h->dst.ss_family, 0);
		return;
	}
	assert_addr(&h->src, w->src, w->sport);
	assert_addr(&h->dst, w->dst, w->dport);
}

static void test_valid(void **state)
{
	(void)state;
	struct want w[32];
	size_t n = valid_headers(w, ARRAY_SIZE(w));
	struct proxy_header h;
	const char *why;

	assert_int_equal(strlen(V1_UNKNOWN_MAX), PROXY_V1_MAX);
	for (size_t i = 0; i < n; i++) {
		if (parse(w[i].hdr.b, w[i].hdr.n, &h, &why) != PROXY_OK)
			fail_msg("valid header %zu: %s", i, why ? why : "not bad either");
		check_want(&w[i], &h);
	}
}

/* Every proper prefix of a valid header asks for more, at every size. */
static void test_prefixes(void **state)
{
	(void)state;
	struct want w[32];
	size_t n = valid_headers(w, ARRAY_SIZE(w));
	struct proxy_header h;
	const char *why;

	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < w[i].hdr.n; k++) {
			enum proxy_result r = parse(w[i].hdr.b, k, &h, &why);
			if (r != PROXY_NEED_MORE)
				fail_msg("header %zu cut at %zu: %s (%s)", i, k, proxy_result_name(r), why);
			assert_int_equal(h.version, 0);
			assert_int_equal(h.len, 0);
		}
	}
}

/* The client's bytes after the header are not the parser's: the length
 * says where they start, and they parse as no header. */
static void test_bytes_after(void **state)
{
	(void)state;
	static const uint8_t ssl_request[8] = { 0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F };
	struct blob b = v2_ok(0x21, 0x11, tcp4_block, 12);
	struct proxy_header h;
	const char *why;

	put(&b, ssl_request, sizeof(ssl_request));
	assert_int_equal(parse(b.b, b.n, &h, &why), PROXY_OK);
	assert_int_equal(h.len, 28);
	assert_memory_equal(b.b + h.len, ssl_request, sizeof(ssl_request));
	assert_addr(&h.src, "192.0.2.1", 56324);
	assert_int_equal(parse(b.b + h.len, b.n - h.len, &h, &why), PROXY_NONE);

	b = text(V1_TCP4 "PROXY TCP4 10.0.0.1 10.0.0.2 1 2\r\n");
	assert_int_equal(parse(b.b, b.n, &h, &why), PROXY_OK);
	assert_int_equal(h.len, strlen(V1_TCP4));
	assert_addr(&h.src, "192.0.2.1", 56324);

	/* bytes after "PROXY UNKNOWN...\r\n" may be anything, even a NUL */
	b = text("PROXY UNKNOWN\r\n");
	put(&b, "\0\0\0\x08", 4);
	assert_int_equal(parse(b.b, b.n, &h, &why), PROXY_OK);
	assert_int_equal(h.len, 15);
}

/* What a client without a proxy sends first is told apart at its first
 * byte, and stays "none" however much of it has arrived. */
static void test_none(void **state)
{
	(void)state;
#define B(s) s, sizeof(s) - 1
	static const struct {
		const char *what;
		const char *bytes;
		size_t n;
	} cases[] = {
		{ "startup", B("\0\0\0\x20\0\x03\0\0user\0alice\0database\0db\0\0") },
		{ "SSLRequest", B("\0\0\0\x08\x04\xD2\x16\x2F") },
		{ "GSSENCRequest", B("\0\0\0\x08\x04\xD2\x16\x30") },
		{ "CancelRequest", B("\0\0\0\x10\x04\xD2\x16\x2E\0\0\0\1\0\0\0\2") },
		{ "ClientHello", B("\x16\x03\x01\x02\x00\x01\x00\x01\xFC\x03\x03") },
		{ "HTTP", B("GET / HTTP/1.1\r\n") },
		{ "PROXZ", B("PROXZ TCP4") },
		{ "PRO...", B("PROBE") },
		{ "CRLF CRLF but not v2", B("\r\n\r\n\x01\r\nQUIT\n!!!!") },
		{ "v2 signature, wrong last byte", B("\r\n\r\n\0\r\nQUIT\r\x21\x11\0\0") },
	};
	struct proxy_header h;
	const char *why;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		for (size_t k = 1; k <= cases[i].n; k++) {
			enum proxy_result r = parse(cases[i].bytes, k, &h, &why);
			bool sig_prefix = (k <= 5 && memcmp(cases[i].bytes, "PROXY", k) == 0) ||
					  (k <= SIG_LEN && memcmp(cases[i].bytes, SIG, k) == 0);
			if (r != (sig_prefix ? PROXY_NEED_MORE : PROXY_NONE))
				fail_msg("%s, %zu bytes: %s", cases[i].what, k, proxy_result_name(r));
		}
	}
	assert_int_equal(parse("", 0, &h, &why), PROXY_NEED_MORE);
#undef B
}

/* ---- malformed headers ---- */

static void test_v1_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324 65536\r\n",     /* port range */
		"PROXY TCP4 192.0.2.1 198.51.100.7 99999 1\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 056324 6432\r\n",     /* leading zero */
		"PROXY TCP4 192.0.2.1 198.51.100.7 00 6432\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 +1 6432\r\n",         /* sign */
		"PROXY TCP4 192.0.2.1 198.51.100.7 -1 6432\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 1x 6432\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 100000 6432\r\n",
		"PROXY TCP4 192.0.2.1  198.51.100.7 56324 6432\r\n",     /* two spaces */
		"PROXY  TCP4 192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4  192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324 6432 \r\n",     /* trailing space */
		"PROXY TCP4 192.0.2.1\t198.51.100.7 56324 6432\r\n",     /* tab */
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324 6432 7\r\n",    /* extra field */
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324\r\n",           /* missing field */
		"PROXY TCP4\r\n",
		"PROXY TCP4 \r\n",
		"PROXY TCP4 192.0.2 198.51.100.7 56324 6432\r\n",        /* bad addresses */
		"PROXY TCP4 192.0.2.256 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4 192.0.2.01 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4 localhost 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4 ::1 ::1 56324 6432\r\n",                     /* family mismatch */
		"PROXY TCP6 192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY TCP6 ::1 192.0.2.1 56324 6432\r\n",
		"PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2\r\n",
		"PROXY TCP6 0000:0000:0000:0000:0000:0000:0000:0000:0000:0001 ::1 1 2\r\n",
		"PROXY TCP5 192.0.2.1 198.51.100.7 56324 6432\r\n",      /* protocol */
		"PROXY tcp4 192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY UDP4 192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY\r\n",
		"PROXY \r\n",
		"PROXYTCP4 192.0.2.1 198.51.100.7 56324 6432\r\n",
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324 6432\n",        /* lone LF */
		"PROXY TCP4 192.0.2.1 198.51.100.7 56324 6432\r\r\n",    /* lone CR */
		"PROXY UNKNOWN\n",
		"PROXY UNKNOWN\rX\r\n",
	};
	struct proxy_header h;
	const char *why;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		enum proxy_result r = parse(bad[i], strlen(bad[i]), &h, &why);
		if (r != PROXY_BAD)
			fail_msg("\"%s\": %s", bad[i], proxy_result_name(r));
		assert_int_equal(h.len, 0);
	}
}

/* No CRLF in the first 107 bytes: bad at byte 107, not before; a NUL is bad
 * as soon as it is seen. */
static void test_v1_limits(void **state)
{
	(void)state;
	char line[300];
	struct proxy_header h;
	const char *why;

	memset(line, 'f', sizeof(line));
	memcpy(line, "PROXY UNKNOWN ", 14);
	assert_int_equal(parse(line, PROXY_V1_MAX - 1, &h, &why), PROXY_NEED_MORE);
	assert_int_equal(parse(line, PROXY_V1_MAX, &h, &why), PROXY_BAD);
	assert_non_null(strstr(why, "CRLF"));
	assert_int_equal(parse(line, sizeof(line), &h, &why), PROXY_BAD);

	memcpy(line + PROXY_V1_MAX - 2, "\r\n", 2);          /* 107 bytes: the longest */
	assert_int_equal(parse(line, sizeof(line), &h, &why), PROXY_OK);
	assert_int_equal(h.len, PROXY_V1_MAX);
	memcpy(line + PROXY_V1_MAX - 2, "f\r\n", 3);         /* 108 */
	assert_int_equal(parse(line, PROXY_V1_MAX - 1, &h, &why), PROXY_NEED_MORE);
	assert_int_equal(parse(line, PROXY_V1_MAX, &h, &why), PROXY_BAD);
	assert_int_equal(parse(line, sizeof(line), &h, &why), PROXY_BAD);

	memcpy(line + 20, "\0", 1);
	assert_int_equal(parse(line, 21, &h, &why), PROXY_BAD);
	assert_non_null(strstr(why, "NUL"));
	assert_int_equal(parse("PROXY\0", 6, &h, &why), PROXY_BAD);
}

struct v2_bad {
	const char *what;
	struct blob hdr;
	size_t decided;         /* bytes after which it is bad (0: all of them) */
	const char *why;        /* a word of the reason */
};

static void test_v2_bad(void **state)
{
	(void)state;
	uint8_t big[PROXY_V2_MAX] = { 0 };
	struct blob b;
	struct v2_bad cases[16];
	size_t k = 0;
	struct proxy_header h;
	const char *why;
#define ADD(...) do { assert_true(k < ARRAY_SIZE(cases)); cases[k++] = (struct v2_bad){ __VA_ARGS__ }; } while (0)
	ADD("version 1", v2_ok(0x11, 0x11, tcp4_block, 12), 13, "version");
	ADD("version 3", v2_ok(0x31, 0x11, tcp4_block, 12), 13, "version");
	ADD("version 0 LOCAL", v2_ok(0x00, 0x00, NULL, 0), 13, "version");
	ADD("command 2", v2_ok(0x22, 0x11, tcp4_block, 12), 13, "command");
	ADD("command 15", v2_ok(0x2F, 0x00, NULL, 0), 13, "command");
	ADD("UDP4", v2_ok(0x21, 0x12, tcp4_block, 12), 14, "UDP");
	ADD("UDP6", v2_ok(0x21, 0x22, tcp6_block, 36), 14, "UDP");
	ADD("UNIX stream", v2_ok(0x21, 0x31, big, 216), 14, "UNIX");
	ADD("UNIX dgram", v2_ok(0x21, 0x32, big, 216), 14, "UNIX");
	ADD("family 4", v2_ok(0x21, 0x41, tcp4_block, 12), 14, "family");
	ADD("IPv4, transport 0", v2_ok(0x21, 0x10, tcp4_block, 12), 14, "family");
	ADD("IPv4 block in 8 bytes", v2(0x21, 0x11, 8, tcp4_block, 8), 16, "address block");
	ADD("IPv6 block in 12 bytes", v2(0x21, 0x21, 12, tcp6_block, 12), 16, "address block");
	b = with_tlvs(tcp4_block, 12);
	b.b[b.n - 1] = 1;                                      /* last TLV: 1 byte, none left */
	ADD("TLV past the end", v2_ok(0x21, 0x11, b.b, b.n), 0, "oversized TLV");
	b = with_tlvs(tcp4_block, 12);
	b.n -= 1;                                              /* last TLV: its header cut */
	ADD("truncated TLV", v2_ok(0x21, 0x11, b.b, b.n), 0, "TLV");
	ADD("over PROXY_V2_MAX", v2(0x21, 0x00, PROXY_V2_MAX - 15, big, 0), 16, "1024");
#undef ADD
	for (size_t i = 0; i < k; i++) {
		size_t decided = cases[i].decided ? cases[i].decided : cases[i].hdr.n;
		for (size_t n = 0; n < decided; n++)
			if (parse(cases[i].hdr.b, n, &h, &why) != PROXY_NEED_MORE)
				fail_msg("%s: decided at %zu bytes, not %zu", cases[i].what, n, decided);
		if (parse(cases[i].hdr.b, decided, &h, &why) != PROXY_BAD || !strstr(why, cases[i].why))
			fail_msg("%s: %s, want bad because of \"%s\"", cases[i].what, why ? why : "not bad",
				 cases[i].why);
		assert_int_equal(parse(cases[i].hdr.b, cases[i].hdr.n, &h, &why), PROXY_BAD);
		assert_int_equal(h.len, 0);
		assert_int_equal(h.version, 0);
	}
}

/* The largest header accepted is exactly PROXY_V2_MAX, TLVs and all. */
static void test_v2_max(void **state)
{
	(void)state;
	struct blob block = { .n = 0 };
	uint8_t zero[PROXY_V2_MAX] = { 0 };
	struct blob b;
	struct proxy_header h;
	const char *why;
	size_t value = PROXY_V2_MAX - 16 - 12 - 3;

	put(&block, tcp4_block, 12);
	put(&block, "\x04", 1);                                /* one NOOP TLV */
	put_be16(&block, (unsigned)value);
	put(&block, zero, value);
	b = v2_ok(0x21, 0x11, block.b, block.n);
	assert_int_equal(b.n, PROXY_V2_MAX);
	assert_int_equal(parse(b.b, b.n - 1, &h, &why), PROXY_NEED_MORE);
	assert_int_equal(parse(b.b, b.n, &h, &why), PROXY_OK);
	assert_int_equal(h.len, PROXY_V2_MAX);
	assert_addr(&h.dst, "198.51.100.7", 6432);
}

static void test_names(void **state)
{
	(void)state;
	assert_string_equal(proxy_result_name(PROXY_NONE), "none");
	assert_string_equal(proxy_result_name(PROXY_NEED_MORE), "need-more");
	assert_string_equal(proxy_result_name(PROXY_OK), "ok");
	assert_string_equal(proxy_result_name(PROXY_BAD), "bad");
	assert_string_equal(proxy_result_name((enum proxy_result)42), "?");
}

/* why is optional. */
static void test_no_why(void **state)
{
	(void)state;
	struct proxy_header h;

	assert_int_equal(proxy_parse((const uint8_t *)"PROXY\n", 6, &h, NULL), PROXY_BAD);
	assert_int_equal(proxy_parse((const uint8_t *)"PROXY UNKNOWN\r\n", 15, &h, NULL), PROXY_OK);
}

/* ---- proxy_protocol_sources ---- */

static bool match(const struct proxy_sources *s, const char *addr)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		in6->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, addr, &in6->sin6_addr), 1);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		in->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, addr, &in->sin_addr), 1);
	}
	return proxy_sources_match(s, (const struct sockaddr *)&ss);
}

static void test_sources(void **state)
{
	(void)state;
	static const char *const yes[] = {
		"10.0.0.0", "10.1.2.3", "10.255.255.255", "192.168.1.5", "::1", "fd00::", "fd12:3456::1",
		"fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "::ffff:10.9.9.9", "::ffff:192.168.1.5",
	};
	static const char *const no[] = {
		"11.0.0.1", "9.255.255.255", "192.168.1.4", "192.168.1.6", "::2", "fe00::1", "fc00::1",
		"::ffff:11.0.0.1", "::ffff:192.168.1.6", "::10.1.2.3", "0.0.0.1",
	};
	struct proxy_sources *s;
	char err[256];
	struct sockaddr_un un = { .sun_family = AF_UNIX };

	assert_true(proxy_sources_parse("10.0.0.0/8, 192.168.1.5, ::1, fd00::/8", &s, err, sizeof(err)));
	assert_int_equal(proxy_sources_count(s), 4);
	for (size_t i = 0; i < ARRAY_SIZE(yes); i++)
		if (!match(s, yes[i]))
			fail_msg("%s should match", yes[i]);
	for (size_t i = 0; i < ARRAY_SIZE(no); i++)
		if (match(s, no[i]))
			fail_msg("%s should not match", no[i]);
	assert_false(proxy_sources_match(s, (const struct sockaddr *)&un));
	assert_false(proxy_sources_match(s, NULL));
	proxy_sources_free(s);

	/* separators: commas and blanks in any number */
	assert_true(proxy_sources_parse(" 10.0.0.1,10.0.0.2 ,\t::1\n, ,", &s, err, sizeof(err)));
	assert_int_equal(proxy_sources_count(s), 3);
	assert_true(match(s, "10.0.0.2") && match(s, "::1") && !match(s, "10.0.0.3"));
	proxy_sources_free(s);

	/* everyone, per family; ::/0 also takes IPv4-mapped peers as IPv6 */
	assert_true(proxy_sources_parse("0.0.0.0/0", &s, err, sizeof(err)));
	assert_true(match(s, "1.2.3.4") && match(s, "::ffff:1.2.3.4") && !match(s, "::1"));
	proxy_sources_free(s);
	assert_true(proxy_sources_parse("::/0", &s, err, sizeof(err)));
	assert_true(match(s, "::1") && match(s, "::ffff:1.2.3.4") && !match(s, "1.2.3.4"));
	proxy_sources_free(s);
	assert_true(proxy_sources_parse("::ffff:10.0.0.0/104 192.0.2.128/25", &s, err, sizeof(err)));
	assert_true(match(s, "::ffff:10.1.1.1") && match(s, "192.0.2.200") && !match(s, "192.0.2.1"));
	proxy_sources_free(s);

	/* empty: nobody */
	assert_true(proxy_sources_parse("", &s, err, sizeof(err)));
	assert_int_equal(proxy_sources_count(s), 0);
	assert_false(match(s, "10.0.0.1"));
	proxy_sources_free(s);
	assert_true(proxy_sources_parse(" , ", &s, err, sizeof(err)));
	assert_int_equal(proxy_sources_count(s), 0);
	proxy_sources_free(s);
	assert_false(match(NULL, "10.0.0.1"));
	assert_int_equal(proxy_sources_count(NULL), 0);
	proxy_sources_free(NULL);
}

static void test_sources_errors(void **state)
{
	(void)state;
	static const struct {
		const char *text;
		const char *err;      /* a part of the message, naming the item */
	} cases[] = {
		{ "10.0.0.1/8", "10.0.0.1/8 has bits set outside" },
		{ "10.0.0.0/8, 192.168.1.0/16", "192.168.1.0/16 has bits set outside" },
		{ "fd00::1/8", "fd00::1/8 has bits set outside" },
		{ "10.0.0.0/33", "'/33' after 10.0.0.0" },
		{ "::1/129", "'/129' after ::1" },
		{ "10.0.0.0/", "'/' after 10.0.0.0" },
		{ "10.0.0.0/-1", "'/-1'" },
		{ "10.0.0.0/+8", "'/+8'" },
		{ "10.0.0.0/8a", "'/8a'" },
		{ "10.0.0.0/0008", "'/0008'" },
		{ "10.0.0.0/8/8", "'/8/8'" },
		{ "localhost", "invalid IP address 'localhost'" },
		{ "10.0.0.1, db.example.com", "'db.example.com'" },
		{ "10.0.0.256", "'10.0.0.256'" },
		{ "10.0.0.1;10.0.0.2", "'10.0.0.1;10.0.0.2'" },
		{ "/8", "invalid IP address ''" },
		{ "1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa:bbbb:cccc:dddd:eeee", "'1111:2222:" },
	};
	struct proxy_sources *s = (struct proxy_sources *)&s;   /* not NULL: must be cleared */
	char err[256], tiny[8];

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		err[0] = '\0';
		assert_false(proxy_sources_parse(cases[i].text, &s, err, sizeof(err)));
		assert_null(s);
		if (!strstr(err, cases[i].err))
			fail_msg("\"%s\": got \"%s\", want \"%s\"", cases[i].text, err, cases[i].err);
		s = (struct proxy_sources *)&s;
	}
	assert_false(proxy_sources_parse("nope", &s, tiny, sizeof(tiny)));
	assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_prefixes),
		cmocka_unit_test(test_bytes_after),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_v1_bad),
		cmocka_unit_test(test_v1_limits),
		cmocka_unit_test(test_v2_bad),
		cmocka_unit_test(test_v2_max),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_no_why),
		cmocka_unit_test(test_sources),
		cmocka_unit_test(test_sources_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
