/* pgcrew — the authentication thread pool (see authpool.h). One mutex
 * guards the queue and the done list; the loop learns of finished jobs from
 * an eventfd and is the only side that ever looks at job->owner, so a
 * client that disconnects while its bind is pending is simply forgotten. */
#include "auth/authpool.h"
#include "log.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

static struct {
	bool started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct authpool_job *queue, **queue_tail;    /* waiting for a thread */
	struct authpool_job *done;                   /* finished, for the loop */
	int pending;                                 /* queued + running + done (loop's view) */
	int running;                                 /* jobs inside a thread right now */
	bool stopping;                               /* worker exiting: take no more jobs */
	int efd;
	struct event *ev;
} P = { .lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER, .efd = -1 };

void authpool_job_free(struct authpool_job *j)
{
	if (!j)
		return;
	/* The password must not linger in freed memory. */
	explicit_bzero(j->password, sizeof(j->password));
	free(j->arg);
	free(j);
}

static void *thread_main(void *unused)
{
	for (;;) {
		pthread_mutex_lock(&P.lock);
		while (!P.queue || P.stopping)
			pthread_cond_wait(&P.cond, &P.lock);
		struct authpool_job *j = P.queue;
		P.queue = j->next;
		if (!P.queue)
			P.queue_tail = &P.queue;
		P.running++;
		pthread_mutex_unlock(&P.lock);

		j->run(j);

		pthread_mutex_lock(&P.lock);
		P.running--;
		j->next = P.done;
		P.done = j;
		pthread_mutex_unlock(&P.lock);
		uint64_t one = 1;
		while (write(P.efd, &one, sizeof(one)) < 0 && errno == EINTR)
			;
	}
	return NULL;
}

/* The loop side: hand each finished job to its client, if it still has one. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
	uint64_t n;
	if (read(fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		log_warning("authpool: eventfd read failed: %s", strerror(errno));
	pthread_mutex_lock(&P.lock);
	struct authpool_job *list = P.done;
	P.done = NULL;
	pthread_mutex_unlock(&P.lock);
	while (list) {
		struct authpool_job *j = list;
		list = j->next;
		P.pending--;
		if (j->owner) {
			*j->slot = NULL;
			j->done(j->owner, j);
		} else {
			if (!j->ok && j->why[0])
				log_warning("%s", j->why);
			log_info("%s authentication answer dropped: user=%s client_gone=1", j->method, j->user);
		}
		authpool_job_free(j);
	}
}

/* Threads block every signal: the worker's signals are libevent events
 * that must be delivered to the loop's thread. */
static bool start(struct event_base *base)
{
	sigset_t all, old;
	pthread_t t;
	pthread_attr_t attr;

	P.queue_tail = &P.queue;
	P.efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (P.efd < 0) {
		log_error("authpool: eventfd failed: %s", strerror(errno));
		return false;
	}
	P.ev = event_new(base, P.efd, EV_READ | EV_PERSIST, on_done, NULL);
	if (!P.ev || event_add(P.ev, NULL) < 0) {
		log_error("authpool: cannot watch its eventfd");
		return false;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int started = 0;
	for (int i = 0; i < AUTHPOOL_THREADS; i++)
		started += pthread_create(&t, &attr, thread_main, NULL) == 0;
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!started) {
		log_error("authpool: cannot start authentication threads");
		return false;
	}
	P.started = true;
	return true;
}

bool authpool_submit(struct event_base *base, struct authpool_job *j, void *owner,
		     struct authpool_job **slot)
{
	if (!P.started && !start(base)) {
		authpool_job_free(j);
		return false;
	}
	if (P.pending >= AUTHPOOL_QUEUE_MAX) {
		log_warning("authentication queue full: method=%s user=%s pending=%d max=%d",
			    j->method, j->user, P.pending, AUTHPOOL_QUEUE_MAX);
		authpool_job_free(j);
		return false;
	}
	j->owner = owner;
	j->slot = slot;
	j->queued = true;
	j->next = NULL;
	*slot = j;
	P.pending++;
	pthread_mutex_lock(&P.lock);
	*P.queue_tail = j;
	P.queue_tail = &j->next;
	pthread_cond_signal(&P.cond);
	pthread_mutex_unlock(&P.lock);
	return true;
}

void authpool_owner_gone(struct authpool_job **slot)
{
	struct authpool_job *j = *slot;
	if (!j)
		return;
	*slot = NULL;
	if (j->queued)
		j->owner = NULL;       /* a thread may hold it: freed when done */
	else
		authpool_job_free(j);
}

bool authpool_stop(void)
{
	if (!P.started)
		return true;
	pthread_mutex_lock(&P.lock);
	P.stopping = true;
	bool idle = P.running == 0;
	pthread_mutex_unlock(&P.lock);
	return idle;
}

static void free_list(struct authpool_job *j)
{
	while (j) {
		struct authpool_job *next = j->next;
		authpool_job_free(j);
		j = next;
	}
}

void authpool_free(void)
{
	if (!P.started)
		return;
	pthread_mutex_lock(&P.lock);
	free_list(P.queue);
	free_list(P.done);
	P.queue = P.done = NULL;
	P.queue_tail = &P.queue;
	pthread_mutex_unlock(&P.lock);
	event_free(P.ev);
	P.ev = NULL;
	close(P.efd);
	P.efd = -1;
}

int authpool_pending(void)
{
	return P.pending;
}
