/* pgcrew — encoding of a server connection's state for a move between
 * workers (see handover.h). Strings are NUL-terminated, numbers network
 * order; times go as they are, since every process reads the same
 * monotonic clock. */
#include "handover.h"
#include "ipc.h"
#include "prepared.h"
#include "proto/build.h"
#include "proto/packet.h"
#include "util.h"
#include "varcache.h"

static void put_u64(struct pktbuf *pb, uint64_t v)
{
	pktbuf_put_u32(pb, (uint32_t)(v >> 32));
	pktbuf_put_u32(pb, (uint32_t)v);
}

static uint64_t get_u64(struct pkt_reader *r)
{
	uint64_t hi = pkt_get_u32(r);
	return hi << 32 | pkt_get_u32(r);
}

bool handover_encode(struct pktbuf *pb, const struct handover_rec *h, const struct varcache *vars,
		     char *const *other, int n_other, const struct ps_server *ps)
{
	pktbuf_put_string(pb, h->db);
	pktbuf_put_string(pb, h->user);
	put_u64(pb, h->id);
	pktbuf_put_u32(pb, h->be_pid);
	pktbuf_put_u32(pb, h->be_key);
	pktbuf_put_string(pb, h->addr);
	pktbuf_put_string(pb, h->laddr);
	pktbuf_put_u32(pb, (uint32_t)h->port);
	pktbuf_put_u32(pb, (uint32_t)h->lport);
	pktbuf_put_u32(pb, (uint32_t)h->host_idx);
	put_u64(pb, (uint64_t)h->connect_time);
	put_u64(pb, (uint64_t)h->request_time);
	put_u64(pb, (uint64_t)h->last_used);
	put_u64(pb, (uint64_t)h->sent_at);
	pktbuf_put_u32(pb, h->vars_set);
	pktbuf_put_u8(pb, h->used);
	for (int i = 0; i < varcache_count(); i++) {
		const char *v = varcache_get(vars, i);
		if (!v)
			continue;
		pktbuf_put_string(pb, varcache_name(i));
		pktbuf_put_string(pb, v);
	}
	pktbuf_put_string(pb, "");     /* end of parameters */
	for (int i = 0; i < n_other; i++) {
		pktbuf_put_string(pb, other[2 * i]);
		pktbuf_put_string(pb, other[2 * i + 1]);
	}
	pktbuf_put_string(pb, "");
	ps_server_export(ps, pb);
	return !pktbuf_failed(pb) && pb->len <= IPC_MAX_PAYLOAD;
}

/* A string into a fixed field: one that does not fit is an error, never cut. */
static bool get_str(struct pkt_reader *r, char *dst, size_t cap)
{
	const char *s = pkt_get_string(r);
	if (r->failed || strlen(s) >= cap)
		return false;
	memcpy(dst, s, strlen(s) + 1);
	return true;
}

static bool get_names(struct pkt_reader *r, struct handover_rec *h)
{
	return get_str(r, h->db, sizeof(h->db)) && get_str(r, h->user, sizeof(h->user));
}

/* Name, value pairs up to an empty name, each to fn. */
static bool get_pairs(struct pkt_reader *r, handover_param_fn fn, void *arg)
{
	for (;;) {
		const char *k = pkt_get_string(r);
		if (r->failed)
			return false;
		if (!*k)
			return true;
		const char *v = pkt_get_string(r);
		if (r->failed)
			return false;
		if (fn)
			fn(arg, k, v);
	}
}

static void set_var(void *vars, const char *k, const char *v)
{
	(void)varcache_set(vars, k, v);   /* an untracked name: ignored */
}

bool handover_decode(const void *payload, size_t len, struct handover_rec *h, struct varcache *vars,
		     handover_param_fn on_other, void *arg, struct ps_server **ps)
{
	struct pkt_reader r;
	memset(h, 0, sizeof(*h));
	pkt_reader_init(&r, payload, len);
	if (!get_names(&r, h))
		return false;
	h->id = get_u64(&r);
	h->be_pid = pkt_get_u32(&r);
	h->be_key = pkt_get_u32(&r);
	if (!get_str(&r, h->addr, sizeof(h->addr)) || !get_str(&r, h->laddr, sizeof(h->laddr)))
		return false;
	h->port = pkt_get_i32(&r);
	h->lport = pkt_get_i32(&r);
	h->host_idx = pkt_get_i32(&r);
	h->connect_time = (usec_t)get_u64(&r);
	h->request_time = (usec_t)get_u64(&r);
	h->last_used = (usec_t)get_u64(&r);
	h->sent_at = (usec_t)get_u64(&r);
	h->vars_set = pkt_get_u32(&r);
	h->used = pkt_get_u8(&r);
	if (r.failed || !get_pairs(&r, set_var, vars) || !get_pairs(&r, on_other, arg) ||
	    !ps_server_import(ps, &r))
		return false;
	return pkt_get_end(&r);
}

bool handover_names(const void *payload, size_t len, char *db, char *user)
{
	struct pkt_reader r;
	struct handover_rec h;
	pkt_reader_init(&r, payload, len);
	if (!get_names(&r, &h))
		return false;
	memcpy(db, h.db, sizeof(h.db));
	memcpy(user, h.user, sizeof(h.user));
	return true;
}
