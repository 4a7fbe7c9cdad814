/* pgcrew — the session layer's part of the supervisor protocol: each
 * message decoded by its typed reader (ipc.h) and handed to its module. A
 * payload that does not read is dropped, as everywhere. The worker loop
 * (worker.c) passes every message here first; unit tests do the same. */
#include "session_ipc.h"
#include "cancel.h"
#include "client.h"
#include "conn_takeover.h"
#include "pool.h"
#include "server_move.h"

#include <unistd.h>

/* A handed client's id, taken by the worker that accepted it; 0 (take one
 * now) if the message does not read. */
static uint64_t client_fd_id(const struct ipc_hdr *hdr, const void *payload)
{
	struct client_fd m;
	return ipc_get_client_fd(hdr, payload, &m) ? m.id : 0;
}

/* The messages that carry a socket. */
static bool with_socket(struct world *w, const struct ipc_hdr *hdr, const void *payload, int fd)
{
	switch (hdr->type) {
	case IPC_CLIENT_FD:
		if (fd >= 0)
			client_accept(w, fd, false, NULL, client_fd_id(hdr, payload));
		return true;
	case IPC_SERVER_FD:
		server_arrived(w, hdr->reqid, payload, hdr->len, fd);
		return true;
	case IPC_TAKEN_CLIENT:
		conn_takeover_client(w, hdr->reqid, payload, hdr->len, fd);
		return true;
	case IPC_TAKEN_SERVER:
		conn_takeover_server(w, hdr->reqid, payload, hdr->len, fd);
		return true;
	default:
		return false;
	}
}

/* The others; a socket sent along by mistake is closed. */
static bool without_socket(struct world *w, const struct ipc_hdr *hdr, const void *payload)
{
	struct slot_req r;
	struct pool_want want;
	struct login_failure f;
	struct cancelkey key;
	struct cancel_waiter waiter;

	switch (hdr->type) {
	case IPC_SLOT_GRANT:
	case IPC_SLOT_DENY:
		if (ipc_get_slot(hdr, payload, &r))
			pool_slot_answer(w, &r, hdr->reqid, hdr->type == IPC_SLOT_GRANT);
		return true;
	case IPC_POOL_WANT:
		if (ipc_get_want(hdr, payload, &want))
			pool_slot_wanted(w, &want);
		return true;
	case IPC_POOL_EVICT:
		if (ipc_get_slot(hdr, payload, &r))
			pool_evict_asked(w, &r);
		return true;
	case IPC_WELCOME:
		pool_welcome_answer(w, payload, hdr->len);
		return true;
	case IPC_WELCOME_FETCH:
		pool_welcome_fetched(w, payload, hdr->len);
		return true;
	case IPC_LOGIN_FAILED:
		if (ipc_get_login_failure(hdr, payload, &f))
			pool_login_failed_heard(w, &f);
		return true;
	case IPC_CANCEL_FWD:
		if (ipc_get_cancel(hdr, payload, &key, &waiter))
			cancel_local(w, &key, &waiter);
		return true;
	case IPC_CANCEL_DONE:
		if (ipc_get_cancel_done(hdr, payload, &waiter) && waiter.worker == w->id)
			cancel_waiter_done(w, &waiter, (enum cancel_outcome)waiter.outcome);
		return true;
	default:
		return false;
	}
}

bool session_ipc(struct world *w, const struct ipc_hdr *hdr, const void *payload, int fd)
{
	if (with_socket(w, hdr, payload, fd))
		return true;
	if (!without_socket(w, hdr, payload))
		return false;
	if (fd >= 0)
		close(fd);
	return true;
}
