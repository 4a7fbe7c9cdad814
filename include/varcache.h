/* pgcrew — the reported parameters (client_encoding, DateStyle, TimeZone,
 * standard_conforming_strings, application_name, track_extra_parameters) a
 * client expects and a server currently has, so a client sees its own
 * settings on whichever server it gets. */
#ifndef PGCREW_VARCACHE_H
#define PGCREW_VARCACHE_H

#include "types.h"

struct pktbuf;

#define VAR_MAX 16          /* built-in ones plus track_extra_parameters */
#define VAR_NAME_MAX 63     /* PostgreSQL's NAMEDATALEN - 1; longer extras are ignored */

struct varcache {
	uint32_t val[VAR_MAX];      /* strpool.h ids, one reference each; 0 = not set */
};

/* Install the tracked names: the fixed ones plus a comma list of extras. */
void varcache_set_tracked(const char *extra_params);
int varcache_count(void);
const char *varcache_name(int i);
/* Index of a tracked parameter (case-insensitive), -1 if not tracked. */
int varcache_lookup(const char *name);

void varcache_init(struct varcache *vc);
void varcache_clear(struct varcache *vc);
void varcache_copy(struct varcache *dst, const struct varcache *src);
/* Set by name; false if the name is not tracked. */
bool varcache_set(struct varcache *vc, const char *name, const char *value);
const char *varcache_get(const struct varcache *vc, int i);

/* Build "SET a='x';SELECT pg_catalog.set_config('extra','y',false);" (SET
 * for the built-in parameters, set_config for track_extra_parameters, which
 * may be lists such as search_path) for what `want` has and `have` differs in;
 * returns false when nothing differs or the text does not fit in len
 * (buf is then empty). varcache_query_room(want) always fits. */
bool varcache_diff_query(const struct varcache *want, const struct varcache *have,
			 char *buf, size_t len);
/* Bytes that the query setting every value of want takes, with its NUL
 * (values have no length limit but the startup packet's or the server's). */
size_t varcache_query_room(const struct varcache *want);
/* Append ParameterStatus messages: base with over's values taking precedence. */
void varcache_write_status(struct pktbuf *pb, const struct varcache *base, const struct varcache *over);

#endif
