/* pgcrew — logging: PgBouncer's level names and line format, to stderr,
 * a logfile and/or syslog. Debug levels test the verbosity before formatting. */
#ifndef PGCREW_LOG_H
#define PGCREW_LOG_H

#include "types.h"

enum log_level {
	LG_FATAL,
	LG_ERROR,
	LG_WARNING,
	LG_LOG,
	LG_DEBUG,          /* -v */
	LG_NOISE,          /* -vv */
	LG_COUNT
};

struct log_settings {
	const char *logfile;       /* NULL or "" = none */
	bool syslog;
	const char *syslog_ident;
	const char *syslog_facility;
	bool to_stderr;            /* false once daemonized or -q */
	int verbose;               /* 0 = LOG, 1 = DEBUG, 2+ = NOISE */
};

void log_setup(const struct log_settings *s);
void log_set_worker(int worker_id);   /* -1 for the supervisor */
void log_reopen(void);                /* after logrotate (SIGHUP) */
extern int log_verbose;               /* read by the macros below */

void log_msg(enum log_level lvl, const char *fmt, ...) PRINTF(2, 3);
void log_msg_errno(enum log_level lvl, const char *fmt, ...) PRINTF(2, 3);
void fatal(const char *fmt, ...) PRINTF(1, 2) NORETURN;
void fatal_errno(const char *fmt, ...) PRINTF(1, 2) NORETURN;

#define log_error(...)   log_msg(LG_ERROR, __VA_ARGS__)
#define log_warning(...) log_msg(LG_WARNING, __VA_ARGS__)
#define log_info(...)    log_msg(LG_LOG, __VA_ARGS__)
#define log_debug(...) do { if (log_verbose >= 1) log_msg(LG_DEBUG, __VA_ARGS__); } while (0)
#define log_noise(...) do { if (log_verbose >= 2) log_msg(LG_NOISE, __VA_ARGS__); } while (0)

const char *log_level_name(enum log_level lvl);

#endif
