/* pgcrew — fuzz target: the prepared-statement rewriter (src/proto/prepared.c) fed
 * an interleaving of client messages and server replies. Each unit of the
 * input is one direction byte (even: client, odd: server) and one framed
 * message. Checks beyond the sanitizers: a rewritten message's length word
 * matches its new size, and freeing the client and server leaves no shared
 * statement behind. */
#include "fuzz.h"
#include "prepared.h"
#include "proto/build.h"
#include "proto/packet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_rewrite(const struct ps_rewrite *rw, const uint8_t *msg, uint32_t len)
{
	if (rw->old_len > len || rw->head_len > PS_HEAD_MAX || rw->head_len < 5)
		abort();
	uint32_t newlen = (uint32_t)rw->head[1] << 24 | (uint32_t)rw->head[2] << 16 |
			  (uint32_t)rw->head[3] << 8 | rw->head[4];
	/* The head may be another message type (a Bind of an unknown name
	 * becomes a Describe the server refuses in order), but its length word
	 * must match the bytes that follow. */
	if (newlen + 1 != rw->head_len + (len - rw->old_len)) {
		fprintf(stderr, "rewrite of %c: len %u old_len %u head_len %u length word %u\n",
			msg[0], len, rw->old_len, rw->head_len, newlen);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ps_client *pc = NULL;
	struct ps_server *ps = NULL;
	struct ps_counters cnt = { 0 };
	struct ps_rewrite rw;
	struct pktbuf inject, out;
	uint32_t owed = 0;

	if (size < 1)
		return 0;
	struct ps_config cfg = { .max_stmts = 1 + (data[0] & 3), .unnamed_cache = data[0] & 4,
				 .sql = data[0] & 8 };
	data++;
	size--;
	pktbuf_init(&inject, 256);
	pktbuf_init(&out, 256);
	for (int i = 0; i < 512 && size > 1; i++) {
		bool from_server = data[0] & 1;
		struct pkt_hdr h;
		const char *why;
		if (pkt_parse_header(data + 1, size - 1, false, 1u << 20, &h, &why) != PKT_OK ||
		    h.len > size - 1)
			break;
		const uint8_t *msg = data + 1;
		if (!from_server) {
			pktbuf_reset(&inject);
			enum ps_verdict v = ps_client_msg(&pc, &ps, &cfg, owed, msg, h.len, h.len, true,
							  true, &inject, &rw, &cnt);
			if (v == PS_REWRITE)
				check_rewrite(&rw, msg, h.len);
			if (v == PS_BAD)
				break;   /* the client is closed */
			if ((v == PS_PASS || v == PS_REWRITE || v == PS_REPLACE) &&
			    (msg[0] == 'S' || msg[0] == 'Q'))
				owed++;
		} else if (ps_server_watch(ps, pc, msg[0]) && ps) {
			pktbuf_reset(&out);
			(void)ps_server_msg(ps, pc, msg, h.len, h.len, &out);
			if (msg[0] == 'Z' && owed)
				owed--;
		}
		data += 1 + h.len;
		size -= 1 + h.len;
	}
	ps_client_free(pc);
	ps_server_free(ps);
	pktbuf_free(&inject);
	pktbuf_free(&out);
	if (ps_stmt_count() != 0)
		abort();   /* a statement outlived every holder */
	return 0;
}
