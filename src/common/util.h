/* util.h: small shared pieces: monotonic clock, random bytes/ids, bounded
 * sleeps and a growable string buffer. No global state. */
#ifndef DLOCK_COMMON_UTIL_H
#define DLOCK_COMMON_UTIL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Milliseconds / microseconds on CLOCK_MONOTONIC (never jumps). */
/* The decimal digits of v, written so that they end at end; returns where
 * they start (at most 20 bytes before end). The one decimal writer of the
 * paths that run per request (RESP, HTTP heads and bodies, order ids),
 * where the printf family was a large share of the instructions. Inline:
 * it runs several times a request. */
static inline char *dlock__digits(char *end, uint64_t v)
{
    do {
        *--end = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return end;
}

int64_t dlock__now_ms(void);
int64_t dlock__now_us(void);
/* Wall clock, for log lines and records only (never for timeouts). */
int64_t dlock__wall_ms(void);

/* Fills buf with n random bytes from getrandom(2); 0 or DLOCK__EIO. */
int dlock__random_bytes(void *buf, size_t n);
/* Writes 2*n lowercase hex digits + NUL of n random bytes into out. */
int dlock__random_hex(char *out, size_t n);
/* Uniform random in [0, bound) (bound > 0); thread-safe, not for secrets. */
uint64_t dlock__random_below(uint64_t bound);
/* base * 2^attempt capped at cap, then +-50% jitter. */
int64_t dlock__backoff_ms(int64_t base_ms, int attempt, int64_t cap_ms);

void dlock__sleep_ms(int64_t ms);

/* The CLOCK_MONOTONIC time ms from now (a negative ms counts as 0), for
 * pthread_cond_timedwait on a condition made with dlock__cond_init. */
void dlock__abstime_ms(int64_t ms, struct timespec *out);
/* pthread_cond_init on CLOCK_MONOTONIC; 0 or an errno value. */
int dlock__cond_init(pthread_cond_t *cv);

/* Growable NUL-terminated buffer. On allocation failure it sets oom and
 * ignores further appends, so callers check once at the end. */
typedef struct dlock__buf {
    char *data;
    size_t len;
    size_t cap;
    bool oom;
} dlock__buf;
void dlock__buf_append(dlock__buf *b, const char *s, size_t n);
void dlock__buf_printf(dlock__buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlock__buf_free(dlock__buf *b);

/* Formats a message into the caller's err buffer (NULL or errlen 0: no-op)
 * and returns code, so a parser can write `return dlock__errf(code, err,
 * errlen, "...")` at each refusal. */
int dlock__errf(int code, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
