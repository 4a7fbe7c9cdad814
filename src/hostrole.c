/* pgcrew — target_session_attrs over a database's host list (hostrole.h).
 * libpq's meanings: read-write needs a host that is neither in hot standby
 * nor read-only by default, primary one not in hot standby, standby and
 * read-only the reverse, prefer-standby a standby while one may exist. */
#include "hostrole.h"
#include "config.h"
#include "log.h"
#include "util.h"
#include "worker.h"

static const char *const role_names[] = {
	[ROLE_UNKNOWN] = "unknown", [ROLE_PRIMARY] = "primary", [ROLE_READ_ONLY] = "read-only",
	[ROLE_STANDBY] = "standby",
};
_Static_assert(ARRAY_SIZE(role_names) == ROLE_COUNT, "role_names");

const char *host_role_name(enum host_role r)
{
	return (unsigned)r < ROLE_COUNT ? role_names[r] : "?";
}

enum tsa hostrole_tsa(const struct database *db)
{
	return db->tsa >= 0 ? (enum tsa)db->tsa : W->cfg->target_session_attrs;
}

enum host_role hostrole_of_server(const struct server *sv)
{
	if (sv->hot_standby < 0 && sv->read_only < 0)
		return ROLE_UNKNOWN;
	if (sv->hot_standby > 0)
		return ROLE_STANDBY;
	return sv->read_only > 0 ? ROLE_READ_ONLY : ROLE_PRIMARY;
}

enum host_role hostrole_get(const struct database *db, int host)
{
	if (host < 0 || host >= SHM_HOSTS)
		return ROLE_UNKNOWN;
	if (db->shm_idx >= 0)
		return (enum host_role)shm_host_role(db->shm_idx, host);
	return (enum host_role)db->host_role[host];
}

usec_t hostrole_skipped_until(const struct database *db, int host)
{
	if (host < 0 || host >= SHM_HOSTS)
		return 0;
	return db->shm_idx >= 0 ? (usec_t)shm_host_skip_until(db->shm_idx, host) : db->host_skip[host];
}

void hostrole_skip(struct database *db, int host)
{
	usec_t until = util_monotonic() + HOSTROLE_SKIP_USEC;
	if (host < 0 || host >= SHM_HOSTS)
		return;
	if (db->shm_idx >= 0)
		shm_host_skip(db->shm_idx, host, (int64_t)until);
	else
		db->host_skip[host] = until;
}

static bool skipped(const struct database *db, int host, usec_t now)
{
	return hostrole_skipped_until(db, host) > now;
}

/* Some host other than `except` may still turn out a standby. */
static bool standby_possible(const struct database *db, int except)
{
	usec_t now = util_monotonic();
	for (int h = 0; h < db->n_hosts; h++) {
		enum host_role r = hostrole_get(db, h);
		if (h != except && !skipped(db, h, now) && (r == ROLE_STANDBY || r == ROLE_UNKNOWN))
			return true;
	}
	return false;
}

bool hostrole_serves(const struct database *db, int host, enum host_role r)
{
	switch (hostrole_tsa(db)) {
	case TSA_READ_WRITE: return r == ROLE_PRIMARY;
	case TSA_READ_ONLY: return r == ROLE_STANDBY || r == ROLE_READ_ONLY;
	case TSA_PRIMARY: return r == ROLE_PRIMARY || r == ROLE_READ_ONLY;
	case TSA_STANDBY: return r == ROLE_STANDBY;
	case TSA_PREFER_STANDBY: return r == ROLE_STANDBY || !standby_possible(db, host);
	default: return true;
	}
}

void hostrole_note(struct database *db, int host, enum host_role r)
{
	enum host_role old;
	if (host < 0 || host >= SHM_HOSTS || r == ROLE_UNKNOWN)
		return;
	if (db->shm_idx >= 0) {
		old = (enum host_role)shm_host_role_set(db->shm_idx, host, (int)r);
	} else {
		old = (enum host_role)db->host_role[host];
		db->host_role[host] = (int8_t)r;
	}
	if (old != r)
		log_info("host role: database=%s host=%s port=%d role=%s previous=%s", db->name,
			 db->hosts[host] ? db->hosts[host] : "unix", db->port, host_role_name(r),
			 host_role_name(old));
}

/* A host whose known role cannot serve db is not tried (unknown ones are:
 * a server's login tells). */
static bool worth_trying(const struct database *db, int host)
{
	enum host_role r = hostrole_get(db, host);
	return r == ROLE_UNKNOWN || hostrole_serves(db, host, r);
}

int hostrole_pick(struct database *db, int start)
{
	usec_t now = util_monotonic();
	int fallback = -1;
	for (int i = 0; i < db->n_hosts; i++) {
		int h = (start + i) % db->n_hosts;
		if (skipped(db, h, now))
			continue;
		if (worth_trying(db, h))
			return h;
		if (fallback < 0)
			fallback = h;        /* its role may have changed since */
	}
	return fallback;
}
