/* pgcrew — log sink. Lines look like PgBouncer's:
 *   2026-11-22 07:40:01.123 UTC [1234] LOG message
 * so operators' greps and log parsers keep working. */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

int log_verbose;

static struct {
	FILE *file;
	char *path;
	bool use_syslog;
	bool to_stderr;
	int worker;
} lg = { .to_stderr = true, .worker = -1 };

static const char *const level_names[] = {
	[LG_FATAL] = "FATAL", [LG_ERROR] = "ERROR", [LG_WARNING] = "WARNING",
	[LG_LOG] = "LOG", [LG_DEBUG] = "DEBUG", [LG_NOISE] = "NOISE",
};
_Static_assert(ARRAY_SIZE(level_names) == LG_COUNT, "level_names");

const char *log_level_name(enum log_level lvl)
{
	return lvl < LG_COUNT ? level_names[lvl] : "?";
}

static int syslog_facility(const char *name)
{
	static const struct { const char *n; int f; } tab[] = {
		{ "auth", LOG_AUTH }, { "authpriv", LOG_AUTHPRIV },
		{ "daemon", LOG_DAEMON }, { "user", LOG_USER },
		{ "local0", LOG_LOCAL0 }, { "local1", LOG_LOCAL1 },
		{ "local2", LOG_LOCAL2 }, { "local3", LOG_LOCAL3 },
		{ "local4", LOG_LOCAL4 }, { "local5", LOG_LOCAL5 },
		{ "local6", LOG_LOCAL6 }, { "local7", LOG_LOCAL7 },
	};
	for (size_t i = 0; name && i < ARRAY_SIZE(tab); i++)
		if (strcasecmp(name, tab[i].n) == 0)
			return tab[i].f;
	return LOG_DAEMON;
}

void log_setup(const struct log_settings *s)
{
	if (lg.file)
		fclose(lg.file);
	lg.file = NULL;
	free(lg.path);
	lg.path = NULL;
	if (s->logfile && *s->logfile) {
		lg.path = strdup(s->logfile);
		lg.file = fopen(s->logfile, "a");
		if (lg.file)
			setvbuf(lg.file, NULL, _IOLBF, 0);
		else
			fprintf(stderr, "cannot open logfile '%s': %s\n", s->logfile, strerror(errno));
	}
	if (s->syslog && !lg.use_syslog)
		openlog(s->syslog_ident ? s->syslog_ident : "pgcrew", LOG_PID,
			syslog_facility(s->syslog_facility));
	lg.use_syslog = s->syslog;
	lg.to_stderr = s->to_stderr;
	log_verbose = s->verbose;
}

void log_set_worker(int worker_id)
{
	lg.worker = worker_id;
}

void log_reopen(void)
{
	if (!lg.path)
		return;
	FILE *f = fopen(lg.path, "a");
	if (!f)
		return;
	setvbuf(f, NULL, _IOLBF, 0);
	if (lg.file)
		fclose(lg.file);
	lg.file = f;
}

static int syslog_prio(enum log_level lvl)
{
	switch (lvl) {
	case LG_FATAL: return LOG_CRIT;
	case LG_ERROR: return LOG_ERR;
	case LG_WARNING: return LOG_WARNING;
	case LG_LOG: return LOG_INFO;
	default: return LOG_DEBUG;
	}
}

static void log_write(enum log_level lvl, const char *msg)
{
	char ts[64];
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(ts, sizeof(ts), "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - n, ".%03d", (int)(tv.tv_usec / 1000));
	char zone[16];
	strftime(zone, sizeof(zone), "%Z", &tm);

	if (lg.to_stderr)
		fprintf(stderr, "%s %s [%d] %s %s\n", ts, zone, (int)getpid(), level_names[lvl], msg);
	if (lg.file)
		fprintf(lg.file, "%s %s [%d] %s %s\n", ts, zone, (int)getpid(), level_names[lvl], msg);
	if (lg.use_syslog)
		syslog(syslog_prio(lvl), "%s %s", level_names[lvl], msg);
}

static void log_vmsg(enum log_level lvl, int err, const char *fmt, va_list ap)
{
	char buf[2048];
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	if (n < 0)
		return;
	if (err && (size_t)n < sizeof(buf))
		snprintf(buf + n, sizeof(buf) - n, ": %s", strerror(err));
	log_write(lvl, buf);
}

void log_msg(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;
	if (lvl >= LG_DEBUG && log_verbose < (int)lvl - LG_LOG)
		return;
	va_start(ap, fmt);
	log_vmsg(lvl, 0, fmt, ap);
	va_end(ap);
}

void log_msg_errno(enum log_level lvl, const char *fmt, ...)
{
	va_list ap;
	int err = errno;
	va_start(ap, fmt);
	log_vmsg(lvl, err, fmt, ap);
	va_end(ap);
}

void fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	log_vmsg(LG_FATAL, 0, fmt, ap);
	va_end(ap);
	exit(1);
}

void fatal_errno(const char *fmt, ...)
{
	va_list ap;
	int err = errno;
	va_start(ap, fmt);
	log_vmsg(LG_FATAL, err, fmt, ap);
	va_end(ap);
	exit(1);
}
