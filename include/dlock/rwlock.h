/* rwlock.h: a distributed read-write lock: many readers or one writer.
 *  - Reentrant per handle on both sides.
 *  - Downgrade: the writer may take the read side, then release the write
 *    side, and keeps reading without a gap.
 *  - Upgrade (read -> write) is refused with DLOCK_EUPGRADE instead of
 *    deadlocking (two readers upgrading would wait for each other forever).
 *  - Writer preference: a writer that is waiting announces an intent (kept
 *    alive while it waits, expiring writer_intent_ms after it stops); while
 *    an intent exists new readers wait, so a stream of overlapping readers
 *    cannot starve a writer. The price: a steady stream of writers can
 *    delay readers. Readers already holding may re-enter.
 *  - Each reader and the writer hold a lease on the server's clock (the
 *    watchdog renews it), so a crashed holder's side comes back.
 * Key layout and scripts: docs/locks-family.md.
 *
 * Thread-safety: a dlock_rwlock handle is one owner, used by one thread at a
 * time, except dlock_rwlock_cancel(), which any thread may call. Use one
 * handle per thread or per task; many handles on one name exclude as above.
 * Errors: 0 or a negative dlock_err. DLOCK_EUNKNOWN from an acquire: it may
 * have been taken (and then expires on its lease); from a release: it may
 * still be held until its lease ends.
 */
#ifndef DLOCK_RWLOCK_H
#define DLOCK_RWLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dlock/dlock.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dlock_rwlock dlock_rwlock;

typedef struct dlock_rwlock_options {
    size_t size; /* set by dlock_rwlock_options_init (dlock.h, "Contracts"); do not change */
    /* 0 (default): watchdog mode (client's watchdog_timeout_ms, renewed
     * while held); > 0: fixed lease of each acquisition, no renewal. */
    int64_t lease_ms;
    /* How long a waiting writer's intent outlives its last attempt (it
     * re-attempts every third of it), default 1000. 0: writers announce no
     * intent (reader preference: writers may starve). */
    int64_t writer_intent_ms;
} dlock_rwlock_options;

DLOCK_API void dlock_rwlock_options_init(dlock_rwlock_options *opts);

/* Creates a handle (a new owner) on the read-write lock called name. No
 * Redis command is sent. Returns 0 and *rw_out, DLOCK_EINVAL (NULL client
 * or out, bad name, negative option), DLOCK_ENOMEM. */
DLOCK_API int dlock_rwlock_new(dlock_client *client, const char *name,
                               const dlock_rwlock_options *opts, dlock_rwlock **rw_out);

/* Takes (or re-enters) the read side, waiting at most wait_ms (0: one
 * attempt; DLOCK_WAIT_FOREVER: no bound). Allowed while this handle holds
 * the write side (downgrade).
 * Returns 0, DLOCK_EBUSY (wait_ms == 0: a writer holds it or waits),
 * DLOCK_ETIMEOUT, DLOCK_ECANCELED, DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_rwlock_read_lock(dlock_rwlock *rw, int64_t wait_ms);

/* Takes (or re-enters) the write side, waiting at most wait_ms.
 * Returns 0, DLOCK_EUPGRADE (this handle holds the read side: release it
 * first; nothing changed), DLOCK_EBUSY, DLOCK_ETIMEOUT, DLOCK_ECANCELED,
 * DLOCK_EINVAL, transport codes (dlock.h). */
DLOCK_API int dlock_rwlock_write_lock(dlock_rwlock *rw, int64_t wait_ms);

/* Leave one level of the read / write side.
 * Returns 0, DLOCK_ENOTHELD (this handle does not hold that side; nothing
 * sent), DLOCK_ELOST (the side had expired or was lost; the handle no
 * longer holds it), transport codes (dlock.h). */
DLOCK_API int dlock_rwlock_read_unlock(dlock_rwlock *rw);
DLOCK_API int dlock_rwlock_write_unlock(dlock_rwlock *rw);

/* ---- validity and loss (since 1.1) ------------------------------------ */

/* Milliseconds until this handle must stop believing it holds either side: the
 * validity rule of dlock.h (from the send time of the acquire or of the
 * last good renewal, lease less the drift allowance); 0 when it holds
 * nothing or the deadline passed. No Redis call; any thread. */
DLOCK_API int64_t dlock_rwlock_validity_ms(const dlock_rwlock *h);

/* Called once when a held rwlock is lost: a renewal found it gone, or its
 * validity deadline passed with no renewal succeeding (watchdog mode; a
 * fixed lease simply ends: validity_ms says when). It runs on one of the
 * client's watchdog threads, at the deadline even when the server or the
 * network does not answer. reason is DLOCK_ELOST. By the time it runs,
 * validity_ms is 0. It may call the unlock function (which returns
 * DLOCK_ELOST) but not free. */
typedef void (*dlock_rwlock_lost_fn)(dlock_rwlock *h, int reason, void *ud);
/* Sets (fn NULL: clears) the loss callback of this handle. Any thread. */
DLOCK_API void dlock_rwlock_set_on_lost(dlock_rwlock *h, dlock_rwlock_lost_fn fn, void *ud);

/* Local re-entry counts of this handle (0: not held, which includes past
 * the validity deadline: see dlock_rwlock_validity_ms). Any thread. */
DLOCK_API int64_t dlock_rwlock_read_count(const dlock_rwlock *rw);
DLOCK_API int64_t dlock_rwlock_write_count(const dlock_rwlock *rw);

/* Makes a wait on this handle (now, or the next one to start) return
 * DLOCK_ECANCELED. Any thread. */
DLOCK_API void dlock_rwlock_cancel(dlock_rwlock *rw);

/* Frees the handle. Sides still held are NOT released: they are reported
 * (WARN), renewal stops and they expire on their lease. NULL: no-op. May be called before or after
 * the client is destroyed (dlock.h, "Contracts"). */
DLOCK_API void dlock_rwlock_free(dlock_rwlock *rw);

#ifdef __cplusplus
}
#endif
#endif
