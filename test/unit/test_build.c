/* pgcrew — unit tests for proto/build: every message writer against
 * hand-written wire bytes, heap growth, fixed-buffer overflow and the sticky
 * error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto/build.h"
#include "proto/packet.h"

static void expect_bytes(const struct pktbuf *pb, const uint8_t *want, size_t n)
{
	assert_false(pktbuf_failed(pb));
	assert_false(pb->in_msg);
	assert_int_equal(pb->len, n);
	assert_memory_equal(pb->buf, want, n);
}

#define EXPECT(pb, ...) do { \
	static const uint8_t want_[] = { __VA_ARGS__ }; \
	expect_bytes((pb), want_, sizeof(want_)); \
} while (0)

static int setup(void **state)
{
	static struct pktbuf pb;
	pktbuf_init(&pb, 16);
	*state = &pb;
	return 0;
}

static int teardown(void **state)
{
	pktbuf_free(*state);
	return 0;
}

static void test_auth(void **state)
{
	struct pktbuf *pb = *state;
	static const uint8_t salt[4] = { 0xA1, 0xB2, 0xC3, 0xD4 };

	pkt_write_auth_ok(pb);
	EXPECT(pb, 'R', 0, 0, 0, 8, 0, 0, 0, 0);
	pktbuf_reset(pb);
	pkt_write_auth_cleartext(pb);
	EXPECT(pb, 'R', 0, 0, 0, 8, 0, 0, 0, 3);
	pktbuf_reset(pb);
	pkt_write_auth_md5(pb, salt);
	EXPECT(pb, 'R', 0, 0, 0, 12, 0, 0, 0, 5, 0xA1, 0xB2, 0xC3, 0xD4);
	pktbuf_reset(pb);
	pkt_write_auth_sasl_continue(pb, "r=ab", 4);
	EXPECT(pb, 'R', 0, 0, 0, 12, 0, 0, 0, 11, 'r', '=', 'a', 'b');
	pktbuf_reset(pb);
	pkt_write_auth_sasl_final(pb, "v=x", 3);
	EXPECT(pb, 'R', 0, 0, 0, 11, 0, 0, 0, 12, 'v', '=', 'x');
}

static void test_auth_sasl(void **state)
{
	struct pktbuf *pb = *state;

	pkt_write_auth_sasl(pb, false);
	EXPECT(pb, 'R', 0, 0, 0, 23, 0, 0, 0, 10,
	       'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '2', '5', '6', 0, 0);
	pktbuf_reset(pb);
	pkt_write_auth_sasl(pb, true);
	EXPECT(pb, 'R', 0, 0, 0, 42, 0, 0, 0, 10,
	       'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '2', '5', '6', '-', 'P', 'L', 'U', 'S', 0,
	       'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '2', '5', '6', 0, 0);
}

static void test_session_messages(void **state)
{
	struct pktbuf *pb = *state;

	pkt_write_parameter_status(pb, "TimeZone", "UTC");
	EXPECT(pb, 'S', 0, 0, 0, 17, 'T', 'i', 'm', 'e', 'Z', 'o', 'n', 'e', 0, 'U', 'T', 'C', 0);
	pktbuf_reset(pb);
	struct cancelkey k = { .pid = 0x01020304, .len = 4, .secret = { 0xFF, 0xFE, 0xFD, 0xFC } };
	pkt_write_backend_key(pb, &k);
	EXPECT(pb, 'K', 0, 0, 0, 12, 1, 2, 3, 4, 0xFF, 0xFE, 0xFD, 0xFC);
	pktbuf_reset(pb);
	k.len = 6;              /* protocol 3.2: the secret runs to the end */
	k.secret[4] = 7;
	k.secret[5] = 8;
	pkt_write_backend_key(pb, &k);
	EXPECT(pb, 'K', 0, 0, 0, 14, 1, 2, 3, 4, 0xFF, 0xFE, 0xFD, 0xFC, 7, 8);
	pktbuf_reset(pb);
	pkt_write_ready(pb, 'T');
	EXPECT(pb, 'Z', 0, 0, 0, 5, 'T');
	pktbuf_reset(pb);
	pkt_write_query(pb, "SELECT 1");
	EXPECT(pb, 'Q', 0, 0, 0, 13, 'S', 'E', 'L', 'E', 'C', 'T', ' ', '1', 0);
	pktbuf_reset(pb);
	pkt_write_terminate(pb);
	EXPECT(pb, 'X', 0, 0, 0, 4);
	pktbuf_reset(pb);
	pkt_write_notice(pb, "WARNING", "01000", "hi");
	EXPECT(pb, 'N', 0, 0, 0, 34, 'S', 'W', 'A', 'R', 'N', 'I', 'N', 'G', 0,
	       'V', 'W', 'A', 'R', 'N', 'I', 'N', 'G', 0, 'C', '0', '1', '0', '0', '0', 0,
	       'M', 'h', 'i', 0, 0);
}

static void test_password_messages(void **state)
{
	struct pktbuf *pb = *state;

	pkt_write_password(pb, "pw");
	EXPECT(pb, 'p', 0, 0, 0, 7, 'p', 'w', 0);
	pktbuf_reset(pb);
	pkt_write_sasl_initial(pb, "SCRAM-SHA-256", "n,,", 3);
	EXPECT(pb, 'p', 0, 0, 0, 25, 'S', 'C', 'R', 'A', 'M', '-', 'S', 'H', 'A', '-', '2', '5', '6', 0,
	       0, 0, 0, 3, 'n', ',', ',');
	pktbuf_reset(pb);
	pkt_write_sasl_initial(pb, "X", NULL, 0);
	EXPECT(pb, 'p', 0, 0, 0, 10, 'X', 0, 0xFF, 0xFF, 0xFF, 0xFF);
	pktbuf_reset(pb);
	pkt_write_sasl_response(pb, "c=biws", 6);
	EXPECT(pb, 'p', 0, 0, 0, 10, 'c', '=', 'b', 'i', 'w', 's');
}

static void test_startup_messages(void **state)
{
	struct pktbuf *pb = *state;
	static const char *const kv[] = { "user", "u", "database", "d", NULL };
	static const char *const odd[] = { "user", NULL };

	pkt_write_startup(pb, 0, kv);
	EXPECT(pb, 0, 0, 0, 27, 0, 3, 0, 0, 'u', 's', 'e', 'r', 0, 'u', 0,
	       'd', 'a', 't', 'a', 'b', 'a', 's', 'e', 0, 'd', 0, 0);
	pktbuf_reset(pb);
	pkt_write_ssl_request(pb);
	EXPECT(pb, 0, 0, 0, 8, 0x04, 0xD2, 0x16, 0x2F);
	pktbuf_reset(pb);
	struct cancelkey k = { .pid = 42, .len = 4, .secret = { 0x0A, 0x0B, 0x0C, 0x0D } };
	pkt_write_cancel_request(pb, &k);
	EXPECT(pb, 0, 0, 0, 16, 0x04, 0xD2, 0x16, 0x2E, 0, 0, 0, 42, 0x0A, 0x0B, 0x0C, 0x0D);
	pktbuf_reset(pb);
	k.len = 5;
	k.secret[4] = 0x0E;
	pkt_write_cancel_request(pb, &k);
	EXPECT(pb, 0, 0, 0, 17, 0x04, 0xD2, 0x16, 0x2E, 0, 0, 0, 42, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E);
	pktbuf_reset(pb);
	pkt_write_startup(pb, 2, kv);           /* 3.2 */
	assert_int_equal(pb->buf[6], 0);
	assert_int_equal(pb->buf[7], 2);
	pktbuf_reset(pb);
	pkt_write_startup(pb, 0, odd);
	assert_true(pktbuf_failed(pb));
}

static void test_negotiate_version(void **state)
{
	struct pktbuf *pb = *state;
	static const char *const opts[] = { "_pq_.a", "_pq_.bc" };

	pkt_write_negotiate_version(pb, 0, opts, 2);
	EXPECT(pb, 'v', 0, 0, 0, 27, 0, 3, 0, 0, 0, 0, 0, 2,
	       '_', 'p', 'q', '_', '.', 'a', 0, '_', 'p', 'q', '_', '.', 'b', 'c', 0);
	pktbuf_reset(pb);
	pkt_write_negotiate_version(pb, 2, NULL, 0);
	EXPECT(pb, 'v', 0, 0, 0, 12, 0, 3, 0, 2, 0, 0, 0, 0);
}

/* Several messages appended back to back stay individually framed. */
static void test_batch_and_growth(void **state)
{
	struct pktbuf *pb = *state;
	char big[5000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';

	pkt_write_auth_ok(pb);
	pkt_write_query(pb, big);
	pkt_write_ready(pb, 'I');
	assert_false(pktbuf_failed(pb));
	assert_true(pb->cap >= pb->len);

	size_t off = 0;
	static const uint8_t types[] = { 'R', 'Q', 'Z' };
	for (int i = 0; i < 3; i++) {
		struct pkt_hdr h;
		assert_int_equal(pkt_parse_header(pb->buf + off, pb->len - off, false, 1u << 20, &h, NULL), PKT_OK);
		assert_int_equal(h.type, types[i]);
		off += h.len;
	}
	assert_int_equal(off, pb->len);
	assert_int_equal(pb->len, 9 + 5 + sizeof(big) + 6);
	assert_memory_equal(pb->buf + 14, big, sizeof(big));
}

/* A fixed buffer refuses to grow: failure is flagged, no byte lands past cap,
 * later writes do nothing, and reset makes it usable again. */
static void test_fixed_overflow(void **state)
{
	(void)state;
	uint8_t storage[16];
	struct pktbuf pb;

	memset(storage, 0xEE, sizeof(storage));
	pktbuf_init_fixed(&pb, storage, 10);
	pkt_write_ready(&pb, 'I');                  /* 6 bytes fit */
	assert_false(pktbuf_failed(&pb));
	pkt_write_query(&pb, "SELECT 1");           /* 14 more do not */
	assert_true(pktbuf_failed(&pb));
	assert_true(pb.len <= 10);
	for (size_t i = 10; i < sizeof(storage); i++)
		assert_int_equal(storage[i], 0xEE);

	size_t len_after_fail = pb.len;
	pkt_write_terminate(&pb);                   /* would fit, but sticky */
	pktbuf_put_u8(&pb, 1);
	assert_true(pktbuf_failed(&pb));
	assert_int_equal(pb.len, len_after_fail);

	pktbuf_reset(&pb);
	assert_false(pktbuf_failed(&pb));
	pkt_write_terminate(&pb);
	EXPECT(&pb, 'X', 0, 0, 0, 4);
	pktbuf_free(&pb);                           /* must not free caller storage */
	assert_int_equal(storage[0], 'X');
}

static void test_misuse(void **state)
{
	struct pktbuf *pb = *state;

	pktbuf_finish(pb);                          /* finish without begin */
	assert_true(pktbuf_failed(pb));
	pktbuf_reset(pb);
	pktbuf_begin(pb, 'Q');
	pktbuf_begin(pb, 'Q');                      /* nested begin */
	assert_true(pktbuf_failed(pb));
	pktbuf_reset(pb);
	pktbuf_begin(pb, 'd');
	pktbuf_put_u16(pb, 0xBEEF);
	pktbuf_put_u32(pb, 7);
	pktbuf_put_bytes(pb, NULL, 0);
	pktbuf_finish(pb);
	EXPECT(pb, 'd', 0, 0, 0, 10, 0xBE, 0xEF, 0, 0, 0, 7);
}

/* The heap limit is enforced: a put beyond max_len fails instead of growing. */
static void test_heap_limit(void **state)
{
	(void)state;
	struct pktbuf pb;
	static const uint8_t chunk[64];

	pktbuf_init(&pb, 8);
	pb.max_len = 100;                           /* shrink the 1 GB limit for the test */
	pktbuf_begin(&pb, 'd');
	pktbuf_put_bytes(&pb, chunk, sizeof(chunk));
	assert_false(pktbuf_failed(&pb));
	pktbuf_put_bytes(&pb, chunk, sizeof(chunk));
	assert_true(pktbuf_failed(&pb));
	assert_true(pb.cap <= 100);
	assert_int_equal(pb.len, 5 + 64);
	pktbuf_free(&pb);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_auth, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth_sasl, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_messages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_password_messages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_startup_messages, setup, teardown),
		cmocka_unit_test_setup_teardown(test_negotiate_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_and_growth, setup, teardown),
		cmocka_unit_test(test_fixed_overflow),
		cmocka_unit_test_setup_teardown(test_misuse, setup, teardown),
		cmocka_unit_test(test_heap_limit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
