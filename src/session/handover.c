/* pgcrew — encoding of a server connection's state for a move between
 * workers (see handover.h). Strings are NUL-terminated, numbers network
 * order; times go as they are, since every process reads the same
 * monotonic clock. */
#include "handover.h"
#include "ipc.h"
#include "prepared.h"
#include "proto/build.h"
#include "proto/cancelkey.h"
#include "proto/packet.h"
#include "auth/scram.h"
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

/* Tracked parameters as name, value pairs up to an empty name. */
static void put_vars(struct pktbuf *pb, const struct varcache *vars)
{
	for (int i = 0; i < varcache_count(); i++) {
		const char *v = varcache_get(vars, i);
		if (!v)
			continue;
		pktbuf_put_string(pb, varcache_name(i));
		pktbuf_put_string(pb, v);
	}
	pktbuf_put_string(pb, "");
}

bool handover_encode(struct pktbuf *pb, const struct handover_rec *h, const struct varcache *vars,
		     char *const *other, int n_other, const struct ps_server *ps)
{
	pktbuf_put_string(pb, h->db);
	pktbuf_put_string(pb, h->user);
	put_u64(pb, h->id);
	cancelkey_put(pb, &h->be);
	pktbuf_put_u8(pb, h->proto_minor);
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
	pktbuf_put_u8(pb, h->check_due);
	cancelkey_put(pb, &h->owner);
	put_vars(pb, vars);
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
	if (!cancelkey_get(&r, &h->be))
		return false;
	h->proto_minor = pkt_get_u8(&r);
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
	h->check_due = pkt_get_u8(&r);
	if (r.failed || !cancelkey_get(&r, &h->owner) || !get_pairs(&r, set_var, vars) ||
	    !get_pairs(&r, on_other, arg) ||
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

/* ---- clients (online restart) ---- */

static void put_keys(struct pktbuf *pb, const struct scram_secret *k)
{
	pktbuf_put_u32(pb, (uint32_t)k->iterations);
	pktbuf_put_u32(pb, (uint32_t)k->salt_len);
	pktbuf_put_bytes(pb, k->salt, k->salt_len);
	pktbuf_put_bytes(pb, k->stored_key, sizeof(k->stored_key));
	pktbuf_put_bytes(pb, k->server_key, sizeof(k->server_key));
	pktbuf_put_u8(pb, k->has_client_key);
	pktbuf_put_bytes(pb, k->client_key, sizeof(k->client_key));
}

static bool get_bytes(struct pkt_reader *r, void *dst, size_t n)
{
	const uint8_t *p = pkt_get_bytes(r, n);
	if (r->failed || !p)
		return false;
	memcpy(dst, p, n);
	return true;
}

static bool get_keys(struct pkt_reader *r, struct scram_secret *k)
{
	memset(k, 0, sizeof(*k));
	k->iterations = pkt_get_i32(r);
	uint32_t salt_len = pkt_get_u32(r);
	if (r->failed || salt_len > sizeof(k->salt) || k->iterations <= 0)
		return false;
	k->salt_len = salt_len;
	if (!get_bytes(r, k->salt, salt_len) || !get_bytes(r, k->stored_key, sizeof(k->stored_key)) ||
	    !get_bytes(r, k->server_key, sizeof(k->server_key)))
		return false;
	k->has_client_key = pkt_get_u8(r) != 0;
	return get_bytes(r, k->client_key, sizeof(k->client_key));
}

bool handover_client_encode(struct pktbuf *pb, const struct handover_client *h,
			    const struct scram_secret *keys, const struct varcache *vars,
			    const struct ps_client *ps)
{
	pktbuf_put_string(pb, h->db);
	pktbuf_put_string(pb, h->user);
	pktbuf_put_string(pb, h->login_user);
	pktbuf_put_string(pb, h->db_name);
	pktbuf_put_string(pb, h->user_name);
	cancelkey_put(pb, &h->key);
	pktbuf_put_u8(pb, h->proto_minor);
	put_u64(pb, (uint64_t)h->connect_time);
	put_u64(pb, (uint64_t)h->last_activity);
	put_u64(pb, (uint64_t)h->sent_at);
	pktbuf_put_u8(pb, h->is_unix);
	pktbuf_put_u8(pb, h->linked);
	pktbuf_put_u8(pb, h->passthrough_ok);
	pktbuf_put_u8(pb, h->admin);
	pktbuf_put_u8(pb, h->stats_only);
	pktbuf_put_u8(pb, h->local_admin);
	pktbuf_put_u8(pb, h->has_secret);
	if (h->has_secret)
		pktbuf_put_string(pb, h->secret);
	pktbuf_put_u8(pb, h->has_keys);
	if (h->has_keys)
		put_keys(pb, keys);
	put_vars(pb, vars);
	ps_client_export(ps, pb);
	return !pktbuf_failed(pb) && pb->len <= IPC_MAX_PAYLOAD;
}

static bool get_client_strings(struct pkt_reader *r, struct handover_client *h)
{
	return get_str(r, h->db, sizeof(h->db)) && get_str(r, h->user, sizeof(h->user)) &&
	       get_str(r, h->login_user, sizeof(h->login_user)) &&
	       get_str(r, h->db_name, sizeof(h->db_name)) &&
	       get_str(r, h->user_name, sizeof(h->user_name));
}

bool handover_client_decode(const void *payload, size_t len, struct handover_client *h,
			    struct scram_secret *keys, struct varcache *vars,
			    struct ps_client **ps)
{
	struct pkt_reader r;
	memset(h, 0, sizeof(*h));
	memset(keys, 0, sizeof(*keys));
	pkt_reader_init(&r, payload, len);
	if (!get_client_strings(&r, h))
		return false;
	if (!cancelkey_get(&r, &h->key))
		return false;
	h->proto_minor = pkt_get_u8(&r);
	h->connect_time = (usec_t)get_u64(&r);
	h->last_activity = (usec_t)get_u64(&r);
	h->sent_at = (usec_t)get_u64(&r);
	h->is_unix = pkt_get_u8(&r);
	h->linked = pkt_get_u8(&r);
	h->passthrough_ok = pkt_get_u8(&r);
	h->admin = pkt_get_u8(&r);
	h->stats_only = pkt_get_u8(&r);
	h->local_admin = pkt_get_u8(&r);
	h->has_secret = pkt_get_u8(&r);
	if (r.failed || (h->has_secret && !get_str(&r, h->secret, sizeof(h->secret))))
		return false;
	h->has_keys = pkt_get_u8(&r);
	if (r.failed || (h->has_keys && !get_keys(&r, keys)))
		return false;
	if (!get_pairs(&r, set_var, vars) || !ps_client_import(ps, &r))
		return false;
	return pkt_get_end(&r);
}
