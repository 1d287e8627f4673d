/* ratelimit.h: a distributed rate limiter (GCRA, the token bucket without a
 * refill timer) keyed per subject: a user, an IP, an API route. Every
 * decision is one round trip running one Lua script that reads the Redis
 * server's clock (TIME), so skewed client clocks change nothing.
 * Key layout and guarantees: docs/locks-family.md.
 *
 * Thread-safety: a dlock_ratelimit may be used by any number of threads at
 * once (it holds no per-call state); dlock_ratelimit_cancel() wakes all
 * dlock_ratelimit_acquire() calls waiting on it.
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN: the request was sent
 * but no reply came; the tokens may or may not have been taken (treat as
 * taken: the limiter errs on the safe side).
 */
#ifndef DLOCK_RATELIMIT_H
#define DLOCK_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_ratelimit dlock_ratelimit;

/* rate tokens per period_ms, bursts of up to burst tokens. A subject that
 * was idle can spend burst tokens at once; sustained use is held to
 * rate/period_ms. */
typedef struct dlock_ratelimit_options {
    size_t size; /* set by dlock_ratelimit_options_init (dlock.h, "Contracts"); do not change */
    int64_t rate;      /* tokens per period, >= 1; default 10 */
    int64_t period_ms; /* >= 1; default 1000 */
    int64_t burst;     /* bucket size, >= 1; 0 (default) means burst = rate */
} dlock_ratelimit_options;

DLOCK_API void dlock_ratelimit_options_init(dlock_ratelimit_options *opts);

/* Creates a limiter called name on client; each subject's bucket lives at
 * key_prefix + name + ":" + subject. No Redis command is sent.
 * Limiters created with the same name but different options share buckets
 * and disagree: keep the options of one name identical everywhere.
 * Returns 0 and *rl_out, or DLOCK_EINVAL (NULL client/out, bad name, rate,
 * period or burst out of range, or an emission interval below 1 us),
 * DLOCK_ENOMEM. Free with dlock_ratelimit_free(). */
DLOCK_API int dlock_ratelimit_new(dlock_client *client, const char *name,
                                  const dlock_ratelimit_options *opts, dlock_ratelimit **rl_out);

/* The answer of one try. */
typedef struct dlock_ratelimit_result {
    bool allowed;          /* the n tokens were taken */
    int64_t remaining;     /* allowed: tokens left right after; else 0 */
    int64_t retry_after_ms;/* refused: wait this long and the same request
                            * would be allowed (if nobody else takes tokens
                            * meanwhile); allowed: 0 */
} dlock_ratelimit_result;

/* Takes n tokens from subject's bucket if they are there; one round trip,
 * never waits. subject: 1..1024 bytes (copied into the key).
 * Returns 0 with *result_out filled (allowed or not: a refusal is not an
 * error), DLOCK_ELIMIT (n > burst: could never be allowed; nothing taken),
 * DLOCK_EINVAL (NULL, n < 1, bad subject), or a transport code (dlock.h)
 * (DLOCK_ECONN: nothing sent; DLOCK_EUNKNOWN: see top). */
DLOCK_API int dlock_ratelimit_try_acquire(dlock_ratelimit *rl, const char *subject, int64_t n,
                                          dlock_ratelimit_result *result_out);

/* Like dlock_ratelimit_try_acquire, but when refused sleeps the advised
 * retry_after and tries again, for at most wait_ms in total (0: one try;
 * DLOCK_WAIT_FOREVER (-1): no bound).
 * Returns 0 (tokens taken), DLOCK_ETIMEOUT, DLOCK_EBUSY (wait_ms == 0 and
 * refused), DLOCK_ECANCELED, DLOCK_ELIMIT, DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_ratelimit_acquire(dlock_ratelimit *rl, const char *subject, int64_t n,
                                      int64_t wait_ms);

/* Read-only: tokens subject could take now and ms until its bucket is full
 * again (0 when full). Either out pointer may be NULL. */
DLOCK_API int dlock_ratelimit_peek(dlock_ratelimit *rl, const char *subject,
                                   int64_t *available_out, int64_t *full_in_ms_out);

/* Refills subject's bucket (deletes its key). Admin use. */
DLOCK_API int dlock_ratelimit_reset(dlock_ratelimit *rl, const char *subject);

/* Wakes every dlock_ratelimit_acquire() waiting on rl with DLOCK_ECANCELED
 * (or, if none waits, the next one). Any thread. */
DLOCK_API void dlock_ratelimit_cancel(dlock_ratelimit *rl);

/* Frees the limiter (buckets stay in Redis and expire once full again).
 * NULL is a no-op. Not while other threads use rl. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_ratelimit_free(dlock_ratelimit *rl);

#ifdef __cplusplus
}
#endif
#endif
