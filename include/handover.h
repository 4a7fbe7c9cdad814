/* pgcrew — a server connection's state as it travels between workers with
 * its socket (IPC_SERVER_FD): what the receiving worker needs to carry on
 * with the same backend as if it had logged in itself. Encoding only; the
 * worker glue is in server.c, the routing in the supervisor's ledger. */
#ifndef PGCREW_HANDOVER_H
#define PGCREW_HANDOVER_H

#include "types.h"
#include "ledger.h"

struct pktbuf;
struct varcache;
struct ps_server;

/* The records' layout: an online restart hands connections over only to
 * a new process that reads the same (another version drains instead). */
#define HANDOVER_FORMAT 2           /* 2: protocol versions, cancel keys of any length */

struct handover_rec {
	char db[LEDGER_NAME], user[LEDGER_NAME];   /* the pool */
	uint64_t id;                  /* S-<id>: instance-wide, kept */
	struct cancelkey be;          /* BackendKeyData */
	uint8_t proto_minor;          /* protocol 3.<minor> with the server */
	char addr[64], laddr[64];
	int32_t port, lport, host_idx;
	/* CLOCK_MONOTONIC: one clock for every process on the host */
	usec_t connect_time, request_time, last_used;
	usec_t sent_at;               /* offered: the move's latency at arrival */
	uint32_t vars_set;            /* tracked parameters a client SET there */
	uint8_t check_due;            /* server_check_query before its next client */
	/* Online restart, session pooling: the cancel key of the client it
	 * stays linked to (that client moved just before it); length 0: none. */
	struct cancelkey owner;
};

/* Record, then the server's tracked parameters (vars), its pool's other
 * welcome parameters (name, value pairs: a worker new to the pool logs its
 * clients in with them) and its prepared statements. False when it does
 * not fit in one IPC message. */
bool handover_encode(struct pktbuf *pb, const struct handover_rec *h, const struct varcache *vars,
		     char *const *other, int n_other, const struct ps_server *ps) MUSTCHECK;
/* The reverse; vars must be initialised, *ps NULL or the server's table;
 * on_other gets each other parameter. False on a malformed record (what was
 * filled stays for the caller to free). */
typedef void (*handover_param_fn)(void *arg, const char *name, const char *value);
bool handover_decode(const void *payload, size_t len, struct handover_rec *h, struct varcache *vars,
		     handover_param_fn on_other, void *arg, struct ps_server **ps) MUSTCHECK;
/* Only the pool's names (the supervisor routes by them). */
bool handover_names(const void *payload, size_t len, char *db, char *user) MUSTCHECK;

/* A logged-in client as it moves to a new process at an online restart
 * (IPC_TAKEN_CLIENT), with its socket: who it is, what it was told (its
 * cancel key), what it expects (tracked parameters, statement names). */
struct handover_client {
	char db[LEDGER_NAME], user[LEDGER_NAME];   /* its pool (server-side user) */
	char login_user[LEDGER_NAME];              /* as authenticated */
	char db_name[LEDGER_NAME], user_name[LEDGER_NAME];   /* as it sent them */
	struct cancelkey key;         /* its cancel key, as pgcrew made it */
	uint8_t proto_minor;          /* it speaks protocol 3.<minor> */
	usec_t connect_time, last_activity, sent_at;
	uint8_t is_unix;
	uint8_t linked;               /* its server came just before it */
	uint8_t passthrough_ok;
	uint8_t admin, stats_only, local_admin;   /* a console client */
	/* The login user's secret when the new process may not know it (a
	 * user found by auth_query, or ClientKey learned from a proof). */
	uint8_t has_secret, has_keys;
	char secret[SECRET_MAX_LEN];
};

struct scram_secret;
struct ps_client;
bool handover_client_encode(struct pktbuf *pb, const struct handover_client *h,
			    const struct scram_secret *keys, const struct varcache *vars,
			    const struct ps_client *ps) MUSTCHECK;
bool handover_client_decode(const void *payload, size_t len, struct handover_client *h,
			    struct scram_secret *keys, struct varcache *vars,
			    struct ps_client **ps) MUSTCHECK;

#endif
