/* pgcrew — systemd's readiness protocol (sd_notify), spoken directly: one
 * datagram to $NOTIFY_SOCKET, no libsystemd. Only the supervisor talks;
 * without NOTIFY_SOCKET every call does nothing. */
#ifndef PGCREW_SDNOTIFY_H
#define PGCREW_SDNOTIFY_H

void sdnotify(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* In a worker after fork: the supervisor alone reports. */
void sdnotify_forget(void);

#endif
