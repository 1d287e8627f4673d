/* lifecycle.h: cancellations (on request or after the payment timeout)
 * and the sweep that finishes what a crash left half done: the database
 * transition first, then the Redis release (release.h; in the home bucket
 * of the order's user when the campaign has several), then the mark.
 * Thread-safety: uses only the handles it is given. */
#ifndef SK_LIFECYCLE_H
#define SK_LIFECYCLE_H

#include <stdint.h>

#include "db.h"
#include "redis_io.h"

/* Cancels one order (database transition, then Redis release, then marks
 * the release done). 0 when this call cancelled it, SK_ECONFLICT when it
 * was not persisted (already cancelled, paid, rejected), SK_ENOTFOUND,
 * SK_EDB. A failure after the database commit is repaired by the next
 * sweep (sk_lifecycle_sweep re-runs pending releases). */
int sk_order_cancel(sk_db *db, dlock__conn *rc, uint64_t order_id, const char *reason);

/* Cancels orders of campaign (NULL: all) unpaid for pay_timeout_ms,
 * mirrors degraded-path orders into Redis and finishes pending Redis
 * releases, at most max each. Adds to
 * *cancelled_out / *released_out. 0 or the last error. */
int sk_lifecycle_sweep(sk_db *db, dlock__conn *rc, const char *campaign, int64_t pay_timeout_ms, int max,
                       int64_t *cancelled_out, int64_t *released_out);

/* Called once for each order the payment timeout cancelled, with the
 * order as cancelled (reason "payment timeout"): the operator's trace. */
typedef void (*sk_cancel_cb)(const sk_order_row *row, void *ud);

/* sk_lifecycle_sweep, calling on_cancel (NULL: nobody) for each order the
 * timeout cancelled. */
int sk_lifecycle_sweep_cb(sk_db *db, dlock__conn *rc, const char *campaign, int64_t pay_timeout_ms, int max,
                          int64_t *cancelled_out, int64_t *released_out, sk_cancel_cb on_cancel, void *ud);

#endif
