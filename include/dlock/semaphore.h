/* semaphore.h: a bounded, owner-tracked distributed semaphore and its
 * expirable permits. One semaphore name holds at most N permits in total,
 * whoever takes them:
 *  - dlock_semaphore_acquire/release: counted permits held by a handle,
 *    kept alive by the watchdog (or an explicit lease) and given back
 *    automatically when the holder crashes (within its lease);
 *  - dlock_permits_acquire/release/extend: single permits with an id and a
 *    lease of their own, which expire unless released or extended.
 * Every permit is recorded with its holder and an expiry on the Redis
 * server's clock, so a release can never raise the count above N
 * (DLOCK_ELIMIT) and a crashed holder's permits come back.
 * Key layout, scripts and guarantees: docs/locks-family.md.
 *
 * Thread-safety: a dlock_semaphore handle is one holder and is used by one
 * thread at a time, except dlock_semaphore_cancel(), which any thread may
 * call. Use one handle per thread (handles are cheap; many handles in many
 * processes share one semaphore by name). The client's watchdog renews
 * the permits and declares their loss at the validity deadline (dlock.h).
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN from an acquire: the
 * permits may have been taken; they are not counted by the handle and come
 * back when their lease ends. From a release: they may still be held until
 * their lease ends.
 */
#ifndef DLOCK_SEMAPHORE_H
#define DLOCK_SEMAPHORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_semaphore dlock_semaphore;

typedef struct dlock_semaphore_options {
    size_t size; /* set by dlock_semaphore_options_init (dlock.h, "Contracts"); do not change */
    /* N: total permits of this semaphore name, 1..1000000000; default 1.
     * The first handle to use the name records N in Redis; a handle with a
     * different N is refused (DLOCK_EINVAL) until the keys are deleted. */
    int64_t permits;
    /* Lease of permits taken with dlock_semaphore_acquire. 0 (default):
     * watchdog mode: the client's watchdog_timeout_ms, renewed every third
     * of it while the handle holds permits. > 0: fixed lease, no renewal. */
    int64_t lease_ms;
} dlock_semaphore_options;

DLOCK_API void dlock_semaphore_options_init(dlock_semaphore_options *opts);

/* Creates a handle on the semaphore called name. No Redis command is sent.
 * Returns 0 and *sem_out, or DLOCK_EINVAL (NULL client/out, bad name or
 * options), DLOCK_ENOMEM. Free it before destroying the client. */
DLOCK_API int dlock_semaphore_new(dlock_client *client, const char *name,
                                  const dlock_semaphore_options *opts, dlock_semaphore **sem_out);

/* Takes k permits for this handle (adding to any it holds), waiting at most
 * wait_ms (0: one attempt; DLOCK_WAIT_FOREVER (-1): no bound). Waiting sleeps
 * on the semaphore's channel (released permits are published) and wakes
 * when the earliest lease of another holder ends.
 * Returns 0, DLOCK_EBUSY (wait_ms == 0, not enough permits), DLOCK_ETIMEOUT,
 * DLOCK_ECANCELED, DLOCK_ELIMIT (k > N), DLOCK_EINVAL (k < 1; or the name
 * is recorded with another N), DLOCK_EUNKNOWN (see top), DLOCK_ECONN,
 * DLOCK_ESERVER. */
DLOCK_API int dlock_semaphore_acquire(dlock_semaphore *sem, int64_t k, int64_t wait_ms);

/* Gives back k of the permits this handle holds and wakes waiters.
 * Returns 0, DLOCK_ENOTHELD (k is more than the handle holds: refused,
 * nothing sent, nothing changed), DLOCK_ELOST (the handle's permits had
 * expired: they already came back; the handle now holds none),
 * DLOCK_EINVAL (k < 1), DLOCK_EUNKNOWN, DLOCK_ECONN, DLOCK_ESERVER. */
DLOCK_API int dlock_semaphore_release(dlock_semaphore *sem, int64_t k);

/* ---- validity and loss (since 1.1) ------------------------------------ */

/* Milliseconds until this handle must stop believing it holds its permits: the
 * validity rule of dlock.h (from the send time of the acquire or of the
 * last good renewal, lease less the drift allowance); 0 when it holds
 * nothing or the deadline passed. No Redis call; any thread. */
DLOCK_API int64_t dlock_semaphore_validity_ms(const dlock_semaphore *h);

/* Called once when a held semaphore is lost: a renewal found it gone, or its
 * validity deadline passed with no renewal succeeding (watchdog mode; a
 * fixed lease simply ends: validity_ms says when). It runs on one of the
 * client's watchdog threads, at the deadline even when the server or the
 * network does not answer. reason is DLOCK_ELOST. By the time it runs,
 * validity_ms is 0. It may call the unlock function (which returns
 * DLOCK_ELOST) but not free. */
typedef void (*dlock_semaphore_lost_fn)(dlock_semaphore *h, int reason, void *ud);
/* Sets (fn NULL: clears) the loss callback of this handle. Any thread. */
DLOCK_API void dlock_semaphore_set_on_lost(dlock_semaphore *h, dlock_semaphore_lost_fn fn, void *ud);

/* Permits this handle believes it holds (local, no Redis call): 0 when
 * it holds none, and from the validity deadline on (see
 * dlock_semaphore_validity_ms) or after a loss. */
DLOCK_API int64_t dlock_semaphore_held(const dlock_semaphore *sem);

/* Permits free now (N when the name was never used); one round trip.
 * Permits whose lease ended count as free. */
DLOCK_API int dlock_semaphore_available(dlock_semaphore *sem, int64_t *available_out);

/* Wakes every acquire waiting on this handle (dlock_semaphore_acquire and
 * dlock_permits_acquire) with DLOCK_ECANCELED; if none waits, the next one
 * returns DLOCK_ECANCELED. Any thread. */
DLOCK_API void dlock_semaphore_cancel(dlock_semaphore *sem);

/* Frees the handle. Permits it still holds are NOT released: they are
 * reported through the log hook (WARN), their renewal stops and they come
 * back when their lease ends. NULL is a no-op. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_semaphore_free(dlock_semaphore *sem);

/* ---- expirable permits ------------------------------------------------- */

/* Size of a permit id buffer: 32 hex digits + NUL. */
#define DLOCK_PERMIT_ID_LEN 33

/* Takes one permit of the semaphore with its own lease_ms (> 0) and writes
 * its id to id_out. The permit is independent of the handle: any handle or
 * process knowing the id may release or extend it; it is not renewed by the
 * watchdog and comes back by itself when its lease ends.
 * Returns 0, DLOCK_EBUSY, DLOCK_ETIMEOUT, DLOCK_ECANCELED, DLOCK_EINVAL,
 * DLOCK_EUNKNOWN (the permit may exist; it then expires on its lease),
 * DLOCK_ECONN, DLOCK_ESERVER. */
DLOCK_API int dlock_permits_acquire(dlock_semaphore *sem, int64_t lease_ms, int64_t wait_ms,
                                    char id_out[DLOCK_PERMIT_ID_LEN]);

/* Releases the permit id. Returns 0, DLOCK_ENOTHELD (no such live permit:
 * never issued, already released or expired - nothing changes, so the
 * count never rises above N), DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_permits_release(dlock_semaphore *sem, const char *id);

/* Sets the permit's remaining lease to lease_ms (> 0), measured on the
 * server's clock from now. Returns 0, DLOCK_ENOTHELD (no such live permit:
 * expired, released or never issued), DLOCK_EINVAL, transport codes
 * (dlock.h). */
DLOCK_API int dlock_permits_extend(dlock_semaphore *sem, const char *id, int64_t lease_ms);

#ifdef __cplusplus
}
#endif
#endif
