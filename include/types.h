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
 * auth): up to 2048 bytes, as in PgBouncer, plus the NUL. A longer one is
 * an error where it is read, never cut short. */
#define SECRET_MAX_LEN 2049

#endif
