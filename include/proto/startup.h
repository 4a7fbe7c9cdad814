/* pgcrew — the first packet of a client connection: StartupMessage,
 * SSLRequest, GSSENCRequest or CancelRequest, and the "options" startup
 * parameter (-c key=value, --key=value). */
#ifndef PGCREW_PROTO_STARTUP_H
#define PGCREW_PROTO_STARTUP_H

#include "types.h"

enum startup_kind { STARTUP_V3, STARTUP_SSL, STARTUP_GSSENC, STARTUP_CANCEL, STARTUP_BAD };

#define STARTUP_MAX_PARAMS 64

struct startup_msg {
	enum startup_kind kind;
	uint32_t version;                 /* protocol version / request code word */
	struct cancelkey cancel;          /* CancelRequest */
	int n_params;                     /* ordinary parameters in keys/vals */
	const char *keys[STARTUP_MAX_PARAMS], *vals[STARTUP_MAX_PARAMS]; /* point into the packet buffer */
	const char *user, *database, *options, *replication;  /* shortcuts, NULL if absent; last one wins */
	int n_unsupported;                /* _pq_.* options, not in keys/vals */
	const char *unsupported[STARTUP_MAX_PARAMS]; /* their names, for NegotiateProtocolVersion */
};

/* pkt is the whole packet including its 4-byte length word, which must equal
 * len. Returns STARTUP_BAD with a message in err for: wrong length word
 * (SSL/GSSENC need 8 bytes, Cancel 16 to
 * 268: a secret of 4 to 256 bytes), version major != 3 (and not one of
 * the 1234.x request codes), parameters not NUL-terminated, a key without a
 * value, missing final NUL, more than STARTUP_MAX_PARAMS parameters, missing
 * "user". database defaults to user when absent. Minor versions above 0 and
 * _pq_.* keys are accepted and recorded (version, unsupported[]) so the caller
 * can answer NegotiateProtocolVersion. Pointers in out stay valid as long as
 * pkt does. err is always NUL-terminated (set to "" on success). */
enum startup_kind startup_parse(const uint8_t *pkt, size_t len, struct startup_msg *out,
				char *err, size_t errlen);

/* Parse PostgreSQL's "options" startup value, split on whitespace with
 * backslash escaping the next character: "-c key=value", "-ckey=value" and
 * "--key=value" (dashes in a --key become underscores, as in PostgreSQL).
 * Calls cb for each pair; cb returns 0 to go on, nonzero to stop. Returns 0,
 * or -1 with err set on an unsupported switch (anything but -c / --), a pair
 * without '=', an over-long value, or a cb refusal. */
int startup_parse_options(const char *options, int (*cb)(void *arg, const char *key, const char *val),
			  void *arg, char *err, size_t errlen);

/* Before the body is buffered (STYLE rule 10): for a packet of len bytes
 * whose first 8 are at hand, the reason startup_parse will refuse it for
 * its length (a CancelRequest outside 16 to 268 bytes, an SSL or GSSENC
 * request other than 8), or NULL; the connection can then be closed
 * without waiting for bytes that will never make it valid. */
const char *startup_length_refused(const uint8_t *first8, size_t len);

const char *startup_kind_name(enum startup_kind kind);

#endif
