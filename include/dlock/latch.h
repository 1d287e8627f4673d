/* latch.h: a distributed countdown latch. Someone arms it with a count;
 * workers count it down; everyone awaiting is woken (pub/sub) when it
 * reaches zero. A latch that was never armed, or already reached zero, is
 * open. An optional expiry opens an armed latch by itself (so awaiting
 * clients are not stranded when the workers that should count down crashed);
 * without it, a crashed worker leaves the latch armed until
 * dlock_latch_delete() - choose per use. Key layout: docs/locks-family.md.
 *
 * Thread-safety: a dlock_latch handle may be used by any number of threads
 * at once; dlock_latch_cancel() wakes all of its awaiters.
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN from count_down: the
 * decrement may or may not have happened (do not repeat it blindly).
 */
#ifndef DLOCK_LATCH_H
#define DLOCK_LATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_latch dlock_latch;

/* Creates a handle on the latch called name (key = key_prefix + name). No
 * Redis command is sent. Returns 0 and *latch_out, DLOCK_EINVAL, ENOMEM. */
DLOCK_API int dlock_latch_new(dlock_client *client, const char *name, dlock_latch **latch_out);

/* Arms the latch with count (>= 1) if it is open; an armed latch is left
 * alone (*armed_out = false). expire_ms > 0: the latch opens by itself
 * after that long (server clock); 0: never.
 * Returns 0 (see *armed_out, may be NULL), DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_latch_try_set_count(dlock_latch *latch, int64_t count, int64_t expire_ms,
                                        bool *armed_out);

/* Decrements the count; at zero the latch opens and awaiters are woken.
 * *left_out (may be NULL) = count after the call, 0 when open; counting
 * down an open latch changes nothing (*left_out = 0).
 * Returns 0, DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_latch_count_down(dlock_latch *latch, int64_t *left_out);

/* Current count (0 = open). */
DLOCK_API int dlock_latch_get_count(dlock_latch *latch, int64_t *count_out);

/* Waits until the latch is open, at most wait_ms (0: check once;
 * DLOCK_WAIT_FOREVER: no bound). Returns 0 (open), DLOCK_ETIMEOUT (still
 * armed; DLOCK_EBUSY when wait_ms == 0), DLOCK_ECANCELED, transport codes (dlock.h). */
DLOCK_API int dlock_latch_await(dlock_latch *latch, int64_t wait_ms);

/* Opens the latch whatever its count and wakes awaiters (admin / reset).
 * *existed_out (may be NULL) = it was armed. */
DLOCK_API int dlock_latch_delete(dlock_latch *latch, bool *existed_out);

/* Makes every await on this handle (now, or the next one if none waits)
 * return DLOCK_ECANCELED. Any thread. */
DLOCK_API void dlock_latch_cancel(dlock_latch *latch);

/* Frees the handle (the latch stays in Redis). NULL is a no-op. Not while
 * other threads use it. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_latch_free(dlock_latch *latch);

#ifdef __cplusplus
}
#endif
#endif
