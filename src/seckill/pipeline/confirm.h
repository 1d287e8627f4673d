/* confirm.h: the persister's confirmation of Idempotency-Key answers
 * (docs/design/promise.md, "Replays answer the current state"). After a
 * batch's COMMIT the answers of its orders the database holds are marked
 * in Redis (idem_confirm.lua): the one place a replay learns "confirmed".
 * Used from the persister's thread only (its blocking connection). */
#ifndef SK_CONFIRM_H
#define SK_CONFIRM_H

#include <stddef.h>

#include "buckets.h"
#include "db.h"
#include "redis_io.h"

/* Marks the answers of orders[0..n) (all of bucket j of lay, results[i]
 * their sk_apply_result) that the database holds persisted: those it
 * persisted now, and duplicates it holds persisted, paid or cancelled
 * (a redelivery after a mark lost with a master). Orders without a key or
 * refused are left alone. Returns the number of answers to mark (0: no
 * call), or a negative code when the call failed (the replays then stay
 * 202 until a later delivery or WAIT: no promise depends on it). */
int sk_confirm_answers(dlock__conn *rc, sk_db *db, const sk_buckets *lay, int j, const sk_order_in *orders,
                       const int *results, size_t n);

#endif
