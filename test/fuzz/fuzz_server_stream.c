/* pgcrew — fuzz target: a whole server byte stream as pgcrew reads it from
 * PostgreSQL: typed messages framed by pkt_parse_header; authentication
 * requests drive a SCRAM client (the hostile-server cases of PgBouncer's
 * CVE-2026-6664/6665), ErrorResponse/NoticeResponse go through the field
 * parser (no SQLSTATE must not crash), ParameterStatus into a varcache. */
#include "fuzz.h"
#include "auth/scram.h"
#include "proto/error.h"
#include "proto/packet.h"
#include "varcache.h"

#include <stdlib.h>
#include <string.h>

/* PBKDF2 over a hostile iteration count is correct but slow; the parser is
 * what is fuzzed, so inputs asking for more than this are cut short. */
#define FUZZ_MAX_ITERATIONS 4096

static bool cheap_iterations(const uint8_t *msg, size_t len)
{
	for (size_t i = 0; i + 2 < len; i++) {
		if ((i == 0 || msg[i - 1] == ',') && msg[i] == 'i' && msg[i + 1] == '=') {
			long n = 0;
			for (size_t j = i + 2; j < len && msg[j] >= '0' && msg[j] <= '9' && n <= FUZZ_MAX_ITERATIONS; j++)
				n = n * 10 + (msg[j] - '0');
			return n <= FUZZ_MAX_ITERATIONS;
		}
	}
	return true;
}

struct session {
	struct scram_client scram;
	bool started;
	struct varcache vars;
};

static void on_auth(struct session *s, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	char out[1024];
	size_t outn;
	const char *errmsg;

	pkt_reader_init(&r, body, len);
	int32_t code = pkt_get_i32(&r);
	const uint8_t *rest = body + (len >= 4 ? 4 : len);
	size_t rlen = len >= 4 ? len - 4 : 0;
	if (code == 10) {            /* AuthenticationSASL: mechanism list */
		for (const char *m = pkt_get_string(&r); *m; m = pkt_get_string(&r))
			;   /* "" ends the list, and is also what a failed read gives */
		memset(&s->scram, 0, sizeof(s->scram));
		s->started = scram_client_first(&s->scram, out, sizeof(out), &outn) == 0;
	} else if (code == 11 && s->started && cheap_iterations(rest, rlen)) {
		(void)scram_client_final(&s->scram, (const char *)rest, rlen, "pw", NULL, out,
					 sizeof(out), &outn, &errmsg);
	} else if (code == 12 && s->started) {
		(void)scram_client_verify(&s->scram, (const char *)rest, rlen, &errmsg);
	} else if (code == 5) {       /* MD5 salt */
		(void)pkt_get_bytes(&r, 4);
	}
}

static void on_param(struct session *s, const uint8_t *body, size_t len)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	const char *name = pkt_get_string(&r);
	const char *value = pkt_get_string(&r);
	if (name && value && pkt_get_end(&r))
		(void)varcache_set(&s->vars, name, value);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool tracked;
	struct session s = { .started = false };
	struct pkt_hdr h;
	const char *why;

	if (!tracked) {
		varcache_set_tracked("search_path");
		tracked = true;
	}
	varcache_init(&s.vars);
	scram_client_set_test_nonce("fuzzclientnonce", NULL);
	for (int i = 0; i < 4096; i++) {
		if (pkt_parse_header(data, size, false, 1u << 20, &h, &why) != PKT_OK || h.len > size)
			break;
		const uint8_t *body = data + h.hdr_len;
		size_t blen = h.len - h.hdr_len;
		struct pg_error e;
		char st;
		switch (h.type) {
		case 'R': on_auth(&s, body, blen); break;
		case 'E': case 'N': (void)pkt_parse_error(body, blen, &e); break;
		case 'Z': (void)pkt_ready_status(data, h.len, &st); break;
		case 'S': on_param(&s, body, blen); break;
		default: break;
		}
		data += h.len;
		size -= h.len;
	}
	varcache_clear(&s.vars);
	return 0;
}
