/* fairlock.h: a fair (FIFO) reentrant distributed lock. Waiters queue in
 * arrival order on the server and only the head of the queue may take the
 * lock when it is free; a release wakes the head waiter only (on its own
 * channel), not the whole herd.
 * Each waiter keeps a heartbeat deadline on the server's clock (renewed
 * every third of waiter_ttl_ms while it waits); a waiter that crashed or
 * vanished is purged once its deadline passes, so it stalls the queue for
 * at most waiter_ttl_ms (not minutes). The lock hash has the reentrant
 * lock's layout ({owner: count} with PEXPIRE), so a fair lock and a
 * DLOCK_LOCK_REENTRANT dlock_lock on the same name exclude each other.
 * Key layout and scripts: docs/locks-family.md.
 *
 * Thread-safety: a dlock_fairlock handle is one owner, used by one thread
 * at a time, except dlock_fairlock_cancel(), which any thread may call.
 * Reentrancy is per handle.
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN from lock: it may have
 * been taken (then it expires on its lease); from unlock: it may still be
 * held until its lease ends.
 */
#ifndef DLOCK_FAIRLOCK_H
#define DLOCK_FAIRLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_fairlock dlock_fairlock;

typedef struct dlock_fairlock_options {
    size_t size; /* set by dlock_fairlock_options_init (dlock.h, "Contracts"); do not change */
    /* A waiter not heard from for this long is purged from the queue.
     * Default 3000, at least 30. Shorter: crashed waiters cost less; longer:
     * a stalled (GC-paused, swapped) waiter keeps its place longer. */
    int64_t waiter_ttl_ms;
} dlock_fairlock_options;

DLOCK_API void dlock_fairlock_options_init(dlock_fairlock_options *opts);

/* Creates a handle (a new owner) on the fair lock called name. No Redis
 * command is sent. Returns 0 and *fl_out, DLOCK_EINVAL, DLOCK_ENOMEM. */
DLOCK_API int dlock_fairlock_new(dlock_client *client, const char *name,
                                 const dlock_fairlock_options *opts, dlock_fairlock **fl_out);

/* Acquires (or re-enters) the lock in FIFO order, waiting at most wait_ms
 * (0: one attempt that never joins the queue and succeeds only if the lock
 * is free and nobody is queued; DLOCK_WAIT_FOREVER: no bound).
 * lease_ms > 0: fixed lease, no renewal; 0: watchdog mode (client's
 * watchdog_timeout_ms, renewed while held). A re-entry keeps the lease
 * mode of the first acquisition (lease_ms is then ignored).
 * A wait that ends without the lock (timeout, cancel, error) leaves the
 * queue. Returns 0, DLOCK_EBUSY (wait_ms == 0), DLOCK_ETIMEOUT,
 * DLOCK_ECANCELED, DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_fairlock_lock(dlock_fairlock *fl, int64_t wait_ms, int64_t lease_ms);

/* Leaves one level; the last one deletes the lock and wakes the head
 * waiter. Returns 0, DLOCK_ENOTHELD (not held by this handle; nothing
 * sent), DLOCK_ELOST (it had expired or was taken), transport codes (dlock.h). */
DLOCK_API int dlock_fairlock_unlock(dlock_fairlock *fl);

/* *count_out = how many times this handle holds the lock, as the server
 * says now (0: not held); one round trip. Hold count means this for every
 * object (dlock.h, "Contracts"). Returns 0, DLOCK_EINVAL, transport codes. */
DLOCK_API int dlock_fairlock_hold_count(dlock_fairlock *fl, int64_t *count_out);

/* Waiters queued on the server now, including dead ones not purged yet
 * (one round trip). */
DLOCK_API int dlock_fairlock_queue_length(dlock_fairlock *fl, int64_t *len_out);

/* ---- validity and loss (since 1.1) ------------------------------------ */

/* Milliseconds until this handle must stop believing it holds: the
 * validity rule of dlock.h (from the send time of the acquire or of the
 * last good renewal, lease less the drift allowance); 0 when it holds
 * nothing or the deadline passed. No Redis call; any thread. */
DLOCK_API int64_t dlock_fairlock_validity_ms(const dlock_fairlock *h);

/* Called once when a held fairlock is lost: a renewal found it gone, or its
 * validity deadline passed with no renewal succeeding (watchdog mode; a
 * fixed lease simply ends: validity_ms says when). It runs on one of the
 * client's watchdog threads, at the deadline even when the server or the
 * network does not answer. reason is DLOCK_ELOST. By the time it runs,
 * validity_ms is 0. It may call the unlock function (which returns
 * DLOCK_ELOST) but not free. */
typedef void (*dlock_fairlock_lost_fn)(dlock_fairlock *h, int reason, void *ud);
/* Sets (fn NULL: clears) the loss callback of this handle. Any thread. */
DLOCK_API void dlock_fairlock_set_on_lost(dlock_fairlock *h, dlock_fairlock_lost_fn fn, void *ud);

/* Makes a wait on this handle (now, or the next one to start) return
 * DLOCK_ECANCELED; the waiter leaves the queue. Any thread. */
DLOCK_API void dlock_fairlock_cancel(dlock_fairlock *fl);

/* Frees the handle. A lock still held is NOT released: it is reported
 * (WARN), renewal stops and it expires on its lease. NULL: no-op. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_fairlock_free(dlock_fairlock *fl);

#ifdef __cplusplus
}
#endif
#endif
