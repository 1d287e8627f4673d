/* reserve.h: the pipeline's side of the database reserve (design:
 * docs/design/promise.md): finalising tentative database-path orders once
 * the campaign's stream is drained after their mirror, giving back the
 * Redis buyer total of the refused ones, and handing the unsold reserve
 * to Redis once when Redis sold out.
 * Thread-safety: uses only the handles it is given (one thread). */
#ifndef SK_RESERVE_H
#define SK_RESERVE_H

#include <stdint.h>

#include "db.h"
#include "redis_io.h"

typedef struct sk_reserve_stats {
    int64_t confirmed; /* tentative orders finalised persisted */
    int64_t lost;      /* tentative orders refused at finalisation (limit) */
    int64_t handbacks; /* handbacks applied to Redis now */
} sk_reserve_stats;

/* Finalises the mirrored tentative orders of campaign (NULL: all) whose
 * user's home bucket's stream is drained now (nothing pending, no lag;
 * with one bucket the campaign's stream), then gives
 * back in Redis the buyer totals of refused ones, at most max each. Adds
 * to st (may be NULL). 0 or the last error. */
int sk_reserve_finalise(sk_db *db, dlock__conn *rc, const char *campaign, int max, sk_reserve_stats *st);

/* One handback pass for campaign: finishes a recorded handback Redis has
 * not applied; otherwise, when Redis sold out ({c:<id>}:stock exists and
 * is <= 0; with K buckets every bucket's, no transfer in flight:
 * reserve.c) and the database still holds a reserve (and no tentative
 * order), begins one. The units go to bucket 0 ({c:<id>}:stock, gate
 * {c:<id>}:handbacks): transfers carry them to the others.
 * Returns 1 (applied now), 0 (nothing to do) or a negative code. */
int sk_reserve_handback(sk_db *db, dlock__conn *rc, const char *campaign, sk_reserve_stats *st);

/* Runs reserve_handback.lua for hb (the barrier uses it on a new master).
 * 1 (applied now), 0 (before) or a negative code. */
int sk_reserve_handback_apply(dlock__conn *rc, const char *campaign, const sk_db_handback *hb);

#endif
