/* multilock.h: all-or-nothing locking of several names at once (e.g. two
 * accounts of a transfer, every SKU of an order). Each name is a lock with
 * the reentrant lock's layout ({owner: count} hash with a lease, unlock
 * published on "redisson_lock__channel:{key}"), so a multi-lock and
 * DLOCK_LOCK_REENTRANT dlock_locks on the same names exclude each other.
 *  - When every key shares one Cluster hash slot (e.g. all names carry the
 *    same "{tag}"), one script checks and takes all of them atomically.
 *  - Otherwise the keys are taken one by one in a fixed global order
 *    (byte order of the key), and on the first busy key everything taken
 *    so far is released before waiting; the fixed order means two
 *    multi-locks over overlapping names cannot deadlock.
 * Either way the caller never holds a strict subset after lock() returns.
 * Key layout and scripts: docs/locks-family.md.
 *
 * Thread-safety: a dlock_multilock handle is one owner, used by one thread
 * at a time, except dlock_multilock_cancel(), which any thread may call.
 * Reentrancy is per handle.
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN from lock: some keys
 * may have been taken; they expire on their lease (call unlock to release
 * what may be held: it returns DLOCK_ELOST for keys it did not find).
 */
#ifndef DLOCK_MULTILOCK_H
#define DLOCK_MULTILOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_multilock dlock_multilock;

/* Most names one multi-lock accepts. */
#define DLOCK_MULTILOCK_MAX 64

/* Creates a handle over names[0..n-1] (1..DLOCK_MULTILOCK_MAX distinct
 * names, copied). No Redis command is sent.
 * Returns 0 and *ml_out, DLOCK_EINVAL (NULL, n out of range, a bad or
 * duplicate name), DLOCK_ENOMEM. */
DLOCK_API int dlock_multilock_new(dlock_client *client, const char *const *names, size_t n,
                                  dlock_multilock **ml_out);

/* True when all keys share one hash slot (one atomic script). */
DLOCK_API bool dlock_multilock_is_atomic(const dlock_multilock *ml);

/* Takes every name or none, waiting at most wait_ms (0: one attempt;
 * DLOCK_WAIT_FOREVER: no bound) on the unlock channel of the name that was
 * busy. lease_ms > 0: fixed lease; 0: watchdog mode (renewed while held).
 * A re-entry keeps the lease mode of the first acquisition (lease_ms is
 * then ignored).
 * Returns 0, DLOCK_EBUSY (wait_ms == 0), DLOCK_ETIMEOUT, DLOCK_ECANCELED,
 * DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_multilock_lock(dlock_multilock *ml, int64_t wait_ms, int64_t lease_ms);

/* Leaves one level on every name. Returns 0, DLOCK_ENOTHELD (not held by
 * this handle; nothing sent), DLOCK_ELOST (some names had expired or were
 * taken; the others were released), transport codes (dlock.h). */
DLOCK_API int dlock_multilock_unlock(dlock_multilock *ml);

/* *count_out = how many times this handle holds every one of its names, as
 * the server says now (the least count over the names; 0 when any is not
 * held by it); one round trip per name. Hold count means this for every
 * object (dlock.h, "Contracts"). Returns 0, DLOCK_EINVAL, transport codes. */
DLOCK_API int dlock_multilock_hold_count(dlock_multilock *ml, int64_t *count_out);

/* ---- validity and loss (since 1.1) ------------------------------------ */

/* Milliseconds until this handle must stop believing it holds all its names: the
 * validity rule of dlock.h (from the send time of the acquire or of the
 * last good renewal, lease less the drift allowance); 0 when it holds
 * nothing or the deadline passed. No Redis call; any thread. */
DLOCK_API int64_t dlock_multilock_validity_ms(const dlock_multilock *h);

/* Called once when a held multilock is lost: a renewal found it gone, or its
 * validity deadline passed with no renewal succeeding (watchdog mode; a
 * fixed lease simply ends: validity_ms says when). It runs on one of the
 * client's watchdog threads, at the deadline even when the server or the
 * network does not answer. reason is DLOCK_ELOST. By the time it runs,
 * validity_ms is 0. It may call the unlock function (which returns
 * DLOCK_ELOST) but not free. */
typedef void (*dlock_multilock_lost_fn)(dlock_multilock *h, int reason, void *ud);
/* Sets (fn NULL: clears) the loss callback of this handle. Any thread. */
DLOCK_API void dlock_multilock_set_on_lost(dlock_multilock *h, dlock_multilock_lost_fn fn, void *ud);

/* Makes a wait on this handle (now, or the next one) return
 * DLOCK_ECANCELED. Any thread. */
DLOCK_API void dlock_multilock_cancel(dlock_multilock *ml);

/* Frees the handle; names still held are NOT released (WARN; they expire
 * on their lease). NULL is a no-op. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_multilock_free(dlock_multilock *ml);

#ifdef __cplusplus
}
#endif
#endif
