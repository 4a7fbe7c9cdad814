/* pgcrew — what the supervisor keeps per pool between workers: its welcome
 * (the server parameters a client gets at login, learned by the first
 * worker's server login) and its last failed server login, so that a
 * worker that meets the pool later welcomes its clients at once or waits
 * server_login_retry like the others. Found by pool name in constant time;
 * an entry goes when no worker holds the pool any more (welcome_sweep), so
 * ever new tenants leave nothing behind. */
#ifndef PGCREW_WELCOME_H
#define PGCREW_WELCOME_H

#include "ipc.h"
#include "types.h"

/* The key of both: database then user, LEDGER_NAME bytes each. */
#define WELCOME_KEY (2 * LEDGER_NAME)

void welcome_init(void);
void welcome_free_all(void);

/* A pool's welcome as a worker sent it (the key, then name\0value\0
 * pairs); the one kept, or NULL (its length in *len). */
void welcome_put(const void *data, uint32_t len);
const void *welcome_find(const void *key, uint32_t *len);

/* A pool's last failed server login, and when it was seen. */
void welcome_failure_put(const struct login_failure *f, usec_t now);
/* The failure of key if it is younger than retry (its age in *age); an
 * older one is forgotten. */
const struct login_failure *welcome_failure_recent(const void *key, usec_t now, usec_t retry, usec_t *age);
/* Server TLS settings reloaded: failures under the old ones go. */
void welcome_forget_failures(void);

/* A worker's ask for a welcome not known yet while a server of the pool
 * is counted somewhere (its login under way, or its welcome on its way
 * from another worker: the channels are not ordered between them) waits
 * for it, instead of the worker logging in a server of its own. */
void welcome_defer(int worker, const void *key, usec_t now);
/* One deferred ask of key (key NULL: any) asked before `before`, taken
 * off the list: true, its worker in *worker and key in key_out. */
bool welcome_take_deferred(const void *key, usec_t before, int *worker, void *key_out);
/* When the oldest deferred ask was made; 0 for none. */
usec_t welcome_oldest_deferred(void);
/* A worker has gone: its asks go unanswered. */
void welcome_drop_deferred(int worker);

/* Fetches: a worker sends its pool's welcome only when another worker
 * holds the pool; an ask the supervisor cannot answer is sent on to the
 * pool's other holders (IPC_WELCOME_FETCH), `asked` of them. Each answers
 * with the welcome or "none here"; a fetch ends with the first welcome
 * (welcome_put), when every holder asked said none, or with its deferred
 * asks (welcome_fetch_end). */
void welcome_fetch_start(const void *key, int asked, usec_t now);
bool welcome_fetching(const void *key);
/* One holder has none: true when it was the last one not heard from. */
bool welcome_fetch_none(const void *key);
/* The fetch of key (NULL: every fetch started before `before`) is over. */
void welcome_fetch_end(const void *key, usec_t before);

/* Entries of pools no worker holds (held() says which are held) and
 * failures older than retry go; returns how many went. */
typedef bool (*welcome_held_fn)(const char *db, const char *user);
int welcome_sweep(welcome_held_fn held, usec_t now, usec_t retry);
/* Welcomes and failures kept (memory tests). */
size_t welcome_count(void);

#endif
