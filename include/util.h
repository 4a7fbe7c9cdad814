/* pgcrew — small helpers every module uses: intrusive lists, clocks,
 * socket options, checked allocation. */
#ifndef PGCREW_UTIL_H
#define PGCREW_UTIL_H

#include "types.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Intrusive doubly-linked list; an empty list points to itself. */
struct list {
	struct list *next, *prev;
};

#define LIST_INIT(name) { &(name), &(name) }
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))

static inline void list_init(struct list *l) { l->next = l->prev = l; }
static inline bool list_empty(const struct list *l) { return l->next == l; }

static inline void list_append(struct list *head, struct list *item)
{
	item->prev = head->prev;
	item->next = head;
	head->prev->next = item;
	head->prev = item;
}

static inline void list_prepend(struct list *head, struct list *item)
{
	item->next = head->next;
	item->prev = head;
	head->next->prev = item;
	head->next = item;
}

static inline void list_del(struct list *item)
{
	item->prev->next = item->next;
	item->next->prev = item->prev;
	list_init(item);
}

static inline struct list *list_first(const struct list *head)
{
	return list_empty(head) ? NULL : head->next;
}

#define list_for_each(pos, head) \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)
#define list_for_each_safe(pos, tmp, head) \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

/* Monotonic microseconds; `now` is refreshed once per loop iteration. */
usec_t util_monotonic(void);
usec_t util_realtime(void);

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
size_t strlcpy_(char *dst, const char *src, size_t size);

int util_set_nonblock(int fd) MUSTCHECK;
void util_set_cloexec(int fd);
/* TCP_NODELAY and the tcp_keepalive/tcp_user_timeout settings. */
struct config;
void util_tune_tcp(int fd, const struct config *cfg);
/* "1.2.3.4:5678" / "[::1]:5678" / "unix:1234" */
/* "addr:port" for logs, "[addr]:port" for an IPv6 address, as PgBouncer. */
const char *util_addr_port(char *buf, size_t len, const char *addr, int port);
void util_format_addr(const struct sockaddr *sa, char *buf, size_t len, int *port);

/* "1.5s"-style durations for log lines such as "(age=12s)". */
void util_format_age(usec_t us, char *buf, size_t len);

#endif
