/* pgcrew — small helpers: clocks, checked allocation, socket options,
 * address formatting. Kept tiny; anything with a concept gets its own file. */
#include "util.h"
#include "config.h"
#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

usec_t util_monotonic(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

usec_t util_realtime(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (usec_t)ts.tv_sec * USEC_PER_SEC + ts.tv_nsec / 1000;
}

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		fatal("out of memory (%zu bytes)", n);
	return p;
}

void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);
	if (!q)
		fatal("out of memory (%zu bytes)", n);
	return q;
}

void *xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (!p)
		fatal("out of memory (%zu x %zu bytes)", n, sz);
	return p;
}

char *xstrdup(const char *s)
{
	char *p = strdup(s ? s : "");
	if (!p)
		fatal("out of memory");
	return p;
}

size_t strlcpy_(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	if (size) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(dst, src, c);
		dst[c] = 0;
	}
	return n;
}

int util_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -1;
	return 0;
}

void util_set_cloexec(int fd)
{
	int fl = fcntl(fd, F_GETFD);
	if (fl >= 0)
		(void)fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
}

void util_tune_tcp(int fd, const struct config *cfg)
{
	int on = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
	if (cfg->tcp_keepalive) {
		(void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
		if (cfg->tcp_keepidle > 0)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &cfg->tcp_keepidle, sizeof(int));
		if (cfg->tcp_keepintvl > 0)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &cfg->tcp_keepintvl, sizeof(int));
		if (cfg->tcp_keepcnt > 0)
			(void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cfg->tcp_keepcnt, sizeof(int));
	}
	if (cfg->tcp_socket_buffer > 0) {
		int sz = (int)cfg->tcp_socket_buffer;
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	if (cfg->tcp_user_timeout > 0) {
		unsigned int ms = (unsigned int)cfg->tcp_user_timeout;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
	}
}

const char *util_addr_port(char *buf, size_t len, const char *addr, int port)
{
	snprintf(buf, len, strchr(addr, ':') ? "[%s]:%d" : "%s:%d", addr, port);
	return buf;
}

void util_format_addr(const struct sockaddr *sa, char *buf, size_t len, int *port)
{
	char host[INET6_ADDRSTRLEN] = "?";
	int p = 0;

	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		p = ntohs(in->sin_port);
		snprintf(buf, len, "%s", host);
		break;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		p = ntohs(in6->sin6_port);
		snprintf(buf, len, "%s", host);
		break;
	}
	case AF_UNIX:
		snprintf(buf, len, "unix");
		break;
	default:
		snprintf(buf, len, "?");
	}
	if (port)
		*port = p;
}

void util_format_age(usec_t us, char *buf, size_t len)
{
	if (us < 0)
		us = 0;
	snprintf(buf, len, "%llds", (long long)(us / USEC_PER_SEC));
}
