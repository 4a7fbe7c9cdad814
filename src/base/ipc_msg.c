/* pgcrew — typed IPC messages (ipc.h): a builder and a reader per payload
 * shape, so no caller frames a payload by hand and every bad one, from any
 * worker, is refused and logged the same way. */
#include "ipc.h"
#include "log.h"

#include <string.h>

/* The one check of a fixed-size payload. */
static bool sized(const struct ipc_hdr *hdr, size_t len)
{
	if (hdr->len == len)
		return true;
	log_error("ipc: bad %s payload (%u bytes) from worker %d", ipc_type_name(hdr->type), hdr->len,
		  (int)hdr->worker);
	return false;
}

int ipc_send_empty(struct ipc_chan *ch, enum ipc_type type)
{
	return ipc_send(ch, type, 0, NULL, 0, -1);
}

int ipc_send_i32(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid, int32_t v, int fd)
{
	return ipc_send(ch, type, reqid, &v, sizeof(v), fd);
}

bool ipc_get_i32(const struct ipc_hdr *hdr, const void *payload, int32_t *v)
{
	if (!sized(hdr, sizeof(*v)))
		return false;
	memcpy(v, payload, sizeof(*v));
	return true;
}

int ipc_send_slot(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid, const struct slot_req *r)
{
	return ipc_send(ch, type, reqid, r, sizeof(*r), -1);
}

static void terminate_names(struct slot_req *r)
{
	r->db[sizeof(r->db) - 1] = 0;
	r->user[sizeof(r->user) - 1] = 0;
}

bool ipc_get_slot(const struct ipc_hdr *hdr, const void *payload, struct slot_req *r)
{
	if (!sized(hdr, sizeof(*r)))
		return false;
	memcpy(r, payload, sizeof(*r));
	terminate_names(r);
	return true;
}

int ipc_send_want(struct ipc_chan *ch, const struct pool_want *w)
{
	return ipc_send(ch, IPC_POOL_WANT, 0, w, sizeof(*w), -1);
}

bool ipc_get_want(const struct ipc_hdr *hdr, const void *payload, struct pool_want *w)
{
	if (!sized(hdr, sizeof(*w)))
		return false;
	memcpy(w, payload, sizeof(*w));
	terminate_names(&w->pool);
	return true;
}

int ipc_send_client_fd(struct ipc_chan *ch, const struct client_fd *m, int fd)
{
	return ipc_send(ch, IPC_CLIENT_FD, 0, m, sizeof(*m), fd);
}

bool ipc_get_client_fd(const struct ipc_hdr *hdr, const void *payload, struct client_fd *m)
{
	if (!sized(hdr, sizeof(*m)))
		return false;
	memcpy(m, payload, sizeof(*m));
	return true;
}

int ipc_send_login_failure(struct ipc_chan *ch, const struct login_failure *f)
{
	return ipc_send(ch, IPC_LOGIN_FAILED, 0, f, sizeof(*f), -1);
}

bool ipc_get_login_failure(const struct ipc_hdr *hdr, const void *payload, struct login_failure *f)
{
	if (!sized(hdr, sizeof(*f)))
		return false;
	memcpy(f, payload, sizeof(*f));
	terminate_names(&f->pool);
	f->code[sizeof(f->code) - 1] = 0;
	f->msg[sizeof(f->msg) - 1] = 0;
	return true;
}

int ipc_send_cancel(struct ipc_chan *ch, const struct cancelkey *k, const struct cancel_waiter *wt)
{
	struct cancel_fwd v;
	memset(&v, 0, sizeof(v));        /* no stray bytes past the secret */
	v.key.pid = k->pid;
	v.key.len = k->len <= CANCELKEY_MAX ? k->len : 0;
	memcpy(v.key.secret, k->secret, v.key.len);
	v.waiter = wt ? *wt : (struct cancel_waiter){ .worker = -1 };
	return ipc_send(ch, IPC_CANCEL_FWD, 0, &v, sizeof(v), -1);
}

bool ipc_get_cancel(const struct ipc_hdr *hdr, const void *payload, struct cancelkey *k,
		    struct cancel_waiter *wt)
{
	*wt = (struct cancel_waiter){ .worker = -1 };
	if (hdr->len == sizeof(*k)) {
		memcpy(k, payload, sizeof(*k));        /* a key alone: nobody waits */
	} else {
		struct cancel_fwd v;
		if (!sized(hdr, sizeof(v)))
			return false;
		memcpy(&v, payload, sizeof(v));
		*k = v.key;
		*wt = v.waiter;
	}
	if (k->len >= CANCELKEY_MIN && k->len <= CANCELKEY_MAX)
		return true;
	log_error("ipc: bad %s payload (key of %u bytes) from worker %d", ipc_type_name(hdr->type), k->len,
		  (int)hdr->worker);
	return false;
}

int ipc_send_cancel_done(struct ipc_chan *ch, const struct cancel_waiter *wt)
{
	return ipc_send(ch, IPC_CANCEL_DONE, 0, wt, sizeof(*wt), -1);
}

bool ipc_get_cancel_done(const struct ipc_hdr *hdr, const void *payload, struct cancel_waiter *wt)
{
	if (!sized(hdr, sizeof(*wt)))
		return false;
	memcpy(wt, payload, sizeof(*wt));
	return true;
}

int ipc_send_text(struct ipc_chan *ch, enum ipc_type type, uint32_t reqid, const char *text)
{
	return ipc_send(ch, type, reqid, text, (uint32_t)strlen(text) + 1, -1);
}

bool ipc_get_text(const struct ipc_hdr *hdr, const void *payload, const char **text)
{
	const char *t = payload;
	if (hdr->len == 0 || t[hdr->len - 1] != 0) {
		log_error("ipc: bad %s payload (%u bytes, not a terminated text) from worker %d",
			  ipc_type_name(hdr->type), hdr->len, (int)hdr->worker);
		return false;
	}
	*text = t;
	return true;
}
