/* pgcrew — unit tests for proto/cancelkey: the layout of the keys pgcrew
 * gives clients (lengths per protocol version, the worker and peer a key
 * carries, which bits are random), routing a CancelRequest's key, the
 * exact match, and keys in hand-over records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/packet.h"

static void fill(uint8_t rnd[CANCELKEY_RANDOM], uint8_t v)
{
	memset(rnd, v, CANCELKEY_RANDOM);
}

static void as_wire(struct cancelkey *k, const struct cancelkey_own *own)
{
	memset(k, 0, sizeof(*k));
	cancelkey_from_own(k, own);
}

/* Protocol 3.0 and 3.1 get PgBouncer's 4-byte key, 3.2 pgcrew's 32; the
 * worker sits in pid bits 24-30 of both; bit 31 stays clear. */
static void test_lengths_and_layout(void **state)
{
	static const struct {
		int minor, worker, peer;
		size_t len;
	} cases[] = {
		{ 0, 0, 0, 4 }, { 1, 5, 0, 4 }, { 2, 0, 0, 32 }, { 2, 127, 0, 32 }, { 2, 3, 16383, 32 },
		{ 0, 127, 16383, 4 }, { 3, 1, 1, 32 },
	};
	uint8_t rnd[CANCELKEY_RANDOM];
	(void)state;
	fill(rnd, 0xff);
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cancelkey_own own;
		struct cancelkey k;
		int worker, peer;
		print_message("3.%d worker %d peer %d\n", cases[i].minor, cases[i].worker, cases[i].peer);
		cancelkey_make(&own, cases[i].minor, cases[i].worker, cases[i].peer, rnd);
		assert_int_equal(own.len, cases[i].len);
		assert_int_equal(own.pid >> 31, 0);
		assert_int_equal(own.pid >> 24, cases[i].worker);
		assert_int_equal(own.pid & 0xffffff, 0xffffff);
		as_wire(&k, &own);
		assert_true(cancelkey_route(&k, &worker, &peer));
		assert_int_equal(worker, cases[i].worker);
		if (cases[i].peer)
			assert_int_equal(peer, cases[i].peer);
		if (own.len == CANCELKEY_LONG) {
			assert_int_equal(own.secret[0], CANCELKEY_TAG);
			assert_int_equal(own.secret[1], cases[i].worker);
			assert_int_equal(own.secret[2] << 8 | own.secret[3], cases[i].peer);
			assert_int_equal(peer, cases[i].peer);       /* 0 without [peers] */
		}
	}
}

/* Which bits come from the CSPRNG: every random byte changes the key, the
 * routing fields never come from it. A long key has 28 random bytes (224
 * bits), a short one 32 bits (18 with [peers]), both beside the pid's 24. */
static void test_random_bits(void **state)
{
	(void)state;
	for (int minor = 0; minor <= 2; minor += 2) {
		struct cancelkey_own a, b;
		uint8_t rnd[CANCELKEY_RANDOM];
		size_t used = minor == 2 ? CANCELKEY_RANDOM : 7;
		fill(rnd, 0);
		cancelkey_make(&a, minor, 9, 0, rnd);
		for (size_t i = 0; i < CANCELKEY_RANDOM; i++) {
			fill(rnd, 0);
			rnd[i] = 0x81;
			cancelkey_make(&b, minor, 9, 0, rnd);
			bool differs = a.pid != b.pid || memcmp(a.secret, b.secret, a.len) != 0;
			assert_int_equal(differs, i < used);
			assert_int_equal(b.pid >> 24, 9);
		}
	}
	/* The long key's random part is rnd[3..30] as it came. */
	uint8_t rnd[CANCELKEY_RANDOM];
	struct cancelkey_own k;
	for (size_t i = 0; i < CANCELKEY_RANDOM; i++)
		rnd[i] = (uint8_t)(i + 1);
	cancelkey_make(&k, 2, 0, 0, rnd);
	assert_memory_equal(k.secret + 4, rnd + 3, CANCELKEY_LONG - 4);
	assert_int_equal(k.pid, 0x010203);
	/* With [peers] a short key keeps 18 random bits under the peer_id. */
	fill(rnd, 0xff);
	cancelkey_make(&k, 0, 0, 1, rnd);
	assert_int_equal((uint32_t)k.secret[0] << 24 | k.secret[1] << 16 | k.secret[2] << 8 | k.secret[3],
			 1u << 18 | 0x3ffff);
}

/* Keys pgcrew never makes route nowhere: other lengths, another tag, a
 * worker or peer out of range. */
static void test_foreign_keys(void **state)
{
	static const size_t lengths[] = { 5, 16, 31, 33, 64, 255, 256 };
	struct cancelkey k = { .pid = 1 << 24, .len = 32 };
	int worker, peer;
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(lengths); i++) {
		k.len = (uint16_t)lengths[i];
		memset(k.secret, 0, sizeof(k.secret));
		k.secret[0] = CANCELKEY_TAG;
		assert_false(cancelkey_route(&k, &worker, &peer));
	}
	k.len = 32;
	k.secret[0] = CANCELKEY_TAG ^ 1;
	assert_false(cancelkey_route(&k, &worker, &peer));
	k.secret[0] = CANCELKEY_TAG;
	k.secret[1] = 128;
	assert_false(cancelkey_route(&k, &worker, &peer));
	k.secret[1] = 0;
	k.secret[2] = 0x40;          /* peer 16384 */
	assert_false(cancelkey_route(&k, &worker, &peer));
	k.secret[2] = 0;
	assert_true(cancelkey_route(&k, &worker, &peer));
}

/* Only the exact key matches: same pid, same length, every byte. */
static void test_matches(void **state)
{
	struct cancelkey_own own;
	struct cancelkey k;
	uint8_t rnd[CANCELKEY_RANDOM];
	(void)state;
	for (size_t i = 0; i < CANCELKEY_RANDOM; i++)
		rnd[i] = (uint8_t)(i * 37 + 11);
	cancelkey_make(&own, 2, 4, 0, rnd);
	as_wire(&k, &own);
	assert_true(cancelkey_matches(&own, &k));
	for (size_t i = 0; i < CANCELKEY_LONG; i++) {
		k.secret[i] ^= 0x01;
		assert_false(cancelkey_matches(&own, &k));
		k.secret[i] ^= 0x01;
	}
	k.pid ^= 1;
	assert_false(cancelkey_matches(&own, &k));
	k.pid ^= 1;
	k.len = 4;                           /* the long key cut to 3.0's length */
	assert_false(cancelkey_matches(&own, &k));
	k.len = 33;                          /* or one byte longer */
	assert_false(cancelkey_matches(&own, &k));
	k.len = 32;
	assert_true(cancelkey_matches(&own, &k));
	/* A client without a key (len 0) matches nothing, not even len 0. */
	struct cancelkey_own none = { .pid = k.pid };
	k.len = 0;
	assert_false(cancelkey_matches(&none, &k));
}

/* Keys from the wire: 4 to 256 bytes; exactly 4 in a 3.0/3.1
 * BackendKeyData. Only pgcrew's lengths become a client's key. */
static void test_set_and_own(void **state)
{
	static const struct {
		int minor;
		size_t len;
		bool ok;
	} cases[] = {
		{ 0, 4, true }, { 0, 32, false }, { 1, 5, false }, { 2, 3, false }, { 2, 4, true },
		{ 2, 32, true }, { 2, 256, true }, { 2, 257, false }, { 0, 0, false },
	};
	uint8_t bytes[300];
	(void)state;
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)i;
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		struct cancelkey k;
		assert_int_equal(cancelkey_set(&k, cases[i].minor, 77, bytes, cases[i].len), cases[i].ok);
		if (!cases[i].ok)
			continue;
		assert_int_equal(k.pid, 77);
		assert_int_equal(k.len, cases[i].len);
		assert_memory_equal(k.secret, bytes, cases[i].len);
		struct cancelkey_own own;
		bool ours = cases[i].len == 4 || cases[i].len == 32;
		assert_int_equal(cancelkey_to_own(&own, &k), ours);
		if (ours)
			assert_true(cancelkey_matches(&own, &k));
	}
}

/* In a record: pid, 16-bit length, secret; length 0 is "no key"; a
 * length outside 4..256 or a cut record is refused. */
static void test_records(void **state)
{
	static const size_t lengths[] = { 0, 4, 32, 256 };
	(void)state;
	for (size_t i = 0; i < ARRAY_SIZE(lengths); i++) {
		struct cancelkey k = { .pid = 0xa1b2c3d4, .len = (uint16_t)lengths[i] }, back;
		struct pktbuf pb;
		struct pkt_reader r;
		for (size_t j = 0; j < lengths[i]; j++)
			k.secret[j] = (uint8_t)(j ^ 0x5a);
		pktbuf_init(&pb, 16);
		cancelkey_put(&pb, &k);
		assert_int_equal(pb.len, 6 + lengths[i]);
		pkt_reader_init(&r, pb.buf, pb.len);
		assert_true(cancelkey_get(&r, &back));
		assert_true(pkt_get_end(&r));
		assert_int_equal(back.pid, k.pid);
		assert_int_equal(back.len, k.len);
		assert_memory_equal(back.secret, k.secret, k.len);
		for (size_t cut = 0; cut < pb.len; cut++) {
			pkt_reader_init(&r, pb.buf, cut);
			assert_false(cancelkey_get(&r, &back));
		}
		pktbuf_free(&pb);
	}
	static const uint16_t bad[] = { 1, 3, 257, 0xffff };
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		uint8_t rec[6 + 300] = { 0, 0, 0, 1, (uint8_t)(bad[i] >> 8), (uint8_t)bad[i] };
		struct pkt_reader r;
		struct cancelkey back;
		pkt_reader_init(&r, rec, sizeof(rec));
		assert_false(cancelkey_get(&r, &back));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lengths_and_layout),
		cmocka_unit_test(test_random_bits),
		cmocka_unit_test(test_foreign_keys),
		cmocka_unit_test(test_matches),
		cmocka_unit_test(test_set_and_own),
		cmocka_unit_test(test_records),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
