/* pgcrew — target_session_attrs over a database's host list (hostrole.h).
 * libpq's meanings: read-write needs a host that is neither in hot standby
 * nor read-only by default, primary one not in hot standby, standby and
 * read-only the reverse, prefer-standby a standby while one may exist. */
#include "hostrole.h"
#include "config.h"
#include "dns.h"
#include "log.h"
#include "proto/packet.h"
#include "util.h"
#include "world.h"

static const char *const role_names[] = {
	[ROLE_UNKNOWN] = "unknown", [ROLE_PRIMARY] = "primary", [ROLE_READ_ONLY] = "read-only",
	[ROLE_STANDBY] = "standby",
};
_Static_assert(ARRAY_SIZE(role_names) == ROLE_COUNT, "role_names");
_Static_assert(DNS_MAX_ADDRS <= HOST_ADDRS, "every address of an answer is remembered");

const char *host_role_name(enum host_role r)
{
	return (unsigned)r < ROLE_COUNT ? role_names[r] : "?";
}

enum tsa hostrole_tsa(const struct database *db)
{
	return db->tsa >= 0 ? (enum tsa)db->tsa : db->world->cfg->target_session_attrs;
}

enum host_role hostrole_of_server(const struct server *sv)
{
	if (sv->hot_standby < 0 && sv->read_only < 0)
		return ROLE_UNKNOWN;
	if (sv->hot_standby > 0)
		return ROLE_STANDBY;
	return sv->read_only > 0 ? ROLE_READ_ONLY : ROLE_PRIMARY;
}

/* One text column of a DataRow as 0/1: "t"/"f" (boolean) or "on"/"off"
 * (a setting); -1 for NULL or anything else. */
static int row_flag(struct pkt_reader *r)
{
	int32_t n = pkt_get_i32(r);
	const uint8_t *v = n > 0 && n <= 3 ? pkt_get_bytes(r, (size_t)n) : NULL;
	if (!v)
		return -1;
	if ((n == 1 && v[0] == 't') || (n == 2 && memcmp(v, "on", 2) == 0))
		return 1;
	if ((n == 1 && v[0] == 'f') || (n == 3 && memcmp(v, "off", 3) == 0))
		return 0;
	return -1;
}

bool hostrole_parse_row(const uint8_t *body, size_t len, int8_t *in_recovery, int8_t *read_only)
{
	struct pkt_reader r;
	pkt_reader_init(&r, body, len);
	if (pkt_get_u16(&r) != 2 || r.failed)
		return false;
	int rec = row_flag(&r), ro = row_flag(&r);
	if (rec < 0 || ro < 0 || r.failed || !pkt_get_end(&r))
		return false;
	*in_recovery = (int8_t)rec;
	*read_only = (int8_t)ro;
	return true;
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

/* The addresses of one host, reset when its name's answer changed size. */
static struct host_addrs *addrs_of(struct database *db, int host, int n_addrs)
{
	if (host < 0 || host >= SHM_HOSTS || n_addrs < 2)
		return NULL;
	struct host_addrs *ha = &db->host_addrs[host];
	int n = n_addrs < HOST_ADDRS ? n_addrs : HOST_ADDRS;
	if (ha->n != n) {
		memset(ha, 0, sizeof(*ha));
		ha->n = (uint8_t)n;
	}
	return ha;
}

/* The address cursor: shared by the workers (shm) when the database has
 * a row, else this worker's. Returns the value before advancing. */
static int addr_next(struct database *db, int host, struct host_addrs *ha, int advance)
{
	int v = db->shm_idx >= 0 ? shm_addr_next(db->shm_idx, host, advance) : -1;
	if (v < 0) {
		v = ha->next;
		ha->next = (uint8_t)(ha->next + advance);
	}
	return v % ha->n;
}

static void addr_next_set(struct database *db, int host, struct host_addrs *ha, int value)
{
	value %= ha->n;
	if (db->shm_idx >= 0)
		shm_addr_next_set(db->shm_idx, host, value);
	ha->next = (uint8_t)value;
}

int hostrole_pick_addr(struct database *db, int host, int n_addrs)
{
	struct host_addrs *ha = addrs_of(db, host, n_addrs);
	usec_t now = util_monotonic();
	if (!ha)
		return 0;
	/* `any` spreads servers over the addresses, as PgBouncer does (DNS
	 * round robin); a role to match keeps to the one that served. */
	bool spread = hostrole_tsa(db) == TSA_ANY;
	int next = addr_next(db, host, ha, spread ? 1 : 0);
	for (int i = 0; i < ha->n; i++) {
		int a = (next + i) % ha->n;
		if (ha->skip_until[a] <= now) {
			if (spread && i > 0)
				addr_next_set(db, host, ha, a + 1);
			return a;
		}
	}
	return next % ha->n;
}

bool hostrole_addr_failed(struct database *db, int host, int addr, int n_addrs)
{
	struct host_addrs *ha = addrs_of(db, host, n_addrs);
	usec_t now = util_monotonic();
	if (!ha || addr < 0 || addr >= ha->n)
		return false;
	ha->skip_until[addr] = now + HOSTROLE_SKIP_USEC;
	addr_next_set(db, host, ha, addr + 1);
	for (int a = 0; a < ha->n; a++)
		if (ha->skip_until[a] <= now)
			return true;
	return false;
}
