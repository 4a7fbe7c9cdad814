/* pgcrew — basic types shared by every module.
 * Kept free of prototypes so any header may include it without cycles. */
#ifndef PGCREW_TYPES_H
#define PGCREW_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef int64_t usec_t;            /* microseconds; times and durations */

#define USEC_PER_SEC  ((usec_t)1000000)
#define USEC_PER_MSEC ((usec_t)1000)

#define MUSTCHECK __attribute__((warn_unused_result))
#define PRINTF(a, b) __attribute__((format(printf, a, b)))
#define NORETURN __attribute__((noreturn))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* A password or stored secret (auth_file, password=, auth_query, plain
 * auth): up to 65,535 bytes, as in PgBouncer 1.26, plus the NUL. A longer one is
 * an error where it is read, never cut short. */
#define SECRET_MAX_LEN 65536

/* A cancel key as the protocol carries it (BackendKeyData, CancelRequest):
 * a process id and a secret of 4 bytes (protocol 3.0) to 256 (3.2). What
 * pgcrew puts in the keys it makes is proto/cancelkey.h's business. */
#define CANCELKEY_MIN 4
#define CANCELKEY_MAX 256
struct cancelkey {
	uint32_t pid;
	uint16_t len;                     /* secret bytes; 0: no key */
	uint8_t secret[CANCELKEY_MAX];
};

#endif
