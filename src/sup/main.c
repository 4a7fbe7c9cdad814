/* pgcrew — command line, config load, daemonize, pidfile, privilege drop;
 * then the supervisor takes over. Same options as PgBouncer. */
#include "config.h"
#include "log.h"
#include "supervisor.h"
#include "util.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <openssl/opensslv.h>
#include <ares.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "build-config.h"

static void usage(FILE *f)
{
	fprintf(f,
		"%s is a PostgreSQL connection pooler.\n\n"
		"Usage:\n"
		"  %s [OPTION]... CONFIG_FILE\n\n"
		"Options:\n"
		"  -d, --daemon         run in the background (as a daemon)\n"
		"  -q, --quiet          run quietly\n"
		"  -R, --reboot, --upgrade\n"
		"                       online restart: take over the running pgcrew's sockets\n"
		"  -u, --user=USERNAME  assume identity of USERNAME\n"
		"  -v, --verbose        increase verbosity\n"
		"  -V, --version        show version, then exit\n"
		"  -h, --help           show this help, then exit\n",
		PACKAGE_NAME, PACKAGE_NAME);
}

static void version(void)
{
	printf("%s %s\n", PACKAGE_NAME, PACKAGE_VERSION);
	printf("libevent %s\nadns: c-ares %s\ntls: %s\n", event_get_version(),
	       ares_version(NULL), OPENSSL_VERSION_TEXT);
}

static int daemonize(void)
{
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	if (setsid() < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid > 0)
		_exit(0);
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
	return 0;
}

static int write_pidfile(const char *path)
{
	char buf[32];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_msg_errno(LG_ERROR, "cannot write pidfile %s", path);
		return -1;
	}
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	bool ok = write(fd, buf, (size_t)n) == n;
	close(fd);
	return ok ? 0 : -1;
}

/* After an online restart the file names the new process: leave it. */
static void remove_pidfile_if_ours(const char *path)
{
	char buf[32] = "";
	FILE *f = fopen(path, "r");
	if (!f)
		return;
	bool ours = fgets(buf, sizeof(buf), f) && atoi(buf) == (int)getpid();
	fclose(f);
	if (ours)
		unlink(path);
}

static int drop_privileges(const char *user)
{
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		log_error("could not find user '%s'", user);
		return -1;
	}
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		return -1;
	if (setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
		log_msg_errno(LG_ERROR, "could not switch to user '%s'", user);
		return -1;
	}
	return 0;
}

static void setup_logging(const struct config *cfg, const struct run_options *o, bool to_stderr)
{
	struct log_settings ls = {
		.logfile = cfg->logfile, .syslog = cfg->syslog != 0,
		.syslog_ident = cfg->syslog_ident, .syslog_facility = cfg->syslog_facility,
		.to_stderr = to_stderr, .verbose = o->verbose + cfg->verbose,
	};
	log_setup(&ls);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "daemon", no_argument, NULL, 'd' }, { "quiet", no_argument, NULL, 'q' },
		{ "reboot", no_argument, NULL, 'R' }, { "upgrade", no_argument, NULL, 'R' },
		{ "user", required_argument, NULL, 'u' },
		{ "verbose", no_argument, NULL, 'v' }, { "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
	};
	struct run_options o = { 0 };
	int ch;

	while ((ch = getopt_long(argc, argv, "dqRu:vVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'd': o.daemon = true; break;
		case 'q': o.quiet = true; break;
		case 'u': o.user = optarg; break;
		case 'v': o.verbose++; break;
		case 'V': version(); return 0;
		case 'h': usage(stdout); return 0;
		case 'R': o.takeover = true; break;
		default: usage(stderr); return 1;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 1;
	}
	o.config_path = argv[optind];

	struct config *cfg = NULL;
	struct config_error err;
	if (config_load(o.config_path, &cfg, &err) < 0) {
		fprintf(stderr, "FATAL cannot load config file: %s\n", err.msg);
		return 1;
	}
	setup_logging(cfg, &o, !o.quiet);
	if (o.daemon) {
		if (!cfg->logfile[0] && !cfg->syslog) {
			log_error("daemon mode needs logfile or syslog configured");
			config_free(cfg);
			return 1;
		}
		if (daemonize() < 0)
			fatal_errno("daemonize failed");
		setup_logging(cfg, &o, false);
	}
	if (cfg->pidfile[0] && write_pidfile(cfg->pidfile) < 0) {
		config_free(cfg);
		return 1;
	}
	const char *user = o.user ? o.user : (cfg->user[0] ? cfg->user : NULL);
	if (user && geteuid() == 0 && drop_privileges(user) < 0) {
		config_free(cfg);
		return 1;
	}
	char *pidfile = cfg->pidfile[0] ? xstrdup(cfg->pidfile) : NULL;
	int rc = supervisor_run(&o, cfg);
	if (pidfile)
		remove_pidfile_if_ours(pidfile);
	free(pidfile);
	return rc;
}
