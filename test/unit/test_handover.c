/* pgcrew — unit tests for the record a server connection travels with when
 * it moves to another worker: every field, the tracked parameters, the
 * pool's other welcome parameters and the prepared statements come back as
 * they went; cut, padded or oversized records and names too long for their
 * fields are refused; the supervisor reads the pool's names alone. The
 * client record of an online restart likewise: identity, cancel key, login
 * secrets, parameters and statement names. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "auth/scram.h"
#include "handover.h"
#include "ipc.h"
#include "prepared.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/packet.h"
#include "varcache.h"

static struct handover_rec sample(void)
{
	struct handover_rec h;
	memset(&h, 0, sizeof(h));
	strcpy(h.db, "app");
	strcpy(h.user, "alice");
	h.id = 0x123456789aULL;
	/* the longest key protocol 3.2 allows (PostgreSQL 18 sends 32 bytes) */
	h.be.pid = 4242;
	h.be.len = CANCELKEY_MAX;
	for (int i = 0; i < CANCELKEY_MAX; i++)
		h.be.secret[i] = (uint8_t)(255 - i);
	h.proto_minor = 2;
	strcpy(h.addr, "127.0.0.1");
	strcpy(h.laddr, "127.0.0.2");
	h.port = 5432;
	h.lport = 40001;
	h.host_idx = 2;
	h.connect_time = 1000001;
	h.request_time = 2000002;
	h.last_used = (usec_t)1 << 40;
	h.sent_at = 3000003;
	h.vars_set = 0x11;
	h.check_due = 1;
	h.owner.pid = 0x03000001;
	h.owner.len = CANCELKEY_LONG;
	memset(h.owner.secret, 0xf0, CANCELKEY_LONG);
	return h;
}

struct others {
	int n;
	char pairs[4][2][32];
};

static void on_other(void *arg, const char *k, const char *v)
{
	struct others *o = arg;
	assert_true(o->n < 4);
	snprintf(o->pairs[o->n][0], 32, "%s", k);
	snprintf(o->pairs[o->n][1], 32, "%s", v);
	o->n++;
}

static char *other_params[] = { "server_version", "15.8", "integer_datetimes", "on" };

/* A client's and a server's tables holding one protocol-level statement
 * (prepared and answered), as a client and a server at rest have. */
static void one_statement_both(struct ps_client **pcp, struct ps_server **psp)
{
	struct ps_client *pc = NULL;
	struct ps_server *ps = NULL;
	struct pktbuf msg, inject, out;
	struct ps_rewrite rw;
	struct ps_counters cnt;
	struct ps_config cfg = { .max_stmts = 10 };
	uint8_t parse_complete[5] = { '1', 0, 0, 0, 4 };

	memset(&cnt, 0, sizeof(cnt));
	pktbuf_init(&msg, 64);
	pktbuf_init(&inject, 64);
	pktbuf_init(&out, 64);
	pktbuf_begin(&msg, 'P');
	pktbuf_put_string(&msg, "s1");
	pktbuf_put_string(&msg, "SELECT $1");
	pktbuf_put_u16(&msg, 1);
	pktbuf_put_u32(&msg, 23);
	pktbuf_finish(&msg);
	assert_int_equal(ps_client_msg(&pc, &ps, &cfg, 0, msg.buf, msg.len, (uint32_t)msg.len, true, true,
				       &inject, &rw, &cnt), PS_REWRITE);
	assert_int_equal(ps_server_msg(ps, pc, parse_complete, 5, 5, &out), PSR_FORWARD);
	pktbuf_free(&msg);
	pktbuf_free(&inject);
	pktbuf_free(&out);
	*pcp = pc;
	*psp = ps;
}

static struct ps_server *one_statement(void)
{
	struct ps_client *pc;
	struct ps_server *ps;
	one_statement_both(&pc, &ps);
	ps_client_free(pc);
	return ps;
}

static void encode(struct pktbuf *pb, const struct handover_rec *h, const struct varcache *vars,
		   const struct ps_server *ps)
{
	pktbuf_init(pb, 256);
	assert_true(handover_encode(pb, h, vars, other_params, 2, ps));
}

static void test_round_trip(void **state)
{
	(void)state;
	struct handover_rec h = sample(), back;
	struct varcache vars, got;
	struct others o = { 0 };
	struct ps_server *ps = one_statement(), *ps2 = NULL;
	struct pktbuf pb;
	char db[LEDGER_NAME], user[LEDGER_NAME];

	varcache_set_tracked("search_path");
	varcache_init(&vars);
	varcache_init(&got);
	assert_true(varcache_set(&vars, "client_encoding", "UTF8"));
	assert_true(varcache_set(&vars, "search_path", "app, public"));
	encode(&pb, &h, &vars, ps);

	assert_true(handover_decode(pb.buf, pb.len, &back, &got, on_other, &o, &ps2));
	assert_memory_equal(&back, &h, sizeof(h));
	assert_string_equal(varcache_get(&got, varcache_lookup("client_encoding")), "UTF8");
	assert_string_equal(varcache_get(&got, varcache_lookup("search_path")), "app, public");
	assert_null(varcache_get(&got, varcache_lookup("TimeZone")));
	assert_int_equal(o.n, 2);
	assert_string_equal(o.pairs[0][0], "server_version");
	assert_string_equal(o.pairs[0][1], "15.8");
	assert_string_equal(o.pairs[1][0], "integer_datetimes");
	assert_int_equal(ps_server_count(ps2), 1);
	assert_true(handover_names(pb.buf, pb.len, db, user));
	assert_string_equal(db, "app");
	assert_string_equal(user, "alice");

	/* without a callback the other parameters are skipped, not misread */
	struct ps_server *ps3 = NULL;
	varcache_clear(&got);
	assert_true(handover_decode(pb.buf, pb.len, &back, &got, NULL, NULL, &ps3));
	assert_int_equal(ps_server_count(ps3), 1);

	ps_server_free(ps);
	ps_server_free(ps2);
	ps_server_free(ps3);
	varcache_clear(&vars);
	varcache_clear(&got);
	pktbuf_free(&pb);
	varcache_set_tracked(NULL);
	assert_int_equal(ps_stmt_count(), 0);
}

/* Every cut of a valid record, and one byte too many, is refused. */
static void test_cut_and_padded(void **state)
{
	(void)state;
	struct handover_rec h = sample(), back;
	struct varcache vars;
	struct ps_server *ps = one_statement();
	struct pktbuf pb;

	varcache_init(&vars);
	assert_true(varcache_set(&vars, "DateStyle", "ISO, MDY"));
	encode(&pb, &h, &vars, ps);
	for (size_t cut = 0; cut < pb.len; cut++) {
		struct varcache got;
		struct ps_server *ps2 = NULL;
		varcache_init(&got);
		assert_false(handover_decode(pb.buf, cut, &back, &got, NULL, NULL, &ps2));
		ps_server_free(ps2);
		varcache_clear(&got);
	}
	pktbuf_put_u8(&pb, 0);
	struct varcache got;
	struct ps_server *ps2 = NULL;
	varcache_init(&got);
	assert_false(handover_decode(pb.buf, pb.len, &back, &got, NULL, NULL, &ps2));
	ps_server_free(ps2);
	varcache_clear(&got);
	ps_server_free(ps);
	varcache_clear(&vars);
	pktbuf_free(&pb);
	assert_int_equal(ps_stmt_count(), 0);
}

/* A name longer than its field is an error, never cut short. */
static void test_long_names(void **state)
{
	(void)state;
	char db[LEDGER_NAME], user[LEDGER_NAME], big[LEDGER_NAME + 2];
	struct pktbuf pb;
	memset(big, 'd', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	pktbuf_init(&pb, 256);
	pktbuf_put_string(&pb, big);
	pktbuf_put_string(&pb, "u");
	assert_false(handover_names(pb.buf, pb.len, db, user));
	pktbuf_reset(&pb);
	pktbuf_put_string(&pb, "d");
	assert_false(handover_names(pb.buf, pb.len, db, user));      /* no user */
	pktbuf_free(&pb);
}

/* A record that would not fit in one IPC message is not made. */
static void test_too_big(void **state)
{
	(void)state;
	struct handover_rec h = sample();
	struct varcache vars;
	struct pktbuf pb;
	char *huge = malloc(IPC_MAX_PAYLOAD + 1);
	char *other[2] = { "big", huge };

	memset(huge, 'x', IPC_MAX_PAYLOAD);
	huge[IPC_MAX_PAYLOAD] = 0;
	varcache_init(&vars);
	pktbuf_init(&pb, 256);
	assert_false(handover_encode(&pb, &h, &vars, other, 1, NULL));
	pktbuf_free(&pb);
	free(huge);
}


/* ---- clients (online restart) ---- */

static struct handover_client client_sample(void)
{
	struct handover_client h;
	memset(&h, 0, sizeof(h));
	strcpy(h.db, "app");
	strcpy(h.user, "owner");
	strcpy(h.login_user, "alice");
	strcpy(h.db_name, "app");
	strcpy(h.user_name, "alice");
	h.key.pid = 0x02abcdef;
	h.key.len = CANCELKEY_LONG;
	memset(h.key.secret, 0x12, CANCELKEY_LONG);
	h.proto_minor = 2;
	h.connect_time = 111;
	h.last_activity = (usec_t)1 << 41;
	h.sent_at = 333;
	h.is_unix = 1;
	h.linked = 1;
	h.passthrough_ok = 1;
	h.admin = 1;
	h.stats_only = 1;
	h.has_secret = 1;
	strcpy(h.secret, "SCRAM-SHA-256$4096:c2FsdA==$a2V5:a2V5");
	h.has_keys = 1;
	return h;
}

static struct scram_secret keys_sample(void)
{
	struct scram_secret k;
	memset(&k, 0, sizeof(k));
	k.iterations = 4096;
	k.salt_len = 16;
	memset(k.salt, 0x5a, k.salt_len);
	memset(k.stored_key, 1, sizeof(k.stored_key));
	memset(k.server_key, 2, sizeof(k.server_key));
	k.has_client_key = true;
	memset(k.client_key, 3, sizeof(k.client_key));
	return k;
}

static void client_encode(struct pktbuf *pb, const struct handover_client *h,
			  const struct scram_secret *k, const struct varcache *vars,
			  const struct ps_client *pc)
{
	pktbuf_init(pb, 256);
	assert_true(handover_client_encode(pb, h, k, vars, pc));
}

static void test_client_round_trip(void **state)
{
	(void)state;
	struct handover_client h = client_sample(), back;
	struct scram_secret k = keys_sample(), kback;
	struct varcache vars, got;
	struct ps_client *pc, *pc2 = NULL;
	struct ps_server *ps;
	struct pktbuf pb;

	one_statement_both(&pc, &ps);
	assert_true(ps_client_movable(pc));
	varcache_init(&vars);
	varcache_init(&got);
	assert_true(varcache_set(&vars, "application_name", "moved"));
	client_encode(&pb, &h, &k, &vars, pc);
	assert_true(handover_client_decode(pb.buf, pb.len, &back, &kback, &got, &pc2));
	assert_memory_equal(&back, &h, sizeof(h));
	assert_memory_equal(&kback, &k, sizeof(k));
	assert_string_equal(varcache_get(&got, varcache_lookup("application_name")), "moved");
	assert_int_equal(ps_client_count(pc2), 1);
	ps_client_free(pc2);
	pktbuf_free(&pb);

	/* no secret, no keys, no statements: none is read back */
	h.has_secret = h.has_keys = 0;
	memset(h.secret, 0, sizeof(h.secret));
	pc2 = NULL;
	client_encode(&pb, &h, NULL, &vars, NULL);
	assert_true(handover_client_decode(pb.buf, pb.len, &back, &kback, &got, &pc2));
	assert_memory_equal(&back, &h, sizeof(h));
	assert_null(pc2);
	pktbuf_free(&pb);

	ps_client_free(pc);
	ps_server_free(ps);
	varcache_clear(&vars);
	varcache_clear(&got);
	assert_int_equal(ps_stmt_count(), 0);
}

/* Every cut of a client record, one byte too many, and a name longer than
 * its field are refused. */
static void test_client_cut_and_long(void **state)
{
	(void)state;
	struct handover_client h = client_sample(), back;
	struct scram_secret k = keys_sample(), kback;
	struct varcache vars, got;
	struct ps_client *pc, *pc2;
	struct ps_server *ps;
	struct pktbuf pb;

	one_statement_both(&pc, &ps);
	varcache_init(&vars);
	assert_true(varcache_set(&vars, "TimeZone", "UTC"));
	client_encode(&pb, &h, &k, &vars, pc);
	for (size_t cut = 0; cut <= pb.len; cut++) {
		size_t len = cut;
		if (cut == pb.len) {
			pktbuf_put_u8(&pb, 0);      /* one byte too many */
			len = pb.len;
		}
		pc2 = NULL;
		varcache_init(&got);
		assert_false(handover_client_decode(pb.buf, len, &back, &kback, &got, &pc2));
		ps_client_free(pc2);
		varcache_clear(&got);
		if (len != cut)
			break;
	}
	pktbuf_free(&pb);

	char big[LEDGER_NAME + 1];
	memset(big, 'u', LEDGER_NAME);
	big[LEDGER_NAME] = 0;
	pktbuf_init(&pb, 256);
	pktbuf_put_string(&pb, "app");
	pktbuf_put_string(&pb, big);
	varcache_init(&got);
	pc2 = NULL;
	assert_false(handover_client_decode(pb.buf, pb.len, &back, &kback, &got, &pc2));
	assert_null(pc2);
	varcache_clear(&got);
	pktbuf_free(&pb);

	ps_client_free(pc);
	ps_server_free(ps);
	varcache_clear(&vars);
	assert_int_equal(ps_stmt_count(), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_cut_and_padded),
		cmocka_unit_test(test_long_names),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_client_round_trip),
		cmocka_unit_test(test_client_cut_and_long),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
