/* pgcrew — unit tests for dns.c: a private event_base drives the real c-ares
 * channel. There is no network: names come from /etc/hosts or a temporary
 * hosts file (CARES_HOSTS); DNS goes either to an unused loopback address,
 * which refuses at once, or, where port 53 may be bound, to a tiny DNS server
 * on another loopback address served by the same event loop. The cache's
 * clock is the tests' fake one (fakeclock.h), so TTLs are exact; c-ares
 * keeps its own timers, and a lookup's bound is on the real clock. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "dns.h"
#include "fakeclock.h"

#define UNUSED __attribute__((unused))
#define LOOP_LIMIT_USEC (60 * USEC_PER_SEC) /* a lookup ends long before (real time) */
#define NOWHERE "nonexistent.invalid"       /* .invalid never resolves (RFC 6761) */

static char dir[64];
static char resolv_a[128], resolv_b[128], resolv_fake[128], hosts[128];
static char refuse_ip[32], fake_ip[32];    /* per-process loopback addresses */
static struct event_base *base;
static bool tearing_down;                  /* a failed test may leave requests on its stack */

struct result {
	int calls;
	enum dns_status st;
	int n;
	struct sockaddr_storage addrs[DNS_MAX_ADDRS];
	char err[256];
	bool err_null;
	struct dns_req *cancel_other;          /* cancelled from inside the callback */
	bool shutdown_in_cb;                   /* calls dns_shutdown() from the callback */
	struct result *again;                  /* resolves NOWHERE again from the callback */
	struct dns_req *again_req;
};

static void on_result(void *arg, enum dns_status st, const struct sockaddr_storage *addrs, int n,
		      const char *errmsg)
{
	struct result *r = arg;

	if (tearing_down)
		return;
	r->calls++;
	r->st = st;
	r->n = n;
	assert_true(n >= 0 && n <= DNS_MAX_ADDRS);
	assert_true((n > 0) == (addrs != NULL));
	if (n > 0)
		memcpy(r->addrs, addrs, (size_t)n * sizeof(*addrs));
	r->err_null = errmsg == NULL;
	snprintf(r->err, sizeof(r->err), "%s", errmsg ? errmsg : "");
	if (r->cancel_other) {
		dns_cancel(r->cancel_other);
		r->cancel_other = NULL;
	}
	if (r->shutdown_in_cb)
		dns_shutdown();
	if (r->again)
		r->again_req = dns_resolve(NOWHERE, 1234, on_result, r->again);
}

/*
 * Fixtures
 */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
}

static void write_conf(const char *path, const char *ip)
{
	char text[128];

	snprintf(text, sizeof(text), "nameserver %s\n", ip);
	write_file(path, text);
}

static int make_files(void **state UNUSED)
{
	snprintf(dir, sizeof(dir), "/tmp/pgcrew-dns-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(resolv_a, sizeof(resolv_a), "%s/resolv-a.conf", dir);
	snprintf(resolv_b, sizeof(resolv_b), "%s/resolv-b.conf", dir);
	snprintf(resolv_fake, sizeof(resolv_fake), "%s/resolv-fake.conf", dir);
	snprintf(hosts, sizeof(hosts), "%s/hosts", dir);
	/* Addresses in 127/8 picked from the pid, so that concurrent runs of
	 * this test never talk to each other's server. */
	snprintf(refuse_ip, sizeof(refuse_ip), "127.%d.%d.1", 100 + (int)(getpid() % 100),
		 1 + (int)(getpid() / 100 % 250));
	snprintf(fake_ip, sizeof(fake_ip), "127.%d.%d.2", 100 + (int)(getpid() % 100),
		 1 + (int)(getpid() / 100 % 250));
	write_conf(resolv_a, refuse_ip);
	write_conf(resolv_b, refuse_ip);
	write_conf(resolv_fake, fake_ip);
	write_file(hosts, "127.0.0.1 localhost\n");
	return 0;
}

static int remove_files(void **state UNUSED)
{
	unlink(resolv_a);
	unlink(resolv_b);
	unlink(resolv_fake);
	unlink(hosts);
	rmdir(dir);
	return 0;
}

static struct dns_settings settings(int64_t max_ttl, int64_t nxdomain_ttl, const char *conf)
{
	struct dns_settings s = { max_ttl, nxdomain_ttl, conf };
	return s;
}

static int start_with(const struct dns_settings *s)
{
	base = event_base_new();
	if (!base)
		return -1;
	setenv("CARES_HOSTS", hosts, 1);
	return dns_init(base, s);
}

static int stop(void **state);

static int start(void **state UNUSED)
{
	struct dns_settings s = settings(15000000, 15000000, resolv_a);
	return start_with(&s);
}

static int start_no_negative_cache(void **state UNUSED)
{
	struct dns_settings s = settings(15000000, 0, resolv_a);
	return start_with(&s);
}

/*
 * A minimal DNS server for the tests that need real DNS answers. It answers
 * A/AAAA for the names in fake_zone, NXDOMAIN for everything else, and drops
 * the first query of each type for names marked `drop_first`, so that only
 * the c-ares timer (a retransmission) can complete those.
 */

struct fake_name {
	const char *name;
	const char *v4[2];
	const char *v6;
	bool drop_first;
};

static const struct fake_name fake_zone[] = {
	{ "db.pgcrew.test", { "10.1.2.3", "10.1.2.4" }, "2001:db8::1", false },
	{ "shared.pgcrew.test", { "10.9.9.9", NULL }, NULL, false },
	{ "slow.pgcrew.test", { "10.7.7.7", NULL }, NULL, true },
};

#define DNS_T_A    1
#define DNS_T_AAAA 28

static struct {
	int fd;                                  /* -1: port 53 could not be bound */
	struct event *ev;
	int n_seen;
	struct { char name[128]; int type; } seen[64];
} fake = { .fd = -1 };

static int fake_count(const char *name, int type)
{
	int n = 0;

	for (int i = 0; i < fake.n_seen; i++)
		n += strcmp(fake.seen[i].name, name) == 0 && fake.seen[i].type == type;
	return n;
}

/* Reads the question name at buf+12; returns the offset just past QTYPE/QCLASS. */
static size_t fake_parse_question(const uint8_t *buf, size_t len, char *name, size_t size, int *type)
{
	size_t off = 12, used = 0;

	while (off < len && buf[off] != 0) {
		size_t lab = buf[off++];
		if (lab > 63 || off + lab > len || used + lab + 2 > size)
			return 0;
		if (used)
			name[used++] = '.';
		for (size_t i = 0; i < lab; i++)
			name[used++] = (char)(buf[off + i] | 0x20);
		off += lab;
	}
	name[used] = 0;
	if (off + 5 > len)
		return 0;
	*type = buf[off + 1] << 8 | buf[off + 2];
	return off + 5;
}

static size_t fake_put_answer(uint8_t *out, size_t off, int type, const char *ip)
{
	size_t rdlen = type == DNS_T_A ? 4 : 16;
	const uint8_t rr[] = { 0xc0, 12, 0, (uint8_t)type, 0, 1, 0, 0, 0, 1, 0, (uint8_t)rdlen };

	memcpy(out + off, rr, sizeof(rr));    /* name -> question, class IN, TTL 1 s */
	off += sizeof(rr);
	assert_int_equal(inet_pton(type == DNS_T_A ? AF_INET : AF_INET6, ip, out + off), 1);
	return off + rdlen;
}

static void fake_on_query(evutil_socket_t fd, short what UNUSED, void *arg UNUSED)
{
	uint8_t buf[512], out[1024];
	struct sockaddr_storage from;
	socklen_t fromlen = sizeof(from);
	ssize_t n = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &fromlen);
	const struct fake_name *z = NULL;
	char name[128];
	int type = 0, ancount = 0;
	size_t off;

	if (n < 12 || !(off = fake_parse_question(buf, (size_t)n, name, sizeof(name), &type)))
		return;
	if (fake.n_seen < (int)ARRAY_SIZE(fake.seen)) {
		snprintf(fake.seen[fake.n_seen].name, sizeof(fake.seen[0].name), "%s", name);
		fake.seen[fake.n_seen++].type = type;
	}
	for (size_t i = 0; i < ARRAY_SIZE(fake_zone); i++) {
		if (strcmp(fake_zone[i].name, name) == 0)
			z = &fake_zone[i];
	}
	if (z && z->drop_first && fake_count(name, type) == 1)
		return;
	memcpy(out, buf, off);
	out[2] = 0x81;                            /* QR, RD */
	out[3] = z ? 0x80 : 0x83;                 /* RA; NOERROR or NXDOMAIN */
	memset(out + 8, 0, 4);                    /* no authority or additional records */
	for (int i = 0; z && type == DNS_T_A && i < 2 && z->v4[i]; i++, ancount++)
		off = fake_put_answer(out, off, DNS_T_A, z->v4[i]);
	if (z && type == DNS_T_AAAA && z->v6) {
		off = fake_put_answer(out, off, DNS_T_AAAA, z->v6);
		ancount++;
	}
	out[6] = 0;
	out[7] = (uint8_t)ancount;
	assert_int_equal(sendto(fd, out, off, 0, (struct sockaddr *)&from, fromlen), (ssize_t)off);
}

static void fake_start(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(53) };

	fake.n_seen = 0;
	fake.fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(fake.fd >= 0);
	assert_int_equal(inet_pton(AF_INET, fake_ip, &sin.sin_addr), 1);
	if (bind(fake.fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		close(fake.fd);               /* not privileged: those tests skip */
		fake.fd = -1;
		return;
	}
	fake.ev = event_new(base, fake.fd, EV_READ | EV_PERSIST, fake_on_query, NULL);
	assert_non_null(fake.ev);
	assert_int_equal(event_add(fake.ev, NULL), 0);
}

static int start_fake(void **state UNUSED)
{
	struct dns_settings s = settings(15000000, 15000000, resolv_fake);

	if (start_with(&s) < 0)
		return -1;
	fake_start();
	return 0;
}

static int stop_fake(void **state)
{
	if (fake.ev)
		event_free(fake.ev);
	if (fake.fd >= 0)
		close(fake.fd);
	fake.ev = NULL;
	fake.fd = -1;
	return stop(state);
}

static int stop(void **state UNUSED)
{
	tearing_down = true;
	dns_shutdown();
	tearing_down = false;
	assert_int_equal(dns_pending_count(), 0);
	event_base_free(base);
	base = NULL;
	unsetenv("CARES_HOSTS");
	return 0;
}

static void tick(evutil_socket_t fd UNUSED, short what UNUSED, void *arg UNUSED)
{
}

/* Runs the loop until no lookup is in flight; fails the test if that takes
 * longer than LOOP_LIMIT_USEC. A 50 ms tick keeps each iteration bounded. */
static void run_until_idle(void)
{
	struct timeval tv = { 0, 50000 };
	struct event *t = event_new(base, -1, EV_PERSIST, tick, NULL);
	usec_t deadline = fakeclock_real() + LOOP_LIMIT_USEC;

	assert_non_null(t);
	assert_int_equal(event_add(t, &tv), 0);
	while (dns_pending_count() > 0) {
		assert_true(fakeclock_real() < deadline);
		assert_true(event_base_loop(base, EVLOOP_ONCE) >= 0);
	}
	event_free(t);
}

/* Resolves and runs the loop until the callback has run (or nothing is pending). */
static void resolve_wait(const char *host, int port, struct result *r)
{
	memset(r, 0, sizeof(*r));
	(void)dns_resolve(host, port, on_result, r);
	run_until_idle();
	assert_int_equal(r->calls, 1);
}

static const char *addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	const void *ip = ss->ss_family == AF_INET
		? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	assert_non_null(inet_ntop(ss->ss_family, ip, buf, (socklen_t)len));
	return buf;
}

static int port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static void assert_addr(const struct result *r, int i, const char *ip, int port)
{
	char buf[INET6_ADDRSTRLEN];

	assert_true(i < r->n);
	assert_string_equal(addr_str(&r->addrs[i], buf, sizeof(buf)), ip);
	assert_int_equal(port_of(&r->addrs[i]), port);
}

static void assert_failed_lookup(const struct result *r)
{
	assert_int_equal(r->calls, 1);
	assert_true(r->st == DNS_NOTFOUND || r->st == DNS_FAILED);
	assert_int_equal(r->n, 0);
	assert_false(r->err_null);
	assert_true(r->err[0] != 0);
}

/*
 * IP literals: answered synchronously, even with no resolver running.
 */

static void test_literals(void **state UNUSED)
{
	struct result r = { 0 };

	assert_null(dns_resolve("192.0.2.7", 6432, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 1);
	assert_true(r.err_null);
	assert_int_equal(r.addrs[0].ss_family, AF_INET);
	assert_addr(&r, 0, "192.0.2.7", 6432);

	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("2001:db8::5", 5432, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.addrs[0].ss_family, AF_INET6);
	assert_addr(&r, 0, "2001:db8::5", 5432);

	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("fe80::1%3", 5432, on_result, &r));
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(((struct sockaddr_in6 *)&r.addrs[0])->sin6_scope_id, 3);

	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("fe80::1%no-such-if0", 5432, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_FAILED);

	/* Not literals: no resolver is running in this test. */
	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("127.0.0.1.example", 5432, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_FAILED);
	assert_int_equal(dns_pending_count(), 0);
}

static void test_empty_name(void **state UNUSED)
{
	struct result r = { 0 };

	assert_null(dns_resolve("", 5432, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_FAILED);
}

static void test_status_names(void **state UNUSED)
{
	assert_string_equal(dns_status_name(DNS_OK), "ok");
	assert_string_equal(dns_status_name(DNS_CANCELLED), "cancelled");
	assert_string_equal(dns_status_name(DNS_STATUS_COUNT), "?");
}

/*
 * Names from hosts files
 */

static void test_localhost_from_etc_hosts(void **state UNUSED)
{
	struct result r;

	unsetenv("CARES_HOSTS");              /* the real /etc/hosts */
	resolve_wait("localhost", 5432, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_true(r.n >= 1);
	assert_addr(&r, 0, "127.0.0.1", 5432);
	assert_int_equal(dns_cache_count(), 1);
}

static void test_cache_hit_within_ttl(void **state UNUSED)
{
	struct dns_settings s = settings(15000000, 15000000, resolv_a);
	struct result r;

	write_file(hosts, "127.0.0.5 cached.pgcrew.test\n");
	resolve_wait("cached.pgcrew.test", 1000, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_addr(&r, 0, "127.0.0.5", 1000);

	/* The hosts file changes, the cached answer does not; the hit is
	 * synchronous, case-insensitive and carries the new request's port. */
	write_file(hosts, "127.0.0.6 cached.pgcrew.test\n");
	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("CACHED.pgcrew.test", 2000, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_OK);
	assert_addr(&r, 0, "127.0.0.5", 2000);

	/* A reload with dns_max_ttl = 0 expires the entry at once. */
	s.max_ttl_usec = 0;
	dns_apply_settings(&s);
	assert_int_equal(dns_cache_count(), 0);
	resolve_wait("cached.pgcrew.test", 3000, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_addr(&r, 0, "127.0.0.6", 3000);
	assert_int_equal(dns_cache_count(), 0);
	write_file(hosts, "127.0.0.1 localhost\n");
}

static void test_ipv4_first_dedup_and_limit(void **state UNUSED)
{
	struct result r;
	char many[1024] = "";

	for (int i = 1; i <= 10; i++) {
		size_t len = strlen(many);
		snprintf(many + len, sizeof(many) - len, "10.0.0.%d many.pgcrew.test\n", i);
	}
	strcat(many, "::1 multi.pgcrew.test\n"
		     "127.0.0.2 multi.pgcrew.test\n"
		     "2001:db8::9 multi.pgcrew.test\n"
		     "127.0.0.3 multi.pgcrew.test\n"
		     "127.0.0.2 multi.pgcrew.test\n");
	write_file(hosts, many);

	resolve_wait("multi.pgcrew.test", 7000, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, 4);
	assert_addr(&r, 0, "127.0.0.2", 7000);
	assert_addr(&r, 1, "127.0.0.3", 7000);
	assert_int_equal(r.addrs[2].ss_family, AF_INET6);
	assert_int_equal(r.addrs[3].ss_family, AF_INET6);

	resolve_wait("many.pgcrew.test", 7001, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_int_equal(r.n, DNS_MAX_ADDRS);
	for (int i = 0; i < r.n; i++)
		assert_int_equal(r.addrs[i].ss_family, AF_INET);
	write_file(hosts, "127.0.0.1 localhost\n");
}

struct seen {
	int n;
	char host[4][64];
	char addrs[4][256];
	int64_t ttl[4];
};

static void collect(void *arg, const char *host, int64_t ttl_left, const char *addrs)
{
	struct seen *s = arg;

	assert_true(s->n < 4);
	snprintf(s->host[s->n], sizeof(s->host[0]), "%s", host);
	snprintf(s->addrs[s->n], sizeof(s->addrs[0]), "%s", addrs);
	s->ttl[s->n] = ttl_left;
	s->n++;
}

static void test_cache_foreach(void **state UNUSED)
{
	struct seen seen = { 0 };
	struct result r;

	write_file(hosts, "::1 show.pgcrew.test\n127.0.0.4 show.pgcrew.test\n");
	resolve_wait("show.pgcrew.test", 5432, &r);
	resolve_wait(NOWHERE, 5432, &r);
	assert_failed_lookup(&r);

	assert_int_equal(dns_cache_foreach(collect, &seen), 2);
	assert_int_equal(seen.n, 2);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(seen.ttl[i], 15000000);         /* the clock stood still */
		if (strcmp(seen.host[i], "show.pgcrew.test") == 0)
			assert_string_equal(seen.addrs[i], "127.0.0.4,::1");
		else {
			assert_string_equal(seen.host[i], NOWHERE);
			assert_string_equal(seen.addrs[i], "");
		}
	}
	assert_int_equal(dns_cache_count(), 2);
	write_file(hosts, "127.0.0.1 localhost\n");
}

/* An answer is served from the cache for dns_max_ttl, then asked again. */
static void test_cache_expires_after_ttl(void **state UNUSED)
{
	struct seen seen = { 0 };
	struct result r;

	write_file(hosts, "127.0.0.5 ttl.pgcrew.test\n");
	resolve_wait("ttl.pgcrew.test", 1000, &r);
	assert_addr(&r, 0, "127.0.0.5", 1000);
	write_file(hosts, "127.0.0.6 ttl.pgcrew.test\n");

	fakeclock_advance(15 * USEC_PER_SEC - 1);
	assert_int_equal(dns_cache_foreach(collect, &seen), 1);
	assert_int_equal(seen.ttl[0], 1);
	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("ttl.pgcrew.test", 1000, on_result, &r));    /* a hit */
	assert_addr(&r, 0, "127.0.0.5", 1000);

	fakeclock_advance(1);
	assert_int_equal(dns_cache_count(), 0);
	resolve_wait("ttl.pgcrew.test", 1000, &r);
	assert_addr(&r, 0, "127.0.0.6", 1000);
	write_file(hosts, "127.0.0.1 localhost\n");
}

/*
 * Names that need DNS, which fails here: bounded, cached, shared, cancellable.
 */

static void test_nonexistent_fails_and_is_cached(void **state UNUSED)
{
	struct result r = { 0 }, again = { 0 };

	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &r));
	assert_int_equal(r.calls, 0);
	assert_int_equal(dns_pending_count(), 1);
	run_until_idle();
	assert_failed_lookup(&r);

	/* dns_nxdomain_ttl = 15 s: the failure is answered from the cache. */
	fakeclock_advance(15 * USEC_PER_SEC - 1);
	assert_null(dns_resolve(NOWHERE, 5432, on_result, &again));
	assert_int_equal(again.calls, 1);
	assert_int_equal(again.st, r.st);
	assert_string_equal(again.err, r.err);
	/* Then it is forgotten. */
	fakeclock_advance(1);
	assert_int_equal(dns_cache_count(), 0);
}

static void test_nxdomain_ttl_zero(void **state UNUSED)
{
	struct result r = { 0 }, again = { 0 };

	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &r));
	run_until_idle();
	assert_failed_lookup(&r);
	assert_int_equal(dns_cache_count(), 0);

	/* No negative caching: a second request asks again. */
	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &again));
	assert_int_equal(again.calls, 0);
	run_until_idle();
	assert_failed_lookup(&again);
}

static void test_cancel_before_completion(void **state UNUSED)
{
	struct result cancelled = { 0 }, kept = { 0 };
	struct dns_req *req = dns_resolve(NOWHERE, 5432, on_result, &cancelled);

	assert_non_null(req);
	dns_cancel(req);
	dns_cancel(NULL);
	/* The lookup itself goes on and its answer is cached. */
	assert_int_equal(dns_pending_count(), 1);
	run_until_idle();
	assert_int_equal(cancelled.calls, 0);
	assert_null(dns_resolve(NOWHERE, 5432, on_result, &kept));
	assert_int_equal(kept.calls, 1);
	assert_int_equal(cancelled.calls, 0);
}

static void test_concurrent_requests_share_a_lookup(void **state UNUSED)
{
	struct result a = { 0 }, b = { 0 }, c = { 0 };
	struct dns_req *ra = dns_resolve(NOWHERE, 5432, on_result, &a);
	struct dns_req *rb = dns_resolve(NOWHERE, 6432, on_result, &b);
	struct dns_req *rc = dns_resolve("NONEXISTENT.invalid", 7432, on_result, &c);

	assert_non_null(ra);
	assert_non_null(rb);
	assert_non_null(rc);
	assert_ptr_not_equal(ra, rb);
	assert_int_equal(dns_pending_count(), 1);
	run_until_idle();
	assert_failed_lookup(&a);
	assert_failed_lookup(&b);
	assert_failed_lookup(&c);
	assert_int_equal(a.st, b.st);
	assert_string_equal(a.err, c.err);
}

/* Answers are delivered one by one; a callback may cancel a sibling whose
 * answer is already queued, and the sibling then never hears back. */
static void test_cancel_sibling_from_callback(void **state UNUSED)
{
	struct result a = { 0 }, b = { 0 };
	struct dns_req *ra = dns_resolve(NOWHERE, 5432, on_result, &a);
	struct dns_req *rb = dns_resolve(NOWHERE, 5432, on_result, &b);

	assert_non_null(ra);
	assert_non_null(rb);
	a.cancel_other = rb;
	run_until_idle();
	assert_int_equal(a.calls, 1);
	assert_int_equal(b.calls, 0);
}

/* Callbacks may re-enter: a new request for the name just answered is a
 * cache hit; dns_shutdown() from a callback still answers the sibling. */
static void test_reentry_from_callbacks(void **state UNUSED)
{
	struct result a = { 0 }, b = { 0 }, nested = { 0 };

	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &a));
	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &b));
	a.again = &nested;
	b.shutdown_in_cb = true;
	run_until_idle();
	assert_failed_lookup(&a);
	assert_failed_lookup(&b);
	assert_null(a.again_req);
	assert_int_equal(nested.calls, 1);
	assert_int_equal(nested.st, a.st);
	assert_int_equal(dns_cache_count(), 0);     /* shut down */
}

static void test_shutdown_cancels_pending(void **state UNUSED)
{
	struct result a = { 0 }, b = { 0 }, after = { 0 };

	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &a));
	assert_non_null(dns_resolve("other.invalid", 5432, on_result, &b));
	assert_int_equal(dns_pending_count(), 2);
	dns_shutdown();
	assert_int_equal(a.calls, 1);
	assert_int_equal(a.st, DNS_CANCELLED);
	assert_int_equal(b.calls, 1);
	assert_int_equal(b.st, DNS_CANCELLED);
	assert_int_equal(dns_pending_count(), 0);
	assert_int_equal(dns_cache_count(), 0);

	/* Stopped: names fail at once, literals still work. */
	assert_null(dns_resolve("localhost", 5432, on_result, &after));
	assert_int_equal(after.st, DNS_FAILED);
	assert_null(dns_resolve("127.0.0.1", 5432, on_result, &after));
	assert_int_equal(after.st, DNS_OK);
	dns_shutdown();                       /* idempotent */
}

static void test_reload_new_resolv_conf_restarts_lookup(void **state UNUSED)
{
	struct dns_settings s = settings(15000000, 15000000, resolv_b);
	struct result r = { 0 };

	assert_non_null(dns_resolve(NOWHERE, 5432, on_result, &r));
	assert_int_equal(dns_pending_count(), 1);
	dns_apply_settings(&s);
	assert_int_equal(r.calls, 0);
	assert_int_equal(dns_pending_count(), 1);
	run_until_idle();
	assert_failed_lookup(&r);

	/* Back to the system resolv.conf with nothing in flight. */
	s.resolv_conf = "";
	dns_apply_settings(&s);
	assert_int_equal(dns_pending_count(), 0);
	assert_int_equal(r.calls, 1);
}

/*
 * Real DNS answers from the fake server (skipped when port 53 is not ours).
 */

static void test_dns_answer_async_and_cached(void **state UNUSED)
{
	struct seen seen = { 0 };
	struct result r = { 0 };

	if (fake.fd < 0)
		skip();
	assert_non_null(dns_resolve("db.pgcrew.test", 5432, on_result, &r));
	assert_int_equal(r.calls, 0);
	run_until_idle();
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.st, DNS_OK);
	assert_true(r.err_null);
	assert_int_equal(r.n, 3);
	assert_addr(&r, 0, "10.1.2.3", 5432);
	assert_addr(&r, 1, "10.1.2.4", 5432);
	assert_addr(&r, 2, "2001:db8::1", 5432);
	assert_int_equal(fake_count("db.pgcrew.test", DNS_T_A), 1);
	assert_int_equal(fake_count("db.pgcrew.test", DNS_T_AAAA), 1);

	/* The records' TTL of 1 s is ignored, as PgBouncer does: dns_max_ttl rules. */
	assert_int_equal(dns_cache_foreach(collect, &seen), 1);
	assert_string_equal(seen.addrs[0], "10.1.2.3,10.1.2.4,2001:db8::1");
	assert_int_equal(seen.ttl[0], 15000000);

	memset(&r, 0, sizeof(r));
	assert_null(dns_resolve("db.pgcrew.test", 6543, on_result, &r));
	assert_int_equal(r.calls, 1);
	assert_addr(&r, 0, "10.1.2.3", 6543);
	assert_int_equal(fake_count("db.pgcrew.test", DNS_T_A), 1);
}

static void test_dns_nxdomain_is_notfound(void **state UNUSED)
{
	struct result r;

	if (fake.fd < 0)
		skip();
	resolve_wait(NOWHERE, 5432, &r);
	assert_int_equal(r.st, DNS_NOTFOUND);
	assert_true(r.err[0] != 0);
	assert_true(fake_count(NOWHERE, DNS_T_A) >= 1);
}

static void test_dns_one_query_for_concurrent_requests(void **state UNUSED)
{
	struct result r[3] = { { 0 } };

	if (fake.fd < 0)
		skip();
	for (int i = 0; i < 3; i++)
		assert_non_null(dns_resolve("shared.pgcrew.test", 5000 + i, on_result, &r[i]));
	assert_int_equal(dns_pending_count(), 1);
	run_until_idle();
	for (int i = 0; i < 3; i++) {
		assert_int_equal(r[i].calls, 1);
		assert_int_equal(r[i].st, DNS_OK);
		assert_addr(&r[i], 0, "10.9.9.9", 5000 + i);
	}
	assert_int_equal(fake_count("shared.pgcrew.test", DNS_T_A), 1);
	assert_int_equal(fake_count("shared.pgcrew.test", DNS_T_AAAA), 1);
}

/* The first queries are dropped: only the ares_timeout() timer makes c-ares
 * retransmit (after its 5 s default), so this test takes about 5 s. */
static void test_dns_retransmit_driven_by_timer(void **state UNUSED)
{
	struct result r;

	if (fake.fd < 0)
		skip();
	resolve_wait("slow.pgcrew.test", 5432, &r);
	assert_int_equal(r.st, DNS_OK);
	assert_addr(&r, 0, "10.7.7.7", 5432);
	assert_int_equal(fake_count("slow.pgcrew.test", DNS_T_A), 2);
}

static void test_init_twice_refused(void **state UNUSED)
{
	struct dns_settings s = settings(1, 1, NULL);
	assert_int_equal(dns_init(base, &s), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_literals),
		cmocka_unit_test(test_empty_name),
		cmocka_unit_test(test_status_names),
		cmocka_unit_test_setup_teardown(test_localhost_from_etc_hosts, start, stop),
		cmocka_unit_test_setup_teardown(test_cache_hit_within_ttl, start, stop),
		cmocka_unit_test_setup_teardown(test_ipv4_first_dedup_and_limit, start, stop),
		cmocka_unit_test_setup_teardown(test_cache_foreach, start, stop),
		cmocka_unit_test_setup_teardown(test_cache_expires_after_ttl, start, stop),
		cmocka_unit_test_setup_teardown(test_nonexistent_fails_and_is_cached, start, stop),
		cmocka_unit_test_setup_teardown(test_nxdomain_ttl_zero, start_no_negative_cache, stop),
		cmocka_unit_test_setup_teardown(test_cancel_before_completion, start, stop),
		cmocka_unit_test_setup_teardown(test_concurrent_requests_share_a_lookup, start, stop),
		cmocka_unit_test_setup_teardown(test_cancel_sibling_from_callback, start, stop),
		cmocka_unit_test_setup_teardown(test_reentry_from_callbacks, start, stop),
		cmocka_unit_test_setup_teardown(test_shutdown_cancels_pending, start, stop),
		cmocka_unit_test_setup_teardown(test_reload_new_resolv_conf_restarts_lookup, start, stop),
		cmocka_unit_test_setup_teardown(test_init_twice_refused, start, stop),
		cmocka_unit_test_setup_teardown(test_dns_answer_async_and_cached, start_fake, stop_fake),
		cmocka_unit_test_setup_teardown(test_dns_nxdomain_is_notfound, start_fake, stop_fake),
		cmocka_unit_test_setup_teardown(test_dns_one_query_for_concurrent_requests, start_fake,
						stop_fake),
		cmocka_unit_test_setup_teardown(test_dns_retransmit_driven_by_timer, start_fake, stop_fake),
	};

	return cmocka_run_group_tests(tests, make_files, remove_files);
}
