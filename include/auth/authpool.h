/* pgcrew — a worker's small pool of authentication threads for the methods
 * whose library calls block (LDAP binds, PAM conversations): a bounded
 * queue in, results back to the event loop through an eventfd. Threads
 * start on first use, so a worker that never needs them has none. */
#ifndef PGCREW_AUTH_AUTHPOOL_H
#define PGCREW_AUTH_AUTHPOOL_H

#include "types.h"

#define AUTHPOOL_THREADS 2
#define AUTHPOOL_QUEUE_MAX 64             /* jobs queued or running, per worker */

struct authpool_job;
struct event_base;

/* Runs in a pool thread: must touch nothing but the job's own fields (no
 * client, no worker state, no logging). Sets ok and, on failure, why. */
typedef void (*authpool_run_fn)(struct authpool_job *j);
/* Runs in the event loop when the job is done and its owner (the client
 * that asked) is still there; the job is freed after it returns. The owner
 * logs why and acts on ok. */
typedef void (*authpool_done_fn)(void *owner, struct authpool_job *j);

struct authpool_job {
	struct authpool_job *next;        /* queue / done list */
	void *owner;                      /* loop only; NULL once the owner went */
	struct authpool_job **slot;       /* the owner's pointer to its job, cleared when done */
	bool queued;                      /* submitted: a thread may be running it */
	authpool_run_fn run;
	authpool_done_fn done;
	const char *method;               /* "LDAP", "PAM": for logs */
	void *arg;                        /* method's input, freed with the job */
	char user[64];
	char password[SECRET_MAX_LEN];
	char rhost[64];                   /* the client's address */
	bool ok;                          /* result */
	char why[512];                    /* failure reason, logged by the loop */
};

/* Queue j (run, done and method set) for owner, whose *slot points at j
 * until done runs. The threads start on first use, watched from base.
 * False when the queue is full or the threads cannot start: the WARNING is
 * logged here, j is freed and the caller refuses its client. */
bool authpool_submit(struct event_base *base, struct authpool_job *j, void *owner,
		     struct authpool_job **slot) MUSTCHECK;
/* The owner of *slot is going: its job, if any, is freed, or dropped
 * unanswered when it comes back from a thread. */
void authpool_owner_gone(struct authpool_job **slot);
/* The worker is exiting: threads take no further job. False while one is
 * still inside a job; libldap and PAM then hold process state that exit()
 * would free under them, so the caller must leave with _exit() and skip its
 * cleanup. */
bool authpool_stop(void) MUSTCHECK;
/* After authpool_stop() returned true and every client is freed: the
 * queued and finished jobs and the eventfd. */
void authpool_free(void);
/* Jobs queued or running in this worker (SHOW-style diagnostics, tests). */
int authpool_pending(void);
void authpool_job_free(struct authpool_job *j);

#endif
