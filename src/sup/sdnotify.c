/* pgcrew — sd_notify without libsystemd (see sdnotify.h): READY=1 once every
 * worker runs, RELOADING=1 / READY=1 around a reload, STOPPING=1 at
 * shutdown, so a Type=notify unit knows when pgcrew serves. */
#include "sdnotify.h"
#include "log.h"
#include "util.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

void sdnotify(const char *fmt, ...)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char msg[512];
	va_list ap;

	if (!path || !*path || strlen(path) >= sizeof(sa.sun_path))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	memcpy(sa.sun_path, path, strlen(path));
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = 0;          /* abstract namespace */
	socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return;
	if (sendto(fd, msg, strlen(msg), MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
		log_debug("sd_notify to %s failed", path);
	close(fd);
}

void sdnotify_forget(void)
{
	unsetenv("NOTIFY_SOCKET");
}
